"""`kinema-nodes`: the parser and the dispatch to one module per subcommand.

Every command takes a URDF path or a bundled robot's name; `--json` prints one JSON object on
stdout; an error is one line on stderr and a non-zero exit code. Each subcommand's module is
loaded on demand, so `info` and `fk` never import JAX or Blender.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys


from ..core.errors import KinemaError
from .common import BLENDER_COMMANDS, OneLineParser, answer_on_stdout_only

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
}


def _command(name: str):
    module_name = COMMAND_MODULES[name]
    module = importlib.import_module(f".{module_name}", __package__)
    key = name.replace("-", "_")
    return getattr(module, f"add_arguments_{key}"), getattr(module, f"run_{key}")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="kinema-nodes", description="Robot IK for Blender: headless commands.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
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
    quiet = answer_on_stdout_only() if args.command in BLENDER_COMMANDS else contextlib.nullcontext()
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
