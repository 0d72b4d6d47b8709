"""xacro files expanded to URDF through the ROS xacro implementation from PyPI (`xacro`).

We do not expand macros ourselves: `xacro.process_file` does, exactly as ``xacro FILE`` in a
ROS workspace, and the text is what that command writes (``toprettyxml(indent="  ")``), so the
expansion matches xacro's own output byte for byte. Two things differ from a ROS install:

- ``$(find PKG)`` (and ``find`` in expressions) resolves through Kinema's one package search
  path (`core.model.packages`), not through ament or rospack, so no ROS is needed;
- an included or loaded file must be a regular file under a size cap (a FIFO would block
  forever), and a macro or include that recurses without end is one line, not a traceback.

The `xacro` module keeps its state in module globals, so expansions run one at a time.
`xacrodoc` was the alternative: it needs rospkg and catkin_pkg besides xacro, replaces xacro's
package lookup for the whole process at import, and compiles each file until a fixed point, so
its output is not xacro's; it is used in the tests only as an independent check.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import threading
from pathlib import Path

from ..errors import RobotFileError
from .packages import PackageSearchPath

#: Largest xacro (or included file) read.
MAX_XACRO_BYTES = 32 * 1024 * 1024
#: Deepest macro call stack: a real robot nests macros a few levels; a loop nests forever.
MAX_MACRO_DEPTH = 100

_LOCK = threading.Lock()
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ARG = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def parse_xacro_args(items) -> dict[str, str]:
    """``name:=value`` strings (the xacro command line's own form) -> {name: value}."""
    args: dict[str, str] = {}
    for item in items or ():
        name, sep, value = str(item).partition(":=")
        name = name.strip()
        if not sep or not _ARG.match(name):
            from ..errors import KinemaError

            raise KinemaError(f"xacro argument '{item}' is not NAME:=VALUE")
        args[name] = value
    return args


def _check_input_file(filename: str, source: Path) -> None:
    try:
        info = os.stat(filename)
    except OSError as exc:
        raise RobotFileError(source, f"xacro includes '{filename}', which cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise RobotFileError(source, f"xacro includes '{filename}', which is not a regular file (a device, pipe or folder?); refused")
    if info.st_size > MAX_XACRO_BYTES:
        raise RobotFileError(source, f"xacro includes '{filename}' of {info.st_size / 1e6:.0f} MB; refusing files over {MAX_XACRO_BYTES / 1e6:.0f} MB")


@contextlib.contextmanager
def _patched(xacro, search: PackageSearchPath, source: Path):
    """xacro with our package lookup, file checks and macro depth cap, for one expansion."""
    from xacro import substitution_args

    def find(package: str) -> str:
        return str(search.require(package, source))

    original_parse, original_yaml, original_call = xacro.parse, xacro.load_yaml, xacro.handle_macro_call
    original_find = substitution_args._eval_find
    original_dict_find = substitution_args._eval_dict.get("find")

    def parse(inp, filename=None):
        if inp is None and filename is not None:
            _check_input_file(os.path.join(xacro.root_dir, filename), source)
        return original_parse(inp, filename)

    def load_yaml(filename):
        _check_input_file(xacro.abs_filename_spec(filename), source)
        return original_yaml(filename)

    def handle_macro_call(node, macros, symbols):
        if len(xacro.macrostack or ()) > MAX_MACRO_DEPTH:
            raise RecursionError("macro calls nested too deep")
        return original_call(node, macros, symbols)

    xacro.parse, xacro.load_yaml, xacro.handle_macro_call = parse, load_yaml, handle_macro_call
    substitution_args._eval_find = find
    substitution_args._eval_dict["find"] = find
    try:
        yield
    finally:
        xacro.parse, xacro.load_yaml, xacro.handle_macro_call = original_parse, original_yaml, original_call
        substitution_args._eval_find = original_find
        if original_dict_find is not None:
            substitution_args._eval_dict["find"] = original_dict_find


def _one_line(text: str) -> str:
    return " ".join(_ANSI.sub("", text).split())


def _root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while getattr(exc, "exc", None) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.exc
    return exc


def expand_xacro(path: str | Path, args: dict[str, str] | None, search: PackageSearchPath) -> tuple[str, list[str]]:
    """(URDF text, notes) for a xacro file with `args` (``name:=value``), as ``xacro`` writes it.

    Raises `RobotFileError` (one line naming the file) for a missing argument, a missing
    package, a macro or include loop, or anything else xacro refuses."""
    path = Path(path)
    try:
        import xacro
    except ImportError:
        raise RobotFileError(path, "is a xacro file; reading it needs the 'xacro' package (pip install xacro)") from None
    _check_input_file(str(path), path)
    warnings = io.StringIO()
    with _LOCK, _patched(xacro, search, path), contextlib.redirect_stderr(warnings), contextlib.redirect_stdout(warnings):
        xacro.all_includes = []
        try:
            doc = xacro.process_file(str(path), mappings=dict(args or {}))
            text = doc.toprettyxml(indent="  ")
        except RobotFileError:
            raise
        except RecursionError:
            raise RobotFileError(path, "xacro macro loop: a macro (or an include) that calls itself without end") from None
        except Exception as exc:  # noqa: BLE001  (xacro and minidom raise many kinds)
            cause = _root_cause(exc)
            if isinstance(cause, RobotFileError):
                raise RobotFileError(path, f"xacro: {cause.problem}") from None
            if isinstance(cause, RecursionError):
                raise RobotFileError(path, "xacro macro loop: a macro (or an include) that calls itself without end") from None
            from xacro.substitution_args import ArgException

            if isinstance(cause, ArgException):
                raise RobotFileError(
                    path, f"xacro argument '{cause}' has no value and no default; give it as {cause}:=VALUE "
                    "(--xacro-arg, or xacro Arguments in the import dialog)"
                ) from None
            message = _one_line(str(exc)) or type(exc).__name__
            raise RobotFileError(path, f"xacro could not expand it: {message[:400]}") from None
        finally:
            xacro.all_includes = []
    notes = [f"xacro: {_one_line(line)}" for line in warnings.getvalue().splitlines() if _one_line(line)]
    return text, notes[:20]
