"""cli.common"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import numpy as np
from ..core.errors import KinemaError


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the CLI's error contract)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_joint_values(items: list[str] | None) -> dict[str, float]:
    """NAME=VALUE pairs -> {name: value}; bad pairs are a `KinemaError`."""
    values: dict[str, float] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise KinemaError(f"joint value '{item}' is not NAME=VALUE")
        try:
            value = float(text)
        except ValueError:
            raise KinemaError(f"joint value '{item}': '{text}' is not a number") from None
        if not np.isfinite(value):
            raise KinemaError(f"joint value '{item}' is not a finite number")
        values[name] = value
    return values


#: Where a command's answer goes. Commands that run Blender point the process's stdout at
#: /dev/null (Blender logs to it from C, at times we cannot predict) and answer here instead.
_answer = None


#: Commands that start Blender's module.
BLENDER_COMMANDS = ("import", "configs", "bake", "demo")


def emit(args, payload: dict, text: str) -> None:
    """Print the JSON object with --json, else the human text."""
    out = _answer or sys.stdout
    if getattr(args, "json", False):
        print(json.dumps(payload, allow_nan=False), file=out)
    else:
        print(text, file=out)
    out.flush()


@contextlib.contextmanager
def answer_on_stdout_only():
    """Keep stdout for the command's answer: anything else written to fd 1 is dropped."""
    global _answer
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    _answer = os.fdopen(os.dup(saved), "w")
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        _answer.close()
        _answer = None
        os.close(saved)
        os.close(devnull)


def finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
