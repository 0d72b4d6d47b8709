"""xacro files expanded to URDF through the ROS xacro implementation from PyPI (`xacro`).

We do not expand macros ourselves: `xacro.process_file` does, exactly as ``xacro FILE`` in a
ROS workspace, and the text is what that command writes (``toprettyxml(indent="  ")``), so the
expansion matches xacro's own output byte for byte on ordinary files. What differs from a ROS
install:

- ``$(find PKG)`` (and ``find`` in expressions) resolves through Kinema's one package search
  path (`core.model.packages`), not through ament or rospack, so no ROS is needed;
- a xacro file from the internet is untrusted: its expressions (``${...}``, ``$(eval ...)``, YAML
  units) go through a restricted evaluator (`core.model.safe_eval`) instead of Python's ``eval``,
  so they compute but never run code; every file xacro opens (includes, ``load_yaml``) must lie
  inside the robot's folders (`robot_folders`: its folder, the one above, its ROS package and the
  packages ``$(find)`` found) after ``..`` and symlinks, and be a regular file under a size cap
  (a FIFO would block forever);
- the expansion's work is capped (macro calls, elements, characters, seconds), so a macro that
  calls itself twice per level or a property that doubles is one line, not a hang or a
  MemoryError; a refusal names the construct and the file and line it is on.

Why a restricted evaluator and not a sandboxed process: a process whose file access is confined
to the robot's folders needs the operating system's help (Landlock or seccomp on Linux; nothing
a Python add-on can readily use on Windows or macOS), costs a process start on every import, and
would still run xacro's ``eval`` inside it; the evaluator costs about 0.1 ms an expression
(docs/RELIABILITY.md has the measurements), and what it allows is a short list that can be read
and tested.

The `xacro` module keeps its state in module globals, so expansions run one at a time.
`xacrodoc` was the alternative: it needs rospkg and catkin_pkg besides xacro, replaces xacro's
package lookup for the whole process at import, and compiles each file until a fixed point, so
its output is not xacro's; it is used in the tests only as an independent check.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import re
import stat
import threading
import time
import types
from pathlib import Path

from ..errors import RobotFileError
from .packages import PackageSearchPath
from .safe_eval import MAX_TEXT, REPLACED, SAFE_BUILTINS, ExpressionRefused, evaluate, measure
from .xml_reading import check_no_doctype

#: Largest xacro (or included file) read.
MAX_XACRO_BYTES = 32 * 1024 * 1024
#: Deepest macro call stack: a real robot nests macros a few levels; a loop nests forever.
MAX_MACRO_DEPTH = 100
#: Most macro calls in one expansion: a real robot makes tens to hundreds; a macro calling itself twice
#: per level makes 2**depth.
MAX_MACRO_CALLS = 2_500
#: Most elements evaluated in one expansion (a 100-link humanoid has a few thousand; minidom slows
#: quadratically as siblings pile up: 50,000 in one parent take 15-40 s, 20,000 a few).
MAX_ELEMENTS = 20_000
#: Most element moves (moved elements times the siblings they join, summed) in one expansion: a
#: real robot needs thousands to a few million (the Franka arm 1,410); a doubling macro makes billions.
MAX_DOM_WORK = 100_000_000
#: Most characters of expanded text in one expansion (twice the URDF cap).
MAX_EXPANDED_TEXT = 64 * 1024 * 1024
#: Longest an expansion may run.
MAX_XACRO_SECONDS = 30

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
        raise RobotFileError(source, f"xacro includes '{filename}', which is not a regular file (a device, pipe or folder?); "
                                     "refused")
    if info.st_size > MAX_XACRO_BYTES:
        raise RobotFileError(source, f"xacro includes '{filename}' of {info.st_size / 1e6:.0f} MB; "
                                     f"refusing files over {MAX_XACRO_BYTES / 1e6:.0f} MB")


class _Expansion:
    """What one expansion may read and how much work it may do.

    Every file xacro opens (an include, ``load_yaml``) goes through `open`: it must lie inside
    the robot's folders (`robot_folders`: the xacro's folder, the one above, its ROS package,
    and each package ``$(find)`` found) after ``..`` and symlinks are followed, and be a
    regular file under the size cap. Expressions go through the restricted evaluator; macro
    calls, elements and expanded text are counted against their caps, and the clock against
    `MAX_XACRO_SECONDS`."""

    def __init__(self, xacro, search: PackageSearchPath, source: Path):
        self.xacro = xacro
        self.search = search
        self.source = source
        self.deadline = time.monotonic() + MAX_XACRO_SECONDS
        self.macro_calls = 0
        self.elements = 0
        self.dom_work = 0
        self.parsing = False
        self.text = 0
        self.texts: dict[str, str] = {}
        self.allowed, self.replaced = _xacro_helpers(xacro)

    # ---- files -------------------------------------------------------------------------------
    def folders(self) -> list[Path]:
        from .mesh_paths import robot_folders

        return robot_folders(self.source, search=self.search)

    def inside(self, filename: str, what: str) -> Path:
        """`filename`, resolved, if it lies inside the robot's folders; else a one-line refusal."""
        try:
            real = Path(filename).resolve()
        except RecursionError:
            raise
        except (OSError, RuntimeError, ValueError):
            raise self.refusal(f"xacro {what} '{filename}', which is not a usable path", filename) from None
        folders = self.folders()
        if not any(real == folder or folder in real.parents for folder in folders):
            raise self.refusal(
                f"xacro {what} '{filename}', which is {real}, outside the robot's folders "
                f"({', '.join(str(f) for f in folders)}); "
                "refused: a xacro file may read only inside its folders and the packages $(find) names", filename)
        return real

    def open(self, filename, mode="r", *args, **kwargs):
        """xacro's `open`: reads inside the robot's folders only, regular files only, read once
        here and handed to xacro as text (an XML file after the DOCTYPE rule of `xml_reading`)."""
        if any(flag in str(mode) for flag in "wax+"):
            raise self.refusal(f"xacro writes '{filename}'; refused", str(filename))
        what = "includes" if self.parsing else "loads YAML from"
        real = self.inside(str(filename), what)
        if not os.path.lexists(real):  # as open() would: xacro handles it (optional includes)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(filename))
        _check_input_file(str(real), self.source)
        self.deadline_check()
        try:
            data = real.read_bytes()
        except OSError as exc:
            raise self.refusal(f"xacro {what} '{filename}', which cannot be read: {exc.strerror or exc}", str(filename)) from None
        if self.parsing:
            text = check_no_doctype(data, self.source, f"xacro file '{filename}'")
        else:
            try:
                text = data.decode("utf-8").removeprefix("\ufeff")
            except UnicodeDecodeError as exc:
                raise self.refusal(f"xacro {what} '{filename}', which is not UTF-8 text (byte {exc.start})") from None
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # as open() in text mode reads it
        self.texts.setdefault(str(filename), text)
        return io.BytesIO(data) if "b" in str(mode) else io.StringIO(text)

    def parse(self, original):
        """xacro's `parse`: what it opens is an XML file (so `open` applies the DOCTYPE rule)."""
        def parse(inp, filename=None):
            self.parsing = True
            try:
                return original(inp, filename)
            finally:
                self.parsing = False

        return parse

    def glob(self, pattern: str):
        """xacro's include glob: only inside the robot's folders."""
        import glob

        fixed = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        self.inside(os.path.dirname(fixed) or ".", "includes files matching")
        return glob.glob(pattern)

    # ---- work --------------------------------------------------------------------------------
    def deadline_check(self) -> None:
        if time.monotonic() > self.deadline:
            raise self.refusal(f"xacro expansion took over {MAX_XACRO_SECONDS} s; refused "
                               "(a macro or property that grows without end?)")

    def refusal(self, problem: str, fragment: str | None = None) -> RobotFileError:
        where = self.where(fragment)
        return RobotFileError(self.source, f"{where}{problem}" if where else problem)

    def where(self, fragment: str | None) -> str:
        """'FILE line N: ' for the first file read that holds `fragment`, the current file first."""
        if not fragment:
            return ""
        stack = [str(name) for name in (self.xacro.filestack or []) if name]
        for needle in dict.fromkeys((fragment, os.path.basename(fragment))):
            for name in [*reversed(stack), *self.texts]:
                text = self.texts.get(name)
                at = -1 if text is None or not needle else text.find(needle)
                if at >= 0:
                    return f"{Path(name).name} line {text.count(chr(10), 0, at) + 1}: "
        return ""

    def evaluate(self, expression: str, lookup, fragment: str):
        self.deadline_check()
        try:
            return evaluate(expression, lookup, allowed=self.allowed, replaced=self.replaced,
                            namespaces=(self.xacro.NameSpace, self.xacro.YamlDictWrapper), deadline=self.deadline)
        except ExpressionRefused as refused:
            raise self.refusal(f"{refused} (in '{fragment}'); refused: xacro expressions may use numbers, properties, "
                               "operators and xacro's functions only", fragment) from None

    def safe_eval(self, expr, globals, locals=None):
        """xacro's `safe_eval` (``${...}``, YAML units) through the restricted evaluator."""
        return self.evaluate(expr, globals.__getitem__, expr.strip())

    def eval_text(self, text, symbols):
        """xacro's `eval_text`, measuring each part before joining, and counting the text made."""
        xacro = self.xacro

        def handle_expr(s):
            try:
                return self.evaluate(eval_text(s, symbols), symbols.__getitem__, "${" + s + "}")
            except RobotFileError:
                raise
            except Exception as e:  # noqa: BLE001  (as xacro: its message gains the expression)
                raise xacro.XacroException(exc=e, suffix=os.linesep + "when evaluating expression '%s'" % s) from None

        eval_text = self.eval_text
        results = []
        lex = xacro.QuickLexer(xacro.LEXER)
        lex.lex(text)
        while lex.peek():
            kind = lex.peek()[0]
            if kind == lex.EXPR:
                results.append(handle_expr(lex.next()[1][2:-1]))
            elif kind == lex.EXTENSION:
                results.append(xacro.eval_extension("$(%s)" % eval_text(lex.next()[1][2:-1], symbols)))
            elif kind == lex.TEXT:
                results.append(lex.next()[1])
            elif kind == lex.DOLLAR_DOLLAR_BRACE:
                results.append(lex.next()[1][1:])
        if len(results) == 1:
            return results[0]
        size = sum(measure(part) if isinstance(part, str) else 0 for part in results)
        self.count_text(size, text)
        return "".join(map(str, results))

    def count_text(self, size: int, fragment: str) -> None:
        self.text += size
        if size > MAX_TEXT or self.text > MAX_EXPANDED_TEXT:
            raise self.refusal(f"xacro expansion makes more than {min(self.text, size):,} characters; refused "
                               f"(at most {MAX_TEXT:,} in one value, {MAX_EXPANDED_TEXT:,} in all)", fragment[:80])

    def eval_substitution(self, s, context):
        """``$(eval ...)`` through the restricted evaluator, with xacro's names for it."""
        from xacro import substitution_args as sa

        context.setdefault("arg", {})
        if s.find("__") >= 0:
            raise sa.SubstitutionException("$(eval ...) may not contain double underscore expressions")

        def arg(name):
            return sa.convert_value(sa._eval_arg(name, args=context["arg"]), "auto")

        def dirname():
            return sa._eval_dirname(context["filename"])

        functions = {"arg": arg, "dirname": dirname, **sa._eval_dict}
        functions.pop("__builtins__", None)

        def lookup(name):
            if name in functions:
                return functions[name]
            if name in context["arg"]:
                return sa.convert_value(context["arg"][name], "auto")
            if name in SAFE_BUILTINS:
                return getattr(builtins, name)
            raise KeyError(name)

        self.allowed.update(value for value in functions.values() if callable(value))
        return str(self.evaluate(s, lookup, f"$(eval {s})"))

    def handle_macro_call(self, original):
        def handle_macro_call(node, macros, symbols):
            if not node.tagName.startswith("xacro:"):
                return original(node, macros, symbols)
            self.macro_calls += 1
            if len(self.xacro.macrostack or ()) > MAX_MACRO_DEPTH:
                raise RecursionError("macro calls nested too deep")
            if self.macro_calls > MAX_MACRO_CALLS:
                raise self.refusal(f"xacro expansion calls more than {MAX_MACRO_CALLS:,} macros; refused "
                                   "(a macro that calls itself more than once per level grows exponentially)",
                                   f"<{node.tagName}")
            self.deadline_check()
            return original(node, macros, symbols)

        return handle_macro_call

    def replace_node(self, original):
        """xacro's `replace_node`, counting its cost: minidom finds each insertion point by a linear
        search of the parent's children, so moving n nodes into a parent of m costs about n * m."""
        def replace_node(node, by, content_only=False):
            if by is not None and node.parentNode is not None:
                parts = by if isinstance(by, list) else [by]
                moved = sum(len(part.childNodes) for part in parts) if content_only else len(parts)
                self.dom_work += moved * (len(node.parentNode.childNodes) + moved)
                if self.dom_work > MAX_DOM_WORK:
                    raise self.refusal(f"xacro expansion grows too large (over {MAX_DOM_WORK:,} element moves); refused "
                                       "(a macro that calls itself more than once per level grows exponentially)")
            return original(node, by, content_only)

        return replace_node

    def eval_all(self, original):
        def eval_all(node, macros, symbols):
            self.elements += 1
            if self.elements > MAX_ELEMENTS:
                raise self.refusal(f"xacro expansion makes more than {MAX_ELEMENTS:,} elements; refused")
            if self.elements % 256 == 0:
                self.deadline_check()
            return original(node, macros, symbols)

        return eval_all


def _xacro_helpers(xacro) -> tuple[set, dict]:
    """The callables of xacro's symbol table an expression may call, and the capped stand-ins
    for xacro's deprecation wrappers around ``range`` and ``sorted`` (``range`` as itself would
    hand out ``range(10**9)`` uncapped)."""
    allowed: set = {xacro.YamlDictWrapper}
    replaced: dict = {}
    spaces = [xacro._global_symbols]
    while spaces:
        space = spaces.pop()
        for name, value in dict.items(space):
            if isinstance(value, xacro.NameSpace):
                if name in ("xacro",):
                    allowed.update(v for v in dict.values(value) if callable(v))
                spaces.append(value)
                continue
            inner = _wrapped(value)
            if inner is not None:
                replaced[id(value)] = REPLACED.get(id(inner), inner)
                allowed.add(value)
    return allowed, replaced


def _wrapped(function):
    """The function a xacro deprecation wrapper calls, or None."""
    if not callable(function) or "deprecate" not in getattr(function, "__qualname__", ""):
        return None
    for cell in function.__closure__ or ():
        if callable(cell.cell_contents):
            return cell.cell_contents
    return None


@contextlib.contextmanager
def _patched(xacro, search: PackageSearchPath, source: Path):
    """xacro with our package lookup, file rule, restricted evaluator and caps, for one expansion."""
    from xacro import substitution_args

    def find(package: str) -> str:
        return str(search.require(package, source))

    expansion = _Expansion(xacro, search, source)
    names = ("open", "parse", "glob", "safe_eval", "eval_text", "handle_macro_call", "eval_all", "replace_node")
    saved = {name: xacro.__dict__.get(name, _MISSING) for name in names}
    saved_sa = {name: getattr(substitution_args, name) for name in ("_eval_find", "_eval")}
    original_dict_find = substitution_args._eval_dict.get("find")

    xacro.open = expansion.open
    xacro.parse = expansion.parse(saved["parse"])
    xacro.glob = types.SimpleNamespace(glob=expansion.glob)
    xacro.safe_eval = expansion.safe_eval
    xacro.eval_text = expansion.eval_text
    xacro.handle_macro_call = expansion.handle_macro_call(saved["handle_macro_call"])
    xacro.eval_all = expansion.eval_all(saved["eval_all"])
    xacro.replace_node = expansion.replace_node(saved["replace_node"])
    substitution_args._eval_find = find
    substitution_args._eval = expansion.eval_substitution
    substitution_args._eval_dict["find"] = find
    try:
        yield expansion
    finally:
        for name, value in saved.items():
            if value is _MISSING:
                xacro.__dict__.pop(name, None)
            else:
                setattr(xacro, name, value)
        for name, value in saved_sa.items():
            setattr(substitution_args, name, value)
        if original_dict_find is not None:
            substitution_args._eval_dict["find"] = original_dict_find


_MISSING = object()


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
            if len(text) > MAX_XACRO_BYTES:
                raise RobotFileError(path, f"xacro expands it to {len(text) / 1e6:.0f} MB; "
                                     f"refusing URDFs over {MAX_XACRO_BYTES / 1e6:.0f} MB")
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
