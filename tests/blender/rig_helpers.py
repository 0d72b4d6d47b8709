"""The rig helpers the Blender tests share: import a robot, read and set its joints, let the
depsgraph settle. Real Blender, real robots: these only shorten what each test would spell out."""

from __future__ import annotations

import numpy as np
from independent_fk import IndependentFK, pose_error  # noqa: F401 -- the Blender tests' yardstick, re-exported


def import_rig(bpy, name_or_path, *, active: bool = False, **options):
    """A robot (a bundled name or a URDF path) imported as a rig; `active`: made the active object."""
    from kinema_nodes.blender.build import import_urdf

    rig = import_urdf(bpy.context, name_or_path, **options)
    if active:
        bpy.context.view_layer.objects.active = rig
    return rig


def robot_of(rig):
    from kinema_nodes.blender.rig import robot_for_rig

    return robot_for_rig(rig)


def joints_of(rig) -> np.ndarray:
    """The rig's joint values now (one per actuated joint)."""
    from kinema_nodes.blender.rig import read_joint_values

    return read_joint_values(rig, robot_of(rig))


def set_joints(rig, q) -> None:
    """Pose the rig at joint values `q` (no depsgraph update)."""
    from kinema_nodes.blender.rig import write_joint_values

    write_joint_values(rig, robot_of(rig), np.asarray(q, dtype=float))


def pose_and_update(bpy, rig, q) -> None:
    """`set_joints`, then one depsgraph update (the handlers run on it)."""
    set_joints(rig, q)
    bpy.context.view_layer.update()


def settle(bpy) -> None:
    """Let the depsgraph run the handlers, then evaluate what they wrote."""
    bpy.context.view_layer.update()
    bpy.context.view_layer.update()


def scrub(bpy, rig, solver, frames) -> dict:
    """The rig's joints at each frame, visited in the order given; every frame must say converged."""
    seen = {}
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        assert solver.summary.startswith("converged"), (frame, solver.summary)
        seen[frame] = joints_of(rig)
    return seen


def walk(robot, link, q, count, step, seed):
    """`count` configurations, each a small step (+- `step` rad on each chain joint) from the
    last, inside the limits: every one is a pose the arm can reach from the one before. Only the
    moving joints move (and are kept off their limits): a held joint keeps its value, as on the
    rig (a torso slide at its lower limit, clipped up with the rest, made the goal one the rig
    cannot reach: tiago's 'out of reach' 2.75 mm, #29)."""
    rng = np.random.default_rng(seed)
    moving = set(robot.chain_joint_names(link)) - set(robot.held_joints(True))
    free = np.array([name in moving for name in robot.actuated_joint_names], dtype=float)
    lower = np.where(np.isfinite(robot.lower), robot.lower, -np.pi)
    upper = np.where(np.isfinite(robot.upper), robot.upper, np.pi)
    margin = np.minimum(0.05, 0.1 * (upper - lower))
    out = []
    for _ in range(count):
        q = np.where(free > 0, np.clip(q + free * rng.uniform(-step, step, robot.dof), lower + margin, upper - margin), q)
        out.append(q.copy())
    return out
