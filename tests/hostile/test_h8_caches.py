"""Class 8: corrupt caches. An exported solver carries the SHA-256 of its payload, checked
before anything deserialises it: a bit-flipped, truncated or damaged entry is deleted and
rebuilt, and said once; a stale one (another robot or JAX version) is replaced quietly.
"""

from __future__ import annotations

import os

import pytest

from kinema_nodes.core.solve import _cache
from kinema_nodes.core.solve._cache import read_entry, write_entry

MAGIC, HEADER = b"KINEMA-IK-EXPORT\n", b'{"key": "arm6", "jax": "0.7.1"}\n'


@pytest.fixture
def entry(tmp_path):
    path = tmp_path / "exports" / "solver.jaxexport"
    payload = os.urandom(50_000)
    assert write_entry(path, MAGIC, HEADER, payload)
    _cache._reported.discard(str(path))
    return path, payload


def test_good_entry_reads_back(entry):
    path, payload = entry
    assert read_entry(path, MAGIC, HEADER) == payload
    assert sorted(p.name for p in path.parent.iterdir()) == ["solver.jaxexport"]


def _flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["flip_payload_start", "flip_payload_end", "truncate", "flip_digest", "append", "flip_header"])
def test_damaged_entry_is_deleted_and_said_once(entry, capsys, damage):
    path, payload = entry
    size = path.stat().st_size
    if damage == "flip_payload_start":
        _flip(path, len(MAGIC) + len(HEADER) + 65)
    elif damage == "flip_payload_end":
        _flip(path, size - 1)
    elif damage == "truncate":
        os.truncate(path, size - 1000)
    elif damage == "flip_digest":
        _flip(path, len(MAGIC) + len(HEADER) + 3)
    elif damage == "append":
        with open(path, "ab") as handle:
            handle.write(b"junk")
    elif damage == "flip_header":
        _flip(path, 2)
    assert read_entry(path, MAGIC, HEADER) is None
    assert not path.exists()
    notes = [line for line in capsys.readouterr().err.splitlines() if "corrupt" in line]
    assert len(notes) == 1 and str(path) in notes[0] and "rebuilding" in notes[0]
    # rebuilt by the caller, then read again: no second note
    assert write_entry(path, MAGIC, HEADER, payload) and read_entry(path, MAGIC, HEADER) == payload
    _flip(path, size - 1)
    assert read_entry(path, MAGIC, HEADER) is None
    assert not [line for line in capsys.readouterr().err.splitlines() if "corrupt" in line]


def test_stale_entry_is_replaced_quietly(entry, capsys):
    path, _ = entry
    assert read_entry(path, MAGIC, b'{"key": "arm6", "jax": "0.9.0"}\n') is None
    assert not path.exists() and "corrupt" not in capsys.readouterr().err


def test_missing_entry_is_none(tmp_path):
    assert read_entry(tmp_path / "nothing.jaxexport", MAGIC, HEADER) is None


def test_unwritable_cache_folder_costs_only_a_rebuild(tmp_path):
    blocker = tmp_path / "exports"
    blocker.write_text("a file where the folder should be")
    assert write_entry(blocker / "solver.jaxexport", MAGIC, HEADER, b"payload") is False


@pytest.mark.slow
@pytest.mark.jax
def test_bit_flipped_exported_solver_is_rebuilt_once(tmp_path, monkeypatch, robots, capfd):
    """The real thing: a PyRoki solver exported to disk, its payload bit-flipped with the
    header intact. The next load deletes it, rebuilds (from_disk False), says so once, and the
    run after that loads the rebuilt entry from disk again."""
    pytest.importorskip("pyroki")
    monkeypatch.setenv("KINEMA_CACHE_DIR", str(tmp_path))
    from kinema_nodes.core.solve._pyroki_backend import CompiledSolver, export_path

    robot = robots("arm6")
    first = CompiledSolver(robot, (robot.tool_point,))
    path = export_path(first.layout)
    assert path.exists() and not first.from_disk
    _flip(path, path.stat().st_size // 2)
    second = CompiledSolver(robot, (robot.tool_point,))
    assert not second.from_disk and path.exists()
    notes = [line for line in capfd.readouterr().err.splitlines() if "corrupt" in line]
    assert len(notes) == 1
    third = CompiledSolver(robot, (robot.tool_point,))
    assert third.from_disk


def test_an_export_from_before_signing_is_rebuilt_quietly(tmp_path, capsys):
    """An install from before cache signing wrote a plain SHA-256 under a header without
    "hash": after the upgrade it is stale (removed, rebuilt), not reported as damaged."""
    import hashlib
    import json

    from kinema_nodes.core.solve import _pyroki_program

    layout = type("Layout", (), {"key_text": "arm6"})()
    header = _pyroki_program._header(layout)
    assert json.loads(header)["hash"] == "hmac-sha256"
    old_header = json.dumps({k: v for k, v in json.loads(header).items() if k != "hash"}).encode() + b"\n"
    payload = os.urandom(1000)
    path = tmp_path / "exports" / "old.jaxexport"
    path.parent.mkdir()
    path.write_bytes(MAGIC + old_header + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    assert read_entry(path, MAGIC, header) is None
    assert not path.exists()
    assert capsys.readouterr().err == ""
