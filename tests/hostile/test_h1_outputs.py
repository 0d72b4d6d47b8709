"""Class 1: outputs are never half-written.

Every file Kinema writes goes to a temporary in the same folder, is fsynced and then moved
over the target. On a full disk the write fails with one line and the old file is untouched;
no temporary, `.blend1` or `@` file is left; an output that cannot be written is refused
before the long work starts.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.files import OutputError, atomic_write, check_output_path, write_bytes, write_text

from corpus import Untouched, assert_cli_refusal, assert_one_line, fill_disk, run_cli

TARGETS = "frame,x,y,z,qw,qx,qy,qz\n1,0.4,0.1,0.4,0,1,0,0\n2,0.4,0.12,0.4,0,1,0,0\n3,0.4,0.14,0.4,0,1,0,0\n"


# ---- the writer itself ----------------------------------------------------------------------

def test_write_replaces_whole_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    write_text(target, "new contents")
    assert target.read_text() == "new contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("failure", [RuntimeError("writer crashed"), KeyboardInterrupt(), KinemaError("bad value")])
def test_failure_mid_write_keeps_old_file(tmp_path, failure):
    target = tmp_path / "out.txt"
    target.write_text("old")
    kept = Untouched(tmp_path)
    with pytest.raises(type(failure)):
        with atomic_write(target) as handle:
            handle.write("half of the new")
            raise failure
    kept.check()


def test_disk_full_text_write_is_one_line_and_old_file_kept(full_disk):
    target = full_disk / "joints.csv"
    target.write_text("frame,j1\n1,0.5\n")
    filler = fill_disk(full_disk)
    kept = Untouched(full_disk, ignore=(filler.name,))
    with pytest.raises(OutputError) as caught:
        write_text(target, "frame,j1\n" + "1,0.5\n" * 100_000)
    assert_one_line(caught.value, "joints.csv", "no space left", "unchanged")
    kept.check()


def test_disk_full_bytes_write_is_refused(full_disk):
    fill_disk(full_disk)
    with pytest.raises(OutputError) as caught:
        write_bytes(full_disk / "new.bin", b"x" * 200_000)
    assert_one_line(caught.value, "new.bin")
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler.bin"]


def test_disk_full_report_png_is_refused(full_disk):
    from PIL import Image

    from kinema_nodes.core.files import write_with

    target = full_disk / "report.png"
    Image.new("RGB", (8, 8), (1, 2, 3)).save(target)
    filler = fill_disk(full_disk)
    kept = Untouched(full_disk, ignore=(filler.name,))
    noisy = Image.frombytes("RGB", (512, 512), os.urandom(512 * 512 * 3))
    with pytest.raises(OutputError) as caught:
        write_with(target, lambda temporary: noisy.save(temporary, format="PNG"), "--report")
    assert_one_line(caught.value, "report.png")
    kept.check()


def test_disk_full_preset_save_keeps_old_preset(full_disk):
    from kinema_nodes.core.presets import load_preset, save_preset

    shipped = Path(__file__).resolve().parents[2] / "kinema_nodes" / "presets" / "dual_arm.json"
    target = full_disk / "mine.json"
    shutil.copy(shipped, target)
    preset = load_preset(target)
    bigger = type(preset)(preset.name, "x" * 400_000, preset.nodes, preset.links, None, preset.requires)
    filler = fill_disk(full_disk)
    kept = Untouched(full_disk, ignore=(filler.name,))
    with pytest.raises(KinemaError) as caught:
        save_preset(bigger, target)
    assert_one_line(caught.value, "mine.json")
    kept.check()
    assert load_preset(target).name == preset.name


def test_disk_full_cache_entry_is_skipped_cleanly(full_disk):
    from kinema_nodes.core.solve._cache import read_entry, write_entry

    fill_disk(full_disk)
    path = full_disk / "exports" / "entry.jaxexport"
    assert write_entry(path, b"MAGIC\n", b"{}\n", os.urandom(300_000)) is False
    assert read_entry(path, b"MAGIC\n", b"{}\n") is None
    assert not path.exists() and not any(p.name.startswith(".kinema-tmp") for p in full_disk.rglob("*"))


# ---- checked before the work ----------------------------------------------------------------

def test_output_folder_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "not_a_folder").write_text("x")
    with pytest.raises(OutputError) as caught:
        check_output_path(tmp_path / "not_a_folder" / "out.blend", "--out")
    assert_one_line(caught.value, "--out", "not_a_folder")


def test_output_that_is_a_folder_is_refused(tmp_path):
    (tmp_path / "out.blend").mkdir()
    with pytest.raises(OutputError) as caught:
        check_output_path(tmp_path / "out.blend", "--out")
    assert_one_line(caught.value, "is a folder")


def test_output_that_is_a_device_is_refused():
    with pytest.raises(OutputError) as caught:
        check_output_path("/dev/null", "--joints-out")
    assert_one_line(caught.value, "not a regular file")


def test_output_on_read_only_mount_is_refused(read_only_folder):
    with pytest.raises(OutputError) as caught:
        check_output_path(read_only_folder / "out.blend", "--out")
    assert_one_line(caught.value, "not writable", "read-only")


def test_missing_output_folder_is_made(tmp_path):
    path = check_output_path(tmp_path / "a" / "b" / "out.csv", "--joints-out")
    assert path.parent.is_dir() and not any(path.parent.iterdir())


# ---- through the CLI ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def good_blend(tmp_path_factory):
    """A real .blend from `import arm6`, made once."""
    folder = tmp_path_factory.mktemp("blend")
    result = run_cli("import", "arm6", "--out", folder / "arm6.blend")
    assert result.returncode == 0, result.stderr
    return folder / "arm6.blend"


def test_import_twice_leaves_no_blend1_or_at_files(tmp_path, good_blend):
    out = tmp_path / "robot.blend"
    for _ in range(2):
        result = run_cli("import", "arm6", "--out", out)
        assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["robot.blend"]


def test_saved_blend_opens_in_blender(good_blend):
    from kinema_nodes.cli.headless import blend_is_whole

    assert blend_is_whole(good_blend)
    script = (f"import bpy, os; bpy.ops.wm.open_mainfile(filepath={str(good_blend)!r}); "
              "print('ARMATURES', sum(o.type == 'ARMATURE' for o in bpy.data.objects)); os._exit(0)")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "ARMATURES 1" in done.stdout, done.stderr[-800:]


def test_truncated_blend_is_not_whole(tmp_path, good_blend):
    from kinema_nodes.cli.headless import blend_is_whole

    data = good_blend.read_bytes()
    for cut in (len(data) // 2, len(data) - 16):
        broken = tmp_path / f"cut{cut}.blend"
        broken.write_bytes(data[:cut])
        assert not blend_is_whole(broken)


def test_import_on_full_disk_exits_2_and_keeps_old_blend(full_disk, good_blend):
    target = full_disk / "robot.blend"
    shutil.copy(good_blend, target)
    filler = fill_disk(full_disk)
    kept = Untouched(full_disk, ignore=(filler.name,))
    result = run_cli("import", "arm6", "--out", target)
    assert_cli_refusal(result, "robot.blend")
    kept.check()


def test_import_into_read_only_folder_is_refused_before_blender(read_only_folder):
    result = run_cli("import", "arm6", "--out", read_only_folder / "robot.blend")
    assert_cli_refusal(result, "not writable")
    assert not any(read_only_folder.iterdir())


@pytest.mark.parametrize("option, make_bad", [
    ("--joints-out", lambda d: (d / "csv_is_a_folder.csv").mkdir() or d / "csv_is_a_folder.csv"),
    ("--report", lambda d: (d / "file").write_text("x") or d / "file" / "report.png"),
    ("--out", lambda d: (d / "blend_is_a_folder.blend").mkdir() or d / "blend_is_a_folder.blend"),
])
def test_bake_refuses_unwritable_output_before_baking(tmp_path, option, make_bad):
    targets = tmp_path / "targets.csv"
    targets.write_text(TARGETS)
    bad = make_bad(tmp_path)
    outputs = {"--out": tmp_path / "out.blend", "--joints-out": tmp_path / "joints.csv", "--report": tmp_path / "report.png"}
    outputs[option] = bad
    kept = Untouched(tmp_path)
    args = ["bake", "arm6", "--targets", targets, "--solver", "numpy"]
    for name, value in outputs.items():
        args += [name, value]
    result = run_cli(*args)
    assert_cli_refusal(result, option)
    kept.check()  # in particular: no out.blend was saved before the refusal


def test_bake_on_full_disk_exits_nonzero_and_keeps_old_outputs(full_disk, good_blend):
    targets = full_disk / "targets.csv"
    targets.write_text(TARGETS)
    out = full_disk / "bake.blend"
    shutil.copy(good_blend, out)
    joints = full_disk / "joints.csv"
    joints.write_text("frame,old\n1,0\n")
    filler = fill_disk(full_disk)
    kept = Untouched(full_disk, ignore=(filler.name,))
    result = run_cli("bake", "arm6", "--targets", targets, "--solver", "numpy", "--out", out, "--joints-out", joints)
    assert_cli_refusal(result)
    kept.check()


def test_joints_csv_write_is_atomic(full_disk):
    """The joints CSV goes through the same atomic writer (the `cli` helper's csv_files)."""
    import numpy as np

    from kinema_nodes.cli.csv_files import write_joints_csv

    target = full_disk / "joints.csv"
    target.write_text("frame,j\n1,0\n")
    filler = fill_disk(full_disk)
    kept = Untouched(full_disk, ignore=(filler.name,))
    with pytest.raises(KinemaError) as caught:
        write_joints_csv(target, ["j"], np.arange(50_000), np.zeros((50_000, 1)))
    assert_one_line(caught.value, "joints.csv")
    kept.check()


def test_preset_json_written_atomically_and_readable(tmp_path):
    from kinema_nodes.core.presets import load_preset, save_preset

    shipped = Path(__file__).resolve().parents[2] / "kinema_nodes" / "presets" / "reach_with_the_tool.json"
    preset = load_preset(shipped)
    path = save_preset(preset, tmp_path / "copy.json")
    assert json.loads(path.read_text())["name"] == preset.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.json"]


def test_new_output_gets_ordinary_mode_and_old_mode_is_kept(tmp_path):
    fresh = write_text(tmp_path / "fresh.csv", "x")
    assert os.stat(fresh).st_mode & 0o777 == 0o666 & ~_umask()
    kept = tmp_path / "kept.csv"
    kept.write_text("old")
    os.chmod(kept, 0o640)
    write_text(kept, "new")
    assert os.stat(kept).st_mode & 0o777 == 0o640


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("command", ["import", "configs"])
def test_render_to_a_folder_is_refused_before_the_work(tmp_path, command):
    (tmp_path / "picture.png").mkdir()
    if command == "import":
        args = ["import", "arm6", "--out", tmp_path / "robot.blend", "--render", tmp_path / "picture.png"]
    else:
        args = ["configs", "arm6", "--target", "0.4", "0.1", "0.4", "0", "1", "0", "0", "--render", tmp_path / "picture.png"]
    kept = Untouched(tmp_path)
    assert_cli_refusal(run_cli(*args), "--render", "is a folder")
    kept.check()


def test_render_picture_is_written_whole(tmp_path):
    result = run_cli("import", "arm6", "--out", tmp_path / "robot.blend", "--render", tmp_path / "robot.png", "--resolution", "64x48")
    assert result.returncode == 0, result.stderr[-800:]
    from PIL import Image

    with Image.open(tmp_path / "robot.png") as picture:
        assert picture.size == (64, 48)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["robot.blend", "robot.png"]
