"""Robots by name from the libraries roboticists use (#29 item 22): `robot_descriptions` and
`mujoco-menagerie`. `kinema-nodes robots` lists their robots by name without fetching anything,
and a name works wherever a robot file does, through each package's own API, which fetches the
model into its cache on first use.

No network: each library's cache is a small local tree in tmp_path laid out as the package lays
it out, with real robot files in it:

- `robot_descriptions` (installed in the test environment; its real API): a git clone at
  ``$ROBOT_DESCRIPTIONS_CACHE/<repo>-<commit>/<repo>``, the layout the package uses when
  ``ROBOT_DESCRIPTION_COMMIT`` pins a commit; the commit is the local tree's own, so the package
  finds HEAD already there and fetches nothing. ``gen2_description`` (Kinova Gen2, URDF, the
  example-robot-data repository: its files from the installed example-robot-data) and
  ``gen3_mj_description`` (Kinova Gen3, MJCF, the mujoco_menagerie repository: robosuite's Gen3
  model in its place).
- `mujoco-menagerie` (the PyPI package; its documented ``MENAGERIE_ROOT`` checkout): the models
  ``kinova_gen3`` (``gen3.xml``) and ``universal_robots_ur5e`` (``ur5e.xml``), robosuite's models
  in Menagerie's places. When the package is not installed (it is not a dependency), a stand-in
  module with the same calls (`names`, `get(name).default_model`, `.xml(entry)` under
  ``MENAGERIE_ROOT``) is put on the path instead; the real package is used when present.

Each robot is judged by its own FK: `fk --json` against yourdfpy (URDF) or `mj_kinematics` (MJCF)
on the file in the cache, within 1e-9 m.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder

WORKTREE = Path(__file__).resolve().parents[2]


def kinema(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = dict(os.environ, **(env or {}))
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (environment.get("PYTHONPATH", ""), str(WORKTREE)) if p)
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True, env=environment,
                          timeout=600, check=False)


def _link_or_copy(source, target):
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
    shutil.copytree(robosuite_robot_folder(robosuite_name), folder, copy_function=_link_or_copy, dirs_exist_ok=True)
    (folder / "robot.xml").rename(folder / file)
    return folder / file


def own_fk_position(path: Path, link: str, values: dict[str, float]) -> np.ndarray:
    """`link`'s position with the joints at `values` by the file's own FK (MuJoCo's from its ref)."""
    if path.suffix == ".xml":
        import mujoco

        model = mujoco.MjModel.from_xml_path(str(path))
        data = mujoco.MjData(model)
        for name, value in values.items():
            address = model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)]
            data.qpos[address] = model.qpos0[address] + value
        mujoco.mj_kinematics(model, data)
        return np.array(data.xpos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, link)])
    import yourdfpy

    urdf = yourdfpy.URDF.load(str(path), build_scene_graph=True, load_meshes=False)
    urdf.update_cfg(values)
    return np.asarray(urdf.get_transform(link, urdf.base_link), dtype=float)[:3, 3]


def check_name_reaches(name: str, source: str, expected_file: Path, env: dict[str, str]) -> None:
    listed = json.loads(kinema("robots", "--json", env=env).stdout)["robots"]
    (entry,) = [r for r in listed if r["name"] == name]
    assert entry["source"] == source and entry["format"] == ("mjcf" if expected_file.suffix == ".xml" else "urdf")
    info = kinema("info", name, "--json", env=env)
    assert info.returncode == 0, info.stderr
    info = json.loads(info.stdout)
    assert Path(info["file"]).resolve() == expected_file.resolve()
    assert info["dof"] >= 6
    link = info["tool_point"]
    # each joint a third of the way into its range (continuous joints at 0.4 rad)
    values = {}
    for joint in info["joints"]:
        if joint["actuated"]:
            lower, upper = joint.get("lower"), joint.get("upper")
            values[joint["name"]] = 0.4 if lower is None or upper is None else lower + (upper - lower) / 3
    fk = kinema("fk", name, "--link", link, "--joints", *(f"{n}={v!r}" for n, v in values.items()), "--json", env=env)
    assert fk.returncode == 0, fk.stderr
    ours = np.array(json.loads(fk.stdout)["position"])
    assert np.abs(ours - own_fk_position(expected_file, link, values)).max() <= 1e-9


# ---- robot_descriptions ----------------------------------------------------------------------

def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                          cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def robot_descriptions_cache(tmp_path: Path, repository: str, fill) -> tuple[Path, dict[str, str]]:
    """A clone of `repository` as robot_descriptions keeps it for a pinned commit: the tree `fill`
    writes, committed, at ``cache/<repo>-<commit>/<repo>``. The environment that pins it."""
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


def test_robot_descriptions_urdf_by_name_from_its_cache(tmp_path):
    pytest.importorskip("robot_descriptions")
    shutil.which("git") or pytest.skip("robot_descriptions clones with git")
    erd = example_robots_folder()
    if erd is None:
        pytest.skip("example-robot-data is not installed")

    def fill(root: Path) -> None:
        # the repository's package.xml names it example-robot-data (the wheel's copy is renamed)
        text = (erd.parent / "package.xml").read_text()
        text = text.replace("<name>example_robot_descriptions</name>", "<name>example-robot-data</name>")
        (root / "package.xml").write_text(text)
        shutil.copytree(erd / "kinova_description", root / "robots" / "kinova_description", copy_function=_link_or_copy)

    clone, env = robot_descriptions_cache(tmp_path, "example-robot-data", fill)
    urdf = clone / "robots" / "kinova_description" / "robots" / "kinova.urdf"
    check_name_reaches("gen2_description", "robot_descriptions", urdf, env)


def test_robot_descriptions_mjcf_by_name_from_its_cache(tmp_path):
    pytest.importorskip("robot_descriptions")
    pytest.importorskip("mujoco")
    shutil.which("git") or pytest.skip("robot_descriptions clones with git")
    clone, env = robot_descriptions_cache(tmp_path, "mujoco_menagerie",
                                          lambda root: place_model("kinova3", root / "kinova_gen3", "gen3.xml"))
    check_name_reaches("gen3_mj_description", "robot_descriptions", clone / "kinova_gen3" / "gen3.xml", env)


def test_robots_lists_every_robot_descriptions_name_without_fetching(tmp_path):
    descriptions = pytest.importorskip("robot_descriptions").DESCRIPTIONS
    empty = tmp_path / "empty-cache"
    result = kinema("robots", "--json", env={"ROBOT_DESCRIPTIONS_CACHE": str(empty)})
    assert result.returncode == 0, result.stderr
    listed = {r["name"]: r for r in json.loads(result.stdout)["robots"] if r["source"] == "robot_descriptions"}
    others = {r["name"] for r in json.loads(result.stdout)["robots"] if r["source"] != "robot_descriptions"}
    assert set(listed) == {n for n, d in descriptions.items() if d.has_urdf or d.has_mjcf} - others
    assert all(r["file"] is None for r in listed.values())
    assert not empty.exists()  # nothing was cloned to list them


# ---- mujoco-menagerie ------------------------------------------------------------------------

#: A stand-in for the mujoco_menagerie package (not a dependency; used only when it is not
#: installed): the calls Kinema Nodes makes, resolving models under MENAGERIE_ROOT as it does.
STAND_IN = '''
"""Stand-in for mujoco-menagerie's API (names, get, Robot.xml), MENAGERIE_ROOT only."""
import dataclasses, os, pathlib

_MODELS = {MODELS}


@dataclasses.dataclass(frozen=True)
class Robot:
    name: str
    category: str
    default_model: str
    files: dict

    def path(self, cache=None, progress=None) -> pathlib.Path:
        path = pathlib.Path(os.environ["MENAGERIE_ROOT"]) / self.name
        if not path.is_dir():
            raise RuntimeError(f"{{self.name!r}} not found under MENAGERIE_ROOT={{path.parent}}")
        return path

    def xml(self, entry=None, cache=None) -> pathlib.Path:
        return self.path(cache) / self.files[entry or self.default_model]


def names():
    return sorted(_MODELS)


def get(name):
    return Robot(name, "arm", *_MODELS[name])
'''

MENAGERIE = {"kinova_gen3": ("kinova3", "gen3", "gen3.xml"), "universal_robots_ur5e": ("ur5e", "ur5e", "ur5e.xml")}


@pytest.fixture
def menagerie(tmp_path):
    """(environment, root): a MENAGERIE_ROOT checkout holding two models, and the package (or its stand-in)."""
    pytest.importorskip("mujoco")
    root = tmp_path / "menagerie"
    for name, (robosuite_name, _, file) in MENAGERIE.items():
        place_model(robosuite_name, root / name, file)
    env = {"MENAGERIE_ROOT": str(root)}
    if importlib.util.find_spec("mujoco_menagerie") is None:
        site = tmp_path / "site" / "mujoco_menagerie"
        site.mkdir(parents=True)
        models = {name: (entry, {entry: file}) for name, (_, entry, file) in MENAGERIE.items()}
        module = textwrap.dedent(STAND_IN).replace("{MODELS}", repr(models)).replace("{{", "{").replace("}}", "}")
        (site / "__init__.py").write_text(module)
        env["PYTHONPATH"] = str(site.parent)
    return env, root


@pytest.mark.parametrize("name", sorted(MENAGERIE))
def test_menagerie_model_by_name(name, menagerie):
    env, root = menagerie
    check_name_reaches(name, "mujoco-menagerie", root / name / MENAGERIE[name][2], env)
