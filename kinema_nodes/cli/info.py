"""`kinema-nodes info` and `kinema-nodes fk`: what a robot is, and where its links are (no solver, no Blender)."""

from __future__ import annotations

import numpy as np
from .common import finite_or_none, emit, parse_joint_values


def add_arguments_info(parser):
    """List a robot's joints (type, axis, limits), links and tool point."""
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def robot_info(robot) -> dict:
    joints = []
    for joint in robot.joints:
        entry = {
            "name": joint.name,
            "type": joint.type,
            "parent": joint.parent,
            "child": joint.child,
            "axis": [float(v) for v in joint.axis],
            "lower": finite_or_none(joint.lower) if joint.is_movable else None,
            "upper": finite_or_none(joint.upper) if joint.is_movable else None,
            "velocity": finite_or_none(joint.velocity) if joint.is_movable else None,
            "actuated": joint.is_actuated,
        }
        if joint.mimic:
            entry["mimic"] = {"joint": joint.mimic.joint, "multiplier": joint.mimic.multiplier, "offset": joint.mimic.offset}
        joints.append(entry)
    return {
        "name": robot.name,
        "file": str(robot.path),
        "root_link": robot.root_link,
        "tool_point": robot.tool_point,
        "dof": robot.dof,
        "actuated_joints": robot.actuated_joint_names,
        "joints": joints,
        "links": robot.links,
        "meshes": len(robot.meshes),
        "notes": robot.notes,
    }


def _limits_text(entry: dict) -> str:
    if entry["type"] == "continuous":
        return "continuous (no limits)"
    if entry["lower"] is None:
        return ""
    if entry["type"] == "prismatic":
        return f"{entry['lower'] * 1000:.1f} .. {entry['upper'] * 1000:.1f} mm"
    return f"{np.degrees(entry['lower']):.1f} .. {np.degrees(entry['upper']):.1f} deg"


def run_info(args) -> int:
    from ..core.model.loading import load_robot

    info = robot_info(load_robot(args.urdf))
    lines = [
        f"{info['name']}  ({info['file']})",
        f"root link: {info['root_link']}   tool point: {info['tool_point']}   degrees of freedom: {info['dof']}",
        "joints:",
    ]
    for j in info["joints"]:
        mimic = f"  mimics {j['mimic']['joint']}" if "mimic" in j else ""
        axis = " ".join(f"{v:g}" for v in j["axis"]) if j["type"] != "fixed" else ""
        lines.append(f"  {j['name']:<28} {j['type']:<10} axis [{axis}]  {_limits_text(j)}{mimic}")
    lines.append(f"links ({len(info['links'])}): {', '.join(info['links'])}")
    lines.extend(f"note: {n}" for n in info["notes"])
    emit(args, info, lines)
    return 0


def add_arguments_fk(parser):
    """Forward kinematics: a link's pose in the robot's root frame for given joint values."""
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--link", help="link whose pose to print (default: the tool point)")
    parser.add_argument("--joints", nargs="*", default=[], metavar="NAME=VALUE", help="joint values, radians or metres (default: zero, moved inside the limits; values "
                             "outside the limits are clamped, with a warning)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def clamp_to_limits(robot, q, what: str = "joint values"):
    """`q` inside the joint limits, with one warning line naming each joint that was moved
    (`fk` and `import` treat out-of-limit values the same way). Returns (q, clamped names)."""
    from .common import warn

    clamped_q = np.clip(q, robot.lower, robot.upper)
    moved = [i for i in range(len(q)) if clamped_q[i] != q[i]]
    if moved:
        def unit(i, v):
            return f"{v * 1000:g} mm" if robot.is_prismatic[i] else f"{v:g} rad"
        parts = [f"{robot.actuated_joint_names[i]}={unit(i, q[i])} -> {unit(i, clamped_q[i])} "
                 f"(limits {unit(i, robot.lower[i])} .. {unit(i, robot.upper[i])})" for i in moved]
        warn(f"{what} outside the joint limits, clamped: {'; '.join(parts)}")
    return clamped_q, [robot.actuated_joint_names[i] for i in moved]


def run_fk(args) -> int:
    from ..core.model.kinematics import link_pose
    from ..core.model.loading import load_robot
    from ..core.model.rotations import matrix_to_quaternion

    robot = load_robot(args.urdf, check_meshes=False)
    link = robot.check_link(args.link or robot.tool_point)
    q, clamped = clamp_to_limits(robot, robot.configuration(parse_joint_values(args.joints)))
    pose = link_pose(robot, q, link)
    position = pose[:3, 3]
    quaternion = matrix_to_quaternion(pose)
    payload = {
        "link": link,
        "frame": robot.root_link,
        "matrix": pose.tolist(),
        "position": position.tolist(),
        "quaternion": quaternion.tolist(),
        "joints": dict(zip(robot.actuated_joint_names, q.tolist())),
        "clamped": clamped,
    }
    text = (
        [f"{link} in {robot.root_link}:"]
        + ["  " + "  ".join(f"{v: .6f}" for v in row) for row in pose]
        + [f"position (m): {' '.join(f'{v:.6f}' for v in position)}", f"quaternion (w x y z): {' '.join(f'{v:.6f}' for v in quaternion)}"]
    )
    emit(args, payload, text)
    return 0
