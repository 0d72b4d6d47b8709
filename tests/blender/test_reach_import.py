"""File > Import > Kinema Reachability Map in real Blender: one point per reachable cell, at the
cell centre, with the index and the picture's colour as point attributes."""

from __future__ import annotations

import numpy as np

from kinema_nodes.core.reach import assemble, grid_cells, index_colours, reach_chunk, super_fibonacci


def test_the_operator_imports_a_map_as_points_coloured_by_index(blender, robots, tmp_path):
    bpy = blender
    robot = robots("arm6")
    centres, shape = grid_cells([-0.6, -0.6, 0.0, 0.6, 0.6, 0.6], 0.3)
    wxyz = super_fibonacci(4)
    reach_map = assemble(robot, robot.tool_point, centres, shape, 0.3, wxyz,
                         [reach_chunk(robot, robot.tool_point, centres, np.arange(len(centres)), wxyz)])
    reach_map.save(tmp_path / "map.npz")
    assert bpy.ops.kinema.import_reach_map(filepath=str(tmp_path / "map.npz")) == {"FINISHED"}
    obj = next(o for o in bpy.data.objects if "kinema_reach_map" in o)
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    keep = reach_map.index > 0
    geometry = evaluated.evaluated_geometry()  # what Geometry Nodes makes of it: points, one per cell
    assert geometry.pointcloud is not None and len(geometry.pointcloud.points) == keep.sum()
    cloud = obj.data
    assert len(cloud.vertices) == keep.sum() > 0
    positions = np.empty(len(cloud.vertices) * 3, dtype=np.float32)
    cloud.attributes["position"].data.foreach_get("vector", positions)
    assert np.allclose(positions.reshape(-1, 3), reach_map.centres[keep], atol=1e-6)
    values = np.empty(len(cloud.vertices), dtype=np.float32)
    cloud.attributes["reach_index"].data.foreach_get("value", values)
    assert np.allclose(values, reach_map.index[keep], atol=1e-6)
    colours = np.empty(len(cloud.vertices) * 4, dtype=np.float32)
    cloud.attributes["reach_color"].data.foreach_get("color", colours)
    assert np.allclose(colours.reshape(-1, 4)[:, :3], index_colours(reach_map.index[keep]), atol=1e-6)


def test_a_file_that_is_not_a_map_is_one_error_and_nothing_added(blender, tmp_path):
    bpy = blender
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    before = len(bpy.data.objects)
    try:
        result = bpy.ops.kinema.import_reach_map(filepath=str(tmp_path / "bad.npz"))
    except RuntimeError as exc:  # bpy.ops raises the operator's ERROR report
        assert "cannot be read" in str(exc)
    else:
        assert result == {"CANCELLED"}
    assert len(bpy.data.objects) == before
