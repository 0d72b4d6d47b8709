"""A reachability map (`kinema-nodes reach --out MAP.npz`) in Blender: a point cloud, one point
per cell centre, coloured by the cell's reachability index (the classic reach visualisation).

Blender 5.0's Python cannot add points to a PointCloud, so the cloud is a mesh of loose
vertices turned into points by a Geometry Nodes modifier (Mesh to Points, Set Material). The
vertices carry `reach_index` (float, share of orientations reached) and `reach_color` (the
picture's ramp); the material shows the colour, so it renders as it looks. Every number comes
from core.reach.
"""

from __future__ import annotations

import numpy as np

from ..core.reach import index_colours, load_map

MATERIAL_NAME = "Kinema Reach Index"


def _material(bpy):
    material = bpy.data.materials.get(MATERIAL_NAME)
    if material is not None:
        return material
    material = bpy.data.materials.new(MATERIAL_NAME)
    if not material.node_tree:  # Blender < 5 makes the tree on request
        material.use_nodes = True
    nodes = material.node_tree.nodes
    attribute = nodes.new("ShaderNodeAttribute")
    attribute.attribute_name = "reach_color"
    shader = nodes.get("Principled BSDF") or nodes.new("ShaderNodeBsdfPrincipled")
    material.node_tree.links.new(attribute.outputs["Color"], shader.inputs["Base Color"])
    return material


def _points_group(bpy, radius: float, material):
    group = bpy.data.node_groups.new("Kinema Reach Points", "GeometryNodeTree")
    group.interface.new_socket(name="Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket(name="Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    nodes, links = group.nodes, group.links
    given, result = nodes.new("NodeGroupInput"), nodes.new("NodeGroupOutput")
    points = nodes.new("GeometryNodeMeshToPoints")
    points.inputs["Radius"].default_value = radius
    paint = nodes.new("GeometryNodeSetMaterial")
    paint.inputs["Material"].default_value = material
    links.new(given.outputs[0], points.inputs["Mesh"])
    links.new(points.outputs["Points"], paint.inputs["Geometry"])
    links.new(paint.outputs["Geometry"], result.inputs[0])
    return group


def import_reach_map(context, path, include_unreachable: bool = False, radius: float | None = None, parent=None):
    """Add the map at `path` as a point cloud object (in the robot's root frame: parented to
    `parent`, e.g. the rig, when given). Returns the object."""
    import bpy

    reach_map = load_map(path)
    from .rig import is_rig, robot_for_rig

    if is_rig(parent):  # drawn in a Kinema rig's root frame: it must be that robot's map
        from ..core.reach import check_map_matches

        check_map_matches(reach_map, robot_for_rig(parent), f"reach map '{path}'")
    index = reach_map.index
    keep = np.ones(len(index), dtype=bool) if include_unreachable else index > 0
    centres = np.ascontiguousarray(reach_map.centres[keep], dtype=np.float32)
    values = np.ascontiguousarray(index[keep], dtype=np.float32)
    colours = np.ones((len(values), 4), dtype=np.float32)
    colours[:, :3] = index_colours(values)
    mesh = bpy.data.meshes.new(f"{reach_map.robot} reach {reach_map.link}")
    mesh.vertices.add(len(values))
    mesh.vertices.foreach_set("co", centres.ravel())
    mesh.attributes.new("reach_index", "FLOAT", "POINT").data.foreach_set("value", values)
    mesh.attributes.new("reach_color", "FLOAT_COLOR", "POINT").data.foreach_set("color", colours.ravel())
    mesh.update()
    material = _material(bpy)
    mesh.materials.append(material)
    size = float(radius if radius is not None else 0.3 * reach_map.step)
    obj = bpy.data.objects.new(mesh.name, mesh)
    modifier = obj.modifiers.new("Reach Points", "NODES")
    modifier.node_group = _points_group(bpy, size, material)
    obj["kinema_reach_map"] = str(path)
    context.collection.objects.link(obj)
    if parent is not None:
        obj.parent = parent
    return obj
