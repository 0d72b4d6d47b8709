"""The SRDF beside a robot file and its `<disable_collisions>` pairs (MoveIt's setup assistant's
list of link pairs never checked)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RobotFileError

if TYPE_CHECKING:
    from ..model.robot import RobotModel

#: Largest SRDF read.
MAX_SRDF_BYTES = 8 * 1024 * 1024


def _pair(x: str, y: str) -> tuple[str, str]:
    return (x, y) if x <= y else (y, x)


def _srdf_path(robot: RobotModel, srdf) -> Path | None:
    if srdf is not None:
        path = Path(srdf)
        if not path.is_file():
            raise RobotFileError(path, "SRDF not found (or not a file)")
        return path
    if robot.path is not None:
        path = Path(robot.path)
        stem = path.name.split(".")[0]
        # beside the URDF, or in the ROS package layout (pkg/urdf/NAME.urdf, pkg/srdf/NAME.srdf)
        for candidate in (path.with_name(stem + ".srdf"), path.parent.parent / "srdf" / (stem + ".srdf")):
            if candidate.is_file():
                return candidate
    return None


def read_srdf_pairs(path: str | Path, robot: RobotModel) -> set[tuple[str, str]]:
    """The `<disable_collisions link1= link2=>` pairs of an SRDF, with the same hardening as a
    URDF (size, no DOCTYPE or entities); unknown links are refused with the file named."""
    from ..model.xml_reading import parse_xml, read_xml_file

    path = Path(path)
    root = parse_xml(read_xml_file(path, MAX_SRDF_BYTES, "SRDF"), path, "SRDF")
    pairs = set()
    known = set(robot.links)
    for element in root.iter("disable_collisions"):
        x, y = element.get("link1"), element.get("link2")
        if not x or not y:
            raise RobotFileError(path, "SRDF <disable_collisions> needs link1 and link2")
        for name in (x, y):
            if name not in known:
                raise RobotFileError(path, f"SRDF <disable_collisions> names link '{name}', which robot '{robot.name}' does not have")
        pairs.add(_pair(x, y))
    return pairs
