"""Robots by name from the libraries roboticists use (#29 item 22): `robot_descriptions` and
`mujoco-menagerie`. `kinema-nodes robots` lists their robots by name without fetching anything,
and a name works wherever a robot file does, through each package's own API, once the package
has fetched the model into its cache.

No network: each library's cache is a small local tree in tmp_path laid out as the package lays
it out, with real robot files in it:

- `robot_descriptions` (installed in the test environment; its real API): a git clone at
  ``$ROBOT_DESCRIPTIONS_CACHE/<repo>-<commit>/<repo>``, the layout the package uses when
  ``ROBOT_DESCRIPTION_COMMIT`` pins a commit; the commit is the local tree's own, so the package
  finds HEAD already there and fetches nothing. ``gen2_description`` (Kinova Gen2, URDF, the
  example-robot-data repository: its files from the installed example-robot-data) and
  ``gen3_mj_description`` (Kinova Gen3, MJCF, the mujoco_menagerie repository: robosuite's Gen3
  model in its place).
- `mujoco-menagerie` (the PyPI package): the models ``kinova_gen3`` (``gen3.xml``) and
  ``universal_robots_ur5e`` (``ur5e.xml``), robosuite's models in Menagerie's places: in its
  documented ``MENAGERIE_ROOT`` checkout, and in its download cache
  (``$MENAGERIE_CACHE_DIR/models/<name>-<oid[:16]>/`` with the ``.complete`` file its `Cache`
  writes; the package's own `is_cached` is asserted to agree). When the package is not installed
  (both are in the test extra, so only outside it), the ``MENAGERIE_ROOT`` test puts a stand-in
  module with the same calls (`names`, `get(name).default_model`, `.xml(entry)`) on the path, so
  our listing code is still exercised; the download-cache tests skip.

Kinema never fetches: a name not in the cache is refused in one line that gives the library's
command to fetch it, and no cache folder appears (`*_not_fetched_*`); a robot_descriptions clone
that is not at the commit the package pins (the package would check out and fetch) is refused
likewise and left as it is. A xacro description (``ur5e_description``) reads with the
``XACRO_ARGS`` of its module. Without either package importable, `robots` and unknown names
still work (`test_robots_and_names_work_without_either_library`).

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

from library_caches import (MENAGERIE, NO_NETWORK, example_robot_data_repository, git, menagerie_cache, place_model,
                            robot_descriptions_cache)

from kinema_nodes.core.model.example_robots import example_robots_folder

WORKTREE = Path(__file__).resolve().parents[2]


def kinema(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = dict(os.environ, **(env or {}))
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (environment.get("PYTHONPATH", ""), str(WORKTREE)) if p)
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True, env=environment,
                          timeout=600, check=False)


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

def test_robot_descriptions_urdf_by_name_from_its_cache(tmp_path):
    pytest.importorskip("robot_descriptions")
    shutil.which("git") or pytest.skip("robot_descriptions clones with git")
    erd = example_robots_folder()
    if erd is None:
        pytest.skip("example-robot-data is not installed")

    clone, env = robot_descriptions_cache(tmp_path, "example-robot-data", example_robot_data_repository(erd, "kinova_description"))
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


@pytest.mark.parametrize("name", ["kinova_gen3"])  # the UR5e by the download-cache layout below
def test_menagerie_model_by_name(name, menagerie):
    env, root = menagerie
    check_name_reaches(name, "mujoco-menagerie", root / name / MENAGERIE[name][2], env)


# ---- read from the cache only; one line when not fetched ----------------------------------------

def fails_in_one_line(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.strip().splitlines()
    for needle in needles:
        assert needle in line, line
    return line


def test_robot_descriptions_name_not_fetched_says_how_and_fetches_nothing(tmp_path):
    pytest.importorskip("robot_descriptions")
    cache = tmp_path / "rd-cache"
    env = {"ROBOT_DESCRIPTIONS_CACHE": str(cache)}
    listed = {r["name"]: r for r in json.loads(kinema("robots", "--json", env=env).stdout)["robots"]}
    assert listed["ur5e_description"]["cached"] is False and listed["ur5e_description"]["format"] == "xacro"
    assert "import robot_descriptions.ur5e_description" in listed["ur5e_description"]["fetch"]
    line = fails_in_one_line(kinema("info", "ur5e_description", env=env),
                             "has not fetched it yet", 'python -c "import robot_descriptions.ur5e_description"',
                             str(cache / "ur_description"))
    assert "github.com/UniversalRobots" in line
    assert not cache.exists()  # nothing cloned


def test_robot_descriptions_clone_at_another_commit_is_not_updated(tmp_path):
    """The default layout (``$ROBOT_DESCRIPTIONS_CACHE/<cache_path>``, no pinned commit in the
    environment): a clone whose HEAD is not the commit the package pins would make the package
    check out, and fetch; Kinema says so in one line and leaves the clone as it is."""
    pytest.importorskip("robot_descriptions")
    shutil.which("git") or pytest.skip("robot_descriptions clones with git")
    erd = example_robots_folder()
    if erd is None:
        pytest.skip("example-robot-data is not installed")
    clone, pinned = robot_descriptions_cache(tmp_path, "example-robot-data", example_robot_data_repository(erd, "kinova_description"))
    default = tmp_path / "cache" / clone.name
    clone.rename(default)
    head = git("rev-parse", "HEAD", cwd=default)
    env = {"ROBOT_DESCRIPTIONS_CACHE": pinned["ROBOT_DESCRIPTIONS_CACHE"]}
    listed = {r["name"]: r for r in json.loads(kinema("robots", "--json", env=env).stdout)["robots"]}
    assert listed["gen2_description"]["cached"] is True  # a clone is there
    fails_in_one_line(kinema("info", "gen2_description", env=env), "is not at the commit it pins", "update it with")
    assert git("rev-parse", "HEAD", cwd=default) == head


def test_robot_descriptions_xacro_by_name_uses_its_modules_arguments(tmp_path):
    """``ur5e_description`` names ``urdf/ur.urdf.xacro`` with XACRO_ARGS ur_type=ur5e, name=ur5e.
    Its repository here: a xacro that takes those two arguments (the robot's name, and the file
    it includes: ``<ur_type>_robot.urdf``), and example-robot-data's UR5 URDF standing in for the
    UR5e one. The arguments reach xacro: the robot is named ur5e and has the UR5's six joints,
    judged by yourdfpy on the UR5 URDF itself."""
    pytest.importorskip("robot_descriptions")
    shutil.which("git") or pytest.skip("robot_descriptions clones with git")
    erd = example_robots_folder()
    if erd is None:
        pytest.skip("example-robot-data is not installed")

    def fill(root: Path) -> None:
        example_robot_data_repository(erd, "ur_description")(root)
        (root / "urdf").mkdir()
        shutil.copy2(erd / "ur_description" / "urdf" / "ur5_robot.urdf", root / "urdf" / "ur5e_robot.urdf")
        (root / "urdf" / "ur.urdf.xacro").write_text(textwrap.dedent("""\
            <?xml version="1.0"?>
            <robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="$(arg name)">
              <xacro:arg name="ur_type" default="ur3"/>
              <xacro:arg name="name" default="ur"/>
              <xacro:include filename="$(arg ur_type)_robot.urdf"/>
            </robot>
            """))

    clone, env = robot_descriptions_cache(tmp_path, "Universal_Robots_ROS2_Description", fill)
    info = kinema("info", "ur5e_description", "--json", env=env)
    assert info.returncode == 0, info.stderr
    info = json.loads(info.stdout)
    assert info["name"] == "ur5e" and info["dof"] == 6
    assert Path(info["file"]).resolve() == (clone / "urdf" / "ur.urdf.xacro").resolve()
    values = {name: 0.3 + 0.1 * i for i, name in enumerate(info["actuated_joints"])}
    link = info["tool_point"]
    fk = kinema("fk", "ur5e_description", "--link", link, "--joints", *(f"{n}={v!r}" for n, v in values.items()), "--json", env=env)
    assert fk.returncode == 0, fk.stderr
    ours = np.array(json.loads(fk.stdout)["position"])
    assert np.abs(ours - own_fk_position(clone / "urdf" / "ur5e_robot.urdf", link, values)).max() <= 1e-9


@pytest.mark.parametrize("name", ["universal_robots_ur5e"])  # the Gen3 by the MENAGERIE_ROOT layout above
def test_menagerie_model_by_name_from_its_download_cache(name, tmp_path):
    pytest.importorskip("mujoco")
    env, cache = menagerie_cache(tmp_path)
    import mujoco_menagerie

    robot = mujoco_menagerie.get(name)
    folder = cache / "models" / f"{name}-{robot.oid[:16]}"
    assert mujoco_menagerie.Cache(cache).is_cached(robot)  # the package's own check agrees with the layout
    listed = {r["name"]: r for r in json.loads(kinema("robots", "--json", env=env).stdout)["robots"]}
    assert listed[name]["cached"] is True and listed["franka_emika_panda"]["cached"] is False
    check_name_reaches(name, "mujoco-menagerie", folder / MENAGERIE[name][2], env)


def test_menagerie_name_not_downloaded_says_how_and_downloads_nothing(tmp_path):
    pytest.importorskip("mujoco_menagerie")
    cache = tmp_path / "empty"
    env = {"MENAGERIE_CACHE_DIR": str(cache), "MENAGERIE_BASE_URL": NO_NETWORK}
    fails_in_one_line(kinema("info", "franka_emika_panda", env=env), "has not downloaded it yet",
                      "python -m mujoco_menagerie path franka_emika_panda", str(cache))
    assert not cache.exists()


BLOCKED = "import sys; sys.modules['robot_descriptions'] = sys.modules['mujoco_menagerie'] = None; "


def test_robots_and_names_work_without_either_library(tmp_path):
    """Neither package importable (as when not installed): `robots` lists the others, and a
    library name is an unknown name, in one line."""
    environment = dict(os.environ, PYTHONPATH=str(WORKTREE))
    run = [sys.executable, "-c", BLOCKED + "from kinema_nodes.cli import run; run()"]
    listed = subprocess.run([*run, "robots", "--json"], capture_output=True, text=True, env=environment, timeout=300, check=False)
    assert listed.returncode == 0, listed.stderr
    sources = {r["source"] for r in json.loads(listed.stdout)["robots"]}
    assert "bundled" in sources and not sources & {"robot_descriptions", "mujoco-menagerie"}
    unknown = subprocess.run([*run, "info", "kinova_gen3"], capture_output=True, text=True, env=environment, timeout=300, check=False)
    fails_in_one_line(unknown, "no robot of that name")
