"""`kinema-nodes`: the headless commands scripts and pipelines rely on.

Every command takes a URDF path or a bundled robot's name; `--json` prints one JSON object on
stdout; an error is one line on stderr and a non-zero exit code. Commands that need more than
the core live in their own modules (`cli_solver`, `cli_blender`) and are loaded on demand,
so `info` and `fk` never import JAX or Blender.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys

import numpy as np

from .core.errors import KinemaError

#: Subcommand -> module that provides `add_arguments_<name>(parser)` and `run_<name>(args)`.
#: Commands in this file are listed with module None.
COMMAND_MODULES: dict[str, str | None] = {
    "info": None,
    "fk": None,
    "solve": "cli_solver",
    "bench": "cli_solver",
    "import": "cli_blender",
    "configs": "cli_configs",
    "bake": "cli_bake",
    "demo": "cli_bake",
}


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the CLI's error contract)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_joint_values(items: list[str] | None) -> dict[str, float]:
    """NAME=VALUE pairs -> {name: value}; bad pairs are a `KinemaError`."""
    values: dict[str, float] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise KinemaError(f"joint value '{item}' is not NAME=VALUE")
        try:
            value = float(text)
        except ValueError:
            raise KinemaError(f"joint value '{item}': '{text}' is not a number") from None
        if not np.isfinite(value):
            raise KinemaError(f"joint value '{item}' is not a finite number")
        values[name] = value
    return values


#: Where a command's answer goes. Commands that run Blender point the process's stdout at
#: /dev/null (Blender logs to it from C, at times we cannot predict) and answer here instead.
_answer = None

#: Commands that start Blender's module.
BLENDER_COMMANDS = ("import", "configs", "bake", "demo")


def emit(args, payload: dict, text: str) -> None:
    """Print the JSON object with --json, else the human text."""
    out = _answer or sys.stdout
    if getattr(args, "json", False):
        print(json.dumps(payload, allow_nan=False), file=out)
    else:
        print(text, file=out)
    out.flush()


@contextlib.contextmanager
def _answer_on_stdout_only():
    """Keep stdout for the command's answer: anything else written to fd 1 is dropped."""
    global _answer
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    _answer = os.fdopen(os.dup(saved), "w")
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        _answer.close()
        _answer = None
        os.close(saved)
        os.close(devnull)


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


# ---- info ------------------------------------------------------------------------------

def add_arguments_info(parser):
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
            "lower": _finite_or_none(joint.lower) if joint.is_movable else None,
            "upper": _finite_or_none(joint.upper) if joint.is_movable else None,
            "velocity": _finite_or_none(joint.velocity) if joint.is_movable else None,
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
    from .core.robot import load_robot

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
    emit(args, info, "\n".join(lines))
    return 0


# ---- fk --------------------------------------------------------------------------------

def add_arguments_fk(parser):
    parser.add_argument("urdf", help="URDF file or bundled robot name")
    parser.add_argument("--link", help="link whose pose to print (default: the tool point)")
    parser.add_argument("--joints", nargs="*", default=[], metavar="NAME=VALUE", help="joint values, radians or metres")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_fk(args) -> int:
    from .core.kinematics import link_pose
    from .core.robot import load_robot
    from .core.rotations import matrix_to_quaternion

    robot = load_robot(args.urdf, check_meshes=False)
    link = robot.check_link(args.link or robot.tool_point)
    q = robot.configuration(parse_joint_values(args.joints))
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
    }
    text = "\n".join(
        [f"{link} in {robot.root_link}:"]
        + ["  " + "  ".join(f"{v: .6f}" for v in row) for row in pose]
        + [f"position (m): {' '.join(f'{v:.6f}' for v in position)}", f"quaternion (w x y z): {' '.join(f'{v:.6f}' for v in quaternion)}"]
    )
    emit(args, payload, text)
    return 0


# ---- main ------------------------------------------------------------------------------

def _command(name: str):
    module_name = COMMAND_MODULES[name]
    module = sys.modules[__name__] if module_name is None else importlib.import_module(f".{module_name}", __package__)
    key = name.replace("-", "_")
    return getattr(module, f"add_arguments_{key}"), getattr(module, f"run_{key}")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="kinema-nodes", description="Robot IK for Blender: headless commands.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    for name in COMMAND_MODULES:
        try:
            add_arguments, _ = _command(name)
        except (ImportError, AttributeError):
            continue  # a command whose module is not part of this build
        add_arguments(sub.add_parser(name))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _, run = _command(args.command)
    quiet = _answer_on_stdout_only() if args.command in BLENDER_COMMANDS else contextlib.nullcontext()
    try:
        with quiet:
            return int(run(args) or 0)
    except KinemaError as exc:
        print(f"kinema-nodes: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if os.environ.get("KINEMA_DEBUG"):
            raise
        print(f"kinema-nodes: internal error: {type(exc).__name__}: {exc} (set KINEMA_DEBUG=1 for a traceback)", file=sys.stderr)
        return 3


def run() -> None:
    """The console script: `main`, then exit. Under Blender's module, exit without running its
    shutdown code, which some bpy versions (4.5) can hang in at process exit."""
    code = main()
    if "bpy" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
