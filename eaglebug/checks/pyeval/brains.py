"""Plug-ins for what the tree imports from outside it: torch, os, functools, transformers.

Each gives the meaning a name has on the box SGLang runs on (an NVIDIA GPU under CUDA), by
the name's qualified name, as astroid's brain modules do. What only the launch knows (its
environment, the GPU's capability) is a parameter; everything else outside the tree stays an
`Intrinsic` whose calls are unknown.
"""

from __future__ import annotations

import copy
import decimal
import re
from collections.abc import Collection, Mapping
from typing import Any

from eaglebug.checks.pyeval import calls, objects
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import (
    ClassVal,
    FuncVal,
    Instance,
    Intrinsic,
    OneOf,
    PartialDict,
    Top,
)

# torch's dtypes by their attribute name, and their element sizes in bytes.
DTYPE_BYTES: dict[str, int] = {
    "float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2,
    "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1, "float4_e2m1fn_x2": 1, "int64": 8, "long": 8, "int32": 4, "int": 4,
    "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}  # fmt: skip


def dtype(name: str) -> Intrinsic:
    """`torch.<name>` as the run's value (compared by name, `.itemsize` known)."""
    return Intrinsic(f"torch.{name}")


def register_torch(hooks: Intrinsics, capability: tuple[int, int] | None = None) -> None:
    """torch on a CUDA build with an NVIDIA GPU: `torch.cuda.is_available()` is true,
    `torch.version.hip` is None, the dtypes' sizes are torch's."""
    for name, size in DTYPE_BYTES.items():
        hooks.value(f"torch.{name}", dtype(name))
        hooks.value(f"torch.{name}.itemsize", size)
    hooks.value("torch.version.hip", None)
    hooks.call("torch.cuda.is_available", lambda call: True)
    hooks.call("torch.xpu.is_available", lambda call: False)
    hooks.call(
        "torch.cuda.get_device_capability",
        lambda call: capability if capability is not None else Top("the GPU is not known"),
    )


def register_os(
    hooks: Intrinsics, environ: Mapping[str, str], known: Collection[str] | None = None
) -> dict[str, str]:
    """`os.getenv` / `os.environ.get` as the launched server's environment: `environ` holds
    the variables that are set among `known` (None: every variable), so a known one that is
    not in it is unset and any other is not known. Returns the dict the run reads and may
    change (`envs.X.set(...)`)."""
    env: dict[str, str] = (
        dict(environ) if known is None else PartialDict(dict(environ), frozenset(known))
    )
    hooks.value("os.environ", env)

    def getenv(call: Call) -> Any:
        name = call.args[0] if call.args else None
        default = call.args[1] if len(call.args) > 1 else call.kwargs.get("default")
        if not isinstance(name, str):
            return Top(f"{call.where}: getenv of an unknown name")
        if name in env:
            return env[name]
        if known is None or name in known:
            return default
        return Top(f"{name}: the server's environment is not known", frozenset({f"env:{name}"}))

    hooks.call("os.getenv", getenv)
    hooks.call("os.environ.get", getenv)
    return env


def register_functools(hooks: Intrinsics) -> None:
    """Decorators that do not change what a function computes: `lru_cache`, `cache`,
    `wraps`, `cached_property` (a property here)."""

    def identity_decorator(call: Call) -> Any:
        if call.args and isinstance(call.args[0], FuncVal):
            return call.args[0]  # `@lru_cache` bare, or `lru_cache(f)`
        return Intrinsic("functools.identity_decorator")

    for name in ("lru_cache", "cache", "wraps"):
        hooks.call(f"functools.{name}", identity_decorator)
    hooks.call("functools.identity_decorator", lambda call: call.args[0] if call.args else None)


def register_transformers(hooks: Intrinsics) -> None:
    """transformers' `PretrainedConfig.get_text_config()`: the config itself, unless it holds
    a `text_config` (a vision-language model's)."""

    def text_config(call: Call) -> Any:
        owner = call.callee.data if isinstance(call.callee, Intrinsic) else None
        if owner is None:
            return Top(f"{call.where}: get_text_config of an unknown config")
        inner = objects.attribute(call.machine, owner, "text_config", call.where)
        if isinstance(inner, (Top, OneOf)):
            return owner
        return inner

    def init(call: Call) -> Any:
        """`PretrainedConfig.__init__(**kwargs)` keeps every keyword it is given as an
        attribute (`setattr(self, key, value)` for what its own fields do not take): a
        sub-config's keys its class does not name (`full_attention_interval` of Qwen3.5's
        text config) are the config.json's, and what neither they nor its classes set it
        does not have (`hasattr(text_config, "text_config")` is false)."""
        owner = call.callee.data if isinstance(call.callee, Intrinsic) else None
        if isinstance(owner, Instance):
            for key, value in call.kwargs.items():
                if owner.key(key) not in call.machine.fields(owner):
                    call.machine.heap.set(owner.oid, owner.key(key), value)
            if not owner.path:  # a config built from config.json's keys: a key it lacks, it
                call.machine.heap.closed.add(owner.oid)  # lacks (as the store's own configs)
        return None

    for base in (
        "transformers.PretrainedConfig",
        "transformers.PreTrainedConfig",
        "transformers.configuration_utils.PretrainedConfig",
        "transformers.configuration_utils.PreTrainedConfig",
    ):
        hooks.call(f"{base}.get_text_config", text_config)
        hooks.call(f"{base}.__init__", init)

    def made(call: Call) -> Any:
        """`DeepseekV3Config(**text_config)`: a config whose attributes are the keywords it
        was given (what config.json held)."""
        if call.args:
            return Top(f"{call.where}: {call.qualname}() with positional arguments")
        return call.machine.bag(dict(call.kwargs), ClassVal(call.qualname))

    hooks.call_matching("transformers*", lambda name: made if name.endswith("Config") else None)


def _decimal(call: Call) -> Any:
    """`Decimal("25.6")`: a decimal of a known string or number (its arithmetic is Python's)."""
    value = call.args[0] if call.args else "0"
    if (
        isinstance(value, (str, int, float))
        and not isinstance(value, bool)
        and len(str(value)) < 64
    ):
        try:
            return decimal.Decimal(value)
        except decimal.InvalidOperation:
            return Top(f"{call.where}: Decimal({value!r}): not a number", error="InvalidOperation")
    return Top(f"{call.where}: Decimal of {type(value).__name__}")


def register_stdlib(hooks: Intrinsics) -> None:
    """`copy`, `dataclasses` and `re` on the run's values: copies of objects the run made, the
    dataclass test by the class's decorator, regular expressions on known short strings."""

    def copied(call: Call) -> Any:
        value = call.args[0] if call.args else None
        deep = call.qualname == "copy.deepcopy"
        return _copy(call.machine, value, deep, {})

    hooks.call("copy.copy", copied)
    hooks.call("copy.deepcopy", copied)

    def is_dataclass(call: Call) -> Any:
        value = call.args[0] if call.args else None
        cls = value.cls if isinstance(value, Instance) else value
        if isinstance(cls, ClassVal) and cls.ref is not None:
            return calls.is_dataclass(call.machine, cls)
        if value is None or isinstance(value, (bool, int, float, str, tuple, list, dict)):
            return False
        return Top(f"{call.where}: is_dataclass of {type(value).__name__}")

    hooks.call("dataclasses.is_dataclass", is_dataclass)
    for name in ("match", "search", "fullmatch"):
        hooks.call(f"re.{name}", _regex(name))
        hooks.call(f"re.Pattern.{name}", _regex(name))
    hooks.call("re.compile", _compile)
    hooks.call("decimal.Decimal", _decimal)
    hooks.call("re.sub", _sub)
    for name in ("group", "groups", "start", "end", "groupdict"):
        hooks.call(f"re.Match.{name}", _match_method(name))


_REGEX_TEXT = 10_000  # the longest string, and pattern, a regular expression is run on


def _copy(machine: Machine, value: Any, deep: bool, memo: dict[int, Instance]) -> Any:
    if isinstance(value, Instance) and not value.path:
        if value.oid in memo:
            return memo[value.oid]
        made = machine.new_object(value.cls)
        memo[value.oid] = made
        for key, inner in machine.fields(value).items():
            machine.heap.set(made.oid, key, _copy(machine, inner, deep, memo) if deep else inner)
        if value.oid in machine.heap.closed:
            machine.heap.closed.add(made.oid)
        return made
    if isinstance(value, (list, dict, set)):
        try:
            return copy.deepcopy(value) if deep else copy.copy(value)
        except Exception:
            return Top("a copy of a container of objects")
    return value


def _texts(*values: Any) -> bool:
    return all(isinstance(v, str) and len(v) <= _REGEX_TEXT for v in values)


def _regex(name: str) -> Any:
    def run(call: Call) -> Any:
        args = list(call.args)
        if call.qualname.startswith("re.Pattern.") and isinstance(call.callee, Intrinsic):
            pattern = call.callee.data
            subject = args[0] if args else None
            if not isinstance(pattern, re.Pattern) or not _texts(subject):
                return Top(f"{call.where}: a pattern on an unknown string")
            found = getattr(pattern, name)(subject)
        else:
            if len(args) < 2 or not _texts(args[0], args[1]):
                return Top(f"{call.where}: re.{name} of unknown strings")
            flags = args[2] if len(args) > 2 else call.kwargs.get("flags", 0)
            if not isinstance(flags, int):
                return Top(f"{call.where}: re.{name} with unknown flags")
            try:
                found = getattr(re, name)(args[0], args[1], flags)
            except re.error as error:
                return Top(f"{call.where}: {error}")
        return None if found is None else Intrinsic("re.Match", found)

    return run


def _compile(call: Call) -> Any:
    pattern = call.args[0] if call.args else None
    if not _texts(pattern):
        return Top(f"{call.where}: re.compile of an unknown pattern")
    try:
        return Intrinsic("re.Pattern", re.compile(pattern))
    except re.error as error:
        return Top(f"{call.where}: {error}")


def _sub(call: Call) -> Any:
    args = call.args
    if len(args) < 3 or not _texts(args[0], args[1], args[2]):
        return Top(f"{call.where}: re.sub of unknown strings")
    try:
        return re.sub(args[0], args[1], args[2])
    except re.error as error:
        return Top(f"{call.where}: {error}")


def _match_method(name: str) -> Any:
    def run(call: Call) -> Any:
        found = call.callee.data if isinstance(call.callee, Intrinsic) else None
        if not isinstance(found, re.Match):
            return Top(f"{call.where}: a match not known")
        try:
            return getattr(found, name)(*call.args)
        except IndexError as error:
            return Top(f"{call.where}: {error}")

    return run


def register_all(
    hooks: Intrinsics,
    environ: Mapping[str, str] | None = None,
    capability: tuple[int, int] | None = None,
    known: Collection[str] | None = None,
) -> dict[str, str]:
    register_torch(hooks, capability)
    register_functools(hooks)
    register_stdlib(hooks)
    register_transformers(hooks)
    return register_os(hooks, environ or {}, known)
