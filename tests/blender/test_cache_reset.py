"""`evaluator.reset_caches` (run before every test by tests/conftest.py) leaves none of the
per-process caches a live session fills: compiled trees and readouts, the rigs' robots, found
solutions and found configurations; the next run rebuilds them from the file alone."""

from __future__ import annotations

import numpy as np


def test_reset_caches_empties_every_cache_and_the_tree_still_runs(blender):
    bpy = blender
    from kinema_nodes import evaluator
    from kinema_nodes.blender import edit, rig as rig_module
    from kinema_nodes.blender.build import import_urdf
    from kinema_nodes.blender.rig import read_joint_values, robot_for_rig
    from kinema_nodes.core.stages import configurations
    from kinema_nodes.session import SESSION

    rig = import_urdf(bpy.context, "arm6")
    bpy.context.view_layer.objects.active = rig
    tree, _target, _solver = edit.add_ik_target(bpy.context, rig, None, backend="NUMPY")
    evaluator.run_tree(tree, force=True)
    edit.find_solutions(bpy.context, rig)
    states = SESSION.trees.values()
    filled = (sum(s.program is not None for s in states), sum(len(s.readouts) for s in states), len(rig_module._ROBOT_CACHE),
              len(configurations._cache))
    assert all(filled), filled

    evaluator.reset_caches()
    states = SESSION.trees.values()
    assert not any(s.program for s in states) and not any(s.readouts for s in states) and not any(s.last_inputs for s in states)
    assert len(rig_module._ROBOT_CACHE) == 0 and len(configurations._cache) == 0

    results = evaluator.run_tree(tree, force=True)  # rebuilt from the rig's own URDF text
    assert results and all(np.all(np.isfinite(r.joints)) for r in results if r.joints is not None)
    assert np.all(np.isfinite(read_joint_values(rig, robot_for_rig(rig))))
