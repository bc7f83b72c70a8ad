"""Operators, comparisons, truth and builtins over the evaluator's values: one table for every
reading of the tree (the memory arithmetic, the argument resolution, the layer walk).

Each operation is Python's own on known values. An unknown operand gives an unknown result that
keeps the reads of every unknown operand (so a refusal can say which flags it depends on); a
`OneOf` operand is lifted: the operation runs on each alternative and the results merge. What
Python would raise (a division by zero, `None > 1`) is unknown here too, with the reason: the
tree guards it at run time, the reading does not decide it. Results are bounded (`Budget`): a
power with a huge exponent, a string or a range too long, an integer too large, is unknown.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
from collections.abc import Callable
from typing import Any

from eaglebug.checks.pyeval.budget import Budget
from eaglebug.checks.pyeval.values import (
    ClassVal,
    EnumMember,
    FuncVal,
    Instance,
    Intrinsic,
    ModuleVal,
    OneOf,
    PartialDict,
    Top,
    alternatives,
    one_of,
    reads_of,
    same,
    truth,
)

BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_SYMBOL = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
    ast.BitXor: "^",
}  # fmt: skip
_OBJECTS = (ClassVal, Instance, EnumMember, FuncVal, ModuleVal, Intrinsic)


def lifted(fn: Callable[..., Any], budget: Budget, *operands: Any) -> Any:
    """`fn` over the operands' alternatives, merged; unknown when an operand is."""
    unknown = [v for v in operands if isinstance(v, Top)]
    if unknown:
        return Top(unknown[0].why, reads_of(*operands))
    choices = [alternatives(v) for v in operands]
    if math.prod(len(c) for c in choices) > budget.alternatives:
        return Top(f"more than {budget.alternatives} alternatives")
    made = (fn(*combo) for combo in itertools.product(*choices))
    return one_of(made, budget.alternatives, reads_of(*operands))


def binop(op: ast.operator, a: Any, b: Any, budget: Budget, where: str) -> Any:
    def one(x: Any, y: Any) -> Any:
        if isinstance(op, ast.BitOr) and _is_class_like(x) and _is_class_like(y):
            return _classes(x) + _classes(y)  # `A | B` for isinstance: a tuple of classes
        if isinstance(x, _OBJECTS) or isinstance(y, _OBJECTS):
            return Top(f"{where}: {_SYMBOL[type(op)]} of an object")
        fn = BINOPS.get(type(op))
        if fn is None:
            return Top(f"{where}: operator {type(op).__name__}")
        if isinstance(op, ast.Pow) and isinstance(y, (int, float)) and abs(y) > budget.power:
            return Top(f"{where}: a power past {budget.power}")
        if isinstance(op, ast.LShift) and isinstance(y, int) and y > budget.power:
            return Top(f"{where}: a shift past {budget.power}")
        if isinstance(op, ast.Mult) and _long(x, y, budget):
            return Top(f"{where}: a sequence longer than {budget.sequence}")
        try:
            result = fn(x, y)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as error:
            return Top(f"{where}: {error}")
        return bounded(result, budget, where)

    return lifted(one, budget, a, b)


def bounded(value: Any, budget: Budget, where: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return Top(f"{where}: an integer past 2**256")
    if isinstance(value, float) and not math.isfinite(value):
        return Top(f"{where}: {value}")
    if isinstance(value, (str, list, tuple)) and len(value) > budget.sequence:
        return Top(f"{where}: a sequence longer than {budget.sequence}")
    return value


def _long(x: Any, y: Any, budget: Budget) -> bool:
    seq, n = (x, y) if isinstance(x, (str, list, tuple)) else (y, x)
    return (
        isinstance(seq, (str, list, tuple))
        and isinstance(n, int)
        and len(seq) * max(n, 0) > budget.sequence
    )


def _is_class_like(value: Any) -> bool:
    return isinstance(value, ClassVal) or (
        isinstance(value, tuple) and all(isinstance(v, ClassVal) for v in value) and bool(value)
    )


def _classes(value: Any) -> tuple[ClassVal, ...]:
    return value if isinstance(value, tuple) else (value,)


def unary(op: ast.unaryop, value: Any, budget: Budget, where: str) -> Any:
    if isinstance(op, ast.Not):
        told = truth(value)
        if told is None:
            return Top(
                value.why if isinstance(value, Top) else f"{where}: not of alternatives",
                reads_of(value),
            )
        return not told

    def one(v: Any) -> Any:
        if isinstance(v, _OBJECTS) or (isinstance(v, bool) and isinstance(op, ast.Invert)):
            return Top(f"{where}: {type(op).__name__} of {type(v).__name__}")
        try:
            if isinstance(op, ast.USub):
                return -v
            if isinstance(op, ast.UAdd):
                return +v
            return ~v
        except TypeError as error:
            return Top(f"{where}: {error}")

    return lifted(one, budget, value)


def identical(a: Any, b: Any) -> bool:
    """`a is b` on the reading's values: None, True and False by identity; the tree's objects
    (classes, enum members, functions, objects made by the run) by what they are; numbers and
    strings by value (the tree compares them with `is` only where CPython interns them)."""
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, Instance) and isinstance(b, Instance):
        return a.oid == b.oid and a.path == b.path
    return same(a, b)


def compare(op: ast.cmpop, a: Any, b: Any, budget: Budget, where: str) -> Any:
    def one(x: Any, y: Any) -> Any:
        match op:
            case ast.Is():
                return identical(x, y)
            case ast.IsNot():
                return not identical(x, y)
            case ast.Eq() | ast.NotEq():
                equal = _maybe_equal(x, y, objects=None)
                if equal is None:
                    return Top(f"{where}: == of objects the reading cannot compare")
                return equal if isinstance(op, ast.Eq) else not equal
            case ast.In() | ast.NotIn():
                if isinstance(y, PartialDict) and y.absent(x) is None:
                    return Top(f"{where}: whether {x!r} is set is not known")
                if not isinstance(y, (tuple, list, str, dict, set, frozenset, range)):
                    return Top(f"{where}: `in` of a {type(y).__name__}")
                if isinstance(y, str) and not isinstance(x, str):
                    return Top(f"{where}: `in` of a string with a {type(x).__name__}")
                if isinstance(y, str):
                    inside = x in y
                else:  # an item not known (a OneOf in a tuple) leaves it undecided
                    undecided: list[Any] = []
                    inside = False
                    for item in y:
                        equal = _maybe_equal(x, item, objects=False)
                        if equal:
                            inside = True
                            break
                        if equal is None:
                            undecided.append(item)
                    if undecided and not inside:
                        return Top(f"{where}: `in` of items not known", reads_of(*undecided))
                return inside if isinstance(op, ast.In) else not inside
        if isinstance(x, _OBJECTS) or isinstance(y, _OBJECTS):
            return Top(f"{where}: ordering of objects")
        fn = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
        try:
            return bool(fn[type(op)](x, y))
        except TypeError as error:  # None > 1: the tree guards it; not decided here
            return Top(f"{where}: {error}")

    return lifted(one, budget, a, b)


def _maybe_equal(x: Any, y: Any, objects: bool | None) -> bool | None:
    """`x == y` where either may be or hold a value not known (a tuple with a `OneOf` in it):
    None where it is not decided. `objects`: what a comparison the reading cannot make of the
    tree's objects gives (`in` has always taken it as not equal)."""
    if isinstance(x, Top) or isinstance(y, Top):
        return None
    if isinstance(x, OneOf) or isinstance(y, OneOf):
        verdicts = {_maybe_equal(a, b, objects) for a in alternatives(x) for b in alternatives(y)}
        return verdicts.pop() if len(verdicts) == 1 else None
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        if type(x) is not type(y) or len(x) != len(y):
            return False
        pairs = [_maybe_equal(a, b, objects) for a, b in zip(x, y, strict=True)]
        return False if False in pairs else (None if None in pairs else True)
    if isinstance(x, PartialDict) or isinstance(y, PartialDict):
        return None  # a dict of which only some keys are known (the server's environment)
    if isinstance(x, dict) and isinstance(y, dict):
        if x.keys() != y.keys():
            return False
        pairs = [_maybe_equal(x[k], y[k], objects) for k in x]
        return False if False in pairs else (None if None in pairs else True)
    sets = isinstance(x, (set, frozenset)) and isinstance(y, (set, frozenset))
    if sets and any(isinstance(v, (Top, OneOf)) for v in (*x, *y)):
        return None  # which items are equal is not known
    equal = _equal(x, y)
    return objects if equal is None else equal


def _equal(x: Any, y: Any) -> bool | None:
    if isinstance(x, Instance) or isinstance(y, Instance):
        if isinstance(x, Instance) and isinstance(y, Instance):
            return x.oid == y.oid and x.path == y.path
        return None if not (x is None or y is None) else False
    try:
        return bool(x == y)
    except Exception:
        return None


def fstring(parts: list[ast.expr], evaluate: Callable[[ast.expr], Any]) -> Any:
    """An f-string's text with the format specs applied (`f"{x:.2f}"`). With an unknown part
    the value is unknown (a comparison with it decides nothing), and its text, that part left
    as `{expression}`, is kept for a message that reads it (`Top.text`)."""
    out: list[str] = []
    unknown: list[str] = []
    for part in parts:
        if isinstance(part, ast.Constant):
            out.append(str(part.value))
            continue
        if not isinstance(part, ast.FormattedValue):
            out.append("{?}")
            continue
        value = evaluate(part.value)
        spec = ""
        if isinstance(part.format_spec, ast.JoinedStr):
            made = fstring(part.format_spec.values, evaluate)
            spec = made if isinstance(made, str) else ""
        if isinstance(value, (Top, OneOf, _OBJECTS)):
            shown = show(value)
            if shown is None:
                unknown.append(ast.unparse(part.value))
                shown = "{" + unknown[-1] + "}"
            out.append(shown)
            continue
        try:
            if part.conversion == ord("r"):
                text = format(repr(value), spec)
            elif part.conversion == ord("a"):
                text = format(ascii(value), spec)
            elif part.conversion == ord("s"):
                text = format(str(value), spec)
            else:
                text = format(value, spec)
        except (TypeError, ValueError):
            text = str(value)
        out.append(text)
    if unknown:
        text = "".join(out)
        truth_known = True if any(isinstance(p, ast.Constant) and p.value for p in parts) else None
        return Top(f"an f-string of unknown {', '.join(unknown)}", truth=truth_known, text=text)
    return "".join(out)


def show(value: Any) -> str | None:
    """How an object of the reading prints (an enum member as `Backend.DISABLED`)."""
    if isinstance(value, EnumMember):
        return f"{value.cls.name}.{value.name}"
    if isinstance(value, ClassVal):
        return f"<class '{value.qualname}'>"
    return None


def _prod(items: Any) -> Any:
    return math.prod(items) if isinstance(items, (list, tuple)) else items


def _sum(items: Any, start: Any = 0) -> Any:
    return sum(items, start) if isinstance(items, (list, tuple)) else items


# Python's builtins (and the pure functions of `math`/numpy's reductions on numbers), called on
# known arguments only; `isinstance`, `getattr`, `hasattr`, `type`, `super` need the run and are
# the machine's own.
PURE: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "all": all,
    "any": any,
    "bool": bool,
    "dict": dict,
    "divmod": divmod,
    "enumerate": lambda items, start=0: list(enumerate(items, start)),
    "float": float,
    "frozenset": frozenset,
    "int": int,
    "len": len,
    "list": list,
    "max": max,
    "min": min,
    "pow": pow,
    "range": range,
    "reversed": lambda items: list(reversed(items)),
    "round": round,
    "set": set,
    "sorted": sorted,
    "str": str,
    "sum": sum,
    "tuple": tuple,
    "zip": lambda *items: list(zip(*items, strict=False)),
    "math.ceil": math.ceil,
    "math.floor": math.floor,
    "math.prod": math.prod,
    "math.sqrt": math.sqrt,
    "math.log2": math.log2,
    "math.gcd": math.gcd,
    "math.isclose": math.isclose,
    "numpy.prod": _prod,
    "numpy.sum": _sum,
}
# Builtins that only move elements around: known on a known container, whatever it holds.
_STRUCTURAL = frozenset({"len", "list", "tuple", "enumerate", "zip", "reversed", "dict"})
STR_METHODS = frozenset(
    {"lower", "upper", "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "replace",
     "join", "format", "isdigit", "removeprefix", "removesuffix", "title", "count", "find"}
)  # fmt: skip
DICT_METHODS = frozenset({"get", "keys", "values", "items", "setdefault", "pop", "update", "copy"})
_KNOWN_ITERABLES = (list, tuple, str, dict)  # not a range: it could be of any length
# Changes the reading does not make (`layers.pop()`, `d.clear()`): the container is unknown after.
_UNFOLLOWED: dict[type, frozenset[str]] = {
    list: frozenset({"pop", "remove", "clear", "sort", "reverse"}),
    dict: frozenset({"clear", "popitem"}),
}


def change_follows(owner: Any, attr: str, args: list[Any], kwargs: dict[str, Any]) -> bool:
    """Can the reading make this change to a list or dict it holds (`layers.extend(more)`,
    `d.update(other)`) as Python would? Not with an unknown key, index or iterable, nor
    arguments Python would refuse: then the container is unknown from there on. True for
    anything that changes nothing."""
    if any(isinstance(owner, kind) and attr in names for kind, names in _UNFOLLOWED.items()):
        return False
    if isinstance(owner, list):
        if attr == "extend":
            return len(args) == 1 and not kwargs and isinstance(args[0], _KNOWN_ITERABLES)
        if attr == "insert":
            return len(args) == 2 and not kwargs and type(args[0]) is int
        return attr != "append" or (len(args) == 1 and not kwargs)
    if isinstance(owner, dict) and attr == "update":
        # not from a dict whose other keys are not known (`PartialDict`): they would read as absent
        return len(args) <= 1 and (
            not args or (isinstance(args[0], dict) and not isinstance(args[0], PartialDict))
        )
    if isinstance(owner, dict) and attr in {"setdefault", "pop"}:
        if not 1 <= len(args) <= 2 or kwargs or isinstance(args[0], (Top, OneOf)):
            return False
        try:
            hash(args[0])
        except TypeError:
            return False
    return True


def pure_call(
    name: str, args: list[Any], kwargs: dict[str, Any], budget: Budget, where: str
) -> Any:
    """A builtin on the values: unknown when any argument (or element) is."""
    fn = PURE[name]
    flat = [*args, *kwargs.values()]
    # `dict(a=x, b=y)`: its keywords are the elements, its keys the shape (known).
    shape = args if name == "dict" else flat
    if name in _STRUCTURAL and not any(isinstance(a, (Top, OneOf)) for a in shape):
        try:  # the container's shape is known even where its elements are not
            return bounded(fn(*args, **kwargs), budget, where)
        except (TypeError, ValueError) as error:
            return Top(f"{where}: {name}(): {error}")
    inner = [x for a in flat if isinstance(a, (list, tuple, set, frozenset)) for x in a]
    if name == "range" and all(isinstance(a, int) for a in args):
        made = range(*args)
        if len(made) > budget.sequence:
            return Top(f"{where}: a range longer than {budget.sequence}")
    if any(isinstance(a, (Top, OneOf)) for a in [*flat, *inner]):
        if name in {"max", "min"} and not kwargs:
            return _extreme(name, args, budget, where)
        if not any(isinstance(a, Top) for a in [*flat, *inner]) and not kwargs and not inner:
            return lifted(lambda *xs: pure_call(name, list(xs), {}, budget, where), budget, *args)
        first = next((a for a in [*flat, *inner] if isinstance(a, Top)), None)
        return Top(
            first.why if first is not None else f"{where}: {name}() of alternatives",
            reads_of(*flat, *inner),
        )
    if any(isinstance(a, _OBJECTS) for a in [*flat, *inner]) and name not in {
        "len", "list", "tuple", "dict", "set", "frozenset", "enumerate", "zip", "sorted",
        "reversed", "bool", "str",
    }:  # fmt: skip
        return Top(f"{where}: {name}() of an object")
    try:
        return bounded(fn(*args, **kwargs), budget, where)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, KeyError) as error:
        return Top(f"{where}: {name}(): {error}", error=type(error).__name__)


def _extreme(name: str, args: list[Any], budget: Budget, where: str) -> Any:
    """`max(a, b)` with an alternative among the arguments: lifted over them."""
    items = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    fn = max if name == "max" else min

    def one(*values: Any) -> Any:
        try:
            return fn(values)
        except TypeError as error:
            return Top(f"{where}: {error}")

    return lifted(one, budget, *items)


NOT_MODELLED: Any = object()  # a method of a value the reading does not model


def method_of_value(
    owner: Any, attr: str, args: list[Any], kwargs: dict[str, Any], budget: Budget, where: str
) -> Any:
    """A method of a known str / dict / list / tuple (the list's `append` mutates it);
    NOT_MODELLED when the value has no such method the reading models."""
    if isinstance(owner, str) and attr in STR_METHODS:
        if any(isinstance(a, (Top, OneOf)) for a in [*args, *kwargs.values()]):
            return Top(f"{where}: str.{attr} of an unknown", reads_of(*args))
        try:
            return bounded(getattr(owner, attr)(*args, **kwargs), budget, where)
        except (TypeError, ValueError, KeyError, IndexError) as error:
            return Top(f"{where}: str.{attr}: {error}")
    if isinstance(owner, dict) and attr in DICT_METHODS:
        if attr == "get":
            key = args[0] if args else None
            if isinstance(key, (Top, OneOf)):
                return Top(f"{where}: dict.get of an unknown key", reads_of(key))
            if isinstance(owner, PartialDict) and owner.absent(key) is None:
                return Top(f"{where}: whether {key!r} is set is not known")
            found = [v for k, v in owner.items() if _equal(k, key)]
            return found[0] if found else (args[1] if len(args) > 1 else None)
        if attr in {"setdefault", "pop", "update"}:
            if any(isinstance(a, (Top, OneOf)) for a in args[:1]):
                return Top(f"{where}: dict.{attr} of an unknown key", reads_of(*args))
            try:
                return getattr(owner, attr)(*args, **kwargs)
            except (KeyError, TypeError) as error:
                return Top(f"{where}: dict.{attr}: {error}")
        if attr == "copy":
            return dict(owner)
        return list(getattr(owner, attr)())
    if isinstance(owner, list) and attr in {"append", "extend", "insert"}:
        try:  # `change_follows` has said the arguments are ones Python takes
            getattr(owner, attr)(*args)
        except TypeError as error:
            return Top(f"{where}: list.{attr}: {error}")
        return None
    if isinstance(owner, (list, tuple)) and attr in {"index", "count"}:
        try:
            return getattr(owner, attr)(*args)
        except ValueError as error:
            return Top(f"{where}: {error}")
    return NOT_MODELLED


def subscript(owner: Any, key: Any, budget: Budget, where: str) -> Any:
    def one(container: Any, index: Any) -> Any:
        if isinstance(container, PartialDict) and container.absent(index) is None:
            return Top(f"{where}: whether {index!r} is set is not known")
        if isinstance(index, slice) or isinstance(container, (str, list, tuple, dict, range)):
            try:
                return container[index]
            except (TypeError, KeyError, IndexError) as error:
                return Top(f"{where}: subscript: {error}")
        return Top(f"{where}: subscript of a {type(container).__name__}")

    return lifted(one, budget, owner, key)
