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


#: Characters a terminal would act on rather than show: C0/C1 controls, and the bidirectional
#: marks, embeddings, overrides and isolates that can make a name read backwards (Trojan Source).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str, newlines: bool = True) -> str:
    """`text` safe to print on a terminal: control characters and bidi overrides become
    visible escapes (`\\x1b`, `\\u202e`), so a name from a file can neither recolour the
    terminal, reorder what is shown, nor split one message over two lines. With
    `newlines=False` a newline stays a newline (for multi-line output we built ourselves)."""
    out = []
    for char in str(text):
        code = ord(char)
        if char == "\n" and not newlines:
            out.append(char)
        elif char == "\t":
            out.append(" ")
        elif code < 0x20 or 0x7F <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif char in _BIDI:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


#: Where Kinema's own one-line notes go: stderr, or (set by the command line while Blender's and
#: the solvers' output is kept off the terminal) a stream onto the real stderr.
NOTES = None


def say(message: str) -> None:
    """One line of Kinema's own on stderr (never stdout: the CLI's answer goes there)."""
    import sys

    stream = NOTES or sys.stderr
    print(printable(message), file=stream, flush=True)
