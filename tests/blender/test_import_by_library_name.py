"""File ▸ Import ▸ Robot by Name in real Blender, for robots of `robot_descriptions` and
`mujoco-menagerie` (#29 item 22).

No network: each package's cache is a local tree laid out as the package lays it out
(tests/library_caches.py): robot_descriptions' clone of example-robot-data at a pinned commit
(``gen2_description``: example-robot-data's Kinova Gen2 URDF) and mujoco-menagerie's download
cache (``universal_robots_ur5e``: robosuite's UR5e MJCF in Menagerie's place, with the
``.complete`` file its `Cache` checks).

- The operator's name list (the items Blender's search shows) holds both, as fetched, and a
  Menagerie robot that is not in the cache marked "(not fetched yet)", its tooltip giving the
  package's command that fetches it.
- Importing by name builds the rig; its bones are judged by the file's own FK (yourdfpy for the
  URDF, MuJoCo's mj_kinematics for the MJCF) on 20 random configurations, within 1e-6 m and 1e-6 rad.
- Importing a robot not fetched yet is refused in one line with that command; nothing is made
  in the file and nothing appears in the cache.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from independent_fk import IndependentFK
from library_caches import example_robot_data_repository, menagerie_cache, robot_descriptions_cache

from kinema_nodes.blender import rig
from kinema_nodes.core.model.example_robots import example_robots_folder, named_robots
from kinema_nodes.core.model.rotations import rotation_angle_between

pytest.importorskip("robot_descriptions")
pytest.importorskip("mujoco_menagerie")
pytest.importorskip("mujoco")


@pytest.fixture
def library_caches(tmp_path, monkeypatch):
    shutil.which("git") or pytest.skip("robot_descriptions clones with git")
    erd = example_robots_folder()
    if erd is None:
        pytest.skip("example-robot-data is not installed")
    clone, env = robot_descriptions_cache(tmp_path, "example-robot-data", example_robot_data_repository(erd, "kinova_description"))
    menagerie_env, cache = menagerie_cache(tmp_path, names=("universal_robots_ur5e",))
    for key, value in {**env, **menagerie_env}.items():
        monkeypatch.setenv(key, value)
    named_robots.cache_clear()
    yield clone, cache
    named_robots.cache_clear()  # the next test lists without these caches


def _counts(bpy) -> dict[str, int]:
    return {kind: len(getattr(bpy.data, kind)) for kind in ("objects", "meshes", "materials", "armatures", "collections")}


def _bones_match_own_fk(bpy, obj, seed: int) -> None:
    robot = rig.robot_for_rig(obj)
    own = IndependentFK(robot)
    links = [link for link in robot.links if link in obj.pose.bones]
    worst_position = worst_rotation = 0.0
    for q in robot.random_configurations(20, np.random.default_rng(seed)):
        rig.write_joint_values(obj, robot, q)
        bpy.context.view_layer.update()
        for link in links:
            bone = np.array(obj.pose.bones[link].matrix)
            expected = own.pose(q, link)
            worst_position = max(worst_position, float(np.linalg.norm(bone[:3, 3] - expected[:3, 3])))
            worst_rotation = max(worst_rotation, float(rotation_angle_between(bone[:3, :3], expected[:3, :3])))
    assert worst_position <= 1e-6, f"bone position off the file's own FK by {worst_position:.3g} m"
    assert worst_rotation <= 1e-6, f"bone rotation off the file's own FK by {worst_rotation:.3g} rad"


def test_robot_by_name_lists_and_imports_library_robots(blender, library_caches):
    bpy = blender
    from kinema_nodes.ui.operators import _menu_import, _robot_name_items

    assert _menu_import in bpy.types.TOPBAR_MT_file_import._dyn_ui_initialize()  # File > Import > Robot by Name...
    clone, cache = library_caches
    items = {identifier: (label, tip) for identifier, label, tip in _robot_name_items(None, bpy.context)}
    assert items["gen2_description"][0] == "gen2_description" and "robot_descriptions (urdf)" in items["gen2_description"][1]
    assert items["universal_robots_ur5e"][0] == "universal_robots_ur5e" and "mujoco-menagerie (mjcf)" in items["universal_robots_ur5e"][1]
    assert items["franka_emika_panda"][0] == "franka_emika_panda (not fetched yet)"
    assert "python -m mujoco_menagerie path franka_emika_panda" in items["franka_emika_panda"][1]
    assert {"panda", "robosuite_panda"} <= set(items)  # the other sources stay listed

    for name, expected_file, seed in (("gen2_description", clone / "robots" / "kinova_description" / "robots" / "kinova.urdf", 22),
                                      ("universal_robots_ur5e", next(cache.glob("models/universal_robots_ur5e-*")) / "ur5e.xml", 23)):
        assert bpy.ops.kinema.import_robot_by_name(robot=name, import_collision=False) == {"FINISHED"}
        obj = bpy.context.view_layer.objects.active
        assert obj.type == "ARMATURE"
        robot = rig.robot_for_rig(obj)
        assert robot.path.resolve() == expected_file.resolve() and robot.dof >= 6
        assert any(o.type == "MESH" for o in obj.children)
        _bones_match_own_fk(bpy, obj, seed)


def test_robot_by_name_not_fetched_is_refused_in_one_line(blender, library_caches):
    bpy = blender
    _, cache = library_caches
    before = _counts(bpy)
    cached = sorted(p.name for p in (cache / "models").iterdir())
    with pytest.raises(RuntimeError) as refused:
        bpy.ops.kinema.import_robot_by_name(robot="franka_emika_panda")
    message = str(refused.value).strip()
    assert message.count("\n") == 0, message
    assert "has not downloaded it yet" in message and "python -m mujoco_menagerie path franka_emika_panda" in message
    assert _counts(bpy) == before
    assert sorted(p.name for p in (cache / "models").iterdir()) == cached  # nothing downloaded
