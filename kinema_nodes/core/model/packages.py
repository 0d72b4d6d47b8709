"""The one package search path: where ``package://NAME/...`` and xacro's ``$(find NAME)`` look.

A robot description in a ROS workspace takes its meshes (and xacro its includes) from packages:
its own and, often, a sibling mesh package. The same search serves URDF, xacro and meshes, and
is made of, in this order:

1. folders the user declared: ``--package-path DIR`` on the command line and the folders in the
   add-on's Preferences;
2. the robot file's own folder and each folder above it (never the file system's root or the
   home folder): the folder itself, its child ``NAME`` and ``share/NAME`` below it;
3. ``ROS_PACKAGE_PATH`` (each entry a package, or a folder holding packages);
4. ``AMENT_PREFIX_PATH`` (``PREFIX/share/NAME``).

The rule that keeps a hostile file from reading outside files: a folder is package NAME only if
it really is one — its ``package.xml`` names NAME (or names nothing and the folder is called
NAME), an ament index lists it (``PREFIX/share/NAME`` beside
``PREFIX/share/ament_index/resource_index/packages/NAME``), or a declared folder (1, 3) is NAME or
holds a folder NAME. A folder above the robot file that merely happens to be called NAME
(``/tmp``, ``/home``, ``/opt``) is not a package. A file found in a package must lie inside it
after ``..`` and symlinks are followed; `resolve_package_file` refuses anything else.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RobotFileError

#: How deep below a declared folder a package.xml is looked for (a workspace's ``src/group/pkg``).
CRAWL_DEPTH = 3
#: Most folders one crawl looks at: a search path entry of ``/`` must not walk the whole disk.
CRAWL_LIMIT = 5000
#: Largest package.xml read for its name.
MAX_PACKAGE_XML_BYTES = 1024 * 1024

_NAME = re.compile(r"<name>\s*([^<\s]+)\s*</name>")
_VALID_PACKAGE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def declared_package_names(folder: Path) -> set[str]:
    """The packages a folder is by its own declaration (usually one; none for a plain folder).

    ``folder/package.xml`` names it (one that names nothing counts as the folder's own name),
    ``manifest.xml`` (rosbuild) gives the folder's name, and an ament index beside ``share/``
    (``PREFIX/share/ament_index/resource_index/packages/NAME``) lists the folder under its name:
    example-robot-data is ``example_robot_descriptions`` by its package.xml and
    ``example-robot-data`` by its ament index."""
    names: set[str] = set()
    try:
        package_xml = folder / "package.xml"
        if package_xml.is_file() and package_xml.stat().st_size <= MAX_PACKAGE_XML_BYTES:
            text = package_xml.read_text(encoding="utf-8", errors="replace")
            match = _NAME.search(text)
            names.add(match.group(1) if match else folder.name)
        if (folder / "manifest.xml").is_file():
            names.add(folder.name)
        if folder.parent.name == "share" and (folder.parent / "ament_index" / "resource_index" / "packages" / folder.name).is_file():
            names.add(folder.name)
    except (OSError, ValueError):
        return names
    return names


def is_package(folder: Path, name: str) -> bool:
    return name in declared_package_names(folder)


def _split_env(value: str | None) -> list[Path]:
    return [Path(part) for part in (value or "").split(os.pathsep) if part.strip()]


def _too_wide() -> set[Path]:
    home = Path.home()
    try:
        home = home.resolve()
    except OSError:
        pass
    return {Path("/"), home, Path(home.anchor)}


@dataclass
class PackageSearchPath:
    """Where packages are looked for, for one robot file. See the module docstring for the order.

    `declared` are the user's folders (CLI, Preferences); `robot_file` is the URDF, xacro or MJCF
    whose folder and parents are searched; the environment is read when the object is made
    (`environ` overrides it in tests)."""

    declared: list[Path] = field(default_factory=list)
    robot_file: Path | None = None
    environ: dict | None = None
    found: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        env = os.environ if self.environ is None else self.environ
        # absolute now: a relative folder (`--package-path ./xacro`) must not be read against the
        # folder of whichever xacro file includes from it
        self.declared = [Path(p).expanduser().absolute() for p in self.declared]
        self.ros_package_path = _split_env(env.get("ROS_PACKAGE_PATH"))
        self.ament_prefixes = _split_env(env.get("AMENT_PREFIX_PATH"))
        self._crawled: dict[Path, dict[str, Path]] = {}

    # ---- looking up -------------------------------------------------------------------------
    def _ancestors(self) -> list[Path]:
        if self.robot_file is None:
            return []
        start = Path(self.robot_file).absolute().parent
        wide = _too_wide()
        folders = []
        for folder in [start, *start.parents]:
            if folder in wide:
                break
            folders.append(folder)
        return folders

    def _crawl(self, root: Path) -> dict[str, Path]:
        """{package name: folder} for the package.xml files in `root`, down to CRAWL_DEPTH
        (a package's own subfolders are not searched, as in rospkg)."""
        if root in self._crawled:
            return self._crawled[root]
        packages: dict[str, Path] = {}
        seen = 0
        level = [root]
        for _depth in range(CRAWL_DEPTH + 1):
            following = []
            for folder in level:
                seen += 1
                if seen > CRAWL_LIMIT:
                    break
                names = declared_package_names(folder)
                if names:
                    for name in names:
                        packages.setdefault(name, folder)
                    continue
                try:
                    following.extend(sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")))
                except OSError:
                    continue
            level = following
        self._crawled[root] = packages
        return packages

    def candidates(self, name: str):
        """Every folder that is package `name`, best first."""
        if not _VALID_PACKAGE.match(name or ""):
            return
        for folder in self.declared:
            if folder.name == name or is_package(folder, name):
                yield folder
            if (folder / name).is_dir():
                yield folder / name
            found = self._crawl(folder).get(name)
            if found is not None:
                yield found
        for folder in self._ancestors():
            for candidate in (folder, folder / name, folder / "share" / name):
                if is_package(candidate, name):
                    yield candidate
        for folder in self.ros_package_path:
            if folder.name == name:
                yield folder
            found = self._crawl(folder).get(name)
            if found is not None:
                yield found
        for prefix in self.ament_prefixes:
            candidate = prefix / "share" / name
            if candidate.is_dir():
                yield candidate

    def find(self, name: str) -> Path | None:
        """The folder of package `name`, or None. Remembered in `found` (the roots of this robot)."""
        if name in self.found:
            return self.found[name]
        for candidate in self.candidates(name):
            try:
                if candidate.is_dir():
                    self.found[name] = candidate
                    return candidate
            except (OSError, ValueError):
                continue
        return None

    def require(self, name: str, source: str | Path) -> Path:
        """`find`, or a one-line error saying where it looked and how to add a folder."""
        folder = self.find(name)
        if folder is None:
            raise RobotFileError(source, f"package '{name}' not found: {self.describe()}")
        return folder

    def describe(self) -> str:
        """Where packages are looked for, in one line (for error messages)."""
        parts = []
        if self.declared:
            parts.append("--package-path/Preferences " + ", ".join(str(p) for p in self.declared))
        if self.robot_file is not None:
            parts.append(f"the folders above {Path(self.robot_file).name} (a folder counts only with a package.xml naming it)")
        parts.append("ROS_PACKAGE_PATH " + (os.pathsep.join(str(p) for p in self.ros_package_path) or "(unset)"))
        parts.append("AMENT_PREFIX_PATH " + (os.pathsep.join(str(p) for p in self.ament_prefixes) or "(unset)"))
        return "looked in " + "; ".join(parts) + "; add its folder with --package-path DIR or in the add-on's Preferences"

    def roots(self) -> list[Path]:
        """The package folders found so far, resolved: meshes named by path may lie in them."""
        out = []
        for folder in self.found.values():
            try:
                out.append(folder.resolve())
            except OSError:
                continue
        return out


def split_package_url(filename: str) -> tuple[str, str] | None:
    """``package://NAME/rest`` -> (NAME, rest); None for anything else."""
    if not filename.startswith("package://"):
        return None
    # ``package:///NAME/rest`` (talos in example-robot-data) means ``package://NAME/rest``
    name, _, rest = filename[len("package://"):].lstrip("/").partition("/")
    return name, rest


def is_inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def resolve_package_file(filename: str, search: PackageSearchPath, source: str | Path) -> Path:
    """The file ``package://NAME/rest`` names: inside package NAME after ``..`` and symlinks are
    followed, or a one-line `RobotFileError`. The file need not exist (the caller says so)."""
    parts = split_package_url(filename)
    if parts is None:
        raise ValueError(f"not a package:// reference: {filename}")
    name, rest = parts
    if not name:
        raise RobotFileError(source, f"mesh '{filename}' names no package (package://NAME/... needs a NAME); it is outside the robot's folders")
    if not _VALID_PACKAGE.match(name) or name in (".", ".."):
        raise RobotFileError(source, f"mesh '{filename}': '{name}' is not a package name; it is outside the robot's folders")
    folder = search.require(name, source)
    root = folder.resolve()
    candidate = root / rest
    try:
        real = candidate.resolve()
    except (OSError, RuntimeError, ValueError):
        raise RobotFileError(source, f"mesh '{filename}' is not a usable path") from None
    if not is_inside(real, root):
        raise RobotFileError(
            source, f"mesh '{filename}' is {real}, outside the robot's folders (package '{name}' is {root}); "
            "a package:// file must lie inside its package, not through '..' or a symlink out of it"
        )
    return candidate
