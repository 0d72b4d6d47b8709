"""Short names for real robots from the `example-robot-data` package, when it is installed.

Tests and benchmarks use real robots; this lets the CLI and the benchmarks say `panda` instead
of a long site-packages path. The package is a test dependency, not a runtime one.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

#: short name -> path below example-robot-data's `robots/` folder
EXAMPLE_ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "ur5_limited": "ur_description/urdf/ur5_joint_limited_robot.urdf",
    "ur10": "ur_description/urdf/ur10_robot.urdf",
    "ur3": "ur_description/urdf/ur3_robot.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",
    "xarm7": "xarm_description/urdf/xarm7.urdf",
    "z1": "z1_description/urdf/z1.urdf",
    "talos": "talos_data/robots/talos_full_v2.urdf",
    "talos_left_arm": "talos_data/robots/talos_left_arm.urdf",
    "g1": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",
    "so100": "so_arm_description/urdf/so100.urdf",
}


def example_robots_folder() -> Path | None:
    """`.../cmeel.prefix/share/example-robot-data/robots`, or None when not installed."""
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}
    for root in roots:
        folder = Path(root) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if folder.is_dir():
            return folder
    return None


def example_robot(name: str) -> Path | None:
    """Path of a robot from example-robot-data by short name, or None."""
    folder = example_robots_folder()
    if folder is None or name not in EXAMPLE_ROBOTS:
        return None
    path = folder / EXAMPLE_ROBOTS[name]
    return path if path.is_file() else None
