"""`kinema-nodes robots` (#12 item 14, #16 item 4): every robot the installed data packages hold,
each name usable wherever a URDF path is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kinema_nodes.core.model.example_robots import example_robots_folder, named_robots
from kinema_nodes.core.model.example_robots import bundled_robots
from kinema_nodes.core.model.loading import find_urdf


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *args], capture_output=True, text=True)


def test_robots_lists_every_bundled_example_robot_data_and_robosuite_robot():
    result = cli("robots", "--json")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)["robots"]
    names = [r["name"] for r in listed]
    assert len(names) == len(set(names))
    files = {r["file"] for r in listed}
    assert {str(p) for p in bundled_robots().values()} <= files
    folder = example_robots_folder()
    if folder is not None:
        every_urdf = {str(p) for p in folder.glob("*/*/*.urdf")}
        assert len(every_urdf) >= 40 and every_urdf <= files  # all of them, not the 13 of before
        assert {"so101", "baxter", "panda", "ur5", "talos", "g1"} <= set(names)
    robosuite = [r for r in listed if r["source"] == "robosuite"]
    if robosuite:
        assert {"robosuite_panda", "robosuite_sawyer", "robosuite_iiwa", "robosuite_ur5e", "robosuite_jaco", "robosuite_kinova3"} <= set(names)
        assert all(r["format"] == "mjcf" for r in robosuite)
    text = cli("robots")
    assert text.returncode == 0 and "so101" in text.stdout


def test_every_name_reaches_its_file():
    for robot in named_robots():
        if robot.path is not None:  # a library robot (path None) is read from its cache: test_robot_libraries.py
            assert find_urdf(robot.name) == robot.path


@pytest.mark.parametrize("name", ["so101", "baxter", "robosuite_jaco"])
def test_names_work_wherever_a_urdf_path_does(name):
    if name.startswith("robosuite") and not any(r.name == name for r in named_robots()):
        pytest.skip("robosuite is not installed")
    if not name.startswith("robosuite") and example_robots_folder() is None:
        pytest.skip("example-robot-data is not installed")
    result = cli("info", name, "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["dof"] >= 5 and info["meshes"] > 0


def test_an_unknown_name_points_to_the_robots_command():
    result = cli("info", "no_such_robot")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "`kinema-nodes robots` lists the names" in result.stderr


def test_robots_help_has_a_one_line_description():
    result = cli("robots", "--help")
    assert result.returncode == 0 and "List every robot by name" in result.stdout
