"""The values `treeinterp` computes with: unknowns, alternatives, the run's objects, and the
operations on them (three-valued: a result is only known when its inputs are).

`UNKNOWN` is a value the tree decides at run time (a file's contents, an environment variable,
a model fact not in the config); `OneOf` is one of a few known values, where two branches wrote
different ones; a `Sentinel` is an object of the run whose attributes mean something (the
server args, the platform, a model config, torch on a CUDA build).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True)
class OneOf:
    """A value that is one of several known ones (the merge of two branches)."""

    values: frozenset[Any]


@dataclass(frozen=True)
class Sentinel:
    """An object of the run whose attributes mean something: the args, the platform, a model."""

    kind: str  # args | platform | model | hf_config | runner | class:<module>:<Name> | member:<Class>.<NAME> | ...


ARGS = Sentinel("args")
TRUTHY = Sentinel("truthy")  # a value known to be truthy, and nothing more
PLATFORM = Sentinel("platform")


@dataclass(frozen=True)
class FuncRef:
    rel: str
    module: str
    node: ast.FunctionDef = field(compare=False, hash=False)
    owner: str | None = None  # the class, for methods
    bound_self: Any = field(default=None, compare=False, hash=False)  # None: the server args


@dataclass(frozen=True)
class Raised:
    """A refusal the tree would raise for this launch (or might, when not `definite`)."""

    rel: str
    line: int
    function: str
    message: str | None
    kind: str  # ValueError | AssertionError | ...
    reads: frozenset[str]  # the server-args fields its conditions read
    condition: str  # the tests that lead to it, as written
    definite: bool


@dataclass(frozen=True)
class Write:
    value: Any
    rel: str
    line: int


@dataclass
class World:
    """What the run knows: the launch's values, the machine, the models."""

    values: dict[str, Any]  # server-args field -> value (the launch's, else the default)
    probes: dict[str, bool | None]  # platform probe function -> its answer on this GPU
    capability: tuple[int, int] | None
    platform_names: dict[str, str]  # get_platform().<name> -> probe function name
    architectures: tuple[str, ...] = ()
    draft_architectures: tuple[str, ...] = ()
    mla: bool | None = None
    environ: Mapping[str, str] = field(default_factory=dict)  # what the server's process sees
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class _State:
    fields: dict[str, Any]
    writes: dict[str, Write]

    def copy(self) -> _State:
        return _State(dict(self.fields), dict(self.writes))


@dataclass(frozen=True)
class Maybe:
    """A key that only some branches of a merged dict returned: the field may keep its value."""

    value: Any


def _merge_value(a: Any, b: Any) -> Any:
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    if isinstance(a, dict) and isinstance(b, dict):  # post-process results: merge key by key
        keys = list(dict.fromkeys([*a, *b]))
        return {
            k: _merge_value(a[k], b[k]) if k in a and k in b else Maybe(a.get(k, b.get(k)))
            for k in keys
        }
    if a == b and type(a) is type(b):
        return a
    try:
        left = a.values if isinstance(a, OneOf) else frozenset([a])
        right = b.values if isinstance(b, OneOf) else frozenset([b])
        return OneOf(left | right)
    except TypeError:  # unhashable values
        return UNKNOWN


def _merge(a: _State, b: _State) -> _State:
    fields = {
        k: _merge_value(a.fields.get(k, UNKNOWN), b.fields.get(k, UNKNOWN))
        for k in a.fields.keys() | b.fields.keys()
    }
    writes = dict(a.writes)
    writes.update(b.writes)
    return _State(fields, writes)


# Calls that hand back the server args themselves (the published bags of sglang >= 0.5.2x).
_ARGS_GETTERS = frozenset({"get_spec", "get_server_args", "get_global_server_args", "get_exec"})
_BAGS = frozenset({"kernel"})  # `get_exec().kernel.attention_backend`: a bag of the same fields
# What torch answers on a CUDA build (attributes that are not functions).
_TORCH_ATTRS: dict[str, Any] = {"torch.version.hip": None}
# The box is an NVIDIA GPU under CUDA (what torch would answer there).
_MACHINE_CALLS = {"torch.cuda.is_available": True, "torch.xpu.is_available": False}
_IDENTITY = frozenset({"resolved_view", "resolving_view", "record_of", "ResolvedView"})


class _Branch(Exception):
    """A path ended (returned or raised) inside a branch whose test was not decided."""


_STR_METHODS = frozenset({"split", "upper", "lower", "startswith", "endswith", "strip"})
_BUILTINS = frozenset(
    {
        "hasattr",
        "int",
        "float",
        "str",
        "bool",
        "len",
        "min",
        "max",
        "tuple",
        "list",
        "getattr",
        "isinstance",
    }
)


_PURE_BUILTINS: dict[str, Callable[..., Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "len": len,
    "min": min,
    "max": max,
    "tuple": tuple,
    "list": tuple,
}


def _builtin(name: str, args: list[Any]) -> Any:
    if any(a is UNKNOWN or isinstance(a, OneOf) for a in args):
        return UNKNOWN
    try:
        if name == "getattr" and args and args[0] is ARGS:
            return UNKNOWN
        if (
            name == "hasattr"
            and args
            and isinstance(args[0], Sentinel)
            and args[0].kind.startswith("torch:")
        ):
            return True
        function = _PURE_BUILTINS.get(name)
        if function is not None and args:
            return function(*args)
    except (TypeError, ValueError):
        return UNKNOWN
    return UNKNOWN


def _tri(value: bool | None) -> Any:
    return UNKNOWN if value is None else value


def _tri_name(value: bool | None, yes: str, no: str) -> Any:
    return UNKNOWN if value is None else Sentinel(yes if value else no)


def _truth(value: Any) -> bool | None:
    if value is UNKNOWN or isinstance(value, Sentinel | FuncRef):
        return None if value is UNKNOWN else True
    if isinstance(value, OneOf):
        truths = {bool(v) for v in value.values}
        return truths.pop() if len(truths) == 1 else None
    try:
        return bool(value)
    except Exception:
        return None


def _compare(op: ast.cmpop, a: Any, b: Any) -> Any:
    if isinstance(a, OneOf) or isinstance(b, OneOf):
        lefts = a.values if isinstance(a, OneOf) else {a}
        rights = b.values if isinstance(b, OneOf) else {b}
        results = {_compare(op, x, y) for x in lefts for y in rights}
        return results.pop() if len(results) == 1 else UNKNOWN
    if a is UNKNOWN or b is UNKNOWN or a is TRUTHY or b is TRUTHY:
        return UNKNOWN
    try:
        match op:
            case ast.Eq():
                return a == b
            case ast.NotEq():
                return a != b
            case ast.Is():
                return a is b if a is None or b is None else a == b
            case ast.IsNot():
                return a is not b if a is None or b is None else a != b
            case ast.In():
                return a in b if isinstance(b, (tuple, list, str, dict, frozenset)) else UNKNOWN
            case ast.NotIn():
                return a not in b if isinstance(b, (tuple, list, str, dict, frozenset)) else UNKNOWN
            case ast.Lt():
                return a < b
            case ast.LtE():
                return a <= b
            case ast.Gt():
                return a > b
            case ast.GtE():
                return a >= b
    except TypeError:  # None > 1: Python would raise; the tree guards it, we do not decide
        return UNKNOWN
    return UNKNOWN


def _binop(op: ast.operator, a: Any, b: Any) -> Any:
    if (
        not (isinstance(a, (int, float)) and isinstance(b, (int, float)))
        or isinstance(a, bool)
        or isinstance(b, bool)
    ):
        return UNKNOWN
    try:
        match op:
            case ast.Add():
                return a + b
            case ast.Sub():
                return a - b
            case ast.Mult():
                return a * b
            case ast.FloorDiv():
                return a // b
            case ast.Div():
                return a / b
            case ast.Mod():
                return a % b
            case ast.Pow() if abs(b) <= 64:
                return a**b
    except ZeroDivisionError:
        return UNKNOWN
    return UNKNOWN


def _ends(body: list[ast.stmt]) -> bool:
    return any(isinstance(stmt, (ast.Return, ast.Raise)) for stmt in body)


def _index(container: Any, key: Any) -> Any:
    try:
        return container[key]
    except (IndexError, KeyError, TypeError):
        return UNKNOWN


def _merge_all(values: list[Any]) -> Any:
    merged = values[0]
    for value in values[1:]:
        merged = _merge_value(merged, value)
    return merged


def _product(items: list[Any]) -> Any:
    """A tuple of values; of alternatives, the few tuples they can make."""
    if any(i is UNKNOWN for i in items):
        return UNKNOWN
    combos: list[tuple[Any, ...]] = [()]
    for item in items:
        choices = list(item.values) if isinstance(item, OneOf) else [item]
        combos = [(*c, choice) for c in combos for choice in choices]
        if len(combos) > 16:
            return UNKNOWN
    try:
        return combos[0] if len(combos) == 1 else OneOf(frozenset(combos))
    except TypeError:
        return UNKNOWN


def _literal(node: ast.expr) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, RecursionError):
        return UNKNOWN
    return tuple(value) if isinstance(value, list) else value


def _dict_keys(fn: ast.FunctionDef) -> Iterator[str]:
    """The keys a post-process function may return, for when its result is undecided."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            for key in node.value.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield key.value
