"""The memory evaluator's vocabulary: its values for what it cannot know, the operators and
builtins it applies, and the helpers that name a call or a reason (`memeval` runs them).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unknown:
    """A value the evaluator cannot know; `why` names the line."""

    why: str


@dataclass(frozen=True)
class Ref:
    """An attribute path on an object the evaluator does not model (`cuda_graph_config.decode`)."""

    path: str


# Roots that stand for the server-args / configurator object itself: `self.tp_size`,
# `cfg.tp_size` and `server_args.tp_size` all read the value named `tp_size`.
ROOTS = frozenset({"self", "cfg", "server_args", "kvc", "mr"})
BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
}
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def _prod(items: Any) -> Any:
    return math.prod(items) if isinstance(items, (list, tuple)) else items


def _sum(items: Any) -> Any:
    return sum(items) if isinstance(items, (list, tuple)) else items


BUILTINS: dict[str, Callable[..., Any]] = {
    "max": max,
    "min": min,
    "round": round,
    "int": int,
    "float": float,
    "len": len,
    "abs": abs,
    "list": list,
    "range": range,
    "bool": bool,
    "sum": sum,
    "any": any,
    "all": all,
    "set": set,
    "frozenset": frozenset,
    "tuple": tuple,
    "sorted": sorted,
    "enumerate": lambda items: list(enumerate(items)),
    "math.ceil": math.ceil,
    "math.prod": math.prod,
    # numpy's reductions on the shape tuples and lists the state sizes are built from
    # (`np.prod((32, 128, 128))`, `np.sum([...])`): their Python meaning on numbers.
    "np.prod": _prod,
    "np.sum": _sum,
    "numpy.prod": _prod,
    "numpy.sum": _sum,
    "math.floor": math.floor,
}
STR_METHODS = frozenset({"lower", "upper", "startswith", "endswith", "strip"})


def join(path: str, attr: str) -> str:
    return f"{path}.{attr}" if path else attr


def call_name(func: ast.expr) -> str:
    """`get_schedule().x.y` -> `get_schedule.x.y`; `self.f` -> `f`."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        owner = call_name(func.value)
        return func.attr if owner in ROOTS else f"{owner}.{func.attr}"
    if isinstance(func, ast.Call):
        return call_name(func.func)
    return ast.unparse(func)


def is_unknown(value: object) -> bool:
    return isinstance(value, (Unknown, Ref))


def why(value: object) -> str:
    if isinstance(value, Unknown):
        return value.why
    if isinstance(value, Ref):
        return f"{value.path or 'self'} is not a known value"
    return type(value).__name__


def first_unknown(file: str, node: ast.AST, *values: object) -> Unknown:
    for value in values:
        if isinstance(value, Unknown):
            return value
        if isinstance(value, Ref):
            return Unknown(f"{file}:{getattr(node, 'lineno', 0)}: {value.path} is not known")
    return Unknown(f"{file}:{getattr(node, 'lineno', 0)}")


def isinstance_of(value: object, kind: object) -> object:
    """`isinstance` against the builtin types only: an object the evaluator follows by its
    attributes (a `Ref`, a config) is none of them."""
    kinds = kind if isinstance(kind, list) else [kind]
    names = [k.path for k in kinds if isinstance(k, Ref)]
    types: dict[str, type] = {"dict": dict, "list": list, "tuple": tuple, "int": int}
    types.update({"float": float, "str": str, "bool": bool})
    if len(names) != len(kinds) or any(n not in types for n in names):
        return Unknown(f"isinstance of {kind!r}")
    if isinstance(value, Ref):
        return False
    if isinstance(value, Unknown):
        return value
    return any(isinstance(value, types[n]) for n in names)
