"""Robots of the model libraries roboticists install: `robot_descriptions` and `mujoco-menagerie`.

Both fetch a model from the network on first use and keep it in a cache of their own. Kinema
Nodes lists their robots by name through each package's own API and reads a robot only from a
copy already in that cache: it never fetches (a git clone or a download can take minutes, and in
Blender it would freeze the window). A robot that is not fetched yet is refused with one line
that says the command that fetches it.

- `robot_descriptions`: names from its `DESCRIPTIONS` table. A description's module clones its
  repository when imported, so it is imported only when the clone is already in the package's
  cache (``$ROBOT_DESCRIPTIONS_CACHE``, default ``~/.cache/robot_descriptions``; the folder is
  ``<cache_path>`` from its `REPOSITORIES` table, or ``<cache_path>-<commit>/<cache_path>`` when
  ``ROBOT_DESCRIPTION_COMMIT`` pins a commit) with its HEAD at the commit the package pins, the
  case in which the package itself fetches nothing. The module then gives the file: `URDF_PATH`,
  `MJCF_PATH`, or `XACRO_PATH` with its `XACRO_ARGS` (and `XACRO_PACKAGE_PATHS`), which
  `load_robot` uses for that file (`library_file_options`).
- `mujoco-menagerie`: names from `mujoco_menagerie.names()`; a model is cached when its
  `Cache` says so (``$MENAGERIE_CACHE_DIR/models/<name>-<oid16>/.complete``), or is a folder of
  a ``$MENAGERIE_ROOT`` checkout; the file is the default model's XML,
  ``get(name).xml(default_model)`` (not the scene, which adds a floor and lights).

Nothing here imports either package at module import; both are optional.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RobotFileError


@dataclass(frozen=True)
class LibraryFile:
    """A library robot's file, with what its library says it needs to read it."""

    path: Path
    xacro_args: dict[str, str] = field(default_factory=dict)
    package_path: tuple[Path, ...] = ()


@dataclass(frozen=True)
class LibraryRobot:
    name: str
    source: str  # "robot_descriptions" or "mujoco-menagerie"
    format: str  # "urdf", "mjcf", "xacro"
    cached: bool  # already in the library's cache: the name works now
    locate: Callable[[], LibraryFile]  # the cached file; RobotFileError (one line) when not fetched
    fetch_hint: str  # the command that fetches it


#: The options each library file needs (xacro arguments, package folders), by resolved path:
#: filled when a name is resolved, read by `load_robot` (so a path found from a name, e.g. by
#: the Blender importer, reads as its library says).
_OPTIONS: dict[Path, LibraryFile] = {}


def library_file_options(path: Path) -> LibraryFile | None:
    try:
        return _OPTIONS.get(Path(path).resolve())
    except (OSError, RuntimeError, ValueError):
        return None


def _remember(found: LibraryFile) -> LibraryFile:
    _OPTIONS[found.path.resolve()] = found
    return found


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


# ---- robot_descriptions ----------------------------------------------------------------------

def robot_descriptions_cache_dir() -> Path:
    """Where robot_descriptions clones repositories (its `_cache.clone_to_cache` rule)."""
    return Path(os.path.expanduser(os.environ.get("ROBOT_DESCRIPTIONS_CACHE", "~/.cache/robot_descriptions")))


def _description_source(name: str) -> str | None:
    """The text of a description's module, read without importing it (importing clones)."""
    try:
        spec = importlib.util.find_spec(f"robot_descriptions.{name}")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    try:
        return Path(spec.origin).read_text(encoding="utf-8")
    except OSError:
        return None


_REPOSITORY = re.compile(r"""_clone_to_cache\(\s*["']([^"']+)["']""")


def _description_format(source: str | None, has_urdf: bool, has_mjcf: bool) -> str | None:
    """The file a description's module gives, in the format its `DESCRIPTIONS` entry names (a
    module may also carry the other: `a1_mj_description` has a URDF_PATH beside its MJCF_PATH)."""
    if source is None:
        return None
    wanted = [("URDF_PATH", "urdf"), ("XACRO_PATH", "xacro")] if has_urdf else []
    wanted += [("MJCF_PATH", "mjcf")] if has_mjcf else []
    for variable, kind in wanted:
        if re.search(rf"^{variable}\b", source, re.MULTILINE):
            return kind
    return None


def _clone_folder(repository) -> Path:
    """The folder robot_descriptions clones `repository` into (its `clone_to_cache` rule)."""
    commit = os.environ.get("ROBOT_DESCRIPTION_COMMIT")
    cache_path = repository.cache_path if commit is None else f"{repository.cache_path}-{commit}/{repository.cache_path}"
    return robot_descriptions_cache_dir() / cache_path


def _pinned_commit(repository) -> str:
    return os.environ.get("ROBOT_DESCRIPTION_COMMIT") or repository.commit


def _clone_problem(folder: Path, commit: str) -> str | None:
    """None when the clone's HEAD is at `commit` (robot_descriptions then checks out and fetches
    nothing), else what is wrong, for one line."""
    try:
        from git import Repo
        from git.exc import GitError
    except Exception as exc:  # noqa: BLE001  (GitPython without a git executable raises at import)
        return f"robot_descriptions reads its clones with git, which is not usable here ({_one_line(exc)})"
    try:
        repo = Repo(str(folder))
        try:
            if repo.git.rev_parse(commit).strip() == repo.git.rev_parse("HEAD").strip():
                return None
        except GitError:
            pass
    except Exception as exc:  # noqa: BLE001  (a broken clone)
        return f"robot_descriptions' copy in {folder} is not a usable git clone ({_one_line(exc)})"
    return f"robot_descriptions' copy in {folder} is not at the commit it pins ({commit[:12]})"


def robot_descriptions_robots() -> list[LibraryRobot]:
    """Every description of `robot_descriptions` with a robot file, from its `DESCRIPTIONS`
    table; [] when the package is not installed."""
    try:
        from robot_descriptions import DESCRIPTIONS
        from robot_descriptions._repositories import REPOSITORIES
    except Exception:  # noqa: BLE001  (not installed, or broken: the other robots still list)
        return []
    out = []
    for name, description in sorted(DESCRIPTIONS.items()):
        source = _description_source(name)
        kind = _description_format(source, description.has_urdf, description.has_mjcf)
        match = _REPOSITORY.search(source or "")
        repository = REPOSITORIES.get(match.group(1)) if match else None
        if kind is None or repository is None:
            continue
        folder = _clone_folder(repository)
        hint = f'python -c "import robot_descriptions.{name}" (clones {repository.url} into {folder})'
        out.append(LibraryRobot(name, "robot_descriptions", kind, (folder / ".git").exists(),
                                _locate_description(name, kind, repository, hint), hint))
    return out


def _locate_description(name: str, kind: str, repository, hint: str) -> Callable[[], LibraryFile]:
    def locate() -> LibraryFile:
        import importlib

        folder = _clone_folder(repository)
        commit = _pinned_commit(repository)
        if not (folder / ".git").exists():
            raise RobotFileError(name, f"robot_descriptions has not fetched it yet; fetch it once with: {hint}")
        problem = _clone_problem(folder, commit)
        if problem is not None:
            # the package would check out, or clone again, and so fetch: leave that to the user
            raise RobotFileError(name, f"{problem}; update it with: {hint}")
        try:
            # read again if imported before: its paths were computed from the cache folder of then
            loaded = sys.modules.get(f"robot_descriptions.{name}")
            module = importlib.reload(loaded) if loaded is not None else importlib.import_module(f"robot_descriptions.{name}")
        except Exception as exc:  # noqa: BLE001  (the package's own failure, in one line)
            raise RobotFileError(name, f"robot_descriptions could not open it: {_one_line(exc)}") from None
        variable = {"urdf": "URDF_PATH", "mjcf": "MJCF_PATH", "xacro": "XACRO_PATH"}[kind]
        path = Path(getattr(module, variable))
        if not path.is_file():
            raise RobotFileError(name, f"robot_descriptions names {path}, which is not in its copy in {folder}")
        if kind != "xacro":
            return _remember(LibraryFile(path))
        args = {str(k): str(v) for k, v in (getattr(module, "XACRO_ARGS", None) or {}).items()}
        packages = tuple(Path(p) for p in (getattr(module, "XACRO_PACKAGE_PATHS", None) or {}).values())
        return _remember(LibraryFile(path, args, packages))
    return locate


# ---- mujoco-menagerie ------------------------------------------------------------------------

def _menagerie_cached(cache, robot) -> bool:
    if getattr(cache, "root", None):
        return (Path(cache.root) / robot.name).is_dir()
    return bool(cache.is_cached(robot))


def menagerie_robots() -> list[LibraryRobot]:
    """Every model of `mujoco-menagerie`, from `mujoco_menagerie.names()` (no I/O but the cache
    check); [] when the package is not installed."""
    try:
        import mujoco_menagerie
    except Exception:  # noqa: BLE001
        return []
    try:
        cache = mujoco_menagerie.Cache()
        out = []
        for name in mujoco_menagerie.names():
            robot = mujoco_menagerie.get(name)
            hint = f"python -m mujoco_menagerie path {name} (downloads it into {cache.root or cache.dir})"
            out.append(LibraryRobot(name, "mujoco-menagerie", "mjcf", _menagerie_cached(cache, robot),
                                    _locate_menagerie(name, hint), hint))
        return out
    except Exception:  # noqa: BLE001  (a broken registry: the other robots still list)
        return []


def _locate_menagerie(name: str, hint: str) -> Callable[[], LibraryFile]:
    def locate() -> LibraryFile:
        import mujoco_menagerie

        try:
            cache = mujoco_menagerie.Cache()
            robot = mujoco_menagerie.get(name)
            if not _menagerie_cached(cache, robot):
                raise RobotFileError(name, f"mujoco-menagerie has not downloaded it yet; fetch it once with: {hint}")
            path = Path(robot.xml(robot.default_model, cache))
        except RobotFileError:
            raise
        except Exception as exc:  # noqa: BLE001  (the package's own failure, in one line)
            raise RobotFileError(name, f"mujoco-menagerie could not open it: {_one_line(exc)}") from None
        if not path.is_file():
            raise RobotFileError(name, f"mujoco-menagerie names {path}, which is not in its cache")
        return _remember(LibraryFile(path))
    return locate
