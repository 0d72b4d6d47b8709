"""xacro's restricted evaluator (core.model.safe_eval): what a robot file computes is the value
Python's own ``eval`` gives; what could run code or grow without bound is refused by name."""

from __future__ import annotations

import math

import pytest

from kinema_nodes.core.model.safe_eval import ExpressionRefused, ExpressionTooBig, evaluate

NAMES = {"pi": math.pi, "x": 0.25, "n": 3, "s": "base_link", "xyz": [0.1, 0.2, 0.3], "cfg": {"arm": {"length": 0.5}},
         "radians": math.radians, "sin": math.sin, "atan2": math.atan2, "str": str, "len": len, "int": int, "float": float,
         "list": list, "map": map, "max": max, "min": min, "abs": abs, "round": round, "range": range, "sorted": sorted,
         "sum": sum, "True": True}

SAME_AS_EVAL = [
    "pi/2", "-pi/4", "x * 2 + 1", "n // 2", "n % 2", "2 ** 10", "2 ** -1", "x ** 0.5", "-n", "not n", "~n",
    "x if n > 2 else -x", "n > 2 and x < 1", "n < 2 or s", "1 < n <= 3", "s == 'base_link'", "'link' in s",
    "radians(90)", "sin(x) * atan2(1, 2)", "str(n) + '_' + s", "s.upper()", "s.split('_')[0]", "s.replace('_', '-')",
    "'-'.join(map(str, xyz))", "' '.join(['a', 'b'])",
    "xyz[1]", "xyz[-1]", "xyz[::2]", "cfg['arm']['length'] * 2", "cfg.get('arm')", "len(xyz)", "max(xyz)",
    "sorted(xyz, reverse=True)", "sum(xyz)", "round(pi, 3)", "int('7') + float('0.5')", "list(range(n))",
    "[1, 2] + [3]", "(1, 2)", "{'a': 1}", "{1, 2}", "abs(-x)", "1e3", "0x10", "'ab' * 3", "None",
]


@pytest.mark.parametrize("expression", SAME_AS_EVAL)
def test_value_is_pythons(expression):
    assert evaluate(expression, NAMES.__getitem__) == eval(expression, {"__builtins__": {}}, dict(NAMES))  # noqa: S307


@pytest.mark.parametrize("expression, construct", [
    ("().__class__", "__class__"), ("x.real", ".real"), ("(lambda: 1)()", "lambda"), ("[c for c in s]", "comprehension"),
    ("f'{s}'", "f-string"), ("(y := 1)", ":="), ("'%s' % s", "%"), ("s.format(1)", ".format"), ("_hidden", "_hidden"),
    ("print(1)", "not defined"), ("sum(xyz, [])", "sum starting"), ("max(*xyz)", "'*'"),
])
def test_refused_by_name(expression, construct):
    with pytest.raises((ExpressionRefused, NameError)) as caught:
        evaluate(expression, NAMES.__getitem__)
    assert construct in str(caught.value)


@pytest.mark.parametrize("expression", ["9 ** 9 ** 9", "2 ** 5000", "1 << 5000", "'a' * 10 ** 9", "[0] * 10 ** 8",
                                        "range(10 ** 9)", "round(1, -10 ** 9)", "10 ** 2000 * 10 ** 2000"])
def test_huge_values_are_refused_before_they_are_made(expression):
    with pytest.raises(ExpressionTooBig):
        evaluate(expression, NAMES.__getitem__)
