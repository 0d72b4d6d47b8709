"""URDF import into real Blender: bones move exactly like the robot, meshes are the files' meshes,
bad files leave nothing behind, and two imports are two independent rigs."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh
import yourdfpy

from kinema_nodes.blender import rig
from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.model.rotations import rotation_angle_between

#: Prismatic + mimic (panda), 6-axis arms (ur5, kinova), a 7-axis arm (xarm7), two humanoids.
FK_ROBOTS = ("panda", "ur5", "kinova", "xarm7", "talos", "g1")
CONFIGURATIONS = 200


def real_robot_path(name: str):
    """An example-robot-data robot's URDF (a named module-level helper, not `from conftest`:
    tests/hostile has a conftest of its own, and which one `conftest` names depends on order)."""
    from kinema_nodes.core.model.example_robots import example_robot

    path = example_robot(name)
    if path is None:
        pytest.fail(f"example-robot-data robot '{name}' not found: install the test dependencies (README)")
    return path


def _import(bpy, name_or_path, **options):
    from kinema_nodes.blender.build import import_urdf

    return import_urdf(bpy.context, name_or_path, **options)


def _counts(bpy) -> dict[str, int]:
    data = bpy.data
    return {
        kind: len(getattr(data, kind))
        for kind in ("objects", "meshes", "materials", "armatures", "collections", "actions")
    }


def _bone_matrices(bpy, obj, links) -> np.ndarray:
    bpy.context.view_layer.update()
    return np.array([np.array(obj.pose.bones[link].matrix) for link in links])


@pytest.mark.parametrize("name", FK_ROBOTS)
def test_bones_match_yourdfpy_fk_after_save_and_reload(blender, tmp_path, name):
    bpy = blender
    obj = _import(bpy, name, collision=False)
    rig_name = obj.name
    blend = tmp_path / f"{name}.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    bpy.ops.wm.read_homefile(use_empty=True)
    rig._ROBOT_CACHE.clear()  # the reloaded rig must rebuild its robot from the text it carries
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    obj = bpy.data.objects[rig_name]
    robot = rig.robot_for_rig(obj)

    reference = yourdfpy.URDF.load(str(real_robot_path(name)), build_scene_graph=True, load_meshes=False)
    assert list(reference.actuated_joint_names) == robot.actuated_joint_names
    root = reference.base_link
    configurations = robot.random_configurations(CONFIGURATIONS, np.random.default_rng(4))
    worst_position = worst_rotation = 0.0
    for q in configurations:
        written = rig.write_joint_values(obj, robot, q)
        np.testing.assert_array_equal(written, q)  # random configurations are within limits
        matrices = _bone_matrices(bpy, obj, robot.links)
        reference.update_cfg(q)
        expected = np.array([reference.get_transform(link, root) for link in robot.links])
        worst_position = max(worst_position, float(np.linalg.norm(matrices[:, :3, 3] - expected[:, :3, 3], axis=1).max()))
        worst_rotation = max(worst_rotation, float(rotation_angle_between(matrices, expected).max()))
    assert worst_position <= 1e-6, f"{name}: bone position off yourdfpy FK by {worst_position:.3g} m"
    assert worst_rotation <= 1e-6, f"{name}: bone rotation off yourdfpy FK by {worst_rotation:.3g} rad"


def test_rest_pose_is_the_zero_configuration(blender, robots):
    from kinema_nodes.core.model.kinematics import link_poses

    obj = _import(blender, "ur5")
    robot = robots("ur5")
    rest = np.array([np.array(obj.data.bones[link].matrix_local) for link in robot.links])
    np.testing.assert_allclose(rest, link_poses(robot, np.zeros(robot.dof)), atol=5e-7)
    assert [b.name for b in obj.data.bones] and {b.name for b in obj.data.bones} == set(robot.links)


def _faces_blender_keeps(faces: np.ndarray) -> int:
    """Triangles with three distinct corners, each set of corners once (Blender drops the rest)."""
    faces = np.sort(np.asarray(faces), axis=1)
    distinct = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2])]
    return len(np.unique(distinct, axis=0))


@pytest.mark.parametrize("name", ("panda", "xarm7", "kinova"))
def test_mesh_and_vertex_counts_match_trimesh(blender, robots, name):
    robot = robots(name)
    obj = _import(blender, name)
    primitives = ("box|", "cylinder|", "sphere|")
    children = [child for child in obj.children if child.type == "MESH" and not child.data.kinema_source.startswith(primitives)]
    for role in ("visual", "collision"):
        refs = [m for m in robot.meshes if m.role == role]
        objects = [c for c in children if f".{role}" in c.name]
        assert len(objects) == len(refs), f"{role}: {len(objects)} objects for {len(refs)} meshes in the URDF"
    read: dict[str, trimesh.Trimesh] = {}
    for ref in robot.meshes:
        key = str(ref.path.resolve())
        if key not in read:
            read[key] = trimesh.load(str(ref.path), force="mesh")
    for child in children:
        path = child.data.kinema_source.split("|")[0]
        expected = read[path]
        assert len(child.data.vertices) == len(expected.vertices), child.name
        assert len(child.data.polygons) == _faces_blender_keeps(expected.faces), child.name
    # each mesh file is one mesh data-block, however many links use it
    assert len({c.data.name for c in children}) == len({(str(m.path.resolve()), m.scale) for m in robot.meshes})


def test_meshes_sit_in_their_link_frame(blender, robots):
    robot = robots("panda")
    obj = _import(blender, "panda")
    from kinema_nodes.core.model.kinematics import link_poses

    q = robot.random_configurations(1, np.random.default_rng(2))[0]
    rig.write_joint_values(obj, robot, q)
    blender.context.view_layer.update()
    poses = dict(zip(robot.links, link_poses(robot, q)))
    visuals = {link.name: link.visuals for link in robot.urdf.robot.links}
    for child in obj.children:
        if child.type != "MESH" or ".visual" not in child.name:
            continue
        origin = visuals[child.parent_bone][0].origin
        expected = poses[child.parent_bone] @ (np.eye(4) if origin is None else origin)
        np.testing.assert_allclose(np.array(child.matrix_world), expected, atol=2e-6, err_msg=child.name)


def test_collision_geometry_is_hidden_and_visuals_are_coloured(blender):
    obj = _import(blender, "kinova")
    blender.context.view_layer.update()
    collision = [c for c in obj.children if ".collision" in c.name]
    visual = [c for c in obj.children if ".visual" in c.name]
    assert collision and visual
    assert not any(c.visible_get() for c in collision)
    assert all(c.visible_get() for c in visual)
    assert all(slot.material is not None for c in visual for slot in c.material_slots)


@pytest.mark.parametrize("name", ("arm6", "arm7", "rail_arm6"))
def test_bundled_robots_import_with_primitives_and_urdf_colours(blender, robots, name):
    robot = robots(name)
    obj = _import(blender, name)
    elements = sum(len(link.visuals) + len(link.collisions) for link in robot.urdf.robot.links)
    assert len([c for c in obj.children if c.type == "MESH"]) == elements
    colours = {tuple(round(v, 3) for v in slot.material.diffuse_color) for c in obj.children if ".visual" in c.name for slot in c.material_slots}
    assert len(colours) > 1, "URDF material colours should differ between links"


def _write(path, text):
    path.write_text(text)
    return path


BAD_URDFS = {
    "malformed": "<robot name='x'><link name='a'></robot>",
    "missing_mesh": """<robot name="x"><link name="a"><visual><geometry><mesh filename="nowhere/arm.stl"/></geometry></visual></link>
        <link name="b"/><joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>""",
    "corrupt_mesh": """<robot name="x"><link name="a"><visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual></link>
        <link name="b"><visual><geometry><mesh filename="broken.dae"/></geometry></visual></link>
        <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>""",
    "entity_mesh": """<robot name="x"><link name="a"><visual><geometry><mesh filename="entity.dae"/></geometry></visual></link></robot>""",
    "loop": """<robot name="x"><link name="a"/><link name="b"/>
        <joint name="j1" type="fixed"><parent link="a"/><child link="b"/></joint>
        <joint name="j2" type="fixed"><parent link="b"/><child link="a"/></joint></robot>""",
}


@pytest.mark.parametrize("case", sorted(BAD_URDFS))
def test_bad_file_reports_clearly_and_leaves_nothing(blender, tmp_path, case):
    bpy = blender
    (tmp_path / "broken.dae").write_text("<COLLADA>this is not a mesh")
    (tmp_path / "entity.dae").write_text('<?xml version="1.0"?><!DOCTYPE c [<!ENTITY e SYSTEM "/etc/passwd">]><COLLADA>&e;</COLLADA>')
    path = _write(tmp_path / f"{case}.urdf", BAD_URDFS[case])
    _import(bpy, "arm6")  # something already in the file, which must stay as it is
    before = _counts(bpy)
    with pytest.raises(KinemaError) as error:
        _import(bpy, path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message
    assert _counts(bpy) == before
    with pytest.raises(RuntimeError, match=case):
        bpy.ops.kinema.import_urdf("EXEC_DEFAULT", filepath=str(path))
    assert _counts(bpy) == before


def test_operator_imports_through_bpy_ops(blender):
    bpy = blender
    result = bpy.ops.kinema.import_urdf("EXEC_DEFAULT", filepath=str(real_robot_path("ur5")), import_collision=False)
    assert result == {"FINISHED"}
    obj = bpy.context.view_layer.objects.active
    assert rig.is_rig(obj) and obj.data.kinema.robot_name == "ur5"
    assert not [c for c in obj.children if ".collision" in c.name]
    from kinema_nodes.ui import operators

    assert operators._menu_import in bpy.types.TOPBAR_MT_file_import._dyn_ui_initialize()  # File > Import > URDF
    for panel in ("KINEMA_PT_robot", "KINEMA_PT_joints"):
        cls = bpy.types.Panel.bl_rna_get_subclass_py(panel)
        assert cls is not None and cls.bl_category == "Kinema"


def test_import_twice_gives_independent_rigs_sharing_meshes(blender, robots):
    bpy = blender
    robot = robots("panda")
    first = _import(bpy, "panda")
    second = _import(bpy, "panda")
    assert first.name != second.name and first.data != second.data
    assert {c.data for c in first.children} == {c.data for c in second.children}
    assert {c.name for c in first.children}.isdisjoint({c.name for c in second.children})

    q = robot.random_configurations(1, np.random.default_rng(3))[0]
    rig.write_joint_values(first, robot, q)
    bpy.context.view_layer.update()
    # the second is untouched: at its import pose, zero brought within the limits (the Panda's elbow)
    np.testing.assert_allclose(rig.read_joint_values(second, robot), np.clip(0.0, robot.lower, robot.upper), atol=1e-7)

    for child in list(first.children):
        bpy.data.objects.remove(child, do_unlink=True)
    bpy.data.objects.remove(first, do_unlink=True)
    robot_again = rig.robot_for_rig(second)
    rig.write_joint_values(second, robot_again, q)
    from kinema_nodes.core.model.kinematics import link_poses

    matrices = _bone_matrices(bpy, second, robot_again.links)
    np.testing.assert_allclose(matrices, link_poses(robot_again, q), atol=2e-6)
    assert all(c.data.users >= 1 and len(c.data.vertices) for c in second.children)


def test_import_into_an_excluded_active_collection_still_builds_the_rig(blender):
    bpy = blender
    hidden = bpy.data.collections.new("excluded")
    bpy.context.scene.collection.children.link(hidden)
    layer = bpy.context.view_layer.layer_collection.children["excluded"]
    layer.exclude = True
    bpy.context.view_layer.active_layer_collection = bpy.context.view_layer.layer_collection
    with bpy.context.temp_override(collection=hidden):
        obj = _import(bpy, "arm6")
    assert obj.name in bpy.context.view_layer.objects and len(obj.data.bones) == 10
    assert obj.users_collection[0].name in bpy.context.scene.collection.children and not hidden.children
