"""Class 14: nothing writes over an input, and an export never merges into or removes a folder
of the user's (issue #32, items 5 and 6).

A bake's or a batch shot's output that is an input (its own or another shot's targets, robot or
preset), after symlinks, `..` and hard links, is refused before any work; so are two outputs on
one file. The batch's warm shot server removes only the files it made, by their exact names,
in a folder of its own. A ROS 2 bag export over a folder is refused unless the folder is empty,
or is itself a bag and `--force` is given; a folder holding anything else is never replaced.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.files import OutputError, refuse_writing_over_inputs

from corpus import REPO, Untouched, assert_cli_refusal, assert_one_line, run_cli, within

TARGETS = "frame,x,y,z,qw,qx,qy,qz\n1,0.4,0.1,0.4,0,1,0,0\n2,0.4,0.12,0.4,0,1,0,0\n3,0.4,0.14,0.4,0,1,0,0\n"
ARM6 = REPO / "kinema_nodes" / "robots" / "arm6.urdf"


@pytest.fixture
def shot_folder(tmp_path):
    (tmp_path / "targets.csv").write_text(TARGETS)
    (tmp_path / "other.csv").write_text(TARGETS)
    (tmp_path / "arm6.urdf").write_text(ARM6.read_text())
    return tmp_path


# ---- a single bake ------------------------------------------------------------------------------

def _bake(folder: Path, *extra) -> subprocess.CompletedProcess:
    return run_cli("bake", "arm6", "--targets", folder / "targets.csv", "--solver", "numpy", *extra, timeout=120)


@pytest.mark.parametrize("how", ["same_name", "symlink", "hard_link", "dot_dot"])
def test_bake_joints_out_onto_its_own_targets_is_refused(shot_folder, how):
    targets = shot_folder / "targets.csv"
    if how == "same_name":
        joints = targets
    elif how == "symlink":
        joints = shot_folder / "joints.csv"
        joints.symlink_to(targets)
    elif how == "hard_link":
        joints = shot_folder / "joints.csv"
        os.link(targets, joints)
    else:
        (shot_folder / "sub").mkdir()
        joints = shot_folder / "sub" / ".." / "targets.csv"
    kept = Untouched(shot_folder)
    result = _bake(shot_folder, "--out", shot_folder / "out.blend", "--joints-out", joints)
    assert_cli_refusal(result, "--joints-out", "--targets", "refusing to write over an input")
    kept.check()  # the targets byte for byte, and no out.blend


def test_bake_out_that_is_a_hard_link_to_the_robot_file_is_refused(shot_folder):
    robot = shot_folder / "arm6.urdf"
    os.link(robot, shot_folder / "out.blend")
    kept = Untouched(shot_folder)
    result = run_cli("bake", robot, "--targets", shot_folder / "targets.csv", "--solver", "numpy",
                     "--out", shot_folder / "out.blend", timeout=120)
    assert_cli_refusal(result, "--out", "robot file")
    kept.check()


def test_bake_report_through_a_folder_symlink_onto_an_input_is_refused(shot_folder):
    (shot_folder / "inputs").mkdir()
    picture = shot_folder / "inputs" / "picture.png"
    picture.write_bytes(b"\x89PNG not really")
    (shot_folder / "alias").symlink_to(shot_folder / "inputs")
    os.link(picture, shot_folder / "preset.json")  # the same file under a preset's name
    kept = Untouched(shot_folder)
    result = _bake(shot_folder, "--out", shot_folder / "out.blend", "--preset", shot_folder / "preset.json",
                   "--report", shot_folder / "alias" / "picture.png")
    assert_cli_refusal(result, "--report", "--preset")
    kept.check()


@pytest.mark.parametrize("first, second", [("--report", "--limits-report"), ("--out", "--retime")])
def test_bake_two_outputs_on_one_file_are_refused(shot_folder, first, second):
    suffix = ".png" if first == "--report" else ".blend"
    same = shot_folder / f"same{suffix}"
    extra = ["--check-limits"] if second == "--limits-report" else ["--max-acc", "5"]
    outputs = {"--out": shot_folder / "out.blend", first: same, second: same}
    args = [part for option, path in outputs.items() for part in (option, path)]
    kept = Untouched(shot_folder)
    result = _bake(shot_folder, *args, *extra)
    assert_cli_refusal(result, first, second, "same file")
    kept.check()


def test_the_rule_through_the_api_names_both_files(tmp_path):
    targets = tmp_path / "targets.csv"
    targets.write_text(TARGETS)
    with pytest.raises(OutputError) as caught:
        refuse_writing_over_inputs({"--joints-out": tmp_path / "." / "targets.csv"}, {"--targets": targets})
    assert_one_line(caught.value, "--joints-out", "--targets", "targets.csv")
    refuse_writing_over_inputs({"--joints-out": tmp_path / "joints.csv", "--out": None}, {"--targets": targets})


# ---- batch ------------------------------------------------------------------------------------

def _manifest(folder: Path, shots: list[dict], defaults: dict | None = None) -> Path:
    path = folder / "manifest.json"
    path.write_text(json.dumps({"defaults": defaults or {"robot": "arm6", "solver": "numpy"}, "shots": shots}))
    return path


@pytest.mark.parametrize("shots, fragments", [
    ([{"name": "a", "targets": "targets.csv", "out": "a.blend", "joints_out": "targets.csv"}],
     ("shot 'a' joints_out", "shot 'a' targets")),
    ([{"name": "a", "targets": "targets.csv", "out": "a.blend"},
      {"name": "b", "targets": "other.csv", "out": "b.blend", "joints_out": "sub/../targets.csv"}],
     ("shot 'b' joints_out", "shot 'a' targets")),
    ([{"name": "a", "targets": "targets.csv", "out": "a.blend", "robot": "./arm6.urdf"},
      {"name": "b", "targets": "other.csv", "out": "robot_link.blend"}],
     ("shot 'b' out", "shot 'a' robot")),
    ([{"name": "a", "targets": "targets.csv", "out": "a.blend", "preset": "mine.json"},
      {"name": "b", "targets": "other.csv", "out": "b.blend", "report": "preset_alias.png"}],
     ("shot 'b' report", "shot 'a' preset")),
    ([{"name": "a", "targets": "targets.csv", "out": "a.blend"},
      {"name": "b", "targets": "other.csv", "out": "b.blend", "joints_out": "alias.csv"}],
     ("shot 'b' joints_out", "shot 'a' targets")),
], ids=["own_targets", "another_shots_targets_via_dot_dot", "hard_link_to_a_robot", "hard_link_to_a_preset",
        "symlink_to_another_shots_targets"])
def test_a_shot_writing_over_any_shots_input_is_refused(shot_folder, shots, fragments):
    from kinema_nodes.core.shot.batch import read_manifest

    (shot_folder / "sub").mkdir()
    os.link(shot_folder / "arm6.urdf", shot_folder / "robot_link.blend")
    (shot_folder / "mine.json").write_text("{}")
    os.link(shot_folder / "mine.json", shot_folder / "preset_alias.png")
    (shot_folder / "alias.csv").symlink_to(shot_folder / "targets.csv")
    manifest = _manifest(shot_folder, shots)
    with pytest.raises(KinemaError) as caught:
        read_manifest(manifest)
    assert_one_line(caught.value, *fragments, "refusing to write over an input")


def test_shots_sharing_one_targets_file_with_their_own_outputs_are_accepted(shot_folder):
    from kinema_nodes.core.shot.batch import read_manifest

    shots = read_manifest(_manifest(shot_folder, [
        {"name": "a", "targets": "targets.csv", "out": "a.blend", "joints_out": "a.csv"},
        {"name": "b", "targets": "targets.csv", "out": "b.blend", "joints_out": "b.csv", "robot": "./arm6.urdf"},
    ]))
    assert [s.name for s in shots] == ["a", "b"]


def test_batch_cli_refuses_a_shot_over_its_targets_and_runs_nothing(shot_folder):
    manifest = _manifest(shot_folder, [{"name": "a", "targets": "targets.csv", "out": "a.blend", "joints_out": "targets.csv"}])
    kept = Untouched(shot_folder)
    assert_cli_refusal(run_cli("batch", manifest, "--workers", "1", timeout=120), "joints_out", "targets")
    kept.check()


@pytest.mark.parametrize("key, value", [("robot", "--json"), ("link", "--out"), ("preset", "-h"), ("start", {"--force": 1})])
def test_a_shot_value_that_the_bake_would_read_as_an_option_is_refused(shot_folder, key, value):
    from kinema_nodes.core.shot.batch import read_manifest

    manifest = _manifest(shot_folder, [{"name": "a", "targets": "targets.csv", "out": "a.blend", key: value}])
    with pytest.raises(KinemaError) as caught:
        read_manifest(manifest)
    assert_one_line(caught.value, f"shot 1 ('a'): {key}", "option")


def _start_server(temporary_folder: Path) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(temporary_folder), "PYTHONUNBUFFERED": "1",
           "KINEMA_CACHE_DIR": str(temporary_folder / "cache")}
    server = subprocess.Popen([sys.executable, "-c", "from kinema_nodes.cli.batch import serve_shots; serve_shots()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                              cwd=REPO)
    ready, error = within(120, "the warm shot server's start", lambda: json.loads(server.stdout.readline()))
    assert error is None and ready.get("ready"), (ready, error)
    return server


def test_the_shot_server_never_removes_a_file_it_did_not_make(tmp_path):
    """Files named as the old sweep matched them (`kinema-shot-*-*-*.*`, with a dead pid) stay;
    the server's own pair is removed by name and its folder when it ends."""
    planted = ["kinema-shot-mine-999999-0.out", "kinema-shot-notes-1-2.txt", "kinema-shot-a-b-c.d"]
    for name in planted:
        (tmp_path / name).write_text("the user's")
    server = _start_server(tmp_path)
    try:
        server.stdin.write(json.dumps({"arguments": ["robots"], "timeout": 60, "label": "shot"}) + "\n")
        server.stdin.flush()
        answer, error = within(120, "one shot through the server", lambda: json.loads(server.stdout.readline()))
        assert error is None and answer["rc"] == 0 and "arm6" in answer["stdout"], (answer, error)
        folders = [p for p in tmp_path.iterdir() if p.name.startswith("kinema-shots-")]
        assert len(folders) == 1 and not any(folders[0].iterdir())  # the pair went by name once read
    finally:
        server.stdin.close()
        server.wait(60)
    assert all((tmp_path / name).read_text() == "the user's" for name in planted)
    assert not any(p.name.startswith("kinema-shots-") for p in tmp_path.iterdir())


def test_the_shot_server_stopped_by_sigterm_removes_its_own_folder_only(tmp_path):
    (tmp_path / "kinema-shot-x-1-1.out").write_text("the user's")
    server = _start_server(tmp_path)
    server.send_signal(signal.SIGTERM)
    _, error = within(60, "the server's end", lambda: server.wait(60))
    assert error is None
    assert (tmp_path / "kinema-shot-x-1-1.out").read_text() == "the user's"
    assert not any(p.name.startswith("kinema-shots-") for p in tmp_path.iterdir())  # Blender's own temporaries aside


# ---- ROS 2 bag export -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trajectory():
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.shot.export import trajectory_for

    robot = load_robot("arm6")
    frames = np.arange(1, 11)
    joints = robot.mid_configuration() + 0.01 * np.outer(np.arange(10), np.ones(robot.dof))
    return trajectory_for(robot, ARM6.read_text(), frames, joints, 24.0)


def _messages(bag: Path) -> list:
    from rosbags.rosbag2 import Reader

    with Reader(bag) as reader:
        return [(connection.topic, timestamp) for connection, timestamp, _ in reader.messages()]


@pytest.fixture
def old_bag(tmp_path, trajectory):
    from kinema_nodes.core.shot.export import write_ros2

    bag, _ = write_ros2(tmp_path / "shot_bag", trajectory, topic="/old")
    return bag


def test_export_into_a_folder_of_the_users_is_refused_even_with_force(tmp_path, trajectory):
    from kinema_nodes.core.shot.export import write_ros2

    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    kept = Untouched(tmp_path)
    for force in (False, True):
        with pytest.raises(OutputError) as caught:
            write_ros2(folder, trajectory, force=force)
        assert_one_line(caught.value, "results", "other than a rosbag2", "refusing")
    kept.check()


def test_an_existing_bag_is_kept_without_force(tmp_path, trajectory, old_bag):
    from kinema_nodes.core.shot.export import write_ros2

    kept = Untouched(tmp_path)
    with pytest.raises(OutputError) as caught:
        write_ros2(old_bag, trajectory, topic="/new")
    assert_one_line(caught.value, "existing rosbag2", "--force")
    kept.check()
    assert [topic for topic, _ in _messages(old_bag)] == ["/old"]


def test_force_replaces_a_folder_that_is_only_a_bag(tmp_path, trajectory, old_bag):
    from kinema_nodes.core.shot.export import read_ros2, write_ros2

    write_ros2(old_bag, trajectory, topic="/new", force=True)
    assert [topic for topic, _ in _messages(old_bag)] == ["/new"]
    (message,) = read_ros2(old_bag, "/new")
    assert list(message.joint_names) == list(trajectory.joint_names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shot_bag", "shot_bag.yaml"]  # no staging left


@pytest.mark.parametrize("extra", ["notes.txt", "subfolder", "unlisted.db3", "link.db3", "metadata_not_yaml"])
def test_force_never_replaces_a_bag_folder_holding_anything_else(tmp_path, trajectory, old_bag, extra):
    from kinema_nodes.core.shot.export import write_ros2

    if extra == "subfolder":
        (old_bag / "plots").mkdir()
        (old_bag / "plots" / "a.png").write_text("mine")
    elif extra == "link.db3":
        (tmp_path / "elsewhere.db3").write_text("mine")
        (old_bag / "link.db3").symlink_to(tmp_path / "elsewhere.db3")
    elif extra == "metadata_not_yaml":
        (old_bag / "metadata.yaml").write_text("{{{ not: [yaml")
    else:
        (old_bag / extra).write_text("mine")
    kept = Untouched(tmp_path)
    with pytest.raises(OutputError) as caught:
        write_ros2(old_bag, trajectory, topic="/new", force=True)
    assert_one_line(caught.value, "shot_bag", "other than a rosbag2")
    kept.check()


def test_a_link_to_a_bag_is_refused(tmp_path, trajectory, old_bag):
    from kinema_nodes.core.shot.export import write_ros2

    alias = tmp_path / "alias_bag"
    alias.symlink_to(old_bag)
    kept = Untouched(tmp_path)
    with pytest.raises(OutputError) as caught:
        write_ros2(alias, trajectory, force=True)
    assert_one_line(caught.value, "is a link")
    kept.check()


def test_an_empty_folder_gets_the_bag(tmp_path, trajectory):
    from kinema_nodes.core.shot.export import write_ros2

    (tmp_path / "empty_bag").mkdir()
    bag, _ = write_ros2(tmp_path / "empty_bag", trajectory, topic="/arm")
    assert [topic for topic, _ in _messages(bag)] == ["/arm"]


def test_export_cli_refuses_a_folder_of_the_users_before_opening_the_shot(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    shot = tmp_path / "shot.blend"
    shot.write_bytes(b"BLENDER not opened")
    kept = Untouched(tmp_path)
    started = time.monotonic()
    result = run_cli("export", shot, "--format", "ros2", "--out", folder, "--force", timeout=120)
    assert_cli_refusal(result, "results", "refusing")
    kept.check()
    assert time.monotonic() - started < 60


def test_export_cli_refuses_an_output_that_is_the_shot_itself(tmp_path):
    shot = tmp_path / "shot.blend"
    shot.write_bytes(b"BLENDER not opened")
    (tmp_path / "shot.json").symlink_to(shot)
    kept = Untouched(tmp_path)
    assert_cli_refusal(run_cli("export", shot, "--format", "json", "--out", tmp_path / "shot.json", timeout=120),
                       "--out", "SHOT.blend")
    kept.check()
