"""The command line as a newcomer meets it (#12.9-14) and the CSV rules of #19.

Fresh `kinema-nodes` processes on robots the CLI tests had not used (example-robot-data's UR10
and Unitree Z1, robosuite's copy of the pybullet Panda), checked against independent sources:
yourdfpy for forward kinematics, Python's csv module for what a spreadsheet reads.

- Exit codes: 0 converged and unflagged, 3 ran but not converged or flagged, 2 bad input,
  1 an internal error.
- Quiet: `demo` and `import --render` print their own lines and nothing else (golden stdout
  and an empty stderr); `--verbose` lets Blender's lines through. No `.blend1` is left.
- Warnings are one line on stderr; errors name the file, line, column and value.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.cli import csv_files
from kinema_nodes.cli.csv_files import read_targets_csv, write_joints_csv
from kinema_nodes.cli.main import BAD_INPUT, INTERNAL_ERROR, NOT_CONVERGED, exit_code_for
from kinema_nodes.core.errors import KinemaError, printable
from kinema_nodes.core.model.example_robots import example_robot

HEADER = "frame,x,y,z,qw,qx,qy,qz"


def kinema(*args, cwd=None, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=cwd, env={**os.environ, **(env or {})})


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def yourdfpy_pose(path, link: str, joints: dict[str, float]) -> np.ndarray:
    """The link's pose from yourdfpy, the independent reader."""
    import yourdfpy

    model = yourdfpy.URDF.load(str(path), load_meshes=False, build_scene_graph=True, build_collision_scene_graph=False,
                               load_collision_meshes=False)
    model.update_cfg({name: value for name, value in joints.items() if name in model.actuated_joint_names})
    return model.get_transform(link, model.base_link)


def ur10_without_meshes(tmp_path: Path, rename: dict[str, str] | None = None) -> Path:
    """The UR10's kinematics with no visual or collision elements (so the file can live in a
    temporary folder), joints and links renamed as given."""
    text = example_robot("ur10").read_text()
    text = re.sub(r"<visual>.*?</visual>|<collision>.*?</collision>", "", text, flags=re.S)
    for old, new in (rename or {}).items():
        escaped = new.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace("\n", "&#10;")
        text = text.replace(f'"{old}"', f'"{escaped}"')
    path = tmp_path / "ur10_plain.urdf"
    path.write_text(text)
    return path


def ur10_reachable_pose() -> list[float]:
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    robot = load_robot("ur10", check_meshes=False)
    q = np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    pose = link_pose(robot, q, "tool0")
    return [*pose[:3, 3], *matrix_to_quaternion(pose)]


def write_targets(path: Path, rows, header: str = HEADER, encoding: str = "utf-8") -> Path:
    path.write_bytes(("\n".join([header, *rows]) + "\n").encode(encoding))
    return path


# ---- #12.9 exit codes ----------------------------------------------------------------------------

def test_solve_to_an_unreachable_target_exits_3_and_the_json_says_not_converged():
    result = kinema("solve", "ur10", "--target", 3.0, 0, 0.5, 1, 0, 0, 0, "--solver", "numpy", "--json")
    assert result.returncode == NOT_CONVERGED == 3, result.stderr
    payload = json.loads(result.stdout)
    assert payload["converged"] is False
    assert payload["position_error"] > 1.0  # 3 m out; the UR10 reaches about 1.3 m
    assert result.stderr == ""


def test_solve_to_a_reachable_target_exits_0_and_reaches_it_by_yourdfpy():
    target = ur10_reachable_pose()
    result = kinema("solve", "ur10", "--target", *target, "--solver", "numpy", "--cold", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["converged"] is True
    pose = yourdfpy_pose(example_robot("ur10"), "tool0", payload["joints"])
    assert np.linalg.norm(pose[:3, 3] - np.array(target[:3])) < 1e-4  # the solver's 1e-5 plus yourdfpy's float path


def test_bake_with_unconverged_frames_exits_3_and_names_the_joints_behind_each_flag(tmp_path):
    reach = ur10_reachable_pose()
    far = [3.0, 0.0, 0.5, *reach[3:]]
    targets = write_targets(tmp_path / "t.csv", [",".join(map(str, [f, *p])) for f, p in ((1, reach), (6, far), (12, reach))])
    out = tmp_path / "shot.blend"
    result = kinema("bake", "ur10", "--targets", targets, "--out", out, "--solver", "numpy", "--json")
    assert result.returncode == 3, result.stderr
    payload = json.loads(result.stdout)
    assert payload["status"] == "not_converged"
    assert payload["converged"] < payload["frames"] == 12
    assert out.is_file()
    text = kinema("bake", "ur10", "--targets", targets, "--out", out, "--solver", "numpy")
    assert text.returncode == 3
    too_fast = [line for line in text.stdout.splitlines() if line.startswith("flagged, too fast:")]
    not_converged = [line for line in text.stdout.splitlines() if line.startswith("flagged, not converged:")]
    assert not_converged, text.stdout
    joint_names = {"shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"}
    if payload["checks"]["too_fast"]:
        named = set(re.findall(r"(\w+_joint) frames?", too_fast[0]))
        assert named == {n for names in payload["checks"]["too_fast"].values() for n in names}
        assert named <= joint_names
    assert text.stderr == ""


def test_bake_that_converges_unflagged_exits_0(tmp_path):
    """A target that stays put: every frame converges and nothing moves, so nothing is flagged."""
    reach = ur10_reachable_pose()
    targets = write_targets(tmp_path / "t.csv", [",".join(map(str, [f, *reach])) for f in (1, 8)])
    result = kinema("bake", "ur10", "--targets", targets, "--out", tmp_path / "still.blend", "--solver", "numpy",
                    "--start", "shoulder_pan_joint=0.3", "shoulder_lift_joint=-1.2", "elbow_joint=1.4",
                    "wrist_1_joint=-1.6", "wrist_2_joint=-1.5", "wrist_3_joint=0.4", "--json")
    payload = json.loads(result.stdout)
    assert (result.returncode, payload["status"], payload["flagged"]) == (0, "ok", []), result.stdout


def test_configs_with_no_configuration_exits_3():
    result = kinema("configs", "z1", "--target", 5, 0, 0.3, 1, 0, 0, 0, "--json")
    assert result.returncode == 3, result.stderr
    assert json.loads(result.stdout)["count"] == 0


@pytest.mark.parametrize("args", [
    ("solve", "no_such_robot", "--target", 0, 0, 0, 1, 0, 0, 0),
    ("solve", "ur10", "--link", "no_such_link", "--target", 0, 0, 0, 1, 0, 0, 0),
    ("fk", "z1", "--joints", "joint2=abc"),
    ("solve", "ur10", "--target", 0.5, 0, 0.5, 0, 0, 0, 0),
    ("solve", "ur10", "--target", "nan", 0, 0.5, 1, 0, 0, 0),
])
def test_bad_input_exits_2_with_one_line(args):
    result = kinema(*args)
    assert result.returncode == BAD_INPUT == 2
    assert one_line(result.stderr).startswith("kinema-nodes: error: ")
    assert result.stdout == ""


def test_negative_numbers_in_any_notation_are_values_not_options():
    target = ur10_reachable_pose()
    text = [f"{v:.17e}" for v in target]  # -7.9e-01 is what a script's printf("%e") gives
    assert any(t.startswith("-") for t in text)
    result = kinema("solve", "ur10", "--target", *text, "--solver", "numpy", "--json")
    assert result.returncode == 0, result.stderr
    refused = kinema("solve", "ur10", "--target", 0.5, "-inf", 0.5, 1, 0, 0, 0)
    assert one_line(refused.stderr) == "kinema-nodes: error: --target: the position 0.5 -inf 0.5 is not finite (NaN or inf)"


def test_an_internal_error_has_its_own_exit_code_not_3():
    assert exit_code_for(ZeroDivisionError("division by zero")) == INTERNAL_ERROR == 1
    assert exit_code_for(KinemaError("bad")) == BAD_INPUT
    assert len({INTERNAL_ERROR, BAD_INPUT, NOT_CONVERGED, 0}) == 4


def test_every_help_documents_the_exit_codes_and_each_subcommand_has_a_one_line_description():
    from kinema_nodes.cli.main import build_parser

    parser = build_parser()
    top = parser.format_help()
    for code in ("0  ran", "1  internal error", "2  bad input", "3  ran, but"):
        assert code in top
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():
        description = command.description
        assert description and len(description) < 120 and "\n" not in description, name
        assert "exit codes:" in command.format_help(), name


def test_the_readme_matches_help_link_is_optional_and_the_starts_differ():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Command line"):readme.index("## Scripting")]
    for command in ("fk", "solve", "bench", "configs", "bake"):
        line = next(line for line in section.splitlines() if line.startswith(f"kinema-nodes {command} "))
        assert "[--link LINK]" in line, line
    assert "--link LINK --" not in section.replace("[--link LINK]", "")
    help_solve = kinema("solve", "--help").stdout
    help_bake = kinema("bake", "--help").stdout
    assert "default: zero" in " ".join(help_solve.split())
    assert "default: the middle of each range" in " ".join(help_bake.split())
    assert "`solve` and `configs` start from\nzero" in section or "start from\nzero" in section
    assert "`bake` from the middle of each joint's range" in section
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |"):
        assert code in section


# ---- #12.10 quiet output -------------------------------------------------------------------------

DEMO_LINES = [
    r"baked 168 frames of arm7 in \d+\.\d\d s: 168 converged, worst \d+\.\d{4} mm / \d+\.\d{4}°",
    r"saved .*demo\.blend",
    r"no frames flagged",
    r"joints written to .*demo_joints\.csv",
    r"report picture .*demo_report\.png",
    r"rendered .*demo_frame\.png",
]


def test_demo_prints_its_own_lines_only_and_leaves_no_blend1(tmp_path):
    """Run twice into one folder: the second save replaces an existing .blend (where Blender
    would keep a .blend1) and renders again (where EGL and the render's 'Saved:' line appear)."""
    for _ in range(2):
        result = kinema("demo", "--out", tmp_path, "--solver", "numpy")
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        lines = result.stdout.splitlines()
        assert len(lines) == len(DEMO_LINES), result.stdout
        for line, pattern in zip(lines, DEMO_LINES):
            assert re.fullmatch(pattern, line), (line, pattern)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["demo.blend", "demo_frame.png", "demo_joints.csv", "demo_report.png", "demo_targets.csv"], names


def test_import_render_prints_its_own_lines_only_and_verbose_lets_blender_speak(tmp_path):
    out, picture = tmp_path / "z1.blend", tmp_path / "z1.png"
    result = kinema("import", "z1", "--out", out, "--render", picture)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert len(lines) == 3, result.stdout
    assert re.fullmatch(r"imported z1_description: 10 bones, \d+ mesh objects in \d+\.\d\d s", lines[0])
    assert lines[1] == f"saved {out}" and lines[2] == f"rendered {picture}"
    verbose = kinema("import", "z1", "--out", out, "--render", picture, "--verbose")
    assert verbose.returncode == 0
    assert verbose.stdout == result.stdout.replace(lines[0], verbose.stdout.splitlines()[0])
    assert verbose.stderr.strip(), "with --verbose, Blender's own lines (save, render) reach stderr"
    assert not list(tmp_path.glob("*.blend1"))


@pytest.mark.slow
@pytest.mark.jax
def test_pyroki_continuous_joint_warning_stays_off_stderr_unless_verbose(tmp_path):
    """arm6's last wrist joint is continuous with no limits: PyRoki logs a warning while it
    builds its robot, which happens on a cold solver cache."""
    target = ("--target", 0.4, 0.1, 0.3, 0, 1, 0, 0)
    quiet = kinema("solve", "arm6", *target, env={"KINEMA_CACHE_DIR": str(tmp_path / "a")})
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    verbose = kinema("--verbose", "solve", "arm6", *target, env={"KINEMA_CACHE_DIR": str(tmp_path / "b")})
    assert "Continuous joint 'wrist_3_joint'" in verbose.stderr
    assert verbose.stdout == quiet.stdout.replace(re.search(r"\d+\.\d\d ms", quiet.stdout).group(),
                                                  re.search(r"\d+\.\d\d ms", verbose.stdout).group())


def python_without_bpy() -> str | None:
    for candidate in ("/usr/bin/python3", shutil.which("python3.11"), shutil.which("python3")):
        if not candidate or not os.path.exists(candidate):
            continue
        probe = subprocess.run([candidate, "-c", "import importlib.util, sys, tomllib; "
                                "sys.exit(importlib.util.find_spec('bpy') is not None)"], capture_output=True, check=False)
        if probe.returncode == 0:
            return candidate
    return None


def test_build_extension_refuses_a_python_without_bpy_before_downloading(tmp_path):
    python = python_without_bpy()
    if python is None:
        pytest.skip("no Python 3.11+ without bpy on this machine")
    script = Path(__file__).resolve().parents[2] / "scripts" / "build_extension.py"
    result = subprocess.run([python, str(script), "--current-line", "--platform", "linux-x64", "--dist", str(tmp_path / "dist")],
                            capture_output=True, text=True, timeout=60, check=False,
                            env={**os.environ, "PIP_NO_INDEX": "1", "PIP_CACHE_DIR": str(tmp_path / "pip")})
    assert result.returncode != 0
    assert "downloading" not in result.stdout + result.stderr
    assert "bpy module is not installed" in one_line(result.stderr)
    assert ".venv/bin/python scripts/build_extension.py" in result.stderr
    assert not (tmp_path / "dist").exists() and not (tmp_path / "pip").exists()


# ---- #12.11 warnings -----------------------------------------------------------------------------

def test_a_non_unit_quaternion_is_normalised_with_one_warning_and_solves_the_same():
    target = ur10_reachable_pose()
    doubled = [*target[:3], *(2.0 * v for v in target[3:])]
    unit = kinema("solve", "ur10", "--target", *target, "--solver", "numpy", "--json")
    scaled = kinema("solve", "ur10", "--target", *doubled, "--solver", "numpy", "--json")
    assert unit.stderr == ""
    warning = one_line(scaled.stderr)
    assert warning.startswith("kinema-nodes: warning: --target: the quaternion had length 2, not 1; normalised")
    assert scaled.returncode == unit.returncode == 0
    a, b = json.loads(unit.stdout)["joints"], json.loads(scaled.stdout)["joints"]
    assert max(abs(a[k] - b[k]) for k in a) < 1e-9


def test_a_quaternion_within_1e_6_of_unit_gives_no_warning_and_a_huge_one_does_not_overflow():
    target = ur10_reachable_pose()
    nearly = [*target[:3], *(v * (1 + 4e-7) for v in target[3:])]
    assert kinema("solve", "ur10", "--target", *nearly, "--solver", "numpy").stderr == ""
    huge = [*target[:3], *(v * 1e200 for v in target[3:])]
    result = kinema("solve", "ur10", "--target", *huge, "--solver", "numpy", "--json")
    assert result.returncode == 0, result.stderr
    assert "normalised" in one_line(result.stderr)
    assert json.loads(result.stdout)["converged"] is True


def test_bake_rows_out_of_frame_order_and_unnormalised_quaternions_warn_once_each(tmp_path, capsys):
    reach = ur10_reachable_pose()
    doubled = [*reach[:3], *(3.0 * v for v in reach[3:])]
    rows = [",".join(map(str, [5, *reach])), ",".join(map(str, [1, *doubled])), ",".join(map(str, [9, *reach]))]
    targets = write_targets(tmp_path / "t.csv", rows)
    track = read_targets_csv(targets)
    assert track.frames.tolist() == [1, 5, 9]
    assert track.line_numbers == [3, 2, 4]
    assert np.allclose(np.linalg.norm(track.wxyz, axis=1), 1.0, atol=1e-12)
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == [
        f"kinema-nodes: warning: targets '{targets}': quaternion not unit length on line 3 (length 3); normalised",
        f"kinema-nodes: warning: targets '{targets}': rows not in frame order (line 3 has frame 1 after frame 5); sorted by frame",
    ]
    result = kinema("bake", "ur10", "--targets", targets, "--out", tmp_path / "s.blend", "--solver", "numpy")
    assert result.stderr.splitlines() == warnings


def test_fk_warns_and_clamps_values_outside_the_limits_and_matches_yourdfpy(tmp_path):
    result = kinema("fk", "z1", "--joints", "joint2=5", "joint3=-1", "--json")
    assert result.returncode == 0
    assert one_line(result.stderr) == ("kinema-nodes: warning: joint values outside the joint limits, clamped: "
                                       "joint2=5 rad -> 2.96706 rad (limits 0 rad .. 2.96706 rad)")
    payload = json.loads(result.stdout)
    assert payload["clamped"] == ["joint2"]
    assert payload["joints"]["joint2"] == pytest.approx(math.radians(170), abs=1e-5)
    pose = yourdfpy_pose(example_robot("z1"), payload["link"], payload["joints"])
    assert np.allclose(pose, np.array(payload["matrix"]), atol=1e-9)


def test_fk_without_values_uses_the_same_in_limit_pose_as_import():
    """robosuite's pybullet Panda: panda_joint4's range (-3.07 .. -0.07 rad) leaves out zero."""
    spec = importlib.util.find_spec("robosuite")
    assert spec is not None, "robosuite is a test dependency"
    urdf = Path(next(iter(spec.submodule_search_locations))) / "models/assets/bullet_data/panda_description/urdf/panda_arm_hand.urdf"
    result = kinema("fk", urdf, "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    payload = json.loads(result.stdout)
    assert payload["joints"]["panda_joint4"] == pytest.approx(-0.0698, abs=1e-4)
    assert all(v == 0.0 for k, v in payload["joints"].items() if k != "panda_joint4")
    pose = yourdfpy_pose(urdf, payload["link"], payload["joints"])
    assert np.allclose(pose, np.array(payload["matrix"]), atol=1e-9)
    from kinema_nodes.core.model.loading import load_robot

    robot = load_robot(urdf, check_meshes=False)
    assert np.array_equal(robot.configuration({}), np.array(list(payload["joints"].values())))  # import's default


# ---- #12.12 / #19 CSV errors name the place --------------------------------------------------------

GOOD = "1,0.5,0,0.5,0,1,0,0"


@pytest.mark.parametrize("rows, expected", [
    ([GOOD, "2,0.5,abc,0.5,0,1,0,0"], "line 3, column y: 'abc' is not a number"),
    ([GOOD, "2,0.5,0,nan,0,1,0,0"], "line 3, column z: 'nan' is not a finite number"),
    ([GOOD, "2,0.5,0,0.5,inf,1,0,0"], "line 3, column qw: 'inf' is not a finite number"),
    ([GOOD, "2,0.5,0,0.5,0,-inf,0,0"], "line 3, column qx: '-inf' is not a finite number"),
    ([GOOD, "2.5,0.5,0,0.5,0,1,0,0"], "line 3, column frame: '2.5' is not a whole number"),
    ([GOOD, "2,0.5,0,0.5"], "line 3, column qw: missing (the row has 4 fields)"),
    ([GOOD, "1048575,0.5,0,0.5,0,1,0,0"], "line 3, column frame: 1048575 is outside Blender's frame range -1,048,574 .. 1,048,574"),
    ([GOOD, "-2000000,0.5,0,0.5,0,1,0,0"], "line 3, column frame: -2000000 is outside Blender's frame range"),
    ([GOOD, "2,0.5,0,0.5,0,0,0,0"], "line 3, columns qw,qx,qy,qz: the quaternion 0,0,0,0 has zero length"),
    ([GOOD, "3,0.5,0,0.5,0,1,0,0", "1,0.5,0,0.5,0,1,0,0"], "line 4, column frame: frame 1 appears twice (also on line 2)"),
    ([GOOD, "200001,0.5,0,0.5,0,1,0,0"], "frames 1 .. 200001 span 200,001 frames; a bake spans at most 100,000"),
    ([GOOD, "2,0.5,0,0.5,0,1,0," + "9" * 300], "line 3, column qz: a field of 300 characters (at most 256)"),
    ([GOOD, '2,0.5,0,0.5,0,1,0,0,"x' + "\n" * 3], "line 6: unexpected end of data"),
    ([GOOD, '2,0.5,"0"x,0.5,0,1,0,0'], "line 3: ',' expected after '\"'"),
])
def test_a_csv_error_names_the_line_the_column_and_the_value(tmp_path, rows, expected):
    path = write_targets(tmp_path / "t.csv", rows)
    with pytest.raises(KinemaError) as caught:
        read_targets_csv(path)
    message = str(caught.value)
    assert message.startswith(f"targets '{path}'"), message
    assert expected in message, message
    assert "\n" not in message


def test_a_csv_header_without_a_column_is_named(tmp_path):
    path = write_targets(tmp_path / "t.csv", [GOOD], header="frame,x,y,z,qw,qx,qy")
    with pytest.raises(KinemaError, match=r"line 1 lacks column\(s\) qz"):
        read_targets_csv(path)


def test_a_utf8_bom_is_accepted_and_another_encoding_is_refused_with_its_line(tmp_path):
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + f"{HEADER}\n{GOOD}\n".encode())
    assert read_targets_csv(bom).frames.tolist() == [1]
    latin = tmp_path / "latin.csv"
    latin.write_bytes(f"{HEADER},link\n{GOOD},base\n2,0.5,0,0.5,0,1,0,0,caf".encode() + "é\n".encode("latin-1"))
    with pytest.raises(KinemaError) as caught:
        read_targets_csv(latin)
    assert str(caught.value) == f"targets '{latin}' line 3, column link: byte 0xe9 is not UTF-8 (save the file as UTF-8)"
    utf16 = tmp_path / "utf16.csv"
    utf16.write_bytes(f"{HEADER}\n{GOOD}\n".encode("utf-16"))
    with pytest.raises(KinemaError, match=r"line 1, column #1: byte 0xff is not UTF-8"):
        read_targets_csv(utf16)


def test_csv_size_cap_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.csv"
    with path.open("wb") as handle:
        handle.write(f"{HEADER}\n".encode())
        handle.truncate(csv_files.MAX_CSV_BYTES + 1)  # sparse: no 64 MiB written
    with pytest.raises(KinemaError, match=r"is 67\.1 MB; at most 64 MiB is read"):
        read_targets_csv(path)


@pytest.mark.slow
def test_csv_row_cap(tmp_path):
    path = tmp_path / "rows.csv"
    body = "\n".join(f"{i},0.5,0,0.5,0,1,0,0" for i in range(csv_files.MAX_CSV_ROWS + 1))
    path.write_text(f"{HEADER}\n{body}\n")
    with pytest.raises(KinemaError, match=r"line 1000002: more than 1,000,000 rows"):
        read_targets_csv(path)


def test_a_csv_that_is_not_a_regular_file_is_refused(tmp_path):
    with pytest.raises(KinemaError, match="is not a regular file"):
        read_targets_csv("/dev/zero")
    with pytest.raises(KinemaError, match="is not a regular file"):
        read_targets_csv(tmp_path)


def test_bake_refuses_a_bad_csv_with_one_line_and_exit_2_before_blender(tmp_path):
    path = write_targets(tmp_path / "t.csv", [GOOD, "2,0.5,0,0.5,0,1,0,zero"])
    out = tmp_path / "never.blend"
    result = kinema("bake", "ur10", "--targets", path, "--out", out)
    assert result.returncode == 2
    assert one_line(result.stderr) == f"kinema-nodes: error: targets '{path}' line 3, column qz: 'zero' is not a number"
    assert not out.exists()


def test_bake_names_the_line_of_an_unknown_link(tmp_path):
    path = write_targets(tmp_path / "t.csv", [f"{GOOD},tool0", "2,0.5,0,0.5,0,1,0,0,wrist_9_link"], header=f"{HEADER},link")
    result = kinema("bake", "ur10", "--targets", path, "--out", tmp_path / "never.blend")
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(f"kinema-nodes: error: targets '{path}' line 3, column link: unknown link 'wrist_9_link'")


@pytest.mark.parametrize("budget, words", [
    ("nan", "--budget-ms must be a finite number, got nan"),
    ("inf", "--budget-ms must be a finite number, got inf"),
    ("1e9", "--budget-ms 1e+09 is outside 0.001 .. 60000"),
    ("-5", "--budget-ms -5 is outside 0.001 .. 60000"),
])
def test_budget_ms_is_capped_and_must_be_finite(budget, words):
    result = kinema("solve", "ur10", "--target", *ur10_reachable_pose(), "--solver", "numpy", "--budget-ms", budget)
    assert result.returncode == 2
    assert one_line(result.stderr) == f"kinema-nodes: error: {words}"


# ---- #19.10 names a spreadsheet or a terminal cannot be fooled by ------------------------------------

FORMULA_NAMES = ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-cmd", "@SUM(A1)"]


def test_formula_like_joint_names_are_written_quoted_and_prefixed(tmp_path):
    names = [*FORMULA_NAMES, "plain_joint", "comma,joint"]
    path = tmp_path / "joints.csv"
    write_joints_csv(path, names, np.array([1, 2]), np.array([[0.1] * 6, [-0.2] * 6]))
    raw_header = path.read_text().splitlines()[0]
    for name in FORMULA_NAMES:
        assert '"\'' + name.replace('"', '""') + '"' in raw_header  # quoted, with the apostrophe inside the quotes
    header = next(csv.reader(io.StringIO(path.read_text())))
    assert header == ["frame", *("'" + n for n in FORMULA_NAMES), "plain_joint", "comma,joint"]
    assert [row[1] for row in csv.reader(io.StringIO(path.read_text()))][1:] == ["0.1", "-0.2"]  # numbers stay numbers


def test_bake_writes_formula_like_joint_names_safely_and_reads_prefixed_links_back(tmp_path):
    rename = {"shoulder_pan_joint": "=2+5", "elbow_joint": "@cmd", "tool0": "-tool"}
    urdf = ur10_without_meshes(tmp_path, rename)
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    robot = load_robot(urdf, check_meshes=False)
    pose = link_pose(robot, np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.4]), "-tool")
    row = ",".join(map(str, [*pose[:3, 3], *matrix_to_quaternion(pose)]))
    targets = write_targets(tmp_path / "t.csv", [f"1,{row},'-tool", f"4,{row},'-tool"], header=f"{HEADER},link")
    joints_out = tmp_path / "joints.csv"
    result = kinema("bake", urdf, "--targets", targets, "--out", tmp_path / "s.blend", "--joints-out", joints_out,
                    "--solver", "numpy", "--start", "=2+5=0.3", "shoulder_lift_joint=-1.2", "@cmd=1.4", "--json")
    assert result.returncode in (0, 3), result.stderr
    assert json.loads(result.stdout)["converged"] == 4
    header = next(csv.reader(io.StringIO(joints_out.read_text())))
    assert header[:4] == ["frame", "'=2+5", "shoulder_lift_joint", "'@cmd"]
    assert joints_out.read_text().startswith("frame,\"'=2+5\",shoulder_lift_joint,\"'@cmd\",")


def test_bidi_overrides_and_newlines_in_urdf_names_are_escaped_on_the_terminal(tmp_path):
    """XML 1.0 cannot carry an escape character, but it can carry a right-to-left override and
    a newline (&#10;) in a name."""
    urdf = ur10_without_meshes(tmp_path, {"elbow_joint": "elbow\u202etxt.exe", "wrist_1_joint": "wrist\nsecond"})
    result = kinema("info", urdf)
    assert result.returncode == 0, result.stderr
    assert "\u202e" not in result.stdout
    assert "elbow\\u202etxt.exe" in result.stdout
    assert any(line.startswith("  wrist\\x0asecond ") for line in result.stdout.splitlines()), result.stdout
    assert not any(line.startswith("second") for line in result.stdout.splitlines())
    assert json.loads(kinema("info", urdf, "--json").stdout)["actuated_joints"][3] == "wrist\nsecond"  # JSON keeps the name


def test_a_newline_or_an_escape_sequence_in_a_name_never_makes_an_error_two_lines_or_colours():
    result = kinema("fk", "ur10", "--link", "tool0\nInjected: second line\u202e\x1b[31m")
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "unknown link 'tool0\\x0aInjected: second line\\u202e\\x1b[31m'" in line


def test_printable_escapes_what_a_terminal_would_act_on():
    assert printable("a\x1b[2Jb\u202ec\u2066d\x07\n") == "a\\x1b[2Jb\\u202ec\\u2066d\\x07\\x0a"
    assert printable("one\ntwo", newlines=False) == "one\ntwo"
    assert printable("grüße ° ✕") == "grüße ° ✕"


# ---- #12.13 the report picture -----------------------------------------------------------------------

def test_report_frame_ticks_are_even_round_numbers():
    from kinema_nodes.cli.report import frame_ticks

    assert frame_ticks(1, 168) == [1, 20, 40, 60, 80, 100, 120, 140, 160]
    assert frame_ticks(0, 1000) == list(range(0, 1001, 100))
    assert frame_ticks(-50, 50) == list(range(-50, 51, 10))
    for first, last in ((1, 10), (7, 333), (100, 20_000), (5, 5)):
        ticks = frame_ticks(first, last)
        inner = [t for t in ticks if t not in (first, last)]
        steps = set(np.diff(inner)) if len(inner) > 1 else set()
        assert len(steps) <= 1 and all(str(s).strip("0") in ("1", "2", "5") for s in steps), (first, last, ticks)
        assert first <= min(ticks) and max(ticks) <= last and len(ticks) <= 12


def test_report_marks_too_fast_only_on_the_joints_that_were_too_fast(tmp_path):
    """The UR10's base swings 1.2 rad between two frames while the rest of the arm holds: the
    bake flags that frame too fast for shoulder_pan_joint, and the picture's orange band sits on
    the strips of the joints the JSON names, and on no other strip."""
    from PIL import Image

    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    robot = load_robot("ur10", check_meshes=False)
    start = np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.4])
    rows = []
    for frame in range(1, 13):
        q = start + np.array([1.2 if frame >= 6 else 0.0, 0, 0, 0, 0, 0])
        pose = link_pose(robot, q, "tool0")
        rows.append(",".join(map(str, [frame, *pose[:3, 3], *matrix_to_quaternion(pose)])))
    targets = write_targets(tmp_path / "t.csv", rows)
    picture = tmp_path / "report.png"
    result = kinema("bake", "ur10", "--targets", targets, "--out", tmp_path / "s.blend", "--report", picture,
                    "--solver", "numpy", "--start", *(f"{n}={v}" for n, v in zip(robot.actuated_joint_names, start)), "--json")
    payload = json.loads(result.stdout)
    assert result.returncode == 3 and payload["status"] == "flagged", result.stdout
    too_fast = {int(f): names for f, names in payload["checks"]["too_fast"].items()}
    assert "shoulder_pan_joint" in too_fast[6]
    assert set(too_fast[6]) != set(payload["keyed_joints"]), "the case needs a joint that was not too fast"
    whole_pose = set(payload["checks"]["not_converged"]) | set(payload["checks"]["flips"])
    image = np.asarray(Image.open(picture).convert("RGB")).astype(int)
    # The picture's layout (cli/report.py): strips of 78 px from y=58, plot from x=150 to width-56.
    left, plot_right, top, strip = 150, image.shape[1] - 56, 58, 78
    first, last = 1, 12

    def orange_in_strip(row: int, frame: int) -> bool:
        x = int(round(left + (plot_right - left) * (frame - first) / (last - first)))
        column = image[top + row * strip + 10: top + (row + 1) * strip - 10, x]
        # TOO_FAST_COLOUR over the strip's background: red high, blue well below red
        return bool(np.any((column[:, 0] > 225) & (column[:, 2] < 175) & (column[:, 1] > 170)))

    checked = 0
    for frame, names in too_fast.items():
        if frame in whole_pose:
            continue
        for row, joint in enumerate(payload["keyed_joints"]):
            assert orange_in_strip(row, frame) == (joint in names), (frame, joint, names)
            checked += 1
    assert checked >= 6
    quiet_frame = 3  # nothing moves: no band on any strip
    assert not any(orange_in_strip(row, quiet_frame) for row in range(len(payload["keyed_joints"])))


def test_bench_says_what_success_at_1e_5_means():
    result = kinema("bench", "z1", "--n", 5, "--solver", "numpy")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("success "))
    assert "(1e-5: within limits, position error <= 1e-5 m and rotation error <= 1e-5 rad)" in line
    assert "(practical: <= 1 mm and <= 0.01 rad)" in line


def test_configs_rows_carry_joint_names_and_units():
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.model.loading import load_robot
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    robot = load_robot("ur10", check_meshes=False)
    pose = link_pose(robot, np.array([0.3, -1.2, 1.4, -1.6, -1.5, 0.4]), "tool0")
    result = kinema("configs", "ur10", "--target", *pose[:3, 3], *matrix_to_quaternion(pose))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = lines[1].split()
    assert header[:2] == ["shoulder_pan_joint", "(deg)"] and "wrist_3_joint" in header and header[-2:] == ["position", "error"]
    rows = [line for line in lines[2:] if re.match(r"\s+\d+:", line)]
    assert rows and all(line.rstrip().endswith(("mm", "<- current")) for line in rows)
    assert all(len(line.split(":")[1].split()) >= 6 + 2 for line in rows)  # six joints, then the error and its unit


def test_import_says_it_clamped_in_one_warning_line(tmp_path):
    result = kinema("import", "z1", "--out", tmp_path / "z1.blend", "--joints", "joint2=5", "--json")
    assert result.returncode == 0, result.stderr
    assert one_line(result.stderr) == ("kinema-nodes: warning: joint values outside the joint limits, clamped: "
                                       "joint2=5 rad -> 2.96706 rad (limits 0 rad .. 2.96706 rad)")
    assert json.loads(result.stdout)["clamped"] == ["joint2"]


def test_kinemas_own_notes_still_reach_stderr_while_blender_is_kept_quiet(tmp_path):
    """A preset file that cannot be read is skipped with a warning naming it (#19.2): the quiet
    redirect drops Blender's lines, not Kinema's own."""
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "broken.json").write_bytes(b"\xff\xfe{not json")
    targets = write_targets(tmp_path / "t.csv", [GOOD])
    result = kinema("bake", "z1", "--targets", targets, "--out", tmp_path / "p.blend", "--preset", "no such preset",
                    "--solver", "numpy", env={"KINEMA_NODES_PRESET_DIR": str(presets)})
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith(f"kinema-nodes: warning: skipped preset {presets / 'broken.json'}: ")
    assert lines[1].startswith("kinema-nodes: error: no preset named 'no such preset'")
