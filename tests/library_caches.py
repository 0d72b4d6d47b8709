"""Local trees laid out exactly as `robot_descriptions` and `mujoco-menagerie` lay out their caches,
holding real robot files (example-robot-data's, robosuite's), so that tests read library robots
by name with no network (tests/cli/test_robot_libraries.py, tests/blender/test_import_by_library_name.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: Menagerie name -> (robosuite robot standing in for it, its default model's entry, that entry's file)
MENAGERIE = {"kinova_gen3": ("kinova3", "gen3", "gen3.xml"), "universal_robots_ur5e": ("ur5e", "ur5e", "ur5e.xml")}

#: An address nothing answers on: were a package to try a download, it would fail at once.
NO_NETWORK = "http://127.0.0.1:9/never"


def link_or_copy(source, target):
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def robosuite_robot_folder(name: str) -> Path:
    spec = importlib.util.find_spec("robosuite")
    assert spec is not None, "robosuite is a test dependency (pyproject's test extra)"
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "assets" / "robots" / name


def place_model(robosuite_name: str, folder: Path, file: str) -> Path:
    """robosuite's model `robosuite_name` as `folder/file`, its meshes beside it."""
    shutil.copytree(robosuite_robot_folder(robosuite_name), folder, copy_function=link_or_copy, dirs_exist_ok=True)
    (folder / "robot.xml").rename(folder / file)
    return folder / file


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                          cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def robot_descriptions_cache(tmp_path: Path, repository: str, fill) -> tuple[Path, dict[str, str]]:
    """A clone of `repository` as robot_descriptions keeps it for a pinned commit: the tree `fill`
    writes, committed, at ``cache/<cache_path>-<commit>/<cache_path>`` (the repository's
    `cache_path` in the package's REPOSITORIES). The environment that pins it: the commit is the
    local tree's own, so the package finds HEAD already there and fetches nothing."""
    from robot_descriptions._repositories import REPOSITORIES

    repository = REPOSITORIES[repository].cache_path
    work = tmp_path / "work" / repository
    work.mkdir(parents=True)
    fill(work)
    git("init", "-q", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "local tree", cwd=work)
    commit = git("rev-parse", "HEAD", cwd=work)
    clone = tmp_path / "cache" / f"{repository}-{commit}" / repository
    clone.parent.mkdir(parents=True)
    work.rename(clone)
    return clone, {"ROBOT_DESCRIPTIONS_CACHE": str(tmp_path / "cache"), "ROBOT_DESCRIPTION_COMMIT": commit}


def example_robot_data_repository(erd: Path, *packages: str):
    """A `fill` for `robot_descriptions_cache`: the example-robot-data repository holding
    `packages` (copied from the installed example-robot-data folder `erd`)."""
    def fill(root: Path) -> None:
        # the repository's package.xml names it example-robot-data (the wheel's copy is renamed)
        text = (erd.parent / "package.xml").read_text()
        text = text.replace("<name>example_robot_descriptions</name>", "<name>example-robot-data</name>")
        (root / "package.xml").write_text(text)
        for package in packages:
            shutil.copytree(erd / package, root / "robots" / package, copy_function=link_or_copy)
    return fill


def menagerie_cache(tmp_path: Path, names=tuple(MENAGERIE)) -> tuple[dict[str, str], Path]:
    """$MENAGERIE_CACHE_DIR as mujoco-menagerie publishes a download: ``models/<name>-<oid[:16]>/``
    holding the model's tree and a ``.complete`` file listing each file's sha256 (its `Cache`)."""
    menagerie = pytest.importorskip("mujoco_menagerie")
    cache = tmp_path / "menagerie-cache"
    for name in names:
        robosuite_name, entry, file = MENAGERIE[name]
        robot = menagerie.get(name)
        assert robot.default_model == entry and robot.entry(entry).file == file  # the registry's own layout
        folder = cache / "models" / f"{name}-{robot.oid[:16]}"
        place_model(robosuite_name, folder, file)
        files = {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                 for p in sorted(folder.rglob("*")) if p.is_file()}
        (folder / ".complete").write_text(json.dumps({"oid": robot.oid, "files": files}))
    return {"MENAGERIE_CACHE_DIR": str(cache), "MENAGERIE_BASE_URL": NO_NETWORK}, cache
