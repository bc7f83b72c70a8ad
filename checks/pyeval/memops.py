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


def fstring(parts: list[ast.expr], evaluate: Callable[[ast.expr], object]) -> str:
    """An f-string's text; a part that cannot be known stays `{expression}`."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, ast.Constant):
            out.append(str(part.value))
        elif isinstance(part, ast.FormattedValue):
            value = evaluate(part.value)
            spec = ""
            if isinstance(part.format_spec, ast.JoinedStr):
                spec = fstring(part.format_spec.values, evaluate)
            if isinstance(value, (Unknown, Ref)):
                out.append("{" + ast.unparse(part.value) + "}")
                continue
            try:
                text = repr(value) if part.conversion == ord("r") else format(value, spec)
            except (TypeError, ValueError):
                text = str(value)
            out.append(text)
    return "".join(out)


def dict_of(node: ast.Dict, evaluate: Callable[[ast.expr], object], file: str) -> object:
    """A dict literal (`{"float32": torch.float32, ...}`); `**spread` is not read."""
    if any(k is None for k in node.keys):
        return Unknown(f"{file}:{node.lineno}: dict with **")
    pairs = [(evaluate(k), evaluate(v)) for k, v in zip(node.keys, node.values, strict=True) if k]
    try:
        return dict(pairs)
    except TypeError:
        return Unknown(f"{file}:{node.lineno}: dict key")


def comprehension(
    node: ast.ListComp | ast.GeneratorExp,
    scope: dict[str, object],
    evaluate: Callable[[ast.expr, dict[str, object]], object],
    file: str,
) -> object:
    """A one-generator list comprehension or generator expression, as a list."""
    if len(node.generators) != 1 or not isinstance(
        node.generators[0].target, (ast.Name, ast.Tuple)
    ):
        return Unknown(f"{file}:{node.lineno}: comprehension")
    gen = node.generators[0]
    items = evaluate(gen.iter, scope)
    if not isinstance(items, (list, tuple, range, set, frozenset)):
        return Unknown(f"{file}:{node.lineno}: comprehension over {why(items)}")
    inner = dict(scope)
    result: list[object] = []
    target = gen.target
    for item in items:
        if isinstance(target, ast.Name):
            inner[target.id] = item
        elif isinstance(target, ast.Tuple):  # `for i, x in enumerate(...)`
            names = [t.id if isinstance(t, ast.Name) else "" for t in target.elts]
            if not isinstance(item, (list, tuple)) or len(item) != len(names):
                return Unknown(f"{file}:{node.lineno}: comprehension target")
            inner.update(zip(names, item, strict=True))
        if all(evaluate(cond, inner) is True for cond in gen.ifs):
            result.append(evaluate(node.elt, inner))
    return result


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
