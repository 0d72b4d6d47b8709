"""Shot batches (`kinema-nodes batch`): the manifest, checked before anything runs, and one
shot as one `kinema-nodes bake` process.

bpy-free and dask-free: the CLI spreads `run_shot` over a Dask cluster, Flamenco's job type
(flamenco/kinema_bake.js) turns the same manifest into one task per shot. A shot is a
process of its own because Blender's module cannot hold two scenes in one process, and because
a process that dies takes only its own shot with it: a fork of the worker's warm interpreter
(`ShotServer`), or a brand-new Python.

The manifest is JSON: a list of shots, or {"defaults": {...}, "shots": [...]} where defaults
fill any key a shot leaves out. Paths are relative to the manifest's folder.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import KinemaError

#: Keys a shot may have (the README's "Shot batches" lists them).
SHOT_KEYS = ("name", "robot", "link", "targets", "out", "joints_out", "report", "preset", "solver", "start", "fps",
             "speed_limit", "limits", "obstacles")
LIMIT_KEYS = ("check", "margin", "max_acc", "max_jerk")
MAX_SHOTS = 100_000
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
#: A robot given as one of these is a file next to the manifest; anything else is a bundled or
#: example-robot-data name.
ROBOT_FILE_SUFFIXES = (".urdf", ".xacro", ".xml")


@dataclass
class Shot:
    """One shot of a batch, with its paths made absolute."""

    name: str
    robot: str
    targets: Path
    out: Path
    link: str | None = None
    joints_out: Path | None = None
    report: Path | None = None
    preset: str | None = None
    solver: str = "numpy"
    start: dict[str, float] = field(default_factory=dict)
    fps: float | None = None
    speed_limit: float | None = None
    limits: dict = field(default_factory=dict)

    @property
    def outputs(self) -> list[Path]:
        return [p for p in (self.out, self.joints_out, self.report) if p is not None]

    @property
    def inputs(self) -> list[Path]:
        found = [self.targets]
        for value in (self.robot, self.preset):
            if value and Path(value).is_file():
                found.append(Path(value))
        return found

    def bake_arguments(self) -> list[str]:
        """The arguments after `kinema-nodes` that bake this shot alone (the batch adds --json)."""
        args = ["bake", self.robot, "--targets", str(self.targets), "--out", str(self.out), "--solver", self.solver]
        if self.link:
            args += ["--link", self.link]
        if self.joints_out:
            args += ["--joints-out", str(self.joints_out)]
        if self.report:
            args += ["--report", str(self.report)]
        if self.preset:
            args += ["--preset", self.preset]
        if self.start:
            args += ["--start", *(f"{k}={v!r}" for k, v in self.start.items())]
        if self.fps is not None:
            args += ["--fps", repr(self.fps)]
        if self.speed_limit is not None:
            args += ["--speed-limit", repr(self.speed_limit)]
        if self.limits.get("check"):
            args.append("--check-limits")
        for key, option in (("margin", "--margin"), ("max_acc", "--max-acc"), ("max_jerk", "--max-jerk")):
            if self.limits.get(key) is not None:
                args += [option, repr(float(self.limits[key]))]
        return args


def _where(index: int, name: str | None) -> str:
    return f"shot {index + 1}" + (f" ('{name}')" if name else "")


def _number(value, what: str, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (positive and value <= 0):
        raise KinemaError(f"{what} must be a {'positive ' if positive else ''}number, got {value!r}")
    return float(value)


def _path(value, what: str, folder: Path) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise KinemaError(f"{what} must be a file path, got {value!r}")
    return (folder / value).resolve()


def _robot(value, what: str, folder: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise KinemaError(f"{what} must be a URDF path or a robot name, got {value!r}")
    if value.lower().endswith(ROBOT_FILE_SUFFIXES) or "/" in value or os.sep in value:
        return str((folder / value).resolve())
    _not_an_option(value, what)
    return value


def _not_an_option(value: str, what: str) -> None:
    """A name that the shot's `kinema-nodes bake` command line would read as an option."""
    if value.startswith("-"):
        raise KinemaError(f"{what}: {value!r} starts with '-', so the bake would read it as an option; "
                          f"give a file path (./{value}) or a name")


def parse_shot(raw, index: int, folder: Path, defaults: dict) -> Shot:
    """One manifest entry -> Shot, or one line saying which shot and which key is wrong."""
    if not isinstance(raw, dict):
        raise KinemaError(f"{_where(index, None)}: must be an object with robot, targets and out, got {type(raw).__name__}")
    entry = {**defaults, **raw}
    name = entry.get("name")
    where = _where(index, name if isinstance(name, str) else None)
    unknown = sorted(set(entry) - set(SHOT_KEYS))
    if unknown:
        raise KinemaError(f"{where}: unknown key '{unknown[0]}' (known: {', '.join(SHOT_KEYS)})")
    for key in ("robot", "targets", "out"):
        if key not in entry:
            raise KinemaError(f"{where}: needs '{key}'")
    if entry.get("obstacles"):
        raise KinemaError(f"{where}: 'obstacles' is not supported: `kinema-nodes bake` has no obstacle option yet")
    targets = _path(entry["targets"], f"{where}: targets", folder)
    if not targets.is_file():
        raise KinemaError(f"{where}: targets '{entry['targets']}' not found (looked in {targets.parent})")
    out = _path(entry["out"], f"{where}: out", folder)
    if not out.name.lower().endswith(".blend"):
        raise KinemaError(f"{where}: out '{entry['out']}' must end in .blend")
    shot = Shot(name=str(name) if name is not None else out.stem, robot=_robot(entry["robot"], f"{where}: robot", folder),
                targets=targets, out=out)
    if entry.get("link") is not None:
        if not isinstance(entry["link"], str):
            raise KinemaError(f"{where}: link must be a link name, got {entry['link']!r}")
        _not_an_option(entry["link"], f"{where}: link")
        shot.link = entry["link"]
    for key, suffix in (("joints_out", ".csv"), ("report", ".png")):
        if entry.get(key) is not None:
            path = _path(entry[key], f"{where}: {key}", folder)
            if not path.name.lower().endswith(suffix):
                raise KinemaError(f"{where}: {key} '{entry[key]}' must end in {suffix}")
            setattr(shot, key, path)
    preset = entry.get("preset")
    if preset is not None:
        if not isinstance(preset, str):
            raise KinemaError(f"{where}: preset must be a name or a .json path, got {preset!r}")
        if not preset.lower().endswith(".json"):
            _not_an_option(preset, f"{where}: preset")
        shot.preset = str((folder / preset).resolve()) if preset.lower().endswith(".json") else preset
    solver = entry.get("solver", "numpy")
    if solver not in ("numpy", "pyroki"):
        raise KinemaError(f"{where}: solver must be 'numpy' or 'pyroki', got {solver!r}")
    shot.solver = solver
    start = entry.get("start") or {}
    if not isinstance(start, dict):
        raise KinemaError(f"{where}: start must be an object of joint name -> value, got {start!r}")
    for joint in start:
        _not_an_option(str(joint), f"{where}: start")
    shot.start = {str(k): _number(v, f"{where}: start '{k}'", positive=False) for k, v in start.items()}
    if entry.get("fps") is not None:
        shot.fps = _number(entry["fps"], f"{where}: fps")
    if entry.get("speed_limit") is not None:
        shot.speed_limit = _number(entry["speed_limit"], f"{where}: speed_limit")
    limits = entry.get("limits") or {}
    if not isinstance(limits, dict):
        raise KinemaError(f"{where}: limits must be an object ({', '.join(LIMIT_KEYS)}), got {limits!r}")
    for key in limits:
        if key not in LIMIT_KEYS:
            raise KinemaError(f"{where}: limits: unknown key '{key}' (known: {', '.join(LIMIT_KEYS)})")
        if key != "check":
            _number(limits[key], f"{where}: limits {key}", positive=False)
    shot.limits = dict(limits)
    return shot


def read_manifest(path: str | Path) -> list[Shot]:
    """The manifest's shots, every one checked; two shots writing the same file are refused."""
    path = Path(path)
    if not path.is_file():
        raise KinemaError(f"manifest '{path}' not found")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise KinemaError(f"manifest '{path}' is larger than {MAX_MANIFEST_BYTES // (1024 * 1024)} MiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise KinemaError(f"manifest '{path}' is not valid JSON: {exc}") from None
    except RecursionError:
        raise KinemaError(f"manifest '{path}' is nested too deep to be a list of shots") from None
    defaults = {}
    if isinstance(data, dict):
        unknown = sorted(set(data) - {"shots", "defaults"})
        if unknown:
            raise KinemaError(f"manifest '{path}': unknown key '{unknown[0]}' (known: defaults, shots)")
        defaults = data.get("defaults") or {}
        if not isinstance(defaults, dict):
            raise KinemaError(f"manifest '{path}': defaults must be an object")
        data = data.get("shots")
    if not isinstance(data, list) or not data:
        raise KinemaError(f"manifest '{path}' must hold a non-empty list of shots")
    if len(data) > MAX_SHOTS:
        raise KinemaError(f"manifest '{path}' has {len(data)} shots, more than {MAX_SHOTS}")
    folder = path.resolve().parent
    shots = [parse_shot(raw, i, folder, defaults) for i, raw in enumerate(data)]
    writers: dict[Path, str] = {}
    names = set()
    for shot in shots:
        for output in shot.outputs:
            if output in writers:
                raise KinemaError(f"shots '{writers[output]}' and '{shot.name}' both write '{output}'")
            writers[output] = shot.name
        if shot.name in names:
            raise KinemaError(f"manifest '{path}': two shots are named '{shot.name}'")
        names.add(shot.name)
    refuse_outputs_over_inputs(shots)
    return shots


def refuse_outputs_over_inputs(shots: list[Shot]) -> None:
    """No shot writes over a file any shot reads (its own or another's targets, robot or
    preset), after links: a batch runs its shots in any order, so one shot's output over
    another's targets would bake that shot from joints, or fail it, depending on the timing."""
    from ..files import refuse_writing_over_inputs

    inputs, outputs = {}, {}
    for shot in shots:
        for kind, value in (("targets", shot.targets), ("robot", shot.robot), ("preset", shot.preset)):
            if value is not None and (kind == "targets" or Path(value).is_file()):
                inputs[f"shot '{shot.name}' {kind}"] = value
        for kind, value in (("out", shot.out), ("joints_out", shot.joints_out), ("report", shot.report)):
            outputs[f"shot '{shot.name}' {kind}"] = value
    refuse_writing_over_inputs(outputs, inputs)


def is_fresh(shot: Shot) -> bool:
    """Every output exists and is newer than every input: a rerun skips the shot."""
    try:
        oldest_output = min(p.stat().st_mtime_ns for p in shot.outputs)
        newest_input = max(p.stat().st_mtime_ns for p in shot.inputs)
    except (OSError, ValueError):
        return False
    return oldest_output > newest_input


def die_with_parent(signal_number: int = signal.SIGKILL) -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the bake dies when its worker dies, so a retried shot never races an orphan.
    (`signal_number`: SIGTERM for a process that cleans up after itself first.)"""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal_number))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line.removeprefix("kinema-nodes: error: ")


def _result(rc, stdout: str, stderr: str, timeout) -> dict:
    if rc == "timeout":
        return {"rc": 1, "payload": None, "error": f"bake ran past {timeout} s and was stopped", "pid": os.getpid()}
    payload = None
    try:
        payload = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        payload = None
    error = None if rc in (0, 3) else (last_line(stderr) or f"bake exited with code {rc}")
    return {"rc": rc, "payload": payload, "error": error, "pid": os.getpid()}


class ShotServer:
    """This worker's warm interpreter (`kinema_nodes.cli.batch.serve_shots`): Blender's module and
    the robot libraries imported once, each shot a fork of it. Started at the first shot; None
    answers mean "run this shot as a fresh process instead" (no fork here, the server could not
    start, or it died)."""

    def __init__(self):
        self.process = None
        self.failed = not hasattr(os, "fork")
        self.lock = threading.Lock()

    def _start(self) -> bool:
        command = [sys.executable, "-c", "from kinema_nodes.cli.batch import serve_shots; serve_shots()"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                        preexec_fn=die_with_parent if sys.platform.startswith("linux") else None)
        try:
            ready = json.loads(self.process.stdout.readline() or "{}")
        except ValueError:
            ready = {}
        if not ready.get("ready"):
            self.stop()
            self.failed = True
            return False
        return True

    def run(self, arguments: list[str], timeout: float | None, label: str) -> dict | None:
        with self.lock:
            if self.failed:
                return None
            if (self.process is None or self.process.poll() is not None) and not self._start():
                return None
            try:
                self.process.stdin.write(json.dumps({"arguments": [*arguments, "--json"], "timeout": timeout, "label": label}) + "\n")
                self.process.stdin.flush()
                answer = json.loads(self.process.stdout.readline())
            except (OSError, ValueError):
                self.stop()
                return None
        return _result(answer["rc"], answer["stdout"], answer["stderr"], timeout)

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()
            self.process = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


_SERVER = ShotServer()


def run_shot(arguments: list[str], timeout: float | None = None, warm: bool = True, label: str = "shot") -> dict:
    """Run one `kinema-nodes bake`; its JSON (or its one-line error) back.

    `warm`: forked from this worker's `ShotServer` (a copy of an interpreter that has imported
    Blender and the robot libraries, nothing else), else, or where that cannot run, a brand-new
    process. Returns {"rc", "payload" (the bake's JSON or None), "error" (stderr's last line or
    None), "pid" (the process that ran this task, e.g. a Dask worker), "warm"}."""
    if warm:
        result = _SERVER.run(arguments, timeout, label)
        if result is not None:
            return {**result, "warm": True}
    command = [sys.executable, "-m", "kinema_nodes", *arguments, "--json"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=env,
                              preexec_fn=die_with_parent if sys.platform.startswith("linux") else None)
    except subprocess.TimeoutExpired:
        return {**_result("timeout", "", "", timeout), "warm": False}
    return {**_result(done.returncode, done.stdout, done.stderr, timeout), "warm": False}


def shot_summary(shot: Shot, result: dict | None, skipped: bool = False) -> dict:
    """One shot's line of the batch summary."""
    if skipped:
        return {"name": shot.name, "status": "skipped", "out": str(shot.out), "error": None}
    payload = result.get("payload") or {}
    status = payload.get("status") if result["rc"] in (0, 3) and payload else "failed"
    return {"name": shot.name, "status": status, "out": str(shot.out), "frames": payload.get("frames"),
            "converged": payload.get("converged"), "flagged": len(payload.get("flagged") or []),
            "seconds": payload.get("seconds"), "error": result.get("error"), "rc": result["rc"], "worker_pid": result.get("pid"),
            "warm": result.get("warm")}
