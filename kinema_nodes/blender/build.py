"""URDF -> one armature (a bone per link) with the robot's meshes parented to the bones.

Everything that can fail (the URDF, every mesh file) is read into plain arrays first; only
then is any Blender data made, and if making it fails anyway, everything made so far is
removed — a bad file never leaves half a robot behind. Mesh files shared by several links or
several imports are built once: a mesh data-block remembers the file and scale it came from.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix

from . import rig
from .animation import pose_bone_path
from ..core.errors import RobotFileError
from ..core.model.bones import bone_head_tail_roll, default_bone_length
from ..core.model.kinematics import link_poses
from ..core.model.meshes import MeshArrays, load_mesh, srgb_to_linear
from ..core.model.loading import load_robot
from ..core.model.robot import RobotModel

#: Longest name Blender keeps for a bone or object (bytes); a longer link name would be cut.
MAX_NAME_BYTES = 63
#: Colour of geometry that names none (linear RGBA).
DEFAULT_COLOUR = (0.6, 0.6, 0.62, 1.0)
#: Edges sharper than this keep a hard edge on smooth-shaded meshes.
SHARP_ANGLE = math.radians(35.0)


# ---- geometry as arrays (no bpy) ----------------------------------------------------------------

@dataclass
class GeometryItem:
    """One <visual> or <collision> of a link."""

    link: str
    role: str  # "visual" | "collision"
    key: str  # what the mesh data-block is shared by: file+scale or primitive+size
    origin: np.ndarray  # 4x4 in the link frame
    material: tuple[str, tuple[float, float, float, float]] | None  # URDF material, if any
    name: str
    load: object  # () -> MeshArrays


def _primitive(kind: str, size: tuple[float, ...]) -> MeshArrays:
    import trimesh

    if kind == "box":
        mesh = trimesh.creation.box(extents=size)
    elif kind == "cylinder":
        mesh = trimesh.creation.cylinder(radius=size[0], height=size[1], sections=48)
    else:
        mesh = trimesh.creation.uv_sphere(radius=size[0], count=[32, 32])
    return MeshArrays(np.asarray(mesh.vertices, float), np.asarray(mesh.faces, np.int64), np.zeros(len(mesh.faces), np.int64), [])


def _urdf_material(robot: RobotModel, element) -> tuple[str, tuple[float, float, float, float]] | None:
    material = getattr(element, "material", None)
    if material is None:
        return None
    colour = material.color.rgba if material.color is not None else None
    if colour is None and material.name:
        named = {m.name: m for m in (robot.urdf.robot.materials or [])}.get(material.name)
        if named is not None and named.color is not None:
            colour = named.color.rgba
    if colour is None:
        return None
    rgba = tuple(float(c) for c in colour)
    # URDF colours are display colours (sRGB); Blender materials are linear.
    return (material.name or "colour", (srgb_to_linear(rgba[0]), srgb_to_linear(rgba[1]), srgb_to_linear(rgba[2]), rgba[3]))


def geometry_items(robot: RobotModel, collision: bool = True) -> list[GeometryItem]:
    """Every visual (and collision) element of the robot, with how to load its triangles."""
    mesh_paths = {(m.link, m.role, m.filename): m for m in robot.meshes}
    items: list[GeometryItem] = []
    roles = ("visual", "collision") if collision else ("visual",)
    for link in robot.urdf.robot.links:
        for role in roles:
            elements = link.visuals if role == "visual" else link.collisions
            for number, element in enumerate(elements):
                geometry = element.geometry
                if geometry is None:
                    continue
                origin = np.eye(4) if element.origin is None else np.asarray(element.origin, dtype=float)
                name = f"{link.name}.{role}" + (f".{number}" if number else "")
                material = _urdf_material(robot, element) if role == "visual" else None
                if geometry.mesh is not None:
                    ref = mesh_paths.get((link.name, role, geometry.mesh.filename or ""))
                    if ref is None:
                        raise RobotFileError(robot.path, f"link '{link.name}' {role} mesh '{geometry.mesh.filename}' not found")
                    key = f"{ref.path.resolve()}|{ref.scale[0]:.9g},{ref.scale[1]:.9g},{ref.scale[2]:.9g}"
                    load = functools.partial(load_mesh, ref.path, ref.scale, robot.path, ref.filename)
                elif geometry.box is not None:
                    size = tuple(float(s) for s in geometry.box.size)
                    key, load = f"box|{size}", (lambda s=size: _primitive("box", s))
                elif geometry.cylinder is not None:
                    size = (float(geometry.cylinder.radius), float(geometry.cylinder.length))
                    key, load = f"cylinder|{size}", (lambda s=size: _primitive("cylinder", s))
                elif geometry.sphere is not None:
                    size = (float(geometry.sphere.radius),)
                    key, load = f"sphere|{size}", (lambda s=size: _primitive("sphere", s))
                else:
                    continue
                items.append(GeometryItem(link.name, role, key, origin, material, name, load))
    return items


# ---- Blender data ------------------------------------------------------------------------------

class _Created:
    """Data-blocks made so far, removed again if the import fails part-way."""

    def __init__(self):
        self.objects, self.meshes, self.materials, self.armatures, self.collections = [], [], [], [], []

    def remove_all(self) -> None:
        for obj in self.objects:
            bpy.data.objects.remove(obj, do_unlink=True)
        for datablocks, store in (
            (self.armatures, bpy.data.armatures), (self.meshes, bpy.data.meshes),
            (self.materials, bpy.data.materials), (self.collections, bpy.data.collections),
        ):
            for block in datablocks:
                store.remove(block, do_unlink=True)


def _material(key: tuple[str, tuple], existing: dict, created: _Created):
    name, rgba = key
    source = f"{name}|{','.join(f'{c:.6g}' for c in rgba)}"
    material = existing.get(source)
    if material is None:
        material = bpy.data.materials.new(name)
        created.materials.append(material)
        material.kinema_source = source
        material.diffuse_color = rgba
        material.roughness = 0.5
        tree = material.node_tree
        principled = tree.nodes.get("Principled BSDF") if tree is not None else None
        if principled is not None:
            principled.inputs["Base Color"].default_value = rgba
            principled.inputs["Alpha"].default_value = rgba[3]
        existing[source] = material
    return material


def _mesh(item: GeometryItem, arrays: MeshArrays, materials: dict, created: _Created):
    mesh = bpy.data.meshes.new(Path(item.key.split("|")[0]).stem or item.name)
    created.meshes.append(mesh)
    mesh.kinema_source = item.key
    n_vertices, n_faces = len(arrays.vertices), len(arrays.faces)
    mesh.vertices.add(n_vertices)
    mesh.vertices.foreach_set("co", arrays.vertices.astype(np.float32).ravel())
    mesh.loops.add(3 * n_faces)
    mesh.loops.foreach_set("vertex_index", arrays.faces.astype(np.int32).ravel())
    mesh.polygons.add(n_faces)
    mesh.polygons.foreach_set("loop_start", np.arange(0, 3 * n_faces, 3, dtype=np.int32))
    if arrays.materials:
        mesh.polygons.foreach_set("material_index", arrays.face_material.astype(np.int32))
        for key in arrays.materials:
            mesh.materials.append(_material(key, materials, created))
    else:
        mesh.materials.append(None)  # one empty slot, filled per object
    mesh.update(calc_edges=True)
    mesh.validate(clean_customdata=False)
    if n_faces and item.key.split("|")[0] not in ("box",):
        mesh.shade_smooth()
        mesh.set_sharp_from_angle(angle=SHARP_ANGLE)
    return mesh


def _check_names(robot: RobotModel) -> None:
    for link in robot.links:
        if len(link.encode("utf-8")) > MAX_NAME_BYTES:
            raise RobotFileError(robot.path, f"link name '{link}' is longer than Blender's {MAX_NAME_BYTES}-byte limit for bone names")


def _enter_object_mode(context) -> None:
    if context.mode != "OBJECT" and context.view_layer.objects.active is not None:
        bpy.ops.object.mode_set(mode="OBJECT")


def _build_bones(context, arm_obj, robot: RobotModel, rest: np.ndarray, length: float) -> None:
    view_layer = context.view_layer
    previous_active = view_layer.objects.active
    view_layer.objects.active = arm_obj
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        edit_bones = arm_obj.data.edit_bones
        for i, link in enumerate(robot.links):
            bone = edit_bones.new(link)
            head, tail, roll = bone_head_tail_roll(rest[i], length)
            bone.head, bone.tail, bone.roll = head, tail, roll
            joint = robot.joint_of_child.get(link)
            if joint is not None:
                bone.parent = edit_bones[joint.parent]
                bone.use_connect = False
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
        if previous_active is not None and previous_active.name in view_layer.objects:
            view_layer.objects.active = previous_active


def _add_driver(arm_obj, channel: rig.JointChannel, source: rig.JointChannel, factor: float, data_path_suffix=None, index=None):
    pose_path = pose_bone_path(channel.bone, channel.data_path if data_path_suffix is None else data_path_suffix)
    fcurve = arm_obj.driver_add(pose_path, channel.index if index is None else index)
    driver = fcurve.driver
    driver.type = "SCRIPTED"
    variable = driver.variables.new()
    variable.name = "source"
    variable.type = "SINGLE_PROP"
    variable.targets[0].id = arm_obj
    if source.data_path == rig.SLIDE:
        variable.targets[0].data_path = pose_bone_path(source.bone, rig.SLIDE)
    else:
        variable.targets[0].data_path = pose_bone_path(source.bone, f"{source.data_path}[{source.index}]")
    driver.expression = f"source * {factor!r}"
    return fcurve


def _set_up_pose_bones(arm_obj, robot: RobotModel) -> None:
    channels = {c.joint: c for c in rig.joint_channels(robot)}
    actuated = {c.source: c for c in rig.actuated_channels(robot)}
    bones = arm_obj.pose.bones
    for link in robot.links:
        pose_bone = bones[link]
        pose_bone.rotation_mode = "XYZ"
        pose_bone.lock_location = (True, True, True)
        pose_bone.lock_rotation = (True, True, True)
        pose_bone.lock_rotation_w = True
        pose_bone.lock_scale = (True, True, True)
        joint = robot.joint_of_child.get(link)
        settings = pose_bone.bone.kinema
        if joint is None:
            continue
        settings.joint = joint.name
        settings.joint_type = joint.type
        settings.axis = tuple(joint.axis)
        if not joint.is_movable:
            continue
        channel = channels[joint.name]
        settings.actuated = joint.is_actuated
        settings.mimic_joint = joint.mimic.joint if joint.mimic else ""
        settings.lower, settings.upper = joint.lower, joint.upper
        settings.data_path, settings.index, settings.scale = channel.data_path, channel.index, channel.scale
        if channel.data_path == rig.EULER:
            pose_bone.lock_rotation[channel.index] = False
        elif channel.data_path == rig.LOCATION:
            pose_bone.lock_location[channel.index] = False
        elif channel.data_path == rig.AXIS_ANGLE:
            pose_bone.rotation_mode = "AXIS_ANGLE"
            pose_bone.rotation_axis_angle = (0.0, *joint.axis)
            pose_bone.lock_rotations_4d = True
            pose_bone.lock_rotation_w = False
        else:  # a slide on a skew axis: the kinema_slide custom property drives the three location channels
            pose_bone[rig.SLIDE_KEY] = 0.0
            low, high = sorted((channel.scale * joint.lower, channel.scale * joint.upper))
            pose_bone.id_properties_ui(rig.SLIDE_KEY).update(
                description=f"Joint '{joint.name}': a slide along an axis that is not a coordinate axis (drives location)",
                subtype="DISTANCE", **({"min": low, "max": high} if np.isfinite(low) and np.isfinite(high) else {}))
            for k in range(3):
                _add_driver(arm_obj, rig.JointChannel(joint.name, link, rig.LOCATION, k, 1.0, channel.source, True),
                            channel, float(joint.axis[k]), index=k)
        if joint.mimic is not None:
            source = actuated[channel.source]
            if channel.data_path == rig.SLIDE:
                _add_driver(arm_obj, channel, source, channel.scale / source.scale, data_path_suffix=rig.SLIDE, index=-1)
            else:
                _add_driver(arm_obj, channel, source, channel.scale / source.scale)
        elif joint.type != "continuous" and np.isfinite(joint.lower) and np.isfinite(joint.upper):
            _add_limit_constraint(pose_bone, channel, joint)


def _add_limit_constraint(pose_bone, channel: rig.JointChannel, joint) -> None:
    """Limit Rotation/Location where it states the joint's limits exactly (and lets the
    transform tools respect them); write_joint_values clamps in every case."""
    low, high = sorted((channel.scale * joint.lower, channel.scale * joint.upper))
    axis = "xyz"[channel.index]
    if channel.data_path == rig.EULER and -math.pi < low and high < math.pi:
        constraint = pose_bone.constraints.new("LIMIT_ROTATION")
    elif channel.data_path == rig.LOCATION:
        constraint = pose_bone.constraints.new("LIMIT_LOCATION")
        setattr(constraint, f"use_min_{axis}", True)
        setattr(constraint, f"use_max_{axis}", True)
    else:
        return
    constraint.name = "Kinema Joint Limit"
    constraint.owner_space = "LOCAL"
    constraint.use_transform_limit = True
    if constraint.type == "LIMIT_ROTATION":
        setattr(constraint, f"use_limit_{axis}", True)
    setattr(constraint, f"min_{axis}", low)
    setattr(constraint, f"max_{axis}", high)


def _bone_collections(armature, robot: RobotModel) -> None:
    collections = armature.collections
    root = collections.new(rig.COLLECTION_ROOT)
    joints = collections.new(rig.COLLECTION_JOINTS, parent=root)
    tool_points = collections.new(rig.COLLECTION_TOOL_POINTS, parent=root)
    ik = collections.new(rig.COLLECTION_IK, parent=root)
    ik.is_visible = False
    for link in robot.links:
        bone = armature.bones[link]
        joint = robot.joint_of_child.get(link)
        if link == robot.tool_point:
            tool_points.assign(bone)
        elif joint is not None and joint.is_movable:
            joints.assign(bone)
        else:
            root.assign(bone)


def _target_collection(context):
    collection = getattr(context, "collection", None)
    if collection is None or collection.library is not None:
        collection = context.scene.collection
    return collection


def import_urdf(context, filepath: str | Path, *, collision: bool = True, bone_length: float | None = None,
                package_path=None, xacro_args: dict[str, str] | None = None, notes: list | None = None):
    """Import a robot (URDF, xacro, MJCF, or a robot's name) as a rig; returns the armature object.

    The rig stores the URDF the robot was built from (for xacro its expansion, for MJCF its
    conversion), so the saved file never needs the workspace again. `package_path` and
    `xacro_args` are `load_robot`'s. Raises `KinemaError` (one line) and leaves the file as it
    was when anything is wrong. `notes`, a list, receives what the loader noted about the file
    (`RobotModel.notes`: the rig keeps only the URDF, so they are known only now).
    """
    robot = load_robot(filepath, package_path=package_path, xacro_args=xacro_args)
    if notes is not None:
        notes.extend(robot.notes)
    _check_names(robot)
    urdf_text = robot.urdf_text
    if not urdf_text:
        try:
            urdf_text = robot.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RobotFileError(robot.path, f"cannot read as UTF-8 text: {exc}") from None
    rest = link_poses(robot, np.zeros(robot.dof))
    length = float(bone_length) if bone_length else default_bone_length(rest)
    items = geometry_items(robot, collision=collision)

    # Read every mesh before making any Blender data, so a bad file changes nothing.
    existing_meshes = {m.kinema_source: m for m in bpy.data.meshes if m.kinema_source}
    existing_materials = {m.kinema_source: m for m in bpy.data.materials if m.kinema_source}
    arrays: dict[str, MeshArrays] = {}
    for item in items:
        if item.key not in existing_meshes and item.key not in arrays:
            arrays[item.key] = item.load()

    _enter_object_mode(context)
    created = _Created()
    try:
        return _build(context, robot, urdf_text, rest, length, items, arrays, existing_meshes, existing_materials, created)
    except Exception:
        created.remove_all()
        raise


def _build(context, robot, urdf_text, rest, length, items, arrays, meshes, materials, created: _Created):
    parent_collection = _target_collection(context)
    collection = bpy.data.collections.new(robot.name)
    created.collections.append(collection)
    parent_collection.children.link(collection)
    collision_collection = None

    armature = bpy.data.armatures.new(robot.name)
    created.armatures.append(armature)
    arm_obj = bpy.data.objects.new(robot.name, armature)
    created.objects.append(arm_obj)
    collection.objects.link(arm_obj)
    if arm_obj.name not in context.view_layer.objects:
        # the active collection is excluded from this view layer: use the scene's own collection,
        # since bones can only be made on an object the view layer shows
        parent_collection.children.unlink(collection)
        context.scene.collection.children.link(collection)
    arm_obj.show_in_front = True
    armature.display_type = "OCTAHEDRAL"

    settings = armature.kinema
    settings.robot_name = robot.name
    settings.urdf_text = urdf_text
    settings.urdf_path = str(robot.path.resolve())
    settings.urdf_hash = rig.urdf_hash(urdf_text)
    settings.fingerprint = robot.fingerprint
    settings.tool_point = robot.tool_point

    _build_bones(context, arm_obj, robot, rest, length)
    _set_up_pose_bones(arm_obj, robot)
    _bone_collections(armature, robot)

    for item in items:
        mesh = meshes.get(item.key)
        if mesh is None:
            mesh = _mesh(item, arrays[item.key], materials, created)
            meshes[item.key] = mesh
        obj = bpy.data.objects.new(item.name, mesh)
        created.objects.append(obj)
        if item.role == "collision":
            if collision_collection is None:
                collision_collection = bpy.data.collections.new(f"{robot.name} collision")
                created.collections.append(collision_collection)
                collection.children.link(collision_collection)
                collision_collection.hide_viewport = True
                collision_collection.hide_render = True
            collision_collection.objects.link(obj)
            obj.display_type = "WIRE"
        else:
            collection.objects.link(obj)
            # Colours a mesh file carries win, as in RViz; the URDF's colour (or a neutral
            # grey) fills an uncoloured mesh, on the object so shared meshes can differ.
            # MuJoCo colours a geom by its MJCF material alone (it never reads a mesh file's).
            by_mjcf = robot.source_format == "mjcf" and item.material is not None
            if by_mjcf or (len(mesh.materials) == 1 and mesh.materials[0] is None):
                for slot in obj.material_slots:
                    slot.link = "OBJECT"
                    slot.material = _material(item.material or ("kinema_default", DEFAULT_COLOUR), materials, created)
        obj.parent = arm_obj
        obj.parent_type = "BONE"
        obj.parent_bone = item.link
        # A bone child hangs from the bone's tail; undo that so the object sits in the link frame.
        obj.matrix_parent_inverse = Matrix.Translation((0.0, -armature.bones[item.link].length, 0.0))
        obj.matrix_basis = Matrix(item.origin.tolist())
    rig.remember_robot(arm_obj, robot)
    legal = np.clip(np.zeros(robot.dof), robot.lower, robot.upper)
    if np.any(legal != 0.0):  # a zero pose outside the limits (the Panda's elbow, a Jaco's): the nearest pose within them
        rig.write_joint_values(arm_obj, robot, legal)
    for obj in context.view_layer.objects:
        obj.select_set(False)
    arm_obj.select_set(True)
    context.view_layer.objects.active = arm_obj
    return arm_obj


def _register_sources() -> None:
    bpy.types.Mesh.kinema_source = bpy.props.StringProperty(
        name="Kinema Source", description="Mesh file and scale (or primitive) this mesh was built from, for sharing")
    bpy.types.Material.kinema_source = bpy.props.StringProperty(
        name="Kinema Source", description="URDF or mesh-file colour this material was made for, for sharing")


CLASSES = rig.CLASSES


def register() -> None:
    rig.register_properties()
    _register_sources()


def unregister() -> None:
    for owner in (bpy.types.Material, bpy.types.Mesh):
        if hasattr(owner, "kinema_source"):
            del owner.kinema_source
    rig.unregister_properties()
