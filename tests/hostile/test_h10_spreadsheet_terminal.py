"""Class 10: output a spreadsheet or a terminal cannot be fooled by (the `cli` helper's CSV
writer and terminal output; these cases assert the issue's outcome). A name starting with
=, +, - or @ is written to CSV quoted and prefixed (OWASP); control characters and bidi
overrides in names are escaped on the terminal; a newline in a name never makes an error two
lines.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from corpus import assert_cli_refusal, run_cli, two_link_urdf


@pytest.mark.parametrize("name", ["=cmd|' /C calc'!A0", "+1+1", "-2-2", "@SUM(A1:A9)"])
def test_formula_like_joint_name_is_quoted_and_prefixed(name):
    from kinema_nodes.cli.csv_files import joints_csv_text

    text = joints_csv_text([name, "plain"], np.array([1]), np.array([[0.5, 0.25]]))
    header = text.splitlines()[0]
    assert header.split(",", 1)[1].startswith("\"'" + name[0]), header
    assert next(csv.reader(io.StringIO(text)))[1:] == ["'" + name, "plain"]


def test_plain_names_are_left_alone():
    from kinema_nodes.cli.csv_files import joints_csv_text

    text = joints_csv_text(["shoulder_pan", "elbow"], np.array([1]), np.array([[0.5, 0.25]]))
    assert text.splitlines()[0] == "frame,shoulder_pan,elbow"


@pytest.mark.parametrize("link", ["evil\x1b[31mred", "rtl\u202eexe.stl", "bell\x07", "two\nlines", "carriage\rreturn"])
def test_hostile_link_name_on_the_terminal_is_escaped_on_one_line(link):
    result = run_cli("fk", "arm6", "--link", link)
    line = assert_cli_refusal(result)
    for raw in ("\x1b", "\u202e", "\x07", "\r"):
        assert raw not in line, repr(line)


def test_newline_in_a_urdf_name_keeps_the_error_on_one_line(tmp_path):
    path = tmp_path / "robot.urdf"
    path.write_text(two_link_urdf(name="two&#10;lines").replace('<link name="b"/>', '<link name="b&#10;c"/>')
                    .replace('<child link="b"/>', '<child link="b&#10;c"/>'))
    result = run_cli("fk", path, "--link", "nope")
    line = assert_cli_refusal(result, "nope")
    assert "\x1b" not in line
