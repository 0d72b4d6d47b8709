"""The limits a robot file must keep before anything trusts it: its size, how many links it
has, how long a number's text is, and numbers that are finite and of a robot's scale.

The loader, the MJCF reader and the mesh search share these, so a hostile file is refused with
one line naming it, whichever way it came in.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import RobotFileError

#: Largest URDF we read. Real robots are well under a megabyte.
MAX_URDF_BYTES = 32 * 1024 * 1024
#: Any coordinate beyond this many metres is a typo or an attack, not a robot.
MAX_COORDINATE = 1.0e6
#: Most links (and joints) we accept. Real robots have tens, a few hundred at most; a file with
#: thousands is generated junk or an attack on the rig builder and the solver's compiler.
MAX_LINKS = 2000
#: Longest attribute text we parse as numbers (a 'number' of a million digits is an attack).
MAX_NUMBER_TEXT = 1000


def finite_numbers(path: Path, what: str, values) -> np.ndarray:
    """`values` as an array; NaN, inf or a coordinate beyond `MAX_COORDINATE` is one line naming the file."""
    array = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(array)):
        raise RobotFileError(path, f"{what} contains NaN or inf")
    if np.any(np.abs(array) > MAX_COORDINATE):
        raise RobotFileError(path, f"{what} has a value beyond {MAX_COORDINATE:g}")
    return array


def read_robot_file(path: Path, limit: int, kind: str) -> bytes:
    """A robot file's bytes, read once: over `limit` bytes, or unreadable, it is one line
    naming the file (`kind` says what is refused: "URDFs", "MJCF")."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise RobotFileError(path, f"file is {size / 1e6:.0f} MB; refusing {kind} over {limit / 1e6:.0f} MB")
        return path.read_bytes()
    except OSError as exc:
        raise RobotFileError(path, f"cannot read: {exc.strerror or exc}") from None
