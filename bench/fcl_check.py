"""The independent clearance check: FCL (python-fcl) on the URDF's real collision geometry.

Kinema's solver sees each link as a few capsules; this module does not. It builds one FCL
object per `<collision>` element of the URDF (a mesh as a BVH of its real triangles, read with
the product's one hardened loader; boxes, cylinders and spheres as FCL's own primitives; a link
without `<collision>` uses its `<visual>`, as the product does) and the obstacles as FCL
primitives (a capsule as FCL's capsule; a mesh obstacle as the BVH of its triangles; the ground
as a 100 m slab whose top is z = 0), and answers the smallest distance per pair and whether any pair touches.

Self pairs checked are the link pairs the product checks (every pair but the "disabled
collisions": adjacent links and pairs touching at rest or in nearly every pose, or an SRDF's).
Used by tests/core/test_collisions.py, tests/cli/test_cli_collisions.py and bench/bench_collisions.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _rotation(wxyz):
    w, x, y, z = wxyz
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _bvh(vertices, faces):
    import fcl

    model = fcl.BVHModel()
    model.beginModel(len(vertices), len(faces))
    model.addSubModel(np.asarray(vertices, dtype=float), np.asarray(faces, dtype=np.int64))
    model.endModel()
    return model


@dataclass
class _Part:
    link: str
    geometry: object
    offset: np.ndarray  # 4x4, link frame -> geometry frame


class FclChecker:
    """Clearances of a robot configuration per FCL, against an optional `World`."""

    def __init__(self, robot, world=None, self_check: bool = True):
        import fcl

        from kinema_nodes.core.collision.robot_capsules import _pair, collision_model
        from kinema_nodes.core.model.meshes import load_mesh_arrays

        self.robot = robot
        self.model = collision_model(robot)
        self.parts: list[_Part] = []
        for link in robot.links:
            ylink = robot.urdf.link_map.get(link)
            if ylink is None:
                continue
            for role, elements in (("collision", ylink.collisions), ("visual", ylink.visuals)):
                made = []
                for element in elements or ():
                    g = element.geometry
                    origin = np.eye(4) if element.origin is None else np.asarray(element.origin, dtype=float)
                    if g.mesh is not None:
                        ref = next(m for m in robot.mesh_files() if m.link == link and m.role == role and m.filename == g.mesh.filename)
                        v, f = load_mesh_arrays(ref.path, ref.scale, source=robot.path, filename=ref.filename)
                        geometry = _bvh(v, f)
                    elif g.box is not None:
                        geometry = fcl.Box(*[float(x) for x in g.box.size])
                    elif g.cylinder is not None:
                        geometry = fcl.Cylinder(float(g.cylinder.radius), float(g.cylinder.length))
                    elif g.sphere is not None:
                        geometry = fcl.Sphere(float(g.sphere.radius))
                    else:
                        continue
                    made.append(_Part(link, geometry, origin))
                if made:
                    self.parts += made
                    break
        self.objects = [fcl.CollisionObject(p.geometry, fcl.Transform()) for p in self.parts]
        moved = {self.model.links[i] for i in range(len(self.model.links)) if self.model.moving[i]}
        self.self_pairs = []
        if self_check:
            for i, pi in enumerate(self.parts):
                for j in range(i + 1, len(self.parts)):
                    pj = self.parts[j]
                    if pi.link == pj.link or _pair(pi.link, pj.link) in self.model.allowed:
                        continue
                    if pi.link in moved or pj.link in moved:
                        self.self_pairs.append((i, j))
        self.world_objects = []
        if world is not None:
            for obstacle, name in zip(world.obstacles, world.names):
                self.world_objects.append((name, self._obstacle(obstacle)))
            if world.ground:
                # a slab whose top is z = 0 (FCL's half-space has no distance to a BVH mesh: it crashes)
                self.world_objects.append(("ground", fcl.CollisionObject(fcl.Box(100.0, 100.0, 1.0),
                                                                          fcl.Transform(np.array([0.0, 0.0, -0.5])))))
        self.moving_parts = [i for i, p in enumerate(self.parts) if p.link in moved]

    @staticmethod
    def _obstacle(obstacle):
        import fcl

        from kinema_nodes.core.model.meshes import load_mesh_arrays
        from kinema_nodes.core.collision import Box, Capsule, MeshObstacle, Sphere

        if isinstance(obstacle, Box):
            return fcl.CollisionObject(fcl.Box(*obstacle.size), fcl.Transform(_rotation(obstacle.pose[3:]), np.array(obstacle.pose[:3])))
        if isinstance(obstacle, Sphere):
            return fcl.CollisionObject(fcl.Sphere(obstacle.radius), fcl.Transform(np.array(obstacle.center, dtype=float)))
        if isinstance(obstacle, Capsule):
            a, b = np.array(obstacle.a, dtype=float), np.array(obstacle.b, dtype=float)
            axis = b - a
            length = float(np.linalg.norm(axis))
            z = axis / length if length > 1e-12 else np.array([0.0, 0.0, 1.0])
            helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
            x = np.cross(helper, z)
            x /= np.linalg.norm(x)
            rotation = np.stack([x, np.cross(z, x), z], axis=1)
            return fcl.CollisionObject(fcl.Capsule(obstacle.radius, length), fcl.Transform(rotation, (a + b) / 2))
        if isinstance(obstacle, MeshObstacle):
            v, f = load_mesh_arrays(obstacle.path, obstacle.scale)
            return fcl.CollisionObject(_bvh(v, f), fcl.Transform(_rotation(obstacle.pose[3:]), np.array(obstacle.pose[:3])))
        raise TypeError(type(obstacle).__name__)

    def _place(self, q):
        import fcl

        from kinema_nodes.core.model.kinematics import link_poses

        poses = link_poses(self.robot, np.asarray(q, dtype=float))
        index = {name: i for i, name in enumerate(self.robot.links)}
        for part, obj in zip(self.parts, self.objects):
            pose = poses[index[part.link]] @ part.offset
            obj.setTransform(fcl.Transform(pose[:3, :3], pose[:3, 3]))

    def check(self, q) -> tuple[float, list[tuple[str, str, float]]]:
        """(smallest distance over every checked pair (0 where something touches), the pairs
        that touch (name_a, name_b, 0)). A touching pair is decided by `fcl.collide`."""
        import fcl

        self._place(q)
        smallest = np.inf
        touching = []
        pairs = [(self.objects[i], self.objects[j], self.parts[i].link, self.parts[j].link) for i, j in self.self_pairs]
        pairs += [(self.objects[i], obj, self.parts[i].link, name) for i in self.moving_parts for name, obj in self.world_objects]
        for o1, o2, n1, n2 in pairs:
            if fcl.collide(o1, o2, fcl.CollisionRequest(), fcl.CollisionResult()):
                touching.append((n1, n2, 0.0))
                smallest = min(smallest, 0.0)
                continue
            result = fcl.DistanceResult()
            distance = fcl.distance(o1, o2, fcl.DistanceRequest(), result)
            smallest = min(smallest, float(distance))
        return float(smallest), touching

    def free(self, q, margin: float = 0.0) -> bool:
        smallest, touching = self.check(q)
        return not touching and smallest >= margin
