"""Class 18 (issue #32, item 9): work caps are applied before the work.

- presets: over `MAX_PRESET_NODES` nodes, `MAX_PRESET_LINKS` links or `MAX_PRESET_ROWS` key rows,
  refused before any node is looked at;
- obstacle files: over `MAX_MESH_OBSTACLES` mesh obstacles refused before any mesh is read (the
  mesh itself is a file that would be refused if it were read: the count comes first); each
  distinct mesh is read once, and `MAX_OBSTACLE_TRIANGLES` in all is checked before any fit;
- reach: `--seeds`, `--orientations`, and the pose cap (`MAX_POSES`, and `MAX_MAP_BYTES` of
  map: a pose count within the cell cap but beyond memory) before anything is allocated;
- MJCF height fields (and textures): nrow x ncol from the attributes or the file's header, before
  MuJoCo allocates them; through `info`, import and the export's `--model`;
- an export of a key far outside the frame range: class 16 (`test_h16_absurd_values.py`).

Every case runs under a time limit and a memory cap: API cases in a worker thread with the
process's address space capped at its current size plus `HEADROOM` (restored after), CLI cases
in a subprocess with `RLIMIT_AS` set. Each refusal is one line (exit 2 on the CLI), and nothing
is left half-made.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core.errors import KinemaError
from kinema_nodes.core.presets import MAX_PRESET_LINKS, MAX_PRESET_NODES, MAX_PRESET_ROWS, PresetError, load_preset

from corpus import GOOD_STL, REPO, assert_cli_refusal, assert_one_line

PRESETS = REPO / "kinema_nodes" / "presets"
LIMIT_S = 60
HEADROOM = 1536 * 1024 ** 2  # what a case may allocate beyond the process's size before it
CLI_MEMORY = 3 * 1024 ** 3


def _address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def _memory_cap(extra: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def capped(call, what: str = "the case", limit: float = LIMIT_S, extra: int = HEADROOM):
    """(result, error) of `call()` in a worker thread, under a time limit and the memory cap; a
    hang or a `MemoryError` fails the test (a cap must come before the work)."""
    done: dict = {}

    def work():
        try:
            done["result"] = call()
        except BaseException as error:  # noqa: BLE001 - the test judges what came out
            done["error"] = error

    with _memory_cap(extra):
        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        worker.join(limit)
    assert not worker.is_alive(), f"{what} still running after {limit} s"
    assert not isinstance(done.get("error"), MemoryError), f"{what} ran out of memory: the cap came after the work"
    return done.get("result"), done.get("error")


def refused(call, error_type, *fragments, what: str = "the case") -> str:
    _, error = capped(call, what)
    assert isinstance(error, error_type), f"expected {error_type.__name__}, got {error!r}"
    return assert_one_line(error, *fragments)


#: The child caps its own address space before Kinema is imported (no `preexec_fn`: forking a
#: process that holds JAX's threads to run Python in the child can deadlock).
CAPPED_MAIN = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap})); "
               "sys.argv[0] = 'kinema-nodes'; runpy.run_module('kinema_nodes', run_name='__main__', alter_sys=True)")


def run_capped_cli(*args, timeout: float = LIMIT_S, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`kinema-nodes ARGS` in a fresh process under a time limit and an address-space cap."""
    environment = dict(os.environ)
    environment.setdefault("KINEMA_CACHE_DIR", tempfile.mkdtemp(prefix="kinema-hostile-cache-"))
    environment.pop("KINEMA_DEBUG", None)
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", CAPPED_MAIN.format(cap=CLI_MEMORY), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=environment, cwd=cwd or REPO, stdin=subprocess.DEVNULL)


# ---- presets ---------------------------------------------------------------------------------------------


def _preset(tmp_path: Path, nodes: int = 0, links: int = 0, key_rows: int = 0, range_rows: int = 0) -> Path:
    data = json.loads((PRESETS / "hand_off_between_two_links.json").read_text())
    data = copy.deepcopy(data)
    data["nodes"] += [{"name": f"n{i}", "kind": "ik_target"} for i in range(nodes)]
    data["links"] = data.get("links", []) + [["Robot", "Robot", f"n{i}", "Robot"] for i in range(links)]
    lead = next(n for n in data["nodes"] if n["name"] == "Lead")
    if key_rows:
        lead["keys"] = {"link": [[float(i), {"role": "tool_point"}] for i in range(key_rows)]}
    if range_rows:
        switch = next(n for n in data["nodes"] if n["name"] == "Hand-off")
        switch["params"]["ranges"] = [[float(i), {"role": "tool_point"}] for i in range(range_rows)]
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(data, separators=(",", ":")))
    return path


@pytest.mark.parametrize("case, shape, fragments", [
    ("one_over", {"nodes": MAX_PRESET_NODES}, ("nodes", f"more than {MAX_PRESET_NODES}")),
    ("thousands_of_nodes", {"nodes": 20_000}, ("20004 nodes",)),
    ("thousands_of_links", {"links": MAX_PRESET_LINKS + 1}, ("links", f"more than {MAX_PRESET_LINKS}")),
    ("key_rows", {"key_rows": MAX_PRESET_ROWS + 1}, ("keys.link", "rows")),
    ("range_rows", {"range_rows": MAX_PRESET_ROWS + 1}, ("params.ranges", "rows")),
])
def test_preset_over_its_caps_is_refused_before_any_node(tmp_path, case, shape, fragments):
    path = _preset(tmp_path, **shape)
    assert path.stat().st_size < 1024 * 1024, "within the file-size cap: the count is what refuses it"
    refused(lambda: load_preset(path), PresetError, str(path), *fragments, what=f"loading a preset ({case})")


def test_preset_within_the_caps_still_loads(tmp_path):
    path = _preset(tmp_path, key_rows=100, range_rows=100)
    preset, error = capped(lambda: load_preset(path), "loading a preset within the caps")
    assert error is None and len(preset.nodes) == 4


def test_bake_with_a_preset_of_thousands_of_nodes_exits_2_and_makes_nothing(tmp_path):
    path = _preset(tmp_path, nodes=5_000)
    targets = tmp_path / "targets.csv"
    targets.write_text("frame,x,y,z,qw,qx,qy,qz\n1,0.4,0.1,0.4,0,1,0,0\n")
    out = tmp_path / "out" / "shot.blend"
    result = run_capped_cli("bake", "arm6", "--targets", targets, "--out", out, "--solver", "numpy", "--preset", path)
    assert_cli_refusal(result, "5004 nodes", "more than")
    assert not out.exists() and not list(tmp_path.glob("out/*"))


# ---- obstacle files ------------------------------------------------------------------------------------------


def binary_stl(triangles: int, seed: int = 0) -> bytes:
    """`triangles` small random triangles within 10 cm, as binary STL."""
    rng = np.random.default_rng(seed)
    corners = rng.random((triangles, 3, 3)).astype(np.float32) * 0.1
    records = np.zeros(triangles, dtype=[("normal", "<f4", 3), ("corners", "<f4", (3, 3)), ("attribute", "<u2")])
    records["corners"] = corners
    return b"\0" * 80 + struct.pack("<I", triangles) + records.tobytes()


def _obstacles(folder: Path, references: int, mesh: str = "part.stl", distinct_poses: bool = True) -> Path:
    items = [{"mesh": mesh, "name": f"m{i}", "pose": [0.01 * i if distinct_poses else 0.5, 0, 0, 1, 0, 0, 0]}
             for i in range(references)]
    path = folder / "obstacles.json"
    path.write_text(json.dumps(items))
    return path


def _load_obstacles(path):
    from kinema_nodes.core.collision import load_obstacles

    return load_obstacles(path)


@pytest.mark.parametrize("references", [257, 10_000])
def test_one_mesh_named_thousands_of_times_is_refused_before_it_is_read(tmp_path, references):
    """The mesh is not even a mesh (reading it would refuse it): the count refuses first."""
    from kinema_nodes.core.collision import ObstacleFileError

    (tmp_path / "part.stl").write_bytes(b"\0" * 84 + b"not a mesh at all")
    path = _obstacles(tmp_path, references)
    refused(lambda: _load_obstacles(path), ObstacleFileError, f"{references} mesh obstacles", "more than 256")


def test_one_large_mesh_named_many_times_is_read_once_and_refused_before_fitting(tmp_path):
    from kinema_nodes.core.collision import ObstacleFileError

    (tmp_path / "part.stl").write_bytes(binary_stl(20_000))
    path = _obstacles(tmp_path, 200)  # 200 x 20,000 = 4 M triangles
    refused(lambda: _load_obstacles(path), ObstacleFileError, "2,000,000 triangles", "'part.stl' has 20,000", "200 obstacles")


@pytest.mark.slow
def test_two_large_meshes_over_the_total_are_refused(tmp_path):
    """Slow (~13 s on 2 cores): each 1.2 M-triangle file is read once to count it."""
    from kinema_nodes.core.collision import ObstacleFileError

    (tmp_path / "a.stl").write_bytes(binary_stl(1_200_000, seed=1))
    (tmp_path / "b.stl").write_bytes(binary_stl(1_200_000, seed=2))
    path = tmp_path / "obstacles.json"
    path.write_text(json.dumps([{"mesh": "a.stl"}, {"mesh": "b.stl"}]))
    refused(lambda: _load_obstacles(path), ObstacleFileError, "obstacle 2", "2,000,000 triangles")


def test_a_mesh_named_a_few_times_is_read_once_and_placed_each_time(tmp_path, monkeypatch):
    from kinema_nodes.core.model import meshes

    (tmp_path / "part.stl").write_text(GOOD_STL)
    reads = []
    original = meshes.load_mesh
    monkeypatch.setattr(meshes, "load_mesh", lambda *a, **k: reads.append(a[0]) or original(*a, **k))
    path = _obstacles(tmp_path, 3)
    (tmp_path / "obstacles.json").write_text(json.dumps(json.loads(path.read_text()) + [{"box": {"size": [0.1, 0.1, 0.1]}}]))
    world, error = capped(lambda: _load_obstacles(path), "loading three mesh obstacles")
    assert error is None, error
    assert len(reads) == 1, "one file, read once"
    assert [o.name for o in world.obstacles] == ["m0", "m1", "m2", "box 4"], "order kept"
    xs = [min(a[0] for a, _, _ in o.capsules) for o in world.obstacles[:3]]
    assert xs[1] - xs[0] == pytest.approx(0.01, abs=1e-9) and xs[2] - xs[1] == pytest.approx(0.01, abs=1e-9)


def test_solve_with_an_obstacle_file_of_thousands_of_meshes_exits_2(tmp_path):
    (tmp_path / "part.stl").write_bytes(binary_stl(50_000))
    path = _obstacles(tmp_path, 5_000)
    result = run_capped_cli("solve", "arm6", "--solver", "numpy", "--obstacles", path, "--target", "0.4", "0.1", "0.4", "0", "1", "0", "0")
    assert_cli_refusal(result, "5000 mesh obstacles")


# ---- reach ---------------------------------------------------------------------------------------------------


def test_a_billion_orientations_are_refused_before_they_are_made():
    from kinema_nodes.core.reach import super_fibonacci

    refused(lambda: super_fibonacci(10 ** 12), KinemaError, "--orientations", "100,000")


def test_a_pose_count_within_the_cell_cap_but_beyond_memory_is_refused():
    from kinema_nodes.core.reach import MAX_CELLS, check_pose_count

    refused(lambda: check_pose_count(MAX_CELLS, 32, 7), KinemaError, "poses", "GiB", "--step")  # 320 M poses: the pose cap
    refused(lambda: check_pose_count(1_000_000, 100, 7), KinemaError, "100,000,000 poses", "5.3 GiB")  # the memory cap
    _, error = capped(lambda: check_pose_count(8_000, 32, 7), "a default-sized map")
    assert error is None


@pytest.mark.parametrize("seeds", [10 ** 9, 257])
def test_reach_chunk_with_absurd_seeds_is_refused_before_the_robot_is_read(seeds):
    from kinema_nodes.core.reach import reach_chunk, super_fibonacci

    refused(lambda: reach_chunk("no-such-robot", "tool", np.zeros((1, 3)), [0], super_fibonacci(4), seeds=seeds), KinemaError,
            "--seeds", "256")


def test_reach_chunk_beyond_memory_is_refused_before_anything_is_made():
    from kinema_nodes.core.reach import reach_chunk, super_fibonacci

    centres = np.zeros((1_000_000, 3))
    refused(lambda: reach_chunk("no-such-robot", "tool", centres, range(1_000_000), super_fibonacci(100_000)), KinemaError, "poses")


@pytest.mark.parametrize("args, fragments", [
    (["--seeds", "1000000000"], ("--seeds", "256")),
    (["--orientations", "1000000000000"], ("--orientations", "100,000")),
    (["--box", "-1", "-1", "0", "1", "1", "1", "--step", "0.01", "--orientations", "100"], ("poses", "GiB")),
])
def test_reach_cli_caps_exit_2_before_any_work(tmp_path, args, fragments):
    result = run_capped_cli("reach", "arm6", "--workers", "1", "--out", tmp_path / "map.npz", *args)
    assert_cli_refusal(result, *fragments)
    assert not (tmp_path / "map.npz").exists() and not list(tmp_path.iterdir())


# ---- MJCF height fields and textures ----------------------------------------------------------------------

BODY = '<body name="b"><joint name="j" type="hinge" range="-1 1"/><geom size="0.1"/></body>'
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and IHDR (what a reader sees first), for a picture it claims is that big."""
    ihdr = struct.pack(">II5B", width, height, 8, 0, 0, 0, 0)
    return PNG_SIGNATURE + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0" + b"\0" * 64


def _mjcf(folder: Path, assets: str) -> Path:
    path = folder / "model.xml"
    path.write_text(f'<mujoco model="m"><asset>{assets}</asset><worldbody>{BODY}</worldbody></mujoco>')
    return path


def _load(path):
    from kinema_nodes.core.model.loading import load_robot

    return load_robot(path, check_meshes=False)


HFIELD_CASES = {
    "attributes_40_GB": ('<hfield name="h" nrow="100000" ncol="100000" size="1 1 0.1 0.1"/>', None, "samples"),
    "binary_file_header": ('<hfield name="h" file="terrain.bin" size="1 1 0.1 0.1"/>',
                           ("terrain.bin", struct.pack("<ii", 100_000, 100_000) + b"\0" * 64), "100000 x 100000"),
    "png_file_header": ('<hfield name="h" file="terrain.png" size="1 1 0.1 0.1"/>', ("terrain.png", png_header(60_000, 60_000)),
                        "60000 x 60000"),
    "many_small_fields": ("".join(f'<hfield name="h{i}" nrow="2000" ncol="2000" size="1 1 0.1 0.1"/>' for i in range(5)), None,
                          '"h4"'),
    "negative_rows": ('<hfield name="h" nrow="-5" ncol="10" size="1 1 0.1 0.1"/>', None, "not a whole number"),
    "texture_builtin": ('<texture name="t" type="2d" builtin="checker" width="100000" height="100000"/>', None, "pixels"),
    "cube_texture_builtin": ('<texture name="t" type="cube" builtin="flat" width="8192" height="8192"/>', None, "pixels"),
    "texture_png_header": ('<texture name="t" type="2d" file="big.png"/>', ("big.png", png_header(50_000, 50_000)), "pixels"),
}


@pytest.mark.parametrize("case", list(HFIELD_CASES))
def test_mjcf_height_fields_and_textures_over_the_cap_are_refused_before_mujoco(tmp_path, case):
    pytest.importorskip("mujoco")
    from kinema_nodes.core.errors import RobotFileError

    assets, extra_file, fragment = HFIELD_CASES[case]
    if extra_file:
        (tmp_path / extra_file[0]).write_bytes(extra_file[1])
    path = _mjcf(tmp_path, assets)
    refused(lambda: _load(path), RobotFileError, "refused" if fragment != "not a whole number" else "MJCF", fragment,
            what=f"loading an MJCF ({case})")


def test_a_small_height_field_still_loads(tmp_path):
    pytest.importorskip("mujoco")
    path = _mjcf(tmp_path, '<hfield name="h" nrow="64" ncol="64" size="1 1 0.1 0.1"/>')
    robot, error = capped(lambda: _load(path), "loading an MJCF with a 64 x 64 height field")
    assert error is None, error
    assert robot.dof == 1


def test_info_on_a_40_GB_height_field_exits_2(tmp_path):
    pytest.importorskip("mujoco")
    path = _mjcf(tmp_path, '<hfield name="h" nrow="100000" ncol="100000" size="1 1 0.1 0.1"/>')
    assert_cli_refusal(run_capped_cli("info", path), "hfield", "samples")


def test_the_export_model_gets_the_same_caps(tmp_path):
    pytest.importorskip("mujoco")
    from kinema_nodes.core.errors import RobotFileError
    from kinema_nodes.core.shot.export import mujoco_qpos

    (tmp_path / "terrain.bin").write_bytes(struct.pack("<ii", 100_000, 100_000))
    path = _mjcf(tmp_path, '<hfield name="h" file="terrain.bin" size="1 1 0.1 0.1"/>')
    refused(lambda: mujoco_qpos(None, path), RobotFileError, "hfield", "samples")


def test_a_fifo_as_the_export_model_is_refused_without_blocking(tmp_path):
    """Item 7 for the export's --model (its gap in the earlier round): refused from stat."""
    from kinema_nodes.core.shot.export import mujoco_qpos

    pytest.importorskip("mujoco")
    fifo = tmp_path / "model.xml"
    os.mkfifo(fifo)
    refused(lambda: mujoco_qpos(None, fifo), KinemaError, "--model", "not a regular file", what="an export --model that is a FIFO")
