"""Robots by name: every robot the installed data packages hold, with a short name each.

- `example-robot-data` (a test dependency): every URDF it ships. The names the suite and the
  README have always used (`panda`, `ur5`, `talos`, ...) stay; every other URDF is named by its
  file (`so101`, `baxter`, `a1`, ...), or by its package and file where two files share a name
  (`anymal_b_simple_anymal`).
- robosuite (when installed; its robot models are MJCF): `robosuite_panda`, `robosuite_sawyer`,
  ... and likewise for the extra models of `robosuite_models`.
- `robot_descriptions` (when installed): every description by its module name
  (`ur5e_description`, `panda_mj_description`, ...), listed from the package's own
  `DESCRIPTIONS` table; the file is its module's `URDF_PATH`, `MJCF_PATH` or `XACRO_PATH`, read
  from the clone already in the package's cache (`robot_libraries`).
- `mujoco-menagerie` (when installed): every model by its Menagerie name
  (`franka_emika_panda`, `universal_robots_ur5e`, ...) from `mujoco_menagerie.names()`; the file is
  its default model's XML, `get(name).xml(default_model)`, from the package's cache
  (``MENAGERIE_CACHE_DIR``, or a checkout at ``MENAGERIE_ROOT``).

Nothing here fetches: robosuite's folders are found through its install location (its import
pulls in a simulator), the two libraries list from their tables and are read only from what
they have already fetched (a name not fetched yet is refused with the command that fetches it).
`kinema-nodes robots` lists them all.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .robot_libraries import LibraryFile, menagerie_robots, robot_descriptions_robots

#: short name -> path below example-robot-data's `robots/` folder (the names used since the start)
EXAMPLE_ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "ur5_limited": "ur_description/urdf/ur5_joint_limited_robot.urdf",
    "ur10": "ur_description/urdf/ur10_robot.urdf",
    "ur3": "ur_description/urdf/ur3_robot.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",
    "xarm7": "xarm_description/urdf/xarm7.urdf",
    "z1": "z1_description/urdf/z1.urdf",
    "talos": "talos_data/robots/talos_full_v2.urdf",
    "talos_left_arm": "talos_data/robots/talos_left_arm.urdf",
    "g1": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",
    "so100": "so_arm_description/urdf/so100.urdf",
}


@dataclass(frozen=True)
class NamedRobot:
    name: str
    source: str  # "bundled", "example-robot-data", "robosuite", "robosuite_models", "robot_descriptions", "mujoco-menagerie"
    path: Path | None  # None: a library robot, whose file is in its library's cache (`locate`) or not fetched yet
    format: str  # "urdf", "mjcf", "xacro"
    locate: Callable[[], LibraryFile] | None = None  # a library robot's cached file; one-line RobotFileError if not fetched
    cached: bool = True  # False: a library robot not fetched yet (`fetch_hint` says how)
    fetch_hint: str | None = None


def example_robots_folder() -> Path | None:
    """`.../cmeel.prefix/share/example-robot-data/robots`, or None when not installed."""
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}
    for root in roots:
        folder = Path(root) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if folder.is_dir():
            return folder
    return None


def _package_folder(name: str) -> Path | None:
    """The folder of an installed top-level package, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _short(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")


def _example_robot_data(folder: Path) -> dict[str, Path]:
    named = {name: folder / rel for name, rel in EXAMPLE_ROBOTS.items() if (folder / rel).is_file()}
    taken_files = {path.resolve() for path in named.values()}
    files = sorted(p for p in folder.glob("*/*/*.urdf") if p.resolve() not in taken_files)
    stems: dict[str, int] = {}
    for path in files:
        stems[_short(path.stem)] = stems.get(_short(path.stem), 0) + 1
    for path in files:
        stem = _short(path.stem)
        package = _short(re.sub(r"_(description|data)$", "", path.parts[-3]))
        name = stem if stems[stem] == 1 and stem not in named else f"{package}_{stem}"
        count = 2
        base = name
        while name in named:
            name, count = f"{base}_{count}", count + 1
        named[name] = path
    return named


def _robosuite(package: str, assets: str) -> dict[str, Path]:
    root = _package_folder(package)
    if root is None:
        return {}
    folder = root / assets
    return {f"robosuite_{_short(p.parent.name)}": p for p in sorted(folder.glob("*/robot.xml"))}


def bundled_robots() -> dict[str, Path]:
    """Robots that ship with the package, by name."""
    folder = Path(__file__).resolve().parents[2] / "robots"
    return {p.stem: p for p in sorted(folder.glob("*.urdf"))}


@lru_cache(maxsize=1)
def named_robots() -> tuple[NamedRobot, ...]:
    """Every robot a name reaches, bundled first."""
    out: list[NamedRobot] = [NamedRobot(name, "bundled", path, "urdf") for name, path in bundled_robots().items()]
    taken = {r.name for r in out}
    folder = example_robots_folder()
    if folder is not None:
        for name, path in _example_robot_data(folder).items():
            if name not in taken:
                out.append(NamedRobot(name, "example-robot-data", path, "urdf"))
                taken.add(name)
    for package, assets in (("robosuite", "models/assets/robots"), ("robosuite_models", "assets/robots")):
        for name, path in _robosuite(package, assets).items():
            if name not in taken:
                out.append(NamedRobot(name, package, path, "mjcf"))
                taken.add(name)
    for robot in (*robot_descriptions_robots(), *menagerie_robots()):
        if robot.name not in taken:
            out.append(NamedRobot(robot.name, robot.source, None, robot.format, robot.locate, robot.cached, robot.fetch_hint))
            taken.add(robot.name)
    return tuple(out)


def example_robot(name: str) -> Path | None:
    """Path of a robot from an installed data package by short name, or None. A library robot is
    read from its library's cache, never fetched: one `RobotFileError` line says how to fetch
    one that is not there yet."""
    for robot in named_robots():
        if robot.name == name and robot.source != "bundled":
            path = robot.path if robot.path is not None else robot.locate().path
            return path if path.is_file() else None
    return None
