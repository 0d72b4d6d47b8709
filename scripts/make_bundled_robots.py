"""Writes the URDFs of the robots the package bundles (kinema_nodes/robots/*.urdf).

Kinematics come from published data: the 6-axis arm uses the UR5's (Universal Robots DH
parameters, as in ROS-Industrial's ur_description), the 7-axis arm the Franka Panda's
(Franka Control Interface documentation, as in franka_description). Geometry is simple
primitives so nothing needs downloading. Run from the repository root:

    python scripts/make_bundled_robots.py
"""

from __future__ import annotations

from math import pi
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "kinema_nodes" / "robots"

MATERIALS = {
    "grey": "0.55 0.57 0.6 1",
    "dark": "0.15 0.16 0.18 1",
    "orange": "0.95 0.45 0.1 1",
    "white": "0.92 0.92 0.9 1",
    "blue": "0.2 0.4 0.8 1",
}


def f(*values: float) -> str:
    return " ".join(f"{v:.10g}" for v in values)


def cylinder(radius, length, xyz=(0, 0, 0), rpy=(0, 0, 0), material="grey"):
    return ("cylinder", f'<cylinder radius="{radius:g}" length="{length:g}"/>', xyz, rpy, material)


def box(size, xyz=(0, 0, 0), rpy=(0, 0, 0), material="grey"):
    return ("box", f'<box size="{f(*size)}"/>', xyz, rpy, material)


def sphere(radius, xyz=(0, 0, 0), material="grey"):
    return ("sphere", f'<sphere radius="{radius:g}"/>', xyz, (0, 0, 0), material)


def link(name, shapes=()):
    parts = [f'  <link name="{name}">']
    for _, geometry, xyz, rpy, material in shapes:
        origin = f'<origin xyz="{f(*xyz)}" rpy="{f(*rpy)}"/>'
        parts.append(f'    <visual>{origin}<geometry>{geometry}</geometry><material name="{material}"/></visual>')
        parts.append(f"    <collision>{origin}<geometry>{geometry}</geometry></collision>")
    parts.append("  </link>")
    return "\n".join(parts)


def joint(name, kind, parent, child, xyz=(0, 0, 0), rpy=(0, 0, 0), axis=None, limits=None, mimic=None):
    parts = [f'  <joint name="{name}" type="{kind}">', f'    <parent link="{parent}"/>', f'    <child link="{child}"/>',
             f'    <origin xyz="{f(*xyz)}" rpy="{f(*rpy)}"/>']
    if axis is not None:
        parts.append(f'    <axis xyz="{f(*axis)}"/>')
    if limits is not None:
        lower, upper, velocity, effort = limits
        bounds = "" if lower is None else f' lower="{lower:.10g}" upper="{upper:.10g}"'
        parts.append(f'    <limit{bounds} velocity="{velocity:g}" effort="{effort:g}"/>')
    if mimic is not None:
        parts.append(f'    <mimic joint="{mimic[0]}" multiplier="{mimic[1]:g}" offset="{mimic[2]:g}"/>')
    parts.append("  </joint>")
    return "\n".join(parts)


def robot(name, comment, body):
    materials = "\n".join(f'  <material name="{m}"><color rgba="{c}"/></material>' for m, c in MATERIALS.items())
    return f'<?xml version="1.0"?>\n<!-- {comment} -->\n<robot name="{name}">\n{materials}\n' + "\n".join(body) + "\n</robot>\n"


def arm6_body(prefix: str, mount: str, mount_xyz=(0, 0, 0)) -> list[str]:
    """UR5 kinematics. The last wrist joint is continuous (multi-turn), as on many tool flanges."""
    p = prefix
    two_pi = 2 * pi
    return [
        link(f"{p}base_link", [cylinder(0.075, 0.06, (0, 0, 0.03), material="dark")]),
        joint(f"{p}base_mount", "fixed", mount, f"{p}base_link", mount_xyz),
        link(f"{p}shoulder_link", [cylinder(0.06, 0.15, (0, 0, 0), material="blue")]),
        joint(f"{p}shoulder_pan_joint", "revolute", f"{p}base_link", f"{p}shoulder_link", (0, 0, 0.089159), axis=(0, 0, 1),
              limits=(-two_pi, two_pi, pi, 150)),
        link(f"{p}upper_arm_link", [cylinder(0.054, 0.425, (0, 0, 0.2125), material="grey"), cylinder(0.06, 0.14, (0, 0, 0), (pi / 2, 0, 0), "blue")]),
        joint(f"{p}shoulder_lift_joint", "revolute", f"{p}shoulder_link", f"{p}upper_arm_link", (0, 0.13585, 0), (0, pi / 2, 0), (0, 1, 0),
              limits=(-two_pi, two_pi, pi, 150)),
        link(f"{p}forearm_link", [cylinder(0.04, 0.39225, (0, 0, 0.196125), material="grey"), cylinder(0.05, 0.12, (0, 0, 0), (pi / 2, 0, 0), "blue")]),
        joint(f"{p}elbow_joint", "revolute", f"{p}upper_arm_link", f"{p}forearm_link", (0, -0.1197, 0.425), axis=(0, 1, 0),
              limits=(-pi, pi, pi, 150)),
        link(f"{p}wrist_1_link", [cylinder(0.04, 0.11, (0, 0.093, 0), (pi / 2, 0, 0), "blue")]),
        joint(f"{p}wrist_1_joint", "revolute", f"{p}forearm_link", f"{p}wrist_1_link", (0, 0, 0.39225), (0, pi / 2, 0), (0, 1, 0),
              limits=(-two_pi, two_pi, pi, 28)),
        link(f"{p}wrist_2_link", [cylinder(0.04, 0.11, (0, 0, 0.09465), material="blue")]),
        joint(f"{p}wrist_2_joint", "revolute", f"{p}wrist_1_link", f"{p}wrist_2_link", (0, 0.093, 0), axis=(0, 0, 1),
              limits=(-two_pi, two_pi, pi, 28)),
        link(f"{p}wrist_3_link", [cylinder(0.04, 0.06, (0, 0.06, 0), (pi / 2, 0, 0), "dark")]),
        joint(f"{p}wrist_3_joint", "continuous", f"{p}wrist_2_link", f"{p}wrist_3_link", (0, 0, 0.09465), axis=(0, 1, 0),
              limits=(None, None, pi, 28)),
        link(f"{p}flange"),
        joint(f"{p}flange_joint", "fixed", f"{p}wrist_3_link", f"{p}flange", (0, 0.0823, 0), (-pi / 2, 0, 0)),
        link(f"{p}tool_tcp", [cylinder(0.012, 0.1, (0, 0, -0.05), material="orange"), sphere(0.015, material="orange")]),
        joint(f"{p}tcp_joint", "fixed", f"{p}flange", f"{p}tool_tcp", (0, 0, 0.1)),
    ]


def arm6() -> str:
    return robot("arm6", "6-axis arm with UR5 kinematics (DH from Universal Robots); primitive geometry; tool point: tool_tcp",
                 [link("world")] + arm6_body("", "world"))


def rail_arm6() -> str:
    body = [
        link("world", [box((3.4, 0.3, 0.08), (1.5, 0, 0.04), material="dark")]),
        link("carriage", [box((0.3, 0.3, 0.06), (0, 0, 0.03), material="grey")]),
        joint("rail_joint", "prismatic", "world", "carriage", (0, 0, 0.08), axis=(1, 0, 0), limits=(0.0, 3.0, 1.0, 1000)),
    ]
    return robot("rail_arm6", "arm6 (UR5 kinematics) on a 3 m linear rail along x; primitive geometry; tool point: tool_tcp",
                 body + arm6_body("", "carriage", (0, 0, 0.06)))


def arm7() -> str:
    """Franka Panda kinematics with its hand and two fingers (one mimics the other)."""
    limit = 2.8973
    body = [
        link("link0", [cylinder(0.08, 0.14, (0, 0, 0.07), material="white")]),
        link("link1", [cylinder(0.06, 0.2, (0, 0, -0.1), material="white")]),
        joint("joint1", "revolute", "link0", "link1", (0, 0, 0.333), axis=(0, 0, 1), limits=(-limit, limit, 2.175, 87)),
        link("link2", [cylinder(0.06, 0.12, (0, 0, 0), material="white"), cylinder(0.055, 0.2, (0, -0.1, 0), (pi / 2, 0, 0), "white")]),
        joint("joint2", "revolute", "link1", "link2", rpy=(-pi / 2, 0, 0), axis=(0, 0, 1), limits=(-1.7628, 1.7628, 2.175, 87)),
        link("link3", [cylinder(0.055, 0.2, (0, 0, -0.1), material="white")]),
        joint("joint3", "revolute", "link2", "link3", (0, -0.316, 0), (pi / 2, 0, 0), (0, 0, 1), limits=(-limit, limit, 2.175, 87)),
        link("link4", [cylinder(0.055, 0.12, (0, 0, 0), material="dark"), cylinder(0.05, 0.2, (-0.0825, 0.1, 0), (pi / 2, 0, 0), "white")]),
        joint("joint4", "revolute", "link3", "link4", (0.0825, 0, 0), (pi / 2, 0, 0), (0, 0, 1), limits=(-3.0718, -0.0698, 2.175, 87)),
        link("link5", [cylinder(0.05, 0.22, (0, 0, -0.11), material="white")]),
        joint("joint5", "revolute", "link4", "link5", (-0.0825, 0.384, 0), (-pi / 2, 0, 0), (0, 0, 1), limits=(-limit, limit, 2.61, 12)),
        link("link6", [cylinder(0.05, 0.1, (0, 0, 0), material="white"), cylinder(0.04, 0.09, (0.045, 0, 0), (0, pi / 2, 0), "white")]),
        joint("joint6", "revolute", "link5", "link6", rpy=(pi / 2, 0, 0), axis=(0, 0, 1), limits=(-0.0175, 3.7525, 2.61, 12)),
        link("link7", [cylinder(0.045, 0.08, (0, 0, 0.04), material="dark")]),
        joint("joint7", "revolute", "link6", "link7", (0.088, 0, 0), (pi / 2, 0, 0), (0, 0, 1), limits=(-limit, limit, 2.61, 12)),
        link("flange"),
        joint("flange_joint", "fixed", "link7", "flange", (0, 0, 0.107)),
        link("hand", [box((0.04, 0.2, 0.06), (0, 0, 0.03), material="white")]),
        joint("hand_joint", "fixed", "flange", "hand", rpy=(0, 0, -pi / 4)),
        link("finger_left", [box((0.02, 0.015, 0.05), (0, 0.0075, 0.025), material="dark")]),
        joint("finger_joint", "prismatic", "hand", "finger_left", (0, 0, 0.0584), axis=(0, 1, 0), limits=(0.0, 0.04, 0.2, 20)),
        link("finger_right", [box((0.02, 0.015, 0.05), (0, -0.0075, 0.025), material="dark")]),
        joint("finger_joint_mimic", "prismatic", "hand", "finger_right", (0, 0, 0.0584), axis=(0, -1, 0), limits=(0.0, 0.04, 0.2, 20),
              mimic=("finger_joint", 1.0, 0.0)),
        link("fingertip_tcp", [sphere(0.006, material="orange")]),
        joint("fingertip_joint", "fixed", "finger_left", "fingertip_tcp", (0, 0, 0.0453)),
    ]
    return robot("arm7", "7-axis arm with Franka Panda kinematics and a parallel gripper (one finger mimics the other); "
                         "primitive geometry; tool point: fingertip_tcp (aim at 'flange' for the 7 arm joints alone)", body)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in (("arm6", arm6), ("arm7", arm7), ("rail_arm6", rail_arm6)):
        (OUT / f"{name}.urdf").write_text(make())
        print("wrote", OUT / f"{name}.urdf")


if __name__ == "__main__":
    main()
