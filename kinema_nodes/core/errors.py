"""Errors the user can act on.

Every problem with a robot file or a request ends up as a `KinemaError` whose message is
one line naming the file (where there is one) and the problem, so the CLI can print it
without a traceback and Blender can show it in its report area.
"""

from __future__ import annotations


class KinemaError(ValueError):
    """A problem the user can fix: bad file, unknown name, bad number."""


class RobotFileError(KinemaError):
    """A URDF (or a file it refers to) that cannot be used, with the file named."""

    def __init__(self, path: str, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnknownNameError(KinemaError):
    """A joint or link name that the robot does not have; the message lists the valid ones."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind = kind
        self.name = name
        self.valid = list(valid)
        shown = ", ".join(self.valid) if self.valid else "(none)"
        super().__init__(f"unknown {kind} '{name}'; valid {kind}s: {shown}")
