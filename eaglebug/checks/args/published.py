"""The fields the runtime context computes when it publishes the resolved arguments.

0.5.23's namespace classes declare fields that are not flags (`enable_mamba_extra_buffer =
Derived(fn="sglang.srt.arg_groups.model_override_base.mamba_extra_buffer_of")`): at publish
`runtime_context` calls each `fn` on the resolved view and sets the field, and a runtime-only
field with `Derived(default=...)` starts at that default. What runs after publish (the KV
configurator's `get_exec().mamba.enable_mamba_extra_buffer`) reads them. Here the declarations
are read from the tree and each `fn` is run, in the one evaluator, on the object standing for
the resolved arguments; a tree without such declarations publishes nothing extra.
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass

from eaglebug.checks.pyeval import objects
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.values import FuncVal, Instance, is_known
from eaglebug.checks.source.classfacts import class_string
from eaglebug.checks.source.index import TreeIndex

_FOLDER = "sglang/srt/arg_groups/"
_NEEDLE = b"Derived("


@dataclass(frozen=True)
class Declared:
    """One derived field: the function that computes it (dotted), or its literal default."""

    name: str
    namespace: str  # the path below the top-level bag (`mamba` of `exec.mamba`), or ""
    fn: str
    default: object
    has_default: bool
    where: str


def declarations(index: TreeIndex) -> tuple[Declared, ...]:
    """The tree's `name = Derived(...)` class attributes (a tree answer)."""
    found: tuple[Declared, ...] = index.answer(
        "published:derived", tuple[Declared, ...], lambda: _declarations(index)
    )
    return found


def _declarations(index: TreeIndex) -> tuple[Declared, ...]:
    out: list[Declared] = []
    for rel in sorted(index.entries):
        if not rel.startswith(_FOLDER):
            continue
        data = index.files.source(rel)
        if data is None or _NEEDLE not in data:
            continue
        parsed = index.parse_file(rel)
        for cls in parsed.tree.body if parsed else []:
            if not isinstance(cls, ast.ClassDef):
                continue
            inner = (class_string(cls, "_NS_PATH") or "").partition(".")[2]
            for stmt in cls.body:
                made = _declared(stmt, rel, inner)
                if made is not None:
                    out.append(made)
    return tuple(out)


def _declared(stmt: ast.stmt, rel: str, namespace: str) -> Declared | None:
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "Derived"
    ):
        return None
    given = {k.arg: k.value for k in stmt.value.keywords if k.arg}
    fn = given.get("fn")
    default = given.get("default")
    literal: object = None
    has_default = False
    if default is not None:
        with contextlib.suppress(ValueError):
            literal, has_default = ast.literal_eval(default), True
    dotted = fn.value if isinstance(fn, ast.Constant) and isinstance(fn.value, str) else ""
    if not dotted and not has_default:
        return None
    name = stmt.targets[0].id
    return Declared(name, namespace, dotted, literal, has_default, f"{rel}:{stmt.lineno}")


def publish(m: Machine, index: TreeIndex, args: Instance) -> None:
    """Set on `args` each derived field it lacks: its `fn` run on `args` (what it cannot work
    out stays unknown), else its default."""
    store = m.fields(args)
    for declared in declarations(index):
        if declared.name in store:
            continue
        value: object = declared.default
        if declared.fn:
            fn = objects.resolve_dotted(m, declared.fn)
            value = m.call_within(fn, [args], {}) if isinstance(fn, FuncVal) else None
            if not is_known(value):
                continue
        elif not declared.has_default:
            continue
        # where the flat store holds the namespace's fields: at the top and below its path
        # (`get_exec().mamba.x` reads `mamba.x`)
        m.heap.set(args.oid, declared.name, value)
        if declared.namespace:
            m.heap.set(args.oid, f"{declared.namespace}.{declared.name}", value)


__all__ = ["Declared", "declarations", "publish"]
