"""`kinema-nodes`: the parser and the dispatch to one module per subcommand.

Every command takes a URDF path or a bundled robot's name; `--json` prints one JSON object on
stdout; an error is one line on stderr and a non-zero exit code (see EXIT_CODES_TEXT). Each subcommand's module is
loaded on demand, so `info` and `fk` never import JAX or Blender.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys


from ..core.errors import KinemaError, printable
from .common import OneLineParser, own_lines_only

#: Subcommand -> module (in this package) that provides `add_arguments_<name>(parser)` and
#: `run_<name>(args)`.
COMMAND_MODULES: dict[str, str] = {
    "info": "info",
    "fk": "info",
    "solve": "solve",
    "bench": "solve",
    "import": "import_robot",
    "configs": "configs",
    "bake": "bake",
    "demo": "demo",
    "export": "export",
    "robots": "robots",
    "batch": "batch",
    "reach": "reach",
}


#: Exit codes, for scripts and pipelines (the README and every --help say the same).
EXIT_OK = 0  # ran, every solve converged and no frame was flagged
INTERNAL_ERROR = 1  # a fault in Kinema Nodes itself (KINEMA_DEBUG=1 shows the traceback)
BAD_INPUT = 2  # bad input: a file, a name, a number or an option; nothing was written
NOT_CONVERGED = 3  # ran, but a solve did not converge or frames were flagged; the JSON says which

EXIT_CODES_TEXT = """exit codes:
  0  ran; every solve converged and no frame was flagged
  1  internal error in Kinema Nodes (set KINEMA_DEBUG=1 for a traceback)
  2  bad input (a file, a name, a number or an option), said in one line on stderr
  3  ran, but a solve did not converge or frames were flagged ("converged"/"flagged" in the JSON)

Blender's, JAX's and PyRoki's own log lines are dropped; --verbose shows them on stderr."""


def _command(name: str):
    module_name = COMMAND_MODULES[name]
    module = importlib.import_module(f".{module_name}", __package__)
    key = name.replace("-", "_")
    return getattr(module, f"add_arguments_{key}"), getattr(module, f"run_{key}")


def _description(add_arguments) -> str | None:
    """A subcommand's one-line description: the first line of its add_arguments docstring."""
    doc = (add_arguments.__doc__ or "").strip()
    return doc.splitlines()[0].strip() if doc else None


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="kinema-nodes", description="Robot IK for Blender: headless commands.",
                           epilog=EXIT_CODES_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verbose", action="store_true", help="show Blender's, JAX's and PyRoki's own log lines on stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            add_arguments, _ = _command(name)
        except (ImportError, AttributeError):
            continue  # a command whose module is not part of this build
        description = _description(add_arguments)
        command = sub.add_parser(name, help=description, description=description, epilog=EXIT_CODES_TEXT,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        add_arguments(command)
        if any(action.dest == "urdf" for action in command._actions):
            _add_robot_file_arguments(command)
        if not any("--verbose" in action.option_strings for action in command._actions):
            command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                                 help="show Blender's, JAX's and PyRoki's own log lines on stderr")
    return parser


def _add_robot_file_arguments(parser) -> None:
    """--xacro-arg and --package-path, for every command that takes a robot."""
    parser.add_argument("--xacro-arg", action="append", default=[], metavar="NAME:=VALUE",
                        help="an argument of a .xacro robot (repeat for more)")
    parser.add_argument("--package-path", action="append", default=[], metavar="DIR",
                        help="a folder that is, or holds, ROS packages for package:// and $(find) (repeat for more)")


def _set_robot_file_defaults(args) -> None:
    """The run's --package-path and --xacro-arg become `load_robot`'s defaults (none for a
    command without them, so an earlier in-process run leaves nothing behind)."""
    from ..core.model.loading import set_load_defaults
    from ..core.model.xacro import parse_xacro_args

    set_load_defaults(getattr(args, "package_path", ()), parse_xacro_args(getattr(args, "xacro_arg", ())))


def exit_code_for(exc: BaseException) -> int:
    """The exit code for an exception that ended a command: bad input, or our own fault."""
    return BAD_INPUT if isinstance(exc, KinemaError) else INTERNAL_ERROR


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _, run = _command(args.command)
    try:
        _set_robot_file_defaults(args)
        with own_lines_only(verbose=bool(getattr(args, "verbose", False))):
            return int(run(args) or 0)
    except KinemaError as exc:
        print(f"kinema-nodes: error: {printable(exc)}", file=sys.stderr)
        return exit_code_for(exc)
    except Exception as exc:
        if os.environ.get("KINEMA_DEBUG"):
            raise
        print(f"kinema-nodes: internal error: {type(exc).__name__}: {printable(exc)} (set KINEMA_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return exit_code_for(exc)


def run() -> None:
    """The console script: `main`, then exit. Under Blender's module, exit without running its
    shutdown code, which some bpy versions (4.5) can hang in at process exit. Likewise while the
    solver kernel's first compile is still running: a command does not wait for it at exit (a
    script's interpreter does, `core.solve.wait_for_kernel_build`); the next one starts it again."""
    code = main()
    if "bpy" in sys.modules or _kernel_compiling():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _kernel_compiling() -> bool:
    kernel = sys.modules.get("kinema_nodes.core.solve._kernel")
    return kernel is not None and kernel.kernel_building()


if __name__ == "__main__":
    run()
