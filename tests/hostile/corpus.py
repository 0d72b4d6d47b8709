"""Helpers of the hostile-input corpus (tests/hostile): see conftest.py for what every case asserts."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 180, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`kinema-nodes ARGS` in a fresh process (its own solver cache), stdin closed."""
    environment = dict(os.environ)
    environment.setdefault("KINEMA_CACHE_DIR", tempfile.mkdtemp(prefix="kinema-hostile-cache-"))
    environment.pop("KINEMA_DEBUG", None)
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "kinema_nodes", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=environment, cwd=cwd or REPO, stdin=subprocess.DEVNULL)


def within(limit: float, what: str, call):
    """`call()` in a worker thread: (its result or None, the exception it raised or None); fails
    the test if it is still running after `limit` seconds (a hang is the failure)."""
    import threading

    done: dict = {}

    def work():
        try:
            done["result"] = call()
        except BaseException as error:  # noqa: BLE001  (the test judges what came out)
            done["error"] = error

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(limit)
    assert not worker.is_alive(), f"{what} still running after {limit} s"
    return done.get("result"), done.get("error")


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def assert_cli_refusal(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit 2, no traceback, and exactly one `kinema-nodes: error:` line on stderr containing
    every fragment (case-insensitive). Returns that line."""
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in error_lines(result) if line.startswith("kinema-nodes: error:")]
    assert result.returncode == 2, f"exit {result.returncode}; stderr: {result.stderr[-1500:]}; stdout: {result.stdout[-500:]}"
    assert len(errors) == 1, result.stderr[-1500:]
    for fragment in fragments:
        assert fragment.lower() in errors[0].lower(), errors[0]
    return errors[0]


def assert_one_line(error: BaseException, *fragments: str) -> str:
    """A refusal through the Python API: a one-line message naming every fragment."""
    message = str(error)
    assert message and "\n" not in message, repr(message)
    for fragment in fragments:
        assert fragment.lower() in message.lower(), message
    return message


class Untouched:
    """Remembers every file under a folder; `check()` asserts the same files with the same
    bytes are there: an existing output kept, and no temporary, `.blend1` or `@` left behind."""

    def __init__(self, folder: Path, ignore: tuple[str, ...] = ()):
        self.folder = Path(folder)
        self.ignore = ignore
        self.before = self._snapshot()

    def _snapshot(self) -> dict[str, str]:
        found = {}
        for path in sorted(self.folder.rglob("*")):
            if path.is_file() and path.name not in self.ignore:
                found[str(path.relative_to(self.folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found

    def check(self) -> None:
        after = self._snapshot()
        assert set(after) == set(self.before), f"files changed: added {sorted(set(after) - set(self.before))}, " \
                                               f"removed {sorted(set(self.before) - set(after))}"
        changed = [name for name in after if after[name] != self.before[name]]
        assert not changed, f"changed: {changed}"


def fill_disk(folder: Path) -> Path:
    """Write a filler file until the file system under `folder` is full (down to the byte)."""
    filler = Path(folder) / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (65536, 4096, 1):
            while True:
                try:
                    if os.write(fd, b"\0" * size) < size:
                        break
                except OSError:
                    break
    finally:
        os.close(fd)
    return filler


LIMIT = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'


def two_link_urdf(link_a: str = "", joint: str = "", name: str = "hostile", extra: str = "") -> str:
    """Two links and a revolute joint; `link_a` inside link 'a'; `joint` replaces the joint."""
    joint = joint or f'<joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>{LIMIT}</joint>'
    return f'<?xml version="1.0"?><robot name="{name}"><link name="a">{link_a}</link><link name="b"/>{joint}{extra}</robot>'


def mesh_visual(filename: str, scale: str = "") -> str:
    scale_attribute = f' scale="{scale}"' if scale else ""
    return f'<visual><geometry><mesh filename="{filename}"{scale_attribute}/></geometry></visual>'


GOOD_STL = (
    "solid part\n"
    " facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n   vertex 0.1 0 0\n   vertex 0 0.1 0\n  endloop\n endfacet\n"
    "endsolid part\n"
)


def collada(geometries: list[tuple[str, str, list[float], list[int]]], matrix: str | None = None,
            encoding: str = "utf-8", doctype: str = "") -> str:
    """A small COLLADA document: each geometry (id, colour 'r g b a', flat positions, triangle
    indices) gets its own material and node (placed by `matrix`, row-major 16 numbers)."""
    effects, materials, geoms, nodes = [], [], [], []
    for gid, colour, positions, indices in geometries:
        effects.append(f'<effect id="{gid}-fx"><profile_COMMON><technique sid="t"><phong><diffuse><color>{colour}</color>'
                       f'</diffuse></phong></technique></profile_COMMON></effect>')
        materials.append(f'<material id="{gid}-mat" name="{gid}-mat"><instance_effect url="#{gid}-fx"/></material>')
        count = len(positions) // 3
        geoms.append(
            f'<geometry id="{gid}"><mesh><source id="{gid}-p"><float_array id="{gid}-pa" count="{len(positions)}">'
            f'{" ".join(repr(float(v)) for v in positions)}</float_array><technique_common><accessor source="#{gid}-pa" '
            f'count="{count}" stride="3"><param name="X" type="float"/><param name="Y" type="float"/><param name="Z" '
            f'type="float"/></accessor></technique_common></source><vertices id="{gid}-v"><input semantic="POSITION" '
            f'source="#{gid}-p"/></vertices><triangles material="m" count="{len(indices) // 3}"><input semantic="VERTEX" '
            f'source="#{gid}-v" offset="0"/><p>{" ".join(str(i) for i in indices)}</p></triangles></mesh></geometry>')
        place = f'<matrix>{matrix}</matrix>' if matrix else ""
        nodes.append(f'<node id="{gid}-node">{place}<instance_geometry url="#{gid}"><bind_material><technique_common>'
                     f'<instance_material symbol="m" target="#{gid}-mat"/></technique_common></bind_material>'
                     f'</instance_geometry></node>')
    return (f'<?xml version="1.0" encoding="{encoding}"?>{doctype}'
            '<COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1">'
            '<asset><unit meter="1"/><up_axis>Z_UP</up_axis></asset>'
            f'<library_effects>{"".join(effects)}</library_effects><library_materials>{"".join(materials)}</library_materials>'
            f'<library_geometries>{"".join(geoms)}</library_geometries>'
            f'<library_visual_scenes><visual_scene id="s">{"".join(nodes)}</visual_scene></library_visual_scenes>'
            '<scene><instance_visual_scene url="#s"/></scene></COLLADA>')


TRIANGLE = ([0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.1, 0.0], [0, 1, 2])
