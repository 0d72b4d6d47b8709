"""Exports a robot or a simulator reads: the baked joint values with their names, order and units.

A recurring cause of broken playback is an export without joint names or order, or in units
nobody wrote down. So every format here carries the joint names (in the URDF's order, the
order ROS tools and yourdfpy use for a configuration), says its units (rad for revolute and
continuous joints, m for prismatic ones) and the frame rate:

- ``csv``: a leading comment line (robot, frame rate, units), a header ``time_s`` then the joint
  names, one row per frame;
- ``json``: robot name, the URDF's sha256, joint names, units, frame rate, the limits and whether
  each was checked (with what the check found), positions, optionally velocities;
- ``ros2``: a ``trajectory_msgs/msg/JointTrajectory``, as YAML (the layout ``ros2 topic echo``
  prints) and as a rosbag2 on a topic you name, written with `rosbags` (pure Python, no ROS);
- ``mujoco``: ``qpos`` (frames x model.nq) in an ``.npz``, ordered for a given MJCF model's
  joints, with the model's joint names and each one's qpos address beside it.

Each names the rig's Tools (#30: a tool centre point is an offset from a link): the CSV's comment
line, the JSON's "tools", a comment atop the ROS 2 YAML, and the npz's tool_names, tool_links and
tool_offsets (x, y, z, w, x, y, z). A rosbag2 message has no field for it.

Every file is written to a temporary beside its target and moved over it when complete
(`core.files`), so a failure leaves no partial file and the old one as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import KinemaError
from ..files import TEMP_PREFIX, OutputError, atomic_write, check_output_path, write_text
from .limits import LimitReport, Limits, derivatives

if TYPE_CHECKING:
    from ..model.robot import RobotModel

FORMATS = ("csv", "json", "ros2", "mujoco")
#: The topic a rosbag2 export uses unless told otherwise.
DEFAULT_TOPIC = "/joint_trajectory"


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Baked joint values ready to export: (F, n) in `joint_names` order, rad and m."""

    robot_name: str
    urdf_text: str
    joint_names: tuple[str, ...]
    prismatic: tuple[bool, ...]
    fps: float
    frames: np.ndarray  # (F,) frame numbers
    joints: np.ndarray  # (F, n)
    limits: Limits | None = None
    report: LimitReport | None = None
    mimics: tuple[tuple[str, str, float, float], ...] = ()  # (joint, source, multiplier, offset)
    #: The rig's Tools (#30: "exports name it"): each {"name", "link", "offset_xyz" (m), "offset_wxyz"},
    #: the tool centre point's pose in its link's frame, so a reader can put the tool where the shot had it.
    tools: tuple[dict, ...] = ()

    def __post_init__(self) -> None:
        q = np.asarray(self.joints, dtype=float)
        if q.ndim != 2 or q.shape != (len(self.frames), len(self.joint_names)):
            raise KinemaError(f"joint values of shape {q.shape} do not match {len(self.frames)} frames of "
                              f"{len(self.joint_names)} joints")
        if len(self.frames) == 0:
            raise KinemaError("nothing to export: no frames")
        if not np.all(np.isfinite(q)):
            raise KinemaError("refusing to export non-finite joint values")
        if not (np.isfinite(self.fps) and self.fps > 0):
            raise KinemaError(f"the frame rate must be a positive number, got {self.fps}")
        object.__setattr__(self, "joints", q)
        object.__setattr__(self, "frames", np.asarray(self.frames, dtype=float))

    @property
    def times(self) -> np.ndarray:
        """Seconds from the first exported frame."""
        return (self.frames - self.frames[0]) / self.fps

    @property
    def units(self) -> dict[str, str]:
        return {name: ("m" if p else "rad") for name, p in zip(self.joint_names, self.prismatic)}

    @property
    def urdf_sha256(self) -> str:
        return hashlib.sha256(self.urdf_text.encode("utf-8")).hexdigest()

    def velocities(self) -> np.ndarray:
        """Per frame, the same finite differences the limits check uses."""
        return derivatives(self.joints, self.fps).velocity


def trajectory_for(robot: RobotModel, urdf_text: str, frames, joints, fps: float, limits: Limits | None = None,
                   report: LimitReport | None = None, tools=()) -> Trajectory:
    """A Trajectory of `robot`'s actuated joints (configuration order = the URDF's order)."""
    mimics = tuple((j.name, j.mimic.joint, float(j.mimic.multiplier), float(j.mimic.offset))
                   for j in robot.joints if j.is_movable and j.mimic is not None)
    return Trajectory(robot.name, urdf_text, tuple(robot.actuated_joint_names), tuple(bool(p) for p in robot.is_prismatic),
                      float(fps), np.asarray(frames, dtype=float), np.asarray(joints, dtype=float), limits, report, mimics,
                      tuple(tools))


def tool_entry(name: str, link: str, offset_xyz, offset_wxyz) -> dict:
    """One Tool as the exports name it (plain floats: JSON, CSV and npz all carry it)."""
    return {"name": str(name), "link": str(link), "offset_xyz": [float(v) for v in offset_xyz],
            "offset_wxyz": [float(v) for v in offset_wxyz]}


def _tools_text(trajectory: Trajectory) -> str:
    """The Tools for a one-line comment: 'NAME on LINK at (x, y, z) m, wxyz (w, x, y, z)', '; '-joined."""
    return " | ".join(f"{t['name']} on {t['link']} at ({', '.join(f'{v:.6g}' for v in t['offset_xyz'])}) m, "
                      f"wxyz ({', '.join(f'{v:.6g}' for v in t['offset_wxyz'])})" for t in trajectory.tools)


def _units_line(trajectory: Trajectory) -> str:
    kinds = set(trajectory.units.values())
    parts = []
    if "rad" in kinds:
        parts.append("rad (revolute and continuous joints)")
    if "m" in kinds:
        parts.append("m (prismatic joints)")
    return ", ".join(parts)


# ---- csv ------------------------------------------------------------------------------------

def write_csv(path: str | Path, trajectory: Trajectory) -> Path:
    """``# robot ..., fps ..., units ...`` then ``time_s,<joint names>``, one row per frame."""
    path = check_output_path(path, "--out")
    comment = (f"# robot: {trajectory.robot_name}; fps: {trajectory.fps:g}; frames: {int(trajectory.frames[0])}"
               f"-{int(trajectory.frames[-1])}; units: {_units_line(trajectory)}; urdf sha256: {trajectory.urdf_sha256}"
               + (f"; tool: {_tools_text(trajectory)}" if trajectory.tools else ""))
    table = np.column_stack([trajectory.times, trajectory.joints])
    with atomic_write(path, "w", "--out", newline="") as handle:
        handle.write(comment.replace("\n", " ") + "\n")
        handle.write(",".join(["time_s", *trajectory.joint_names]) + "\n")
        np.savetxt(handle, table, delimiter=",", fmt="%.17g")
    return path


def read_csv(path: str | Path) -> tuple[str, list[str], np.ndarray]:
    """(comment line, header, values) of a CSV written by `write_csv`."""
    with open(path, encoding="utf-8") as handle:
        comment = handle.readline().rstrip("\n")
        header = handle.readline().rstrip("\n").split(",")
        values = np.loadtxt(handle, delimiter=",", ndmin=2)
    return comment, header, values


# ---- json -----------------------------------------------------------------------------------

def trajectory_dict(trajectory: Trajectory, velocities: bool = False) -> dict:
    limits = trajectory.limits
    checks = None
    if trajectory.report is not None:
        checks = {k: v for k, v in trajectory.report.to_dict().items() if k.endswith("_violations")}
    data = {
        "robot": trajectory.robot_name,
        "urdf_sha256": trajectory.urdf_sha256,
        "joint_names": list(trajectory.joint_names),
        "units": trajectory.units,
        "fps": trajectory.fps,
        "frames": [int(round(f)) for f in trajectory.frames],
        "time_s": [float(t) for t in trajectory.times],
        "limits": limits.to_dict() if limits is not None else None,
        "limits_checked": trajectory.report is not None,
        "violations": checks,
        "positions": trajectory.joints.tolist(),
        "tools": [dict(t) for t in trajectory.tools],
    }
    if velocities:
        data["velocities"] = trajectory.velocities().tolist()
    return data


def write_json(path: str | Path, trajectory: Trajectory, velocities: bool = False) -> Path:
    path = check_output_path(path, "--out")
    # one line: json's fast encoder only runs without indent (a 10,000-frame shot in a tenth of the time)
    write_text(path, json.dumps(trajectory_dict(trajectory, velocities), allow_nan=False) + "\n", "--out")
    return path


# ---- ROS 2: JointTrajectory as YAML and as a rosbag2 ------------------------------------------

def joint_trajectory_yaml(trajectory: Trajectory, velocities: bool = True, frame_id: str = "") -> str:
    """The message as ``ros2 topic echo`` prints it (and ``ros2 topic pub`` reads it)."""
    speeds = trajectory.velocities().tolist() if velocities else None
    lines = [f"# tool: {_tools_text(trajectory)}"] if trajectory.tools else []  # a comment: the message has no field for it
    lines += ["header:", "  stamp:", "    sec: 0", "    nanosec: 0", f"  frame_id: {json.dumps(frame_id)}", "joint_names:"]
    lines += [f"- {json.dumps(name)}" for name in trajectory.joint_names]
    lines.append("points:")
    seconds, nanoseconds = _durations(trajectory.times)
    for i, row in enumerate(trajectory.joints.tolist()):  # Python floats: repr is the shortest exact text
        # sequences of numbers in flow style ([a, b, ...]), as `ros2 topic echo --flow-style` prints them
        lines.append("- positions: [" + ", ".join(map(repr, row)) + "]")
        lines.append("  velocities: [" + (", ".join(map(repr, speeds[i])) if speeds is not None else "") + "]")
        lines.append(f"  accelerations: []\n  effort: []\n  time_from_start:\n    sec: {seconds[i]}\n    nanosec: {nanoseconds[i]}")
    return "\n".join(lines) + "\n"


def _durations(times: np.ndarray) -> tuple[list[int], list[int]]:
    """Whole seconds and nanoseconds of each time (rounded to the nanosecond)."""
    total = np.rint(np.asarray(times) * 1e9).astype(np.int64)
    return (total // 1_000_000_000).tolist(), (total % 1_000_000_000).tolist()


def _ros_types():
    try:
        from rosbags.typesys import Stores, get_typestore
    except ImportError:
        raise KinemaError("the ros2 export needs rosbags: pip install rosbags") from None
    return get_typestore(Stores.ROS2_HUMBLE)


def joint_trajectory_message(trajectory: Trajectory, velocities: bool = True, frame_id: str = ""):
    """A `rosbags` JointTrajectory message object of the trajectory."""
    store = _ros_types()
    types = store.types
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=frame_id)
    positions = np.ascontiguousarray(trajectory.joints, dtype=np.float64)
    speeds = np.ascontiguousarray(trajectory.velocities(), dtype=np.float64) if velocities else None
    empty = np.zeros(0, dtype=np.float64)
    point, duration = types["trajectory_msgs/msg/JointTrajectoryPoint"], types["builtin_interfaces/msg/Duration"]
    seconds, nanoseconds = _durations(trajectory.times)
    points = [point(positions=positions[i], velocities=empty if speeds is None else speeds[i], accelerations=empty,
                    effort=empty, time_from_start=duration(sec=seconds[i], nanosec=nanoseconds[i]))
              for i in range(len(positions))]
    message = types["trajectory_msgs/msg/JointTrajectory"](header=header, joint_names=list(trajectory.joint_names),
                                                             points=points)
    return store, message


def joint_trajectory_cdr(trajectory: Trajectory, velocities: bool = True, frame_id: str = "") -> bytes:
    """The message serialised as ROS 2 stores it (CDR, little endian), written directly: the same
    bytes as rosbags' `serialize_cdr` of `joint_trajectory_message` (a test holds them equal), at
    a fraction of the cost for long shots (no message object per point)."""
    out = bytearray(b"\x00\x01\x00\x00")  # encapsulation: CDR, little endian

    def align(size: int) -> None:
        out.extend(b"\x00" * ((-(len(out) - 4)) % size))

    def uint32(value: int) -> None:
        align(4)
        out.extend(struct.pack("<I", value))

    def string(text: str) -> None:
        data = text.encode("utf-8") + b"\x00"
        uint32(len(data))
        out.extend(data)

    def doubles(values: np.ndarray) -> None:
        uint32(len(values))
        if len(values):
            align(8)
            out.extend(values.tobytes())

    out.extend(struct.pack("<iI", 0, 0))
    string(frame_id)
    uint32(len(trajectory.joint_names))
    for name in trajectory.joint_names:
        string(name)
    positions = np.ascontiguousarray(trajectory.joints, dtype="<f8")
    speeds = np.ascontiguousarray(trajectory.velocities(), dtype="<f8") if velocities else None
    empty = np.zeros(0, dtype="<f8")
    seconds, nanoseconds = _durations(trajectory.times)
    uint32(len(positions))
    count = len(positions)
    first = 0
    while first < count and (speeds is None or (len(out) - 4) % 8):
        doubles(positions[first])
        doubles(empty if speeds is None else speeds[first])
        doubles(empty)
        doubles(empty)
        align(4)
        out.extend(struct.pack("<iI", seconds[first], nanoseconds[first]))
        first += 1
    if first < count:  # from an 8-aligned start, every point with velocities has the same layout
        out.extend(_point_records(positions[first:], speeds[first:], seconds[first:], nanoseconds[first:]))
    return bytes(out)


def _point_records(positions: np.ndarray, speeds: np.ndarray, seconds: list[int], nanoseconds: list[int]) -> bytes:
    """CDR of JointTrajectoryPoints starting 8-aligned: count, pad, positions, count, pad,
    velocities, two empty sequences, time_from_start; 32 + 8n + 8m bytes each, so all alike."""
    count, n = positions.shape
    m = speeds.shape[1]
    records = np.zeros((count, 32 + 8 * n + 8 * m), dtype=np.uint8)
    records[:, 0:4] = np.frombuffer(struct.pack("<I", n), dtype=np.uint8)
    records[:, 8:8 + 8 * n] = positions.view(np.uint8).reshape(count, 8 * n)
    at = 8 + 8 * n
    records[:, at:at + 4] = np.frombuffer(struct.pack("<I", m), dtype=np.uint8)
    records[:, at + 8:at + 8 + 8 * m] = speeds.view(np.uint8).reshape(count, 8 * m)
    at += 8 + 8 * m + 8  # the empty accelerations and effort: a zero count each
    stamps = np.zeros(count, dtype=[("sec", "<i4"), ("nanosec", "<u4")])
    stamps["sec"], stamps["nanosec"] = seconds, nanoseconds
    records[:, at:at + 8] = stamps.view(np.uint8).reshape(count, 8)
    return records.tobytes()


def _check_topic(topic: str) -> str:
    if not topic or not topic.startswith("/") or any(c.isspace() for c in topic) or "//" in topic:
        raise KinemaError(f"--topic '{topic}' is not a ROS topic name (like /joint_trajectory)")
    return topic


def ros2_paths(path: str | Path) -> tuple[Path, Path]:
    """(bag folder, YAML file) for --out PATH: the bag is PATH, the YAML is PATH.yaml beside it."""
    path = Path(path).absolute()
    if path.suffix.lower() in (".yaml", ".yml"):
        return path.with_suffix(""), path
    return path, path.with_name(path.name + ".yaml")


#: Files a rosbag2 folder holds beside its metadata.yaml (sqlite3 and MCAP storage).
BAG_FILE_SUFFIXES = (".db3", ".mcap")
#: A metadata.yaml larger than this is not one rosbags wrote.
MAX_BAG_METADATA_BYTES = 1024 * 1024


def bag_folder_files(folder: Path) -> list[str] | None:
    """The file names of `folder` when it is itself a rosbag2 and nothing else: metadata.yaml
    plus the .db3/.mcap files that metadata lists, every one a regular file; else None. Only
    such a folder may be replaced by an export, and only with --force: anything else in it is
    the user's, and a folder is replaced whole."""
    import stat

    try:
        names = sorted(os.listdir(folder))
        metadata = folder / "metadata.yaml"
        info = metadata.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BAG_METADATA_BYTES:
            return None
        from ruamel.yaml import YAML

        document = YAML(typ="safe").load(metadata.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - unreadable, not YAML, not UTF-8: not a bag this export may replace
        return None
    information = document.get("rosbag2_bagfile_information") if isinstance(document, dict) else None
    listed = information.get("relative_file_paths") if isinstance(information, dict) else None
    if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
        return None
    for name in names:
        if name == "metadata.yaml":
            continue
        if name not in listed or not name.endswith(BAG_FILE_SUFFIXES) or not (folder / name).is_file() \
                or (folder / name).is_symlink():
            return None
    return names


def check_bag_output(bag: Path, force: bool = False) -> None:
    """Refuse, before any work, a ros2 --out whose folder holds anything of the user's.

    Nothing there, or an empty folder: written. An existing rosbag2 (`bag_folder_files`):
    replaced with --force, else refused. A folder with anything else in it, a file or a
    link: refused, --force or not; an export never merges into a folder or removes one it
    cannot prove is only a bag."""
    if not os.path.lexists(bag):
        return
    if bag.is_symlink():
        raise OutputError(f"--out '{bag}' is a link; refusing to replace it (give the bag folder itself)")
    if not bag.is_dir():
        raise OutputError(f"--out '{bag}' exists and is not a folder; refusing to write over it")
    try:
        empty = not any(os.scandir(bag))
    except OSError as exc:
        raise OutputError(f"--out '{bag}' cannot be read: {exc.strerror or exc}") from None
    if empty:
        return
    if bag_folder_files(bag) is None:
        raise OutputError(f"--out '{bag}' is a folder holding files other than a rosbag2; refusing to write into or over it")
    if not force:
        raise OutputError(f"--out '{bag}' is an existing rosbag2; --force replaces it")


def write_ros2(path: str | Path, trajectory: Trajectory, topic: str = DEFAULT_TOPIC, velocities: bool = True,
               force: bool = False) -> tuple[Path, Path]:
    """The JointTrajectory as a rosbag2 folder (one message on `topic`) and as YAML beside it.
    Both are written completely to temporaries first; an existing bag is replaced only then,
    and only with `force` (`check_bag_output`)."""
    _check_topic(topic)
    bag, yaml_path = ros2_paths(path)
    check_output_path(yaml_path, "--out")
    check_bag_output(bag, force)
    try:
        from rosbags.rosbag2 import Writer
    except ImportError:
        raise KinemaError("the ros2 export needs rosbags: pip install rosbags") from None
    store = _ros_types()
    msgtype = "trajectory_msgs/msg/JointTrajectory"
    staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX + bag.name + "-", dir=bag.parent))
    new_bag = staging / bag.name
    try:
        with Writer(new_bag, version=8) as writer:
            connection = writer.add_connection(topic, msgtype, typestore=store)
            writer.write(connection, time.time_ns(), joint_trajectory_cdr(trajectory, velocities))
        write_text(yaml_path, joint_trajectory_yaml(trajectory, velocities), "--out")
        old = staging / (bag.name + ".old")
        if bag.exists():
            os.replace(bag, old)
        os.replace(new_bag, bag)
    except OSError as exc:
        raise OutputError(f"cannot write --out '{bag}': {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return bag, yaml_path


def read_ros2(bag: str | Path, topic: str = DEFAULT_TOPIC):
    """The JointTrajectory messages on `topic` in a rosbag2, read with rosbags."""
    from rosbags.rosbag2 import Reader

    store = _ros_types()
    with Reader(Path(bag)) as reader:
        connections = [c for c in reader.connections if c.topic == topic]
        return [store.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages(connections=connections)]


# ---- MuJoCo ---------------------------------------------------------------------------------

def mujoco_qpos(trajectory: Trajectory, model_path: str | Path) -> dict:
    """qpos per frame for the MJCF model at `model_path`: each model joint named like one of the
    robot's (actuated or mimic) joints gets its value; every other qpos keeps the model's qpos0."""
    try:
        import mujoco
    except ImportError:
        raise KinemaError("the mujoco export needs mujoco: pip install mujoco") from None
    model_path = Path(model_path)
    if not model_path.is_file():
        what = "is not a regular file (a folder, pipe, device or socket)" if model_path.exists() else "does not exist"
        raise KinemaError(f"--model '{model_path}' {what}")
    from ..model.mjcf_files import check_mjcf_files

    check_mjcf_files(model_path)  # the folder rule and the size caps, before MuJoCo reads or allocates anything
    try:
        model = mujoco.MjModel.from_xml_path(str(model_path))
    except Exception as exc:  # MuJoCo raises ValueError with its compiler's message
        raise KinemaError(f"--model '{model_path}': MuJoCo cannot load it: {str(exc).strip().splitlines()[0]}") from None
    index = {name: i for i, name in enumerate(trajectory.joint_names)}
    mimic = {name: (source, m, o) for name, source, m, o in trajectory.mimics}
    width = {int(mujoco.mjtJoint.mjJNT_FREE): 7, int(mujoco.mjtJoint.mjJNT_BALL): 4}
    kinds = {int(mujoco.mjtJoint.mjJNT_FREE): "free", int(mujoco.mjtJoint.mjJNT_BALL): "ball",
             int(mujoco.mjtJoint.mjJNT_SLIDE): "slide", int(mujoco.mjtJoint.mjJNT_HINGE): "hinge"}
    qpos = np.tile(np.asarray(model.qpos0, dtype=float), (len(trajectory.frames), 1))
    names, addresses, matched, unmatched = [], [], [], []
    for j in range(model.njnt):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) or ""
        address = int(model.jnt_qposadr[j])
        names.append(name)
        addresses.append(address)
        if name in index:
            # a name match is only a match when the kinds agree: metres written into a hinge's
            # radians (or a revolute joint's angle into a free joint's x) plays back wrong
            kind = kinds.get(int(model.jnt_type[j]), "unknown")
            wanted = "slide" if trajectory.prismatic[index[name]] else "hinge"
            if kind != wanted:
                ours = "prismatic" if wanted == "slide" else "revolute"
                raise KinemaError(f"--model '{model_path}': joint '{name}' is a {kind} joint there but {ours} in "
                                  f"{trajectory.robot_name}; refusing to match them by name")
        if width.get(int(model.jnt_type[j]), 1) != 1:
            continue
        if name in index:
            qpos[:, address] = trajectory.joints[:, index[name]]
            matched.append(name)
        elif name in mimic and mimic[name][0] in index:
            source, multiplier, offset = mimic[name]
            qpos[:, address] = multiplier * trajectory.joints[:, index[source]] + offset
            matched.append(name)
    if not matched:
        raise KinemaError(f"--model '{model_path}': none of its joints is named like a joint of {trajectory.robot_name} "
                          f"({', '.join(trajectory.joint_names[:6])}...)")
    model_joints = set(names)
    unmatched = [n for n in trajectory.joint_names if n not in model_joints]
    return {"qpos": qpos, "joint_names": np.array(names), "qpos_address": np.array(addresses, dtype=np.int64),
            "matched": np.array(matched), "unmatched": np.array(unmatched, dtype=str), "time_s": trajectory.times,
            "frames": trajectory.frames, "fps": np.float64(trajectory.fps), "robot": np.array(trajectory.robot_name),
            "model": np.array(str(model_path.resolve())), "nq": np.int64(model.nq),
            "tool_names": np.array([t["name"] for t in trajectory.tools], dtype=str),
            "tool_links": np.array([t["link"] for t in trajectory.tools], dtype=str),
            "tool_offsets": np.array([[*t["offset_xyz"], *t["offset_wxyz"]] for t in trajectory.tools], dtype=float).reshape(-1, 7)}


def write_mujoco(path: str | Path, trajectory: Trajectory, model_path: str | Path) -> tuple[Path, dict]:
    path = check_output_path(path, "--out")
    if path.suffix.lower() != ".npz":
        raise KinemaError(f"--out '{path}' must end in .npz for the mujoco format")
    arrays = mujoco_qpos(trajectory, model_path)
    with atomic_write(path, "wb", "--out") as handle:
        np.savez(handle, **arrays)
    return path, arrays


def export(trajectory: Trajectory, fmt: str, out: str | Path, *, topic: str = DEFAULT_TOPIC, model: str | None = None,
           velocities: bool = False, force: bool = False) -> list[Path]:
    """Write `trajectory` as `fmt`; returns the paths written. `force`: ros2 may replace an
    existing bag (never a folder holding anything else)."""
    if fmt == "csv":
        return [write_csv(out, trajectory)]
    if fmt == "json":
        return [write_json(out, trajectory, velocities)]
    if fmt == "ros2":
        return list(write_ros2(out, trajectory, topic, velocities=True, force=force))
    if fmt == "mujoco":
        if not model:
            raise KinemaError("the mujoco format needs --model MJCF.xml (the model whose joints order qpos)")
        return [write_mujoco(out, trajectory, model)[0]]
    raise KinemaError(f"unknown format '{fmt}'; formats: {', '.join(FORMATS)}")
