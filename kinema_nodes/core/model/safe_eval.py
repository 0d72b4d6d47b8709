"""A restricted evaluator for xacro's ``${...}`` and ``$(eval ...)`` expressions.

xacro evaluates expressions with Python's ``eval`` behind a filter on names starting with
``__``; a file from the internet can still run code through known escapes (``$(eval)`` gets
the real builtins, so ``open``, ``__import__`` and the rest are one name away; lambdas and
attribute walks reach ``object.__subclasses__``). This evaluator parses the expression with
`ast` and walks it itself, allowing only what a robot description uses:

- literals, names looked up by the caller (xacro's property table), lists, tuples, dicts, sets;
- arithmetic, comparison and boolean operators, conditional expressions, subscripts and slices;
- attribute access only on xacro's namespaces and YAML dicts (``math.pi``, ``props.arm.length``)
  and a short list of string, list and dict methods;
- calls only to an allow-list: ``math``'s functions, the builtins xacro documents (``len``,
  ``str``, ``min``, ``range``, ...), and the helpers the caller adds (xacro's ``load_yaml``...).

Refused, with `ExpressionRefused` naming the construct: lambdas, comprehensions, f-strings,
walrus, starred arguments, names or attributes starting with ``_``, ``str % args``, and any
other callable. Work is capped: integers of more than `MAX_INT_BITS` bits (``9**9**9``),
strings and containers over `MAX_TEXT` characters or `MAX_ITEMS` items (``'a' * 10**10``),
``range`` over `MAX_ITEMS`, ``factorial``/``comb``/``perm`` of large arguments. Every result
is the value Python's own operators give, so ordinary files expand byte for byte as before.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
import time
import types
from collections.abc import Callable

#: Largest integer an expression may make, in bits (2**4096 is ~1e1233; floats end at 1e308).
MAX_INT_BITS = 4096
#: Longest string and largest total text (characters) inside one value.
MAX_TEXT = 4_000_000
#: Most items in one list, tuple, dict, set or range.
MAX_ITEMS = 1_000_000
#: Longest expression text parsed.
MAX_EXPRESSION = 100_000
#: Largest argument to factorial, comb and perm (factorial(1e6) takes seconds).
MAX_FACTORIAL = 1000


class ExpressionRefused(ValueError):
    """An expression that uses something the restricted evaluator refuses; `construct` names it."""

    def __init__(self, construct: str, why: str = "is not allowed in a robot file's expressions"):
        self.construct = construct
        super().__init__(f"{construct} {why}")


class ExpressionTooBig(ExpressionRefused):
    """An expression whose value or work passes a cap."""

    def __init__(self, construct: str, why: str):
        super().__init__(construct, why)


def _capped_range(*args):
    made = range(*args)
    if len(made) > MAX_ITEMS:
        raise ExpressionTooBig(f"range of {len(made):,} numbers", f"is refused (at most {MAX_ITEMS:,})")
    return made


def _capped(function: Callable, name: str):
    def capped(*args):
        if any(isinstance(a, int) and abs(a) > MAX_FACTORIAL for a in args):
            raise ExpressionTooBig(f"{name} of {max(abs(a) for a in args if isinstance(a, int)):,}",
                                   f"is refused (arguments up to {MAX_FACTORIAL})")
        return function(*args)

    capped.__name__ = name
    return capped


def _capped_prod(iterable, *, start=1):
    result = start
    for item in iterable:
        result = _binary(ast.Mult(), result, item)
    return result


def _capped_round(number, ndigits=None):
    if isinstance(ndigits, int) and abs(ndigits) > MAX_FACTORIAL:
        raise ExpressionTooBig(f"round to {ndigits:,} digits", f"is refused (at most {MAX_FACTORIAL})")
    return round(number) if ndigits is None else round(number, ndigits)


def _capped_sum(iterable, start=0):
    if not isinstance(start, (int, float, complex)):
        raise ExpressionRefused(f"sum starting from a {type(start).__name__}", "is refused (sum adds numbers)")
    return sum(iterable, start)


def _capped_pow(base, exponent, *rest):
    if rest:
        return pow(base, exponent, *rest)
    return _binary(ast.Pow(), base, exponent)


#: Callables swapped for a capped version wherever an expression reaches them.
REPLACED: dict[int, Callable] = {
    id(range): _capped_range,
    id(math.factorial): _capped(math.factorial, "factorial"),
    id(math.comb): _capped(math.comb, "comb"),
    id(math.perm): _capped(math.perm, "perm"),
    id(math.prod): _capped_prod,
    id(pow): _capped_pow,
    id(round): _capped_round,
    id(sum): _capped_sum,
}

#: The builtins xacro exposes (its ``python`` namespace) less ``type`` and ``vars``, which
#: hand out classes and ``__dict__``s.
SAFE_BUILTINS = ("list", "dict", "map", "len", "str", "float", "int", "bool", "min", "max", "round", "sorted", "range",
                 "abs", "all", "any", "complex", "divmod", "enumerate", "filter", "frozenset", "hash", "isinstance",
                 "issubclass", "ord", "repr", "reversed", "slice", "set", "sum", "tuple", "zip")

_ALLOWED: set[int] = {id(getattr(builtins, name)) for name in SAFE_BUILTINS}
_ALLOWED |= {id(value) for name, value in vars(math).items() if not name.startswith("_") and callable(value)}
_ALLOWED |= {id(function) for function in REPLACED.values()}

#: Methods an expression may call on a string, list, tuple or dict (none builds text without bound
#: except ``replace`` and ``join``, whose results are measured first).
METHODS = {
    str: {"lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
          "replace", "join", "find", "rfind", "index", "count", "capitalize", "title", "isdigit", "isalpha",
          "isalnum", "isspace"},
    list: {"index", "count"},
    tuple: {"index", "count"},
    dict: {"get", "keys", "values", "items"},
}

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_REFUSED_NODES = {
    ast.Lambda: "lambda", ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression", ast.JoinedStr: "an f-string",
    ast.NamedExpr: "':=' (assignment)", ast.Starred: "'*' unpacking", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield", ast.FormattedValue: "an f-string",
}


def _bits(value) -> int:
    return abs(value).bit_length() if isinstance(value, int) else 0


def measure(value, limit: int = MAX_TEXT) -> int:
    """Characters and items inside `value` (strings, containers, nested), stopping past `limit`;
    raises `ExpressionTooBig` when over it. Iterators and other lazy values count as one."""
    total = 0
    stack = [value]
    seen = 0
    while stack:
        item = stack.pop()
        seen += 1
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, dict):
            if len(item) > MAX_ITEMS:
                raise ExpressionTooBig(f"a dict of {len(item):,} items", f"is refused (at most {MAX_ITEMS:,})")
            total += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            if len(item) > MAX_ITEMS:
                raise ExpressionTooBig(f"a list of {len(item):,} items", f"is refused (at most {MAX_ITEMS:,})")
            total += len(item)
            stack.extend(item)
        elif isinstance(item, int) and _bits(item) > MAX_INT_BITS:
            raise ExpressionTooBig(f"an integer of {_bits(item):,} bits", f"is refused (at most {MAX_INT_BITS})")
        if total > limit or seen > MAX_ITEMS:
            raise ExpressionTooBig("a value of more than " + f"{limit:,} characters", "is refused")
    return total


def _binary(op: ast.operator, left, right):
    """`left op right` with Python's own operator, after checking the result cannot be huge."""
    kind = type(op)
    if kind is ast.Pow and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        if _bits(left) * right > MAX_INT_BITS:
            raise ExpressionTooBig(f"{left if _bits(left) < 64 else 'a large number'} ** {right}",
                                   f"is refused (results up to {MAX_INT_BITS} bits)")
    elif kind is ast.LShift and isinstance(left, int) and isinstance(right, int) and left and right > 0:
        if _bits(left) + right > MAX_INT_BITS:
            raise ExpressionTooBig(f"<< {right}", f"is refused (results up to {MAX_INT_BITS} bits)")
    elif kind is ast.Mult:
        if isinstance(left, int) and isinstance(right, int):
            if _bits(left) + _bits(right) > MAX_INT_BITS + 1:
                raise ExpressionTooBig("a product of large numbers", f"is refused (results up to {MAX_INT_BITS} bits)")
        else:
            sequence, count = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(sequence, (str, bytes, list, tuple)) and isinstance(count, int) and count > 0:
                if len(sequence) * count > (MAX_TEXT if isinstance(sequence, (str, bytes)) else MAX_ITEMS):
                    raise ExpressionTooBig(f"repeating a {type(sequence).__name__} {count:,} times",
                                           f"is refused (at most {MAX_TEXT:,} characters or {MAX_ITEMS:,} items)")
                if isinstance(sequence, (list, tuple)):
                    measure(sequence, MAX_TEXT // count)
    elif kind is ast.Mod and isinstance(left, (str, bytes)):
        raise ExpressionRefused("'%' string formatting")
    elif kind is ast.Add and isinstance(left, (str, bytes, list, tuple)) and isinstance(right, type(left)):
        if len(left) + len(right) > (MAX_TEXT if isinstance(left, (str, bytes)) else MAX_ITEMS):
            raise ExpressionTooBig("joining two values", f"is refused (at most {MAX_TEXT:,} characters)")
    result = _BINARY[kind](left, right)
    if isinstance(result, (list, tuple)):
        measure(result)
    return result


def _allowed(function, extra: frozenset[int]) -> bool:
    if id(function) in _ALLOWED or id(function) in extra:
        return True
    if not isinstance(function, types.BuiltinMethodType):
        return False
    owner = getattr(function, "__self__", None)
    return any(isinstance(owner, kind) and function.__name__ in names for kind, names in METHODS.items())


def _name_of(function) -> str:
    return getattr(function, "__name__", None) or type(function).__name__


class _Evaluator:
    def __init__(self, lookup: Callable[[str], object], extra: frozenset[int], replaced: dict, namespaces: tuple[type, ...],
                 deadline: float | None):
        self.lookup = lookup
        self.extra = extra
        self.replaced = replaced
        self.namespaces = namespaces
        self.deadline = deadline
        self.steps = 0

    def checked(self, value, what: str):
        """A value reached by a name or attribute: a callable must be on the allow-list."""
        value = REPLACED.get(id(value)) or self.replaced.get(id(value)) or value
        if callable(value) and not isinstance(value, self.namespaces) and not _allowed(value, self.extra):
            raise ExpressionRefused(f"'{what}' ({_name_of(value)})")
        return value

    def run(self, node):
        self.steps += 1
        if self.deadline is not None and self.steps % 64 == 0 and time.monotonic() > self.deadline:
            raise ExpressionTooBig("the expansion", "took too long; refused")
        method = getattr(self, "do_" + type(node).__name__, None)
        if method is None:
            raise ExpressionRefused(_REFUSED_NODES.get(type(node), f"'{type(node).__name__}'"))
        return method(node)

    def do_Expression(self, node):
        return self.run(node.body)

    def do_Constant(self, node):
        return node.value

    def do_Name(self, node):
        if node.id.startswith("_"):
            raise ExpressionRefused(f"the name '{node.id}'", "is not allowed (names starting with '_' are refused)")
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        try:
            value = self.lookup(node.id)
        except KeyError:
            raise NameError(f"name '{node.id}' is not defined") from None
        return self.checked(value, node.id)

    def do_Attribute(self, node):
        if node.attr.startswith("_"):
            raise ExpressionRefused(f"the attribute '.{node.attr}'", "is not allowed (attributes starting with '_' are refused)")
        owner = self.run(node.value)
        if isinstance(owner, self.namespaces):
            # xacro's namespaces and YAML dicts: dotted access is item access
            try:
                return self.checked(owner[node.attr], node.attr)
            except KeyError:
                raise NameError(f"name '{node.attr}' is not defined") from None
        for kind, names in METHODS.items():
            if isinstance(owner, kind) and node.attr in names:
                return getattr(owner, node.attr)
        raise ExpressionRefused(f"the attribute '.{node.attr}' of a {type(owner).__name__}")

    def do_Subscript(self, node):
        owner = self.run(node.value)
        index = self.run(node.slice)
        if not isinstance(owner, (str, bytes, list, tuple, dict, range)):
            raise ExpressionRefused(f"indexing a {type(owner).__name__}")
        return self.checked(owner[index], "[...]")

    def do_Slice(self, node):
        return slice(*(None if part is None else self.run(part) for part in (node.lower, node.upper, node.step)))

    def do_Tuple(self, node):
        return tuple(self.run(item) for item in node.elts)

    def do_List(self, node):
        return [self.run(item) for item in node.elts]

    def do_Set(self, node):
        return {self.run(item) for item in node.elts}

    def do_Dict(self, node):
        if any(key is None for key in node.keys):
            raise ExpressionRefused("'**' unpacking")
        return {self.run(key): self.run(value) for key, value in zip(node.keys, node.values)}

    def do_BinOp(self, node):
        return _binary(node.op, self.run(node.left), self.run(node.right))

    def do_UnaryOp(self, node):
        return _UNARY[type(node.op)](self.run(node.operand))

    def do_BoolOp(self, node):
        value = None
        for item in node.values:
            value = self.run(item)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def do_Compare(self, node):
        left = self.run(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.run(right_node)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def do_IfExp(self, node):
        return self.run(node.body) if self.run(node.test) else self.run(node.orelse)

    def do_Call(self, node):
        function = self.run(node.func)
        if any(keyword.arg is None for keyword in node.keywords):
            raise ExpressionRefused("'**' unpacking")
        if isinstance(function, self.namespaces) or not callable(function):
            raise ExpressionRefused(f"calling a {type(function).__name__}")
        args = [self.run(item) for item in node.args]
        kwargs = {keyword.arg: self.run(keyword.value) for keyword in node.keywords}
        for value in (*args, *kwargs.values()):
            measure(value)
        if getattr(function, "__name__", "") in ("join", "replace") and isinstance(getattr(function, "__self__", None), str):
            args = self._check_text_method(function, args)
        result = function(*args, **kwargs)
        measure(result)
        return result

    @staticmethod
    def _check_text_method(function, args: list) -> list:
        """`args` for str.join or str.replace, once the text they make is known to be under the cap
        (an iterator given to join is read into a list here, and that list passed on)."""
        text = function.__self__
        if function.__name__ == "join" and args:
            items = args[0] if isinstance(args[0], (list, tuple)) else list(_capped_items(args[0]))
            args = [items, *args[1:]]
            size = sum(len(item) if isinstance(item, str) else 0 for item in items) + len(text) * max(len(items) - 1, 0)
        elif function.__name__ == "replace" and len(args) >= 2 and isinstance(args[1], str):
            old, new = args[0], args[1]
            size = len(text) + text.count(old) * len(new) if isinstance(old, str) and old else len(text) * (len(new) + 1)
        else:
            return args
        if size > MAX_TEXT:
            raise ExpressionTooBig(f"'{function.__name__}' making {size:,} characters", f"is refused (at most {MAX_TEXT:,})")
        return args


def _capped_items(iterable):
    for count, item in enumerate(iterable):
        if count >= MAX_ITEMS:
            raise ExpressionTooBig(f"more than {MAX_ITEMS:,} items", "is refused")
        yield item


def evaluate(expression: str, lookup: Callable[[str], object], *, allowed=(), replaced: dict | None = None,
             namespaces: tuple[type, ...] = (), deadline: float | None = None):
    """The value of `expression`, computed by the restricted evaluator.

    `lookup(name)` gives a name's value (raising KeyError when it has none, which becomes
    NameError as in Python); `allowed` are further callables the expression may call (xacro's
    helpers); `replaced` maps ``id(callable)`` to a capped stand-in; values of a type in
    `namespaces` allow dotted access (``ns.name`` is ``ns['name']``).
    After `deadline` (`time.monotonic()`), the evaluation stops. Raises `ExpressionRefused`
    for what it refuses; Python's own errors (ZeroDivisionError, TypeError...) pass through."""
    text = expression.strip()
    if len(text) > MAX_EXPRESSION:
        raise ExpressionTooBig(f"an expression of {len(text):,} characters", f"is refused (at most {MAX_EXPRESSION:,})")
    tree = ast.parse(text, mode="eval")
    evaluator = _Evaluator(lookup, frozenset(id(f) for f in allowed), dict(replaced or {}), tuple(namespaces), deadline)
    try:
        result = evaluator.run(tree)
    except RecursionError:
        raise ExpressionTooBig("an expression", "is nested too deep; refused") from None
    measure(result)
    return result
