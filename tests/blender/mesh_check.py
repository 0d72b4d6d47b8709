"""The independent clearance check of issue #14: python-fcl on the URDF's own collision meshes
(its visual meshes where a link has none, its boxes, cylinders and spheres as FCL's own shapes)
against the obstacles' own Blender meshes, never our capsules."""

from __future__ import annotations

import numpy as np


def _transform(matrix):
    import fcl

    matrix = np.asarray(matrix, dtype=float)
    return fcl.Transform(matrix[:3, :3], matrix[:3, 3])


def _bvh(vertices, faces):
    import fcl

    model = fcl.BVHModel()
    model.beginModel(len(vertices), len(faces))
    model.addSubModel(np.asarray(vertices, dtype=float), np.asarray(faces, dtype=np.int32))
    model.endModel()
    return model


class RobotMeshes:
    """Each link's collision geometry as FCL objects in the link frame."""

    def __init__(self, robot):
        import fcl

        from kinema_nodes.core.model.meshes import load_mesh_arrays

        self.robot = robot
        self.parts: list[tuple[str, object, np.ndarray]] = []  # (link, geometry, origin in the link frame)
        for link, ylink in robot.urdf.link_map.items():
            for role, elements in (("collision", ylink.collisions), ("visual", ylink.visuals)):
                found = []
                for element in elements or ():
                    geometry = element.geometry
                    origin = np.eye(4) if element.origin is None else np.asarray(element.origin, dtype=float)
                    if geometry is None:
                        continue
                    if geometry.mesh is not None:
                        ref = next((m for m in robot.meshes if m.link == link and m.role == role
                                    and m.filename == geometry.mesh.filename), None)
                        if ref is None:
                            continue
                        vertices, faces = load_mesh_arrays(ref.path, ref.scale, source=robot.path, filename=ref.filename)
                        found.append((_bvh(vertices, faces), origin))
                    elif geometry.box is not None:
                        found.append((fcl.Box(*geometry.box.size), origin))
                    elif geometry.cylinder is not None:
                        found.append((fcl.Cylinder(geometry.cylinder.radius, geometry.cylinder.length), origin))
                    elif geometry.sphere is not None:
                        found.append((fcl.Sphere(geometry.sphere.radius), origin))
                if found:
                    self.parts += [(link, g, o) for g, o in found]
                    break

    def objects(self, q) -> list[tuple[str, object]]:
        import fcl

        from kinema_nodes.core.model.kinematics import link_pose

        poses = {}
        out = []
        for link, geometry, origin in self.parts:
            if link not in poses:
                poses[link] = link_pose(self.robot, np.asarray(q, dtype=float), link)
            out.append((link, fcl.CollisionObject(geometry, _transform(poses[link] @ origin))))
        return out


def obstacle_object(vertices_root, faces):
    """A Blender obstacle's own triangles (already in the robot's root frame) as an FCL object."""
    import fcl

    return fcl.CollisionObject(_bvh(vertices_root, faces), fcl.Transform())


def mesh_distance(robot_meshes: RobotMeshes, q, obstacles, links=None) -> tuple[float, str]:
    """The smallest distance (m) between the robot's meshes at q and `obstacles` (FCL objects),
    0 when they touch or overlap, with the link that comes closest."""
    import fcl

    best, closest = np.inf, ""
    for link, part in robot_meshes.objects(q):
        if links is not None and link not in links:
            continue
        for obstacle in obstacles:
            if fcl.collide(part, obstacle, fcl.CollisionRequest(), fcl.CollisionResult()):
                return 0.0, link
            result = fcl.DistanceResult()
            distance = fcl.distance(part, obstacle, fcl.DistanceRequest(), result)
            if distance < best:
                best, closest = float(distance), link
    return best, closest


def self_distance(robot_meshes: RobotMeshes, q, pairs) -> tuple[float, tuple[str, str]]:
    """The smallest distance between the meshes of the link pairs `pairs` (0: touching)."""
    import fcl

    objects = robot_meshes.objects(q)
    best, which = np.inf, ("", "")
    for a, b in pairs:
        for link_a, part_a in objects:
            if link_a != a:
                continue
            for link_b, part_b in objects:
                if link_b != b:
                    continue
                if fcl.collide(part_a, part_b, fcl.CollisionRequest(), fcl.CollisionResult()):
                    return 0.0, (a, b)
                distance = fcl.distance(part_a, part_b, fcl.DistanceRequest(), fcl.DistanceResult())
                if distance < best:
                    best, which = float(distance), (a, b)
    return best, which
