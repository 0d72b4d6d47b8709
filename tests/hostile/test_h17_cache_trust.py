"""Class 17 (issue #32, item 3): compiled code in the cache folder is loaded only if this install
wrote it. Every entry is signed with a per-install key (HMAC-SHA256, the key 0600 beside the
cache folder), and the folder must be this user's and private (`core.cache_trust`). numba's
index and data pickles, PyRoki's JAX exports and JAX's compiled executables: a planted or
swapped entry is deleted, said once, and rebuilt; a folder or key of another user is refused
(compiled in memory, one line).

The canaries: a pickle that, if unpickled, creates a file and runs a command (`touch`); neither
may happen. Every subprocess runs under a time limit and an address-space cap.
"""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kinema_nodes.core import cache_trust
from kinema_nodes.core.solve import _cache
from kinema_nodes.core.solve._cache import read_entry, write_entry

from corpus import REPO

MAGIC, HEADER = b"KINEMA-IK-EXPORT\n", b'{"key": "arm6", "jax": "0.7.1"}\n'
MEMORY_CAP = 6 << 30  # numba's LLVM and JAX reserve address space generously; 6 GiB still ends a runaway


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache folder for the test, and a fresh key reading."""
    folder = tmp_path / "kinema_cache"
    monkeypatch.setenv("KINEMA_CACHE_DIR", str(folder))
    cache_trust.forget_keys()
    _cache._reported.clear()
    yield folder
    cache_trust.forget_keys()


def _notes(text: str, fragment: str) -> list[str]:
    return [line for line in text.splitlines() if fragment in line]


class Canary:
    """Unpickling this creates `path` and runs `touch path.cmd`: both must never exist."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}.cmd; touch {self.path}",)


def canary_pickle(path: Path) -> bytes:
    return pickle.dumps(Canary(path))


def run_python(code: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter under a time limit and an address-space cap (set by the child
    itself first: no `preexec_fn`, which forks a process holding JAX's threads)."""
    environment = dict(os.environ)
    environment.update(env)
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")])
    capped_code = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", capped_code], capture_output=True, text=True, timeout=timeout,
                          env=environment, cwd=REPO, stdin=subprocess.DEVNULL)


# ---- the key and the folder ---------------------------------------------------------------------------


def test_key_is_made_private_beside_the_folder(cache):
    key = cache_trust.install_key()
    path = cache_trust.key_path()
    assert key is not None and len(key) == 32
    assert path == cache.parent / "kinema_cache.key" and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.stat().st_mode) & 0o077 == 0
    assert not any(p.name.endswith(".key") for p in cache.rglob("*")), "the key must not travel with the folder"
    cache_trust.forget_keys()
    assert cache_trust.install_key() == key, "the same key is read back by the next process"


def test_key_readable_by_others_is_replaced_once(cache, capsys):
    assert write_entry(cache / "exports" / "a.jaxexport", MAGIC, HEADER, b"payload")
    old = cache_trust.install_key()
    os.chmod(cache_trust.key_path(), 0o644)
    cache_trust.forget_keys()
    new = cache_trust.install_key()
    assert new is not None and new != old and stat.S_IMODE(cache_trust.key_path().stat().st_mode) == 0o600
    assert len(_notes(capsys.readouterr().err, "readable by other users")) == 1
    assert read_entry(cache / "exports" / "a.jaxexport", MAGIC, HEADER) is None, "signed with the exposed key: rebuilt"


def test_damaged_key_is_replaced(cache, capsys):
    cache_trust.install_key()
    cache_trust.key_path().write_bytes(b"short")
    cache_trust.forget_keys()
    assert len(cache_trust.install_key()) == 32
    assert len(_notes(capsys.readouterr().err, "damaged")) == 1


def _chown_away(path: Path):
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    os.chown(path, 65534, 65534)


def test_folder_of_another_user_is_refused_with_one_line(cache, capsys):
    cache.mkdir()
    _chown_away(cache)
    assert cache_trust.install_key() is None
    entry = cache / "exports" / "a.jaxexport"
    assert write_entry(entry, MAGIC, HEADER, b"payload") is False and not entry.exists()
    assert read_entry(entry, MAGIC, HEADER) is None
    notes = _notes(capsys.readouterr().err, "belongs to another user")
    assert len(notes) == 1 and "not loaded from or kept on disk" in notes[0]
    assert not cache_trust.key_path().exists()


def test_planted_entry_in_a_folder_of_another_user_is_never_read(cache, capsys):
    """Even a well-formed entry (old SHA-256 format) in another user's folder is not read."""
    assert write_entry(cache / "exports" / "a.jaxexport", MAGIC, HEADER, b"payload")
    _chown_away(cache)
    cache_trust.forget_keys()
    assert read_entry(cache / "exports" / "a.jaxexport", MAGIC, HEADER) is None
    assert len(_notes(capsys.readouterr().err, "belongs to another user")) == 1


def test_key_of_another_user_is_refused(cache, capsys):
    cache_trust.install_key()
    _chown_away(cache_trust.key_path())
    cache_trust.forget_keys()
    assert cache_trust.install_key() is None
    assert len(_notes(capsys.readouterr().err, "belongs to another user")) == 1


def test_group_writable_folder_is_made_private_once(cache, capsys):
    cache.mkdir(mode=0o775)
    os.chmod(cache, 0o777)
    assert cache_trust.install_key() is not None
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert len(_notes(capsys.readouterr().err, "writable by other users")) == 1
    cache_trust.forget_keys()
    cache_trust.install_key()
    assert not _notes(capsys.readouterr().err, "writable by other users"), "once private, nothing more is said"


def test_a_file_where_the_folder_should_be_is_refused(cache, capsys):
    cache.write_text("not a folder")
    assert cache_trust.install_key() is None
    assert len(_notes(capsys.readouterr().err, "kinema-nodes:")) == 1


# ---- exported PyRoki programs (unit level) --------------------------------------------------------------


def _old_format(payload: bytes) -> bytes:
    """An entry as anyone could write it before: magic, header, plain SHA-256, payload."""
    import hashlib

    return MAGIC + HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


@pytest.mark.parametrize("swap", ["plain_sha256", "other_install_key", "moved_from_other_name", "signature_of_other_payload"])
def test_swapped_export_is_deleted_and_said_once(cache, tmp_path, capsys, swap):
    path = cache / "exports" / "solver.jaxexport"
    assert write_entry(path, MAGIC, HEADER, b"the real program")
    planted = b"a payload someone else compiled"
    if swap == "plain_sha256":
        path.write_bytes(_old_format(planted))
    elif swap == "other_install_key":
        os.environ["KINEMA_CACHE_DIR"] = str(tmp_path / "elsewhere" / "cache")
        cache_trust.forget_keys()
        assert write_entry(tmp_path / "elsewhere" / "solver.jaxexport", MAGIC, HEADER, planted)
        path.write_bytes((tmp_path / "elsewhere" / "solver.jaxexport").read_bytes())
        os.environ["KINEMA_CACHE_DIR"] = str(cache)
        cache_trust.forget_keys()
    elif swap == "moved_from_other_name":
        other = cache / "exports" / "other.jaxexport"
        assert write_entry(other, MAGIC, HEADER, planted)
        os.replace(other, path)
    else:
        data = path.read_bytes()
        path.write_bytes(data[: -len(b"the real program")] + planted[: len(b"the real program")])
    capsys.readouterr()
    assert read_entry(path, MAGIC, HEADER) is None
    assert not path.exists()
    notes = _notes(capsys.readouterr().err, "not written by this install")
    assert len(notes) == 1 and "rebuilding" in notes[0]
    assert write_entry(path, MAGIC, HEADER, b"the real program") and read_entry(path, MAGIC, HEADER) == b"the real program"


def test_fifo_as_an_export_entry_does_not_hang(cache, capsys):
    """Item 7 for the cache: a FIFO planted where an export belongs is refused at once."""
    import threading

    path = cache / "exports" / "solver.jaxexport"
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    done = {}
    worker = threading.Thread(target=lambda: done.setdefault("value", read_entry(path, MAGIC, HEADER)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "reading a FIFO cache entry hung"
    assert done["value"] is None and not os.path.lexists(path)
    assert len(_notes(capsys.readouterr().err, "not a regular file")) == 1


def test_own_export_reads_back(cache):
    path = cache / "exports" / "solver.jaxexport"
    payload = os.urandom(100_000)
    assert write_entry(path, MAGIC, HEADER, payload) and read_entry(path, MAGIC, HEADER) == payload


# ---- numba's disk cache ----------------------------------------------------------------------------------

KERNEL_SOURCE = '''
import numpy as np


def add_twice(values):
    out = np.empty_like(values)
    for i in range(values.shape[0]):
        out[i] = values[i] * 2.0 + 1.0
    return out


def other(values):
    return values.sum()
'''

NUMBA_RUN = '''
import json, sys
import numpy as np
sys.path.insert(0, {source!r})
import tiny_kernel
from kinema_nodes.core.numba_cache import njit, cache_files
f = njit(tiny_kernel.add_twice)
g = njit(tiny_kernel.other)
answer = f(np.arange(4.0)).tolist()
total = float(g(np.arange(4.0)))
print(json.dumps({{"answer": answer, "total": total, "hits": sum(f.stats.cache_hits.values()),
                  "index": (cache_files(f) or [None])[0], "other_index": (cache_files(g) or [None])[0]}}))
'''


@pytest.fixture
def numba_env(tmp_path):
    pytest.importorskip("numba")
    source = tmp_path / "src"
    source.mkdir()
    (source / "tiny_kernel.py").write_text(KERNEL_SOURCE)
    folder = tmp_path / "cache"
    env = {"KINEMA_CACHE_DIR": str(folder), "NUMBA_CACHE_DIR": str(folder / "numba")}

    def run():
        import json

        result = run_python(NUMBA_RUN.format(source=str(source)), env)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr

    return run, tmp_path


def test_numba_cache_is_signed_and_loaded_again(numba_env):
    run, _ = numba_env
    first, err = run()
    assert first["answer"] == [1.0, 3.0, 5.0, 7.0] and first["hits"] == 0 and "kinema-nodes" not in err
    index = Path(first["index"])
    assert index.read_bytes().startswith(cache_trust.SIGNED_MAGIC)
    data_files = list(index.parent.glob("tiny_kernel.add_twice-*.nbc"))
    assert data_files and all(p.read_bytes().startswith(cache_trust.SIGNED_MAGIC) for p in data_files)
    second, err = run()
    assert second["hits"] == 1 and second["answer"] == first["answer"] and "kinema-nodes" not in err


@pytest.mark.parametrize("where", ["index", "data", "index_unsigned_numba", "index_from_other_function", "index_truncated", "index_fifo"])
def test_planted_numba_cache_file_is_never_unpickled(numba_env, where):
    run, tmp_path = numba_env
    first, _ = run()
    index = Path(first["index"])
    canary = tmp_path / "canary"
    if where == "index":
        index.write_bytes(canary_pickle(canary))  # stock numba's first `pickle.load` of the index runs it
    elif where == "data":
        data = sorted(index.parent.glob("tiny_kernel.add_twice-*.nbc"))[0]
        data.write_bytes(canary_pickle(canary))
    elif where == "index_unsigned_numba":
        # a genuine numba index (signature stripped), its data file replaced by the canary
        index.write_bytes(index.read_bytes()[len(cache_trust.SIGNED_MAGIC) + 32:])
        sorted(index.parent.glob("tiny_kernel.add_twice-*.nbc"))[0].write_bytes(canary_pickle(canary))
    elif where == "index_from_other_function":
        index.write_bytes(Path(first["other_index"]).read_bytes())
    elif where == "index_fifo":
        index.unlink()
        os.mkfifo(index)  # would block numba's own open() forever
    else:
        index.write_bytes(index.read_bytes()[:40])
    second, err = run()
    assert not canary.exists() and not Path(f"{canary}.cmd").exists(), "a planted pickle was unpickled"
    assert second["answer"] == [1.0, 3.0, 5.0, 7.0] and second["hits"] == 0, "rebuilt, not loaded"
    notes = _notes(err, "not written by this install")
    assert len(notes) == 1 and "rebuilding" in notes[0], err[-2000:]
    assert index.read_bytes().startswith(cache_trust.SIGNED_MAGIC), "the rebuilt index is signed again"
    if where == "index":  # (once: a process each costs a second)
        third, err = run()
        assert third["hits"] == 1 and not _notes(err, "kinema-nodes"), "and loaded from disk the time after"


def test_a_child_with_another_cache_folder_never_touches_this_ones_entries(numba_env):
    """A child process given another KINEMA_CACHE_DIR (so another key) but this process's
    NUMBA_CACHE_DIR keeps its compiled code beside its own key: entries here stay signed by this
    install and load without a note (CI once saw "not written by this install" in a command that
    must print only its own lines: the parent had exported NUMBA_CACHE_DIR, a test's child
    re-signed the entries with its key)."""
    import json

    run, tmp_path = numba_env
    first, _ = run()
    index = Path(first["index"])
    assert index.is_relative_to(tmp_path / "cache" / "numba-signed")
    other = {"KINEMA_CACHE_DIR": str(tmp_path / "other"), "NUMBA_CACHE_DIR": str(index.parent.parent)}
    source = tmp_path / "src"
    child = run_python(NUMBA_RUN.format(source=str(source)), other)
    assert child.returncode == 0, child.stderr[-3000:]
    assert Path(json.loads(child.stdout.strip().splitlines()[-1])["index"]).is_relative_to(tmp_path / "other" / "numba-signed")
    again, err = run()
    assert again["hits"] == 1 and not _notes(err, "kinema-nodes"), err[-2000:]


def test_numba_in_a_folder_of_another_user_compiles_in_memory(numba_env):
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    run, tmp_path = numba_env
    folder = tmp_path / "cache"
    folder.mkdir()
    os.chown(folder, 65534, 65534)
    first, err = run()
    assert first["answer"] == [1.0, 3.0, 5.0, 7.0]
    assert len(_notes(err, "belongs to another user")) == 1
    assert not list(folder.rglob("*.nbi")), "nothing is kept in a folder of another user"


# ---- JAX's compiled executables ---------------------------------------------------------------------------

JAX_RUN = '''
import json
import numpy as np
import jax, jax.numpy as jnp
from kinema_nodes.core.solve._pyroki_program import configure_jax
configure_jax()
from jax._src import compilation_cache as cc
print(json.dumps({"answer": float(jax.jit(lambda x: jnp.sin(x) * 3.0 + x)(jnp.float32(0.5))),
                  "signed": type(cc._cache).__name__}))
'''


@pytest.mark.jax
def test_jax_cache_entries_are_signed_and_a_planted_one_is_rebuilt(tmp_path):
    pytest.importorskip("jax")
    import json

    folder = tmp_path / "cache"
    env = {"KINEMA_CACHE_DIR": str(folder), "JAX_PLATFORMS": "cpu"}
    first = run_python(JAX_RUN, env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout.splitlines()[-1])["signed"] == "_SignedJaxCache"
    entries = [p for p in (folder / "jax-signed").iterdir() if p.name.endswith("-cache")]
    assert entries and all(p.read_bytes().startswith(cache_trust.SIGNED_MAGIC) for p in entries)
    for entry in entries:  # JAX's own bytes, unsigned: as a planted executable would be
        entry.write_bytes(entry.read_bytes()[len(cache_trust.SIGNED_MAGIC) + 32:])
    second = run_python(JAX_RUN, env)
    assert second.returncode == 0, second.stderr[-3000:]
    answer = json.loads(second.stdout.splitlines()[-1])["answer"]
    assert answer == pytest.approx(np.sin(0.5) * 3 + 0.5, abs=1e-6)
    assert len(_notes(second.stderr, "not written by this install")) == 1
    assert all(p.read_bytes().startswith(cache_trust.SIGNED_MAGIC) for p in (folder / "jax-signed").iterdir() if p.name.endswith("-cache"))


@pytest.mark.jax
def test_an_upgrade_from_before_signing_rebuilds_quietly(tmp_path):
    """An install from before cache signing left JAX's unsigned entries in `<cache>/jax`: the
    upgrade keeps its signed entries in `jax-signed` (and numba's in `numba-signed`), so the old
    files are never read, and nothing is said (CI on a machine with an old cache saw the note in
    a command that must print only its own lines)."""
    pytest.importorskip("jax")
    import json

    folder = tmp_path / "cache"
    env = {"KINEMA_CACHE_DIR": str(folder), "JAX_PLATFORMS": "cpu"}
    assert run_python(JAX_RUN, env).returncode == 0
    old = folder / "jax"
    (folder / "jax-signed").rename(old)
    for entry in old.iterdir():
        entry.write_bytes(entry.read_bytes()[len(cache_trust.SIGNED_MAGIC) + 32:])  # as the old install wrote them
    (folder / "numba").mkdir()
    (folder / "numba" / "old_kernel.solve-1.py311.nbi").write_bytes(b"unsigned numba index of an old install")
    again = run_python(JAX_RUN, env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout.splitlines()[-1])["answer"] == pytest.approx(np.sin(0.5) * 3 + 0.5, abs=1e-6)
    assert not _notes(again.stderr, "kinema-nodes"), again.stderr[-2000:]
    assert any(p.read_bytes().startswith(cache_trust.SIGNED_MAGIC) for p in (folder / "jax-signed").iterdir())


# ---- the real kernels (slow: they compile) ---------------------------------------------------------------

SOLVE_KERNEL_RUN = '''
import json
from kinema_nodes.core.solve import _kernel
from kinema_nodes.core.numba_cache import cache_files
print(json.dumps({"status": _kernel.kernel_status(wait=True)[0],
                  "index": cache_files(_kernel._numba_leaves["_packed_rows"])[0]}))
'''


@pytest.mark.slow
def test_planted_pickle_in_the_solve_kernel_index_never_runs(tmp_path):
    """The real compiled IK kernel: the index of its entry point (what a new process loads;
    callees come inside it) replaced by the canary pickle. The next process
    uses the compiled kernel (rebuilt), the canary never appears, one note."""
    import json

    env = {"KINEMA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_CACHE_DIR": str(tmp_path / "cache" / "numba")}
    first = run_python(SOLVE_KERNEL_RUN, env, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    found = json.loads(first.stdout.splitlines()[-1])
    assert found["status"] == "numba"
    canary = tmp_path / "canary"
    Path(found["index"]).write_bytes(canary_pickle(canary))
    second = run_python(SOLVE_KERNEL_RUN, env, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout.splitlines()[-1])["status"] == "numba"
    assert not canary.exists() and not Path(f"{canary}.cmd").exists()
    assert len(_notes(second.stderr, "not written by this install")) == 1


@pytest.mark.slow
@pytest.mark.jax
def test_swapped_pyroki_export_is_rebuilt_and_answers_right(tmp_path, monkeypatch, robots, capfd):
    """The real exported solver for arm6's tool swapped for the export of another link set, with
    the plain SHA-256 an attacker can compute: refused, rebuilt, and the solve is right."""
    pytest.importorskip("pyroki")
    monkeypatch.setenv("KINEMA_CACHE_DIR", str(tmp_path))
    cache_trust.forget_keys()
    from kinema_nodes.core.model.kinematics import link_pose
    from kinema_nodes.core.solve._pyroki_backend import CompiledSolver, export_path

    robot = robots("arm6")
    tool = robot.tool_point
    first = CompiledSolver(robot, (tool,))
    other_link = next(j.child for j in reversed(robot.joints) if j.type != "fixed" and j.child != tool)
    other = CompiledSolver(robot, (other_link,))
    path, other_path = export_path(first.layout), export_path(other.layout)
    first_header = path.read_bytes()[: path.read_bytes().index(b"\n", len(b"KINEMA-IK-EXPORT\n")) + 1]
    foreign = other_path.read_bytes()
    foreign_payload = foreign[foreign.index(b"\n", foreign.index(b"\n", len(b"KINEMA-IK-EXPORT\n")) + 1) + 1:]
    import hashlib

    path.write_bytes(first_header + hashlib.sha256(foreign_payload).hexdigest().encode() + b"\n" + foreign_payload)
    capfd.readouterr()
    again = CompiledSolver(robot, (tool,))
    assert not again.from_disk, "the swapped program was loaded"
    assert len(_notes(capfd.readouterr().err, "not written by this install")) == 1
    start = robot.mid_configuration()
    goal = robot.mid_configuration() + 0.2
    pose = link_pose(robot, goal, tool)
    from kinema_nodes.core.model.rotations import matrix_to_quaternion

    k = again.layout.k
    seeds = again.layout.make_seeds(start, np.ones(k), 0)
    x, errors, _, ok = again(start, seeds, pose[:3, 3][None], matrix_to_quaternion(pose)[None], np.ones((1, 2)),
                             np.ones(k, dtype=np.float32), np.array([1e-4, 1e-3]), 200, True)
    assert ok and errors[0, 0] < 1e-3, errors
    assert CompiledSolver(robot, (tool,)).from_disk, "the rebuilt program is loaded from disk next time"
