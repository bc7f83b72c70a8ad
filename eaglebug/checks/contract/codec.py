"""One codec for every value eaglebug keeps on disk: records to JSON and back, by their types.

Why: a cache is data. A pickle names the code that rebuilds it, so a file planted in the cache
folder ran that code (issue 24). Here the *reader* says what it expects (`decode(data, kind)`),
the type annotations of the records say the rest, and only those types are built: anything
else in a file (another shape, a wrong type, a truncated text) raises `Invalid`, which every
cache treats as a miss. Nothing read can name a function to call.

What it knows, from the annotations: `None`, `bool`, `int`, `float`, `str`, `bytes`, paths; `tuple`
(fixed or `...`), `list`, `set`, `frozenset`, `dict`; unions (`X | None`, `int | str`, unions of
dataclasses, told apart by a tag); `Literal`; enums (by value); records: dataclasses, frozen or
not (their init fields, in order), and `NamedTuple`s (the few records a warm run reads, which
would otherwise pay for `dataclasses` and its generated methods before printing a kept reply).
`object`/`Any` positions hold plain values, containers of them, and this package's own
records and enums (tagged with their module and name; found only among modules already
imported, never imported for the file's sake).

Two spellings: `encode` gives the compact form the caches store (a dataclass as the list of
its fields); `named` gives the readable form of the JSON contract (a dataclass as an object of
its fields), for the `to_json` of evidence and fixes that are plain field dumps.
"""

from __future__ import annotations

import contextlib
import enum
import json
import sys
import types
import typing
from collections.abc import Callable
from pathlib import PurePath
from typing import Annotated, Any, Literal, Union

from eaglebug.checks.contract.scalars import (
    Invalid,
    Json,
    bytes_dec,
    bytes_enc,
    checked,
    float_dec,
    float_enc,
    int_dec,
    none,
    none_dec,
    path_dec,
    same,
)

__all__ = ["Invalid", "JsonTree", "decode", "dumps", "encode", "loads", "named"]

_AS_IS = "json-tree"
# A field kept as the JSON tree it was read as, decoded later by whoever knows its type.
JsonTree = Annotated[Any, _AS_IS]
_Enc = Callable[[Any], Json]
_Dec = Callable[[Json], Any]
_PRIMITIVES: tuple[type, ...] = (type(None), bool, int, float, str)
_OWN = "eaglebug."  # dataclasses and enums in dynamic positions come from this package only


def encode(value: object, kind: object) -> Json:
    """`value` (of type `kind`) as a JSON tree."""
    return _coder(kind).enc(value)


def decode(data: Json, kind: object) -> Any:
    """The value of type `kind` that `data` holds; `Invalid` if it holds anything else."""
    try:
        return _coder(kind).dec(data)
    except Invalid:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        # A constructor that refuses the values (a dataclass's own check, an enum's value).
        raise Invalid(f"{type(exc).__name__}: {exc}") from None


def dumps(value: object, kind: object) -> str:
    return json.dumps(encode(value, kind), separators=(",", ":"), ensure_ascii=False)


def loads(text: str | bytes, kind: object) -> Any:
    """Decode a JSON text; `Invalid` for text that is not JSON (or nests past any limit)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise Invalid(f"not JSON: {exc}") from None
    return decode(data, kind)


def named(value: object) -> dict[str, Json]:
    """A dataclass as an object of its fields by name (tuples as lists, nested dataclasses
    the same way): the JSON contract's form, where a `to_json` would only list the fields."""
    names = None if isinstance(value, type) else _fields_of(type(value), init_only=False)
    if names is None:
        raise TypeError(f"{type(value).__name__} is not a record")
    return {name: _named(getattr(value, name)) for name in names}


def _named(value: object) -> Json:
    if not isinstance(value, type) and _fields_of(type(value)) is not None:
        return named(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_named(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _named(v) for k, v in value.items()}
    return value


# -- coders, one per kind, built once ----------------------------------------------------------
class _Coder:
    """The encoder and decoder of one kind. Built empty and filled, so that a recursive
    type (a condition that holds conditions) refers to its own coder."""

    enc: _Enc
    dec: _Dec
    tag: str = ""  # the name a union tells this member by


_CODERS: dict[object, _Coder] = {}


def _coder(kind: object, owner: dict[str, Any] | None = None) -> _Coder:
    """The coder of `kind`; `owner` is the namespace a string annotation is read in."""
    if isinstance(kind, typing.ForwardRef):  # `tuple["JsonValue", ...]` inside an alias
        kind = kind.__forward_arg__
    if isinstance(kind, str):
        kind = _resolve(kind, owner)
    try:
        return _CODERS[kind]
    except (KeyError, TypeError):
        pass
    coder = _Coder()
    with contextlib.suppress(TypeError):  # an unhashable kind: built each time
        _CODERS[kind] = coder
    _build(coder, kind, owner)
    return coder


def _resolve(name: str, owner: dict[str, Any] | None) -> object:
    if owner is None or name not in owner:
        raise TypeError(f"cannot resolve the annotation {name!r}")
    return owner[name]


def _build(coder: _Coder, kind: object, owner: dict[str, Any] | None) -> None:
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin is Annotated:
        if _AS_IS in args[1:]:
            coder.enc, coder.dec, coder.tag = same, same, "json"
        else:
            inner = _coder(args[0], owner)
            coder.enc, coder.dec = (lambda v: inner.enc(v)), (lambda d: inner.dec(d))
            coder.tag = inner.tag
    elif kind is None or kind is type(None):
        coder.enc, coder.dec, coder.tag = none, none_dec, "None"
    elif kind in (Any, object):
        coder.enc, coder.dec, coder.tag = _dyn_enc, _dyn_dec, "object"
    elif kind is bool:
        coder.enc, coder.dec, coder.tag = same, checked(bool), "bool"
    elif kind is int:
        coder.enc, coder.dec, coder.tag = same, int_dec, "int"
    elif kind is float:
        coder.enc, coder.dec, coder.tag = float_enc, float_dec, "float"
    elif kind is str:
        coder.enc, coder.dec, coder.tag = same, checked(str), "str"
    elif kind is bytes:
        coder.enc, coder.dec, coder.tag = bytes_enc, bytes_dec, "bytes"
    elif isinstance(kind, type) and issubclass(kind, PurePath):
        coder.enc, coder.dec, coder.tag = str, path_dec(kind), kind.__name__
    elif origin is Literal:
        _literal(coder, args)
    elif origin in (Union, types.UnionType):
        _union(coder, args, owner)
    elif origin is tuple:
        _tuple(coder, args, owner)
    elif origin in (list, set, frozenset):
        _sequence(coder, origin, args, owner)
    elif origin is dict:
        _dict(coder, args, owner)
    elif isinstance(kind, type) and issubclass(kind, enum.Enum):
        _enum(coder, kind)
    elif isinstance(kind, type) and (names := _fields_of(kind)) is not None:
        _record(coder, kind, names)
    elif isinstance(kind, type) and kind in (tuple, list, dict, set, frozenset):
        _coder_of_bare(coder, kind)
    else:
        raise TypeError(f"the codec does not know {kind!r}")


def _literal(coder: _Coder, allowed: tuple[object, ...]) -> None:
    def dec(data: Json) -> Any:
        for value in allowed:
            if data == value and type(data) is type(value):
                return value
        raise Invalid(f"expected one of {allowed!r}, got {data!r:.60}")

    coder.enc, coder.dec, coder.tag = same, dec, "Literal"


def _union(coder: _Coder, members: tuple[object, ...], owner: dict[str, Any] | None) -> None:
    optional = type(None) in members
    rest = [m for m in members if m is not type(None)]
    coders = [_coder(m, owner) for m in rest]
    coder.tag = "|".join(c.tag or "?" for c in coders)
    if len(coders) == 1:  # X | None: X as it is, None as null
        inner = coders[0]
        coder.enc = lambda v: None if v is None else inner.enc(v)
        coder.dec = lambda d: None if d is None else inner.dec(d)
        return
    if all(m in _PRIMITIVES for m in rest):  # int | str: told apart by the JSON type
        kinds = tuple(typing.cast(type, m) for m in rest)

        def dec_primitive(data: Json) -> Any:
            if data is None and optional:
                return None
            for kind in kinds:
                if type(data) is kind:
                    return data
                if kind is float and type(data) is int:
                    return float(data)
            raise Invalid(f"expected {coder.tag}, got {type(data).__name__}")

        coder.enc, coder.dec = same, dec_primitive
        return
    by_tag: dict[str, _Coder] = {}
    for member, member_coder in zip(rest, coders, strict=True):
        tag = member_coder.tag or repr(member)
        if tag in by_tag:
            raise TypeError(f"two members of {members!r} share the tag {tag!r}")
        by_tag[tag] = member_coder
    pairs = list(zip(rest, coders, strict=True))

    def enc(value: Any) -> Json:
        if value is None and optional:
            return None
        for member, member_coder in pairs:
            if _is_instance(value, member):
                return [member_coder.tag, member_coder.enc(value)]
        raise TypeError(f"{type(value).__name__} is not one of {coder.tag}")

    def dec(data: Json) -> Any:
        if data is None and optional:
            return None
        if type(data) is not list or len(data) != 2 or type(data[0]) is not str:
            raise Invalid(f"expected a tagged {coder.tag}, got {type(data).__name__}")
        member_coder = by_tag.get(data[0])
        if member_coder is None:
            raise Invalid(f"{data[0]!r:.60} is not one of {coder.tag}")
        return member_coder.dec(data[1])

    coder.enc, coder.dec = enc, dec


def _is_instance(value: object, member: object) -> bool:
    origin = typing.get_origin(member) or member
    if origin is Literal:
        return value in typing.get_args(member)
    if origin is bool:
        return type(value) is bool
    if origin is int:
        return type(value) is int
    return isinstance(origin, type) and isinstance(value, origin)


def _tuple(coder: _Coder, args: tuple[object, ...], owner: dict[str, Any] | None) -> None:
    coder.tag = "tuple"
    if len(args) == 2 and args[1] is Ellipsis:
        item = _coder(args[0], owner)

        def enc_var(value: Any) -> Json:
            return [item.enc(v) for v in value]

        def dec_var(data: Json) -> Any:
            if type(data) is not list:
                raise Invalid(f"expected a list, got {type(data).__name__}")
            return tuple([item.dec(d) for d in data])

        coder.enc, coder.dec = enc_var, dec_var
        return
    items = [_coder(a, owner) for a in args]
    n = len(items)

    def enc(value: Any) -> Json:
        if len(value) != n:
            raise TypeError(f"expected {n} items, got {len(value)}")
        return [c.enc(v) for c, v in zip(items, value, strict=True)]

    def dec(data: Json) -> Any:
        if type(data) is not list or len(data) != n:
            raise Invalid(f"expected a list of {n}")
        return tuple([c.dec(d) for c, d in zip(items, data, strict=True)])

    coder.enc, coder.dec = enc, dec


def _sequence(
    coder: _Coder, origin: type, args: tuple[object, ...], owner: dict[str, Any] | None
) -> None:
    item = _coder(args[0] if args else Any, owner)
    coder.tag = origin.__name__
    ordered = origin is not list

    def enc(value: Any) -> Json:
        out = [item.enc(v) for v in value]
        if ordered:  # a set's order differs from run to run: written sorted where it can be
            with contextlib.suppress(TypeError):
                out.sort()
        return out

    def dec(data: Json) -> Any:
        if type(data) is not list:
            raise Invalid(f"expected a list, got {type(data).__name__}")
        return origin([item.dec(d) for d in data])

    coder.enc, coder.dec = enc, dec


def _dict(coder: _Coder, args: tuple[object, ...], owner: dict[str, Any] | None) -> None:
    key_kind, value_kind = args if args else (Any, Any)
    key, value = _coder(key_kind, owner), _coder(value_kind, owner)
    coder.tag = "dict"
    if key_kind is str:  # a JSON object

        def enc_obj(v: Any) -> Json:
            return {k: value.enc(x) for k, x in v.items()}

        def dec_obj(data: Json) -> Any:
            if type(data) is not dict:
                raise Invalid(f"expected an object, got {type(data).__name__}")
            return {k: value.dec(x) for k, x in data.items()}

        coder.enc, coder.dec = enc_obj, dec_obj
        return

    def enc(v: Any) -> Json:  # other keys: a list of pairs
        return [[key.enc(k), value.enc(x)] for k, x in v.items()]

    def dec(data: Json) -> Any:
        if type(data) is not list:
            raise Invalid(f"expected a list of pairs, got {type(data).__name__}")
        out = {}
        for pair in data:
            if type(pair) is not list or len(pair) != 2:
                raise Invalid("expected a [key, value] pair")
            out[key.dec(pair[0])] = value.dec(pair[1])
        return out

    coder.enc, coder.dec = enc, dec


def _enum(coder: _Coder, kind: type[enum.Enum]) -> None:
    def dec(data: Json) -> Any:
        if type(data) not in _PRIMITIVES:
            raise Invalid(f"expected a {kind.__name__} value")
        try:
            return kind(data)
        except ValueError:
            raise Invalid(f"{data!r:.60} is not a {kind.__name__}") from None

    coder.enc, coder.dec, coder.tag = (lambda v: v.value), dec, kind.__name__


def _fields_of(kind: type, init_only: bool = True) -> list[str] | None:
    """A record type's fields (a dataclass's init fields, or a NamedTuple's), in order; None
    for any other type. (`dataclasses` is loaded already wherever a dataclass exists.)"""
    if hasattr(kind, "__dataclass_fields__"):
        import dataclasses

        return [f.name for f in dataclasses.fields(kind) if f.init or not init_only]
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):
        return list(kind._fields)
    return None


def _record(coder: _Coder, kind: type, names: list[str]) -> None:
    """A record as the list of its fields, in order; decoded by their annotations."""
    coder.tag = kind.__name__
    module = sys.modules.get(kind.__module__)
    namespace = dict(vars(module)) if module is not None else {}
    try:
        hints = typing.get_type_hints(kind, globalns=namespace, include_extras=True)
    except (NameError, TypeError) as exc:
        raise TypeError(f"cannot read the annotations of {kind.__qualname__}: {exc}") from None
    # Filled in below: a recursive type reaches this coder while its fields are being built.
    coders: list[_Coder] = []
    n = len(names)

    def enc(value: Any) -> Json:
        if type(value) is not kind:
            raise TypeError(f"expected {kind.__qualname__}, got {type(value).__qualname__}")
        return [c.enc(getattr(value, name)) for c, name in zip(coders, names, strict=True)]

    def dec(data: Json) -> Any:
        if type(data) is not list or len(data) != n:
            raise Invalid(f"expected the {n} fields of {kind.__qualname__}")
        return kind(*[c.dec(d) for c, d in zip(coders, data, strict=True)])

    coder.enc, coder.dec = enc, dec
    coders.extend(_coder(hints[name], namespace) for name in names)


def _coder_of_bare(coder: _Coder, kind: type) -> None:
    """A bare `tuple`/`list`/`dict`/...: its items are dynamic."""
    if kind is tuple:
        _tuple(coder, (Any, ...), None)
    elif kind is dict:
        _dict(coder, (Any, Any), None)
    else:
        _sequence(coder, kind, (), None)


# -- dynamic values (`object`, `Any`) ---------------------------------------------------------
# Plain values as they are; containers and own types as a one-key object saying what they are.
def _dyn_enc(value: Any) -> Json:
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value
    if type(value) is tuple:
        return {"tuple": [_dyn_enc(v) for v in value]}
    if type(value) is list:
        return {"list": [_dyn_enc(v) for v in value]}
    if type(value) is dict:
        return {"dict": [[_dyn_enc(k), _dyn_enc(v)] for k, v in value.items()]}
    if type(value) in (set, frozenset):
        return {type(value).__name__: _coder(type(value)).enc(value)}
    if type(value) is bytes:
        return {"bytes": bytes_enc(value)}
    kind = type(value)
    if kind.__module__.startswith(_OWN) and (
        _fields_of(kind) is not None or issubclass(kind, enum.Enum)
    ):
        return {"own": [f"{kind.__module__}:{kind.__qualname__}", _coder(kind).enc(value)]}
    raise TypeError(f"the codec does not keep a {kind.__qualname__} in an `object` field")


_DYN_CONTAINERS: dict[str, Callable[[Json], Any]] = {
    "tuple": lambda d: tuple(_dyn_list(d)),
    "list": lambda d: _dyn_list(d),
    "set": lambda d: set(_dyn_list(d)),
    "frozenset": lambda d: frozenset(_dyn_list(d)),
    "bytes": bytes_dec,
}


def _dyn_list(data: Json) -> list[Any]:
    if type(data) is not list:
        raise Invalid("expected a list")
    return [_dyn_dec(d) for d in data]


def _dyn_dec(data: Json) -> Any:
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is not dict or len(data) != 1:
        raise Invalid(f"expected a plain value or a tagged one, got {type(data).__name__}")
    ((tag, payload),) = data.items()
    if tag in _DYN_CONTAINERS:
        return _DYN_CONTAINERS[tag](payload)
    if tag == "dict":
        if type(payload) is not list:
            raise Invalid("expected a list of pairs")
        out = {}
        for pair in payload:
            if type(pair) is not list or len(pair) != 2:
                raise Invalid("expected a [key, value] pair")
            out[_dyn_dec(pair[0])] = _dyn_dec(pair[1])
        return out
    if tag == "own" and type(payload) is list and len(payload) == 2:
        return _coder(_own_type(payload[0])).dec(payload[1])
    raise Invalid(f"unknown tag {tag!r:.60}")


def _own_type(name: Json) -> type:
    """One of this package's dataclasses or enums, by `module:qualname`, from a module that is
    already imported: a file can name a type to build, never a module to import."""
    if type(name) is not str or ":" not in name:
        raise Invalid("expected module:qualname")
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name) if module_name.startswith(_OWN) else None
    if module is None:
        raise Invalid(f"{module_name!r:.80} is not a loaded eaglebug module")
    found: object = module
    for part in qualname.split("."):
        found = vars(found).get(part) if hasattr(found, "__dict__") else None
    if (
        isinstance(found, type)
        and (_fields_of(found) is not None or issubclass(found, enum.Enum))
        and found.__module__ == module_name
    ):
        return found
    raise Invalid(f"{name!r:.80} is not a record or enum of eaglebug")
