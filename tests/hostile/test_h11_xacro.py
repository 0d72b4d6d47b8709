"""Class 11: a xacro file from the internet runs no code and reads nothing outside its folders
(issue #32 items 1, 7, 8).

Every case has two canaries: a file outside the robot's folders that must never be opened
(proved by Python's audit hook seeing no ``open`` of it, and by its text appearing nowhere),
and a command that must never run (it would create a file; the audit hook also sees no
``os.system``, ``subprocess.Popen`` or ``os.posix_spawn``). The escapes are the known ones
against Python-``eval`` sandboxes and xacro's own filter: attribute walks to
``object.__subclasses__``, dunders hidden in format strings, lambdas and their defaults,
``type``/``vars``, ``$(eval)`` with the real builtins (``open``, ``exec``), comprehensions;
and file access: ``load_yaml`` of an outside file, includes outside (absolute, ``..``, glob,
symlink), ``$(find PKG)/..``. Bombs (exponential macros, power towers, string doubling,
billion-laughs properties, YAML alias bombs) and FIFOs run in a worker thread under a time
limit and must end well inside it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kinema_nodes.core.errors import RobotFileError
from kinema_nodes.core.model.packages import PackageSearchPath
from kinema_nodes.core.model.loading import load_robot
from kinema_nodes.core.model.xacro import expand_xacro

from corpus import assert_cli_refusal, assert_one_line, run_cli, within

pytest.importorskip("xacro")

SECRET = "CANARY-SECRET-7f3a"
#: Seconds a hang case may take before it counts as a hang; each case ends well inside it.
HANG_LIMIT = 60


class Audit:
    """Records, while active, every ``open`` of a path under `outside` and every process start."""

    _active: list[Audit] = []
    _installed = False

    def __init__(self, outside: Path):
        self.outside = str(outside.resolve())
        self.opened: list[str] = []
        self.commands: list[str] = []

    @classmethod
    def _hook(cls, event, args):
        for audit in cls._active:
            if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
                name = os.fsdecode(args[0])
                if os.path.realpath(name).startswith(audit.outside):
                    audit.opened.append(name)
            elif event in ("os.system", "subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn", "os.fork"):
                audit.commands.append(f"{event} {args!r}"[:200])

    def __enter__(self):
        if not Audit._installed:
            sys.addaudithook(Audit._hook)
            Audit._installed = True
        Audit._active.append(self)
        return self

    def __exit__(self, *exc):
        Audit._active.remove(self)


def _robot(body: str, name: str = "hostile") -> str:
    return (f'<?xml version="1.0"?><robot name="{name}" xmlns:xacro="http://www.ros.org/wiki/xacro">\n'
            f'<link name="a"/>\n{body}\n</robot>\n')


@pytest.fixture
def place(tmp_path):
    """A robot package ``ws/robot_pkg`` (package.xml) with ``urdf/`` and ``config/``, and outside
    it ``outside/`` holding the canary file (also as YAML and xacro) and the canary command."""
    package = tmp_path / "ws" / "robot_pkg"
    (package / "urdf").mkdir(parents=True)
    (package / "config").mkdir()
    (package / "package.xml").write_text("<package><name>robot_pkg</name></package>")
    (package / "config" / "arm.yaml").write_text("arm:\n  length: 0.5\n  joints: [j1, j2]\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(SECRET)
    (outside / "canary.yaml").write_text(f"secret: {SECRET}\n")
    (outside / "canary.xacro").write_text(_robot(f'<link name="{SECRET}"/>'))
    ran = tmp_path / "CANARY_COMMAND_RAN"

    class Place:
        pass

    place = Place()
    place.tmp, place.package, place.outside, place.ran = tmp_path, package, outside, ran
    place.command = f"touch {ran}"
    place.xacro = package / "urdf" / "robot.urdf.xacro"
    return place


def _expand(path: Path, limit: float = HANG_LIMIT, args=None):
    """expand_xacro in a worker thread: (text or None, error or None); fails if it outlives `limit`."""
    text, error = within(limit, "expansion", lambda: expand_xacro(path, args or {}, PackageSearchPath(robot_file=path)))
    return (None if text is None else text[0]), error


def _refused_safely(place, body: str, *fragments: str, extra_files: dict | None = None) -> str:
    """The xacro with `body` is refused in one line naming every fragment; the canary file was
    never opened, its text is nowhere, and the canary command never ran."""
    for name, text in (extra_files or {}).items():
        (place.package / name).write_text(text)
    place.xacro.write_text(_robot(body))
    with Audit(place.outside) as audit:
        text, error = _expand(place.xacro)
    assert text is None, f"accepted: {text[:500]}"
    assert isinstance(error, RobotFileError), repr(error)
    message = assert_one_line(error, str(place.xacro), *fragments)
    assert SECRET not in message
    assert audit.opened == [], audit.opened
    assert audit.commands == [], audit.commands
    assert not place.ran.exists(), "the canary command ran"
    return message


#: A property holding ')', to close a call inside $(eval ...).
RP = '<xacro:property name="rp" value=")"/>'


# ---- code execution: known escapes ---------------------------------------------------------------
ESCAPES = {
    # attribute walks to object.__subclasses__ (the classic eval-sandbox escape)
    "subclasses_walk": ('<link name="${().__class__.__bases__[0].__subclasses__()}"/>', "__class__"),
    "dunder_in_format_string": ('<xacro:property name="f" value="{0.__class__.__base__.__subclasses__}"/>'
                                '<link name="${f.format(1)}"/>', ".format"),
    "lambda": ('<link name="${(lambda: 1)()}"/>', "lambda"),
    "lambda_default_type": ('<link name="${(lambda t=python.type: t)()}"/>', "lambda"),
    "type_of": ('<link name="${python.type(1)}"/>', "type"),
    "vars_of_math": ('<link name="${python.vars(math)}"/>', "vars"),
    "comprehension_walk": ('<link name="${[c for c in python.type(1).mro()]}"/>', "comprehension"),
    "generator_frame": ('<link name="${(x for x in [1]).gi_frame}"/>', "generator"),
    "str_percent_format": ("<link name=\"${'%s' % 1}\"/>", "%"),
    # $(eval) gets the real builtins in xacro: open, exec and __import__ without a dunder in sight
    # (its lexer ends $(...) at the first ')', so the ')' comes from a property)
    "eval_open": (RP + "<link name=\"$(eval open('{canary}'${rp}.read(${rp})\"/>", "open"),
    "eval_exec": (RP + "<link name=\"$(eval exec('import os; os.system(&quot;{command}&quot;${rp}', {}${rp})\"/>", "exec"),
    "eval_getattr": (RP + "<link name=\"$(eval getattr(1, 'real'${rp})\"/>", "getattr"),
    "eval_compile": (RP + "<link name=\"$(eval eval('1+1'${rp})\"/>", "eval"),
    "property_holds_type": ('<xacro:property name="t" value="${python.type}"/><link name="${t(1)}"/>', "type"),
    "breakpoint_builtin": ('<link name="${python.breakpoint()}"/>', "breakpoint"),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_known_eval_escape_runs_nothing(place, case):
    body, fragment = ESCAPES[case]
    body = body.replace("{canary}", str(place.outside / "canary.txt")).replace("{command}", place.command)
    message = _refused_safely(place, body, fragment)
    assert "line " in message or "not defined" in message, message


# ---- file access outside the robot's folders -----------------------------------------------------
OUTSIDE = "outside the robot's folders"


def _outside_cases(place) -> dict[str, str]:
    outside = place.outside
    return {
        "load_yaml_absolute": f"<link name=\"${{xacro.load_yaml('{outside / 'canary.yaml'}')['secret']}}\"/>",
        "load_yaml_dotdot": "<link name=\"${xacro.load_yaml('../../../outside/canary.yaml')['secret']}\"/>",
        "load_yaml_deprecated_name": f"<link name=\"${{load_yaml('{outside / 'canary.yaml'}')['secret']}}\"/>",
        "load_yaml_etc_passwd": "<link name=\"${xacro.load_yaml('/etc/passwd')}\"/>",
        "include_absolute": f'<xacro:include filename="{outside / "canary.xacro"}"/>',
        "include_dotdot": '<xacro:include filename="../../../outside/canary.xacro"/>',
        "include_find_dotdot": '<xacro:include filename="$(find robot_pkg)/../../outside/canary.xacro"/>',
        "include_glob_outside": f'<xacro:include filename="{outside}/*.xacro"/>',
        "include_etc": '<xacro:include filename="/etc/hostname"/>',
    }


@pytest.mark.parametrize("case", ["load_yaml_absolute", "load_yaml_dotdot", "load_yaml_deprecated_name", "load_yaml_etc_passwd",
                                  "include_absolute", "include_dotdot", "include_find_dotdot", "include_glob_outside",
                                  "include_etc"])
def test_reading_outside_the_robots_folders_is_refused(place, case):
    _refused_safely(place, _outside_cases(place)[case], OUTSIDE)


def test_symlink_out_of_the_package_is_refused(place):
    (place.package / "urdf" / "parts.xacro").symlink_to(place.outside / "canary.xacro")
    _refused_safely(place, '<xacro:include filename="parts.xacro"/>', OUTSIDE)


def test_yaml_symlink_out_of_the_package_is_refused(place):
    (place.package / "config" / "limits.yaml").symlink_to(place.outside / "canary.yaml")
    _refused_safely(place, "<link name=\"${xacro.load_yaml('../config/limits.yaml')['secret']}\"/>", OUTSIDE)


# ---- FIFOs and devices (item 7) ------------------------------------------------------------------
@pytest.mark.parametrize("construct", ["include", "load_yaml", "eval_load_yaml_dev_zero"])
def test_fifo_or_device_is_refused_without_blocking(place, construct):
    fifo = place.package / "config" / "pipe.yaml"
    os.mkfifo(fifo)
    body = {
        "include": '<xacro:include filename="../config/pipe.yaml"/>',
        "load_yaml": "<link name=\"${xacro.load_yaml('../config/pipe.yaml')}\"/>",
        "eval_load_yaml_dev_zero": "<link name=\"${xacro.load_yaml('/dev/zero')}\"/>",
    }[construct]
    fragment = OUTSIDE if "dev_zero" in construct else "not a regular file"
    _refused_safely(place, body, fragment)


# ---- expansion bombs (item 8) --------------------------------------------------------------------
_DOUBLING = "".join(f'<xacro:property name="p{i + 1}" value="${{p{i}}}${{p{i}}}"/>' for i in range(40))
_BILLION_LAUGHS = '<xacro:property name="p0" value="lol"/>' + _DOUBLING + '<link name="${p40}"/>'
_EXPONENTIAL_MACRO = (
    '<xacro:macro name="m" params="n"><xacro:if value="${n > 0}"><xacro:m n="${n-1}"/><xacro:m n="${n-1}"/></xacro:if>'
    '<link name="l${n}"/></xacro:macro><xacro:m n="40"/>'
)
_WIDE_MACRO = _EXPONENTIAL_MACRO.replace('<link name="l${n}"/>', "".join(f'<link name="l${{n}}_{i}"/>' for i in range(100)))
BOMBS = {
    "power_tower": ('<link name="${9**9**9}"/>', "9 ** 387420489"),
    "power_of_big": ('<link name="${10**100000}"/>', "**"),
    "shift": ('<link name="${1 &lt;&lt; 10**9}"/>', "<<"),
    "string_repeat": ("<link name=\"${'a' * 10**10}\"/>", "repeating a str"),
    "list_repeat": ('<link name="${[0] * 10**9}"/>', "repeating a list"),
    "range_list": ('<link name="${python.list(python.range(10**9))}"/>', "range of"),
    "deprecated_range": ('<link name="${list(range(10**9))}"/>', "range of"),
    "factorial": ('<link name="${factorial(10**7)}"/>', "factorial"),
    "round_huge_digits": ('<link name="${round(10, -10**9)}"/>', "round"),
    "billion_laughs_properties": (_BILLION_LAUGHS, "characters"),
    "exponential_macro": (_EXPONENTIAL_MACRO, "macros"),
    "exponential_wide_macro": (_WIDE_MACRO, "grows too large"),
    "yaml_alias_bomb": ("<link name=\"${str(xacro.load_yaml('../config/bomb.yaml'))}\"/>", "refused"),
    "recursive_macro": ('<xacro:macro name="m"><xacro:m/></xacro:macro><xacro:m/>', "macro loop"),
}
_YAML_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))


@pytest.mark.parametrize("case", sorted(BOMBS))
def test_expansion_bomb_ends_in_one_line_well_inside_the_limit(place, case):
    body, fragment = BOMBS[case]
    (place.package / "config" / "bomb.yaml").write_text(_YAML_BOMB)
    _refused_safely(place, body, fragment)


# ---- what still works --------------------------------------------------------------------------------
def test_ordinary_expressions_and_yaml_inside_the_package_expand_as_xacro_does(place):
    body = (
        '<xacro:property name="cfg" value="${xacro.load_yaml(\'../config/arm.yaml\')}"/>'
        '<xacro:property name="L" value="${cfg[\'arm\'][\'length\']}"/>'
        '<xacro:include filename="$(find robot_pkg)/urdf/parts.xacro"/>'
        '<xacro:include filename="not_there.xacro" optional="true"/>'
        '<xacro:part name="b" len="${L * 2}"/>'
        "<link name=\"c_${'-'.join(cfg.arm.joints)}_${python.len(cfg.arm.joints)}_$(eval 2 * 3)\"/>"
        '<joint name="j" type="revolute"><parent link="a"/><child link="b"/>'
        '<origin xyz="${L} 0 ${round(-pi/4, 3)}" rpy="${radians(90)} 0 ${math.pi/2 if L > 0.1 else 0}"/>'
        '<limit lower="${-L}" upper="${max(L, 1)}" effort="1" velocity="1"/></joint>'
        '<joint name="j2" type="fixed"><parent link="b"/><child link="c_j1-j2_2_6"/></joint>'
    )
    (place.package / "urdf" / "parts.xacro").write_text(
        '<robot xmlns:xacro="http://www.ros.org/wiki/xacro"><xacro:macro name="part" params="name len">'
        '<link name="${name}"><visual><geometry><box size="${len} 0.1 0.1"/></geometry></visual></link>'
        '</xacro:macro></robot>')
    place.xacro.write_text(_robot(body))
    with Audit(place.outside) as audit:
        text, error = _expand(place.xacro)
    assert error is None, error
    assert audit.opened == [] and audit.commands == []
    assert '<link name="c_j1-j2_2_6"/>' in text
    assert '<box size="1.0 0.1 0.1"/>' in text
    assert 'xyz="0.5 0 -0.785"' in text and 'rpy="1.5707963267948966 0 1.5707963267948966"' in text
    assert 'lower="-0.5" upper="1"' in text


def test_the_same_file_through_xacros_own_evaluator_gives_the_same_text(place):
    """The restricted evaluator's values are Python's: the expansion equals stock xacro's."""
    import xacro

    body = ("<xacro:property name=\"w\" value=\"0.25\"/><link name=\"b${w*4}_${int(w*8)}_${'x'.upper()}\"/>"
            '<joint name="j" type="revolute"><parent link="a"/><child link="b1.0_2_X"/>'
            '<origin xyz="${w/3} ${-w} ${w**2}" rpy="${pi} ${sin(w)} ${atan2(1, 2)}"/>'
            '<limit lower="${-w}" upper="$(eval 1/3)" effort="1" velocity="1"/></joint>')
    place.xacro.write_text(_robot(body))
    ours = _expand(place.xacro)[0]
    stock = xacro.process_file(str(place.xacro)).toprettyxml(indent="  ")
    assert ours == stock


def test_cli_refuses_an_escape_with_exit_2_and_one_line(place):
    place.xacro.write_text(_robot(RP + f"<link name=\"$(eval open('{place.outside / 'canary.txt'}'${{rp}}.read(${{rp}})\"/>"))
    result = run_cli("info", place.xacro, timeout=120)
    line = assert_cli_refusal(result, "robot.urdf.xacro", "open")
    assert SECRET not in result.stdout + result.stderr and SECRET not in line
    assert not place.ran.exists()


def test_load_robot_refuses_include_outside_with_the_line(place):
    place.xacro.write_text(_robot(f'\n\n<xacro:include filename="{place.outside / "canary.xacro"}"/>'))
    with pytest.raises(RobotFileError) as caught:
        load_robot(place.xacro, check_meshes=False)
    assert_one_line(caught.value, "robot.urdf.xacro line 5", OUTSIDE)


@pytest.mark.parametrize("case", ["fifo_include", "include_outside", "exponential_macro", "power_tower"])
def test_cli_refusals_are_exit_2_and_one_line_well_inside_the_limit(place, case):
    fifo = place.package / "urdf" / "pipe.xacro"
    os.mkfifo(fifo)
    body = {
        "fifo_include": ('<xacro:include filename="pipe.xacro"/>', "not a regular file"),
        "include_outside": (f'<xacro:include filename="{place.outside / "canary.xacro"}"/>', OUTSIDE),
        "exponential_macro": (_EXPONENTIAL_MACRO, "macros"),
        "power_tower": BOMBS["power_tower"],
    }[case]
    place.xacro.write_text(_robot(body[0]))
    result = run_cli("info", place.xacro, timeout=HANG_LIMIT + 60)
    line = assert_cli_refusal(result, "robot.urdf.xacro", body[1])
    assert SECRET not in result.stdout + result.stderr and SECRET not in line
