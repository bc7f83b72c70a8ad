"""Objects for `machine.Machine`: what a name, an attribute and a call are, by qualified name.

Names resolve through the module's table and imports (`scope.Source`) to the tree's functions,
classes and module values (evaluated at import, once per run: `_is_hip = is_hip()`), or to an
`Intrinsic` outside the tree. A class of the tree is the index's `ClassRef`: its attributes are
looked up along the audit's MRO (methods bound, properties run, class constants, enum members
with `.name` / `.value`, `@staticmethod` / `@classmethod`), and calling it makes an `Instance`
(a dataclass from its fields and `__post_init__`, else the `__init__` the MRO gives). A call is
a plug-in's where one is registered for the callee's qualified name, else the tree's function
run, else Python's builtin; anything else is unknown, with the reason.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval import flat
from eaglebug.checks.pyeval.scope import BUILTIN_NAMES
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import (
    MISSING,
    UNSET,
    ClassVal,
    EnumMember,
    FunctionSite,
    FuncVal,
    Instance,
    Intrinsic,
    ModuleVal,
    OneOf,
    Top,
    one_of,
    reads_of,
    truth,
)

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.machine import Machine
    from eaglebug.checks.source.classes import ClassRef

_DECORATED = {"property": "property", "cached_property": "property", "staticmethod": "static",
              "classmethod": "class"}  # fmt: skip


# -- names -------------------------------------------------------------------------------------
def resolve(m: Machine, module: str, name: str, hops: int = 0) -> Any:
    key = (module, name)
    if key in m.module_values:
        return m.module_values[key]
    if key in m._resolving or hops > m.budget.hops:
        return Top(f"{module}.{name} refers to itself")
    m._resolving.add(key)
    try:
        value = _resolve(m, module, name, hops)
    finally:
        m._resolving.discard(key)
    m.module_values[key] = value
    return value


def _resolve(m: Machine, module: str, name: str, hops: int) -> Any:
    given = m.intrinsics.values.get(f"{module}.{name}", MISSING)
    if given is not MISSING:  # a plug-in's value wins over the tree's (a lazy singleton)
        return given
    lazy = m.source.lazy_function(module, name)
    if lazy is not None:  # a plain module function: no parse until it runs
        return FuncVal(lazy)
    table = m.source.table(module)
    if table is None:
        return Intrinsic(f"{module}.{name}")
    home = m.source.defines(module, name)
    if home is not None and home != module:  # brought in by `from X import *`
        return resolve(m, home, name, hops + 1)
    if name in table.runtime:
        return Top(f"{module}.{name} is the process's state, set at run time")
    candidates = table.definitions.get(name)
    if candidates:
        values: list[Any] = []
        with m.module_frame(module):
            for candidate in reversed(candidates):
                told: bool | None = True
                for test, taken in candidate.guards:
                    seen = truth(_expr(m, test)) if test is not None else None
                    step = None if seen is None else seen == taken
                    told = (
                        False
                        if step is False or told is False
                        else (None if step is None or told is None else True)
                    )
                if told is False:
                    continue
                values.append(_definition(m, table.module, table.rel, name, candidate.node))
                if told is True:
                    break
        if not values:
            return Top(f"{module}.{name} is not defined on this platform's path")
        return one_of(values, m.budget.alternatives)
    target = table.imports.get(name)
    if target is not None:
        return resolve_dotted(m, target, hops + 1)
    if table.is_package:  # `pkg.sub` whose file is not in the tree (a partial copy, an
        # extension module): a name outside the tree, which a plug-in may answer
        return m.intrinsics.values.get(f"{module}.{name}", Intrinsic(f"{module}.{name}"))
    return Top(f"{module} has no name {name}")


def _expr(m: Machine, node: ast.expr) -> Any:
    return m.expr(node)


def _definition(m: Machine, module: str, rel: str, name: str, node: ast.AST) -> Any:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return FuncVal(FunctionSite(rel, module, name, node))
    if isinstance(node, ast.ClassDef):
        return m.source.class_val(f"{module}.{name}")
    assert isinstance(node, ast.expr)
    return _expr(m, node)


def resolve_dotted(m: Machine, dotted: str, hops: int = 0) -> Any:
    """A dotted name: a module of the tree, a name in one, or one outside the tree."""
    if m.source.is_module(dotted):
        return ModuleVal(dotted)
    split = m.source.split(dotted)
    if split is None:
        return m.intrinsics.values.get(dotted, Intrinsic(dotted))
    module, rest = split
    head, _, tail = rest.partition(".")
    value = resolve(m, module, head, hops)
    for part in tail.split(".") if tail else []:
        value = attribute(m, value, part, dotted)
    return value


def builtin(m: Machine, name: str, where: str) -> Any:
    if name in {"True", "False", "None"}:
        return {"True": True, "False": False, "None": None}[name]
    if name in BUILTIN_NAMES:
        return Intrinsic(f"builtins.{name}")
    return Top(f"{where}: {name} is not defined")


def qualname_of(value: Any) -> str:
    if isinstance(value, FuncVal):
        return f"{value.site.module}.{value.site.qualname}"
    if isinstance(value, (ClassVal, Intrinsic)):
        return value.qualname
    if isinstance(value, ModuleVal):
        return value.name
    return ""


# -- attributes --------------------------------------------------------------------------------
def attribute(m: Machine, owner: Any, attr: str, where: str) -> Any:
    if isinstance(owner, Top):
        return Top(owner.why, owner.reads)
    if isinstance(owner, OneOf):
        return one_of((attribute(m, v, attr, where) for v in owner.values), m.budget.alternatives)
    found = lookup(m, owner, attr, where)
    if found is MISSING:
        if isinstance(owner, Instance) and owner.oid in m.heap.tracked:
            key = owner.key(attr)
            m.reads.add(key)
            return Top(f"{key} is not set", frozenset({key}))
        return Top(f"{where}: {_kind(owner)} has no attribute {attr}")
    return found


def lookup(m: Machine, owner: Any, attr: str, where: str) -> Any:
    """`owner.attr`, or `MISSING` when the object certainly has no such attribute."""
    if owner is None and not attr.startswith("__"):
        return MISSING  # None has no attributes of its own (`getattr(None, "x", d)` is d)
    if isinstance(owner, Instance):
        return _instance_attribute(m, owner, attr, where)
    if isinstance(owner, ClassVal):
        found = class_attribute(m, owner, None, attr, where)
        if found is MISSING and owner.ref is None:
            return Top(f"{where}: {owner.qualname}.{attr} is outside the tree")
        return found
    if isinstance(owner, EnumMember):
        if attr == "name":
            return owner.name
        if attr == "value":
            return owner.value
        return class_attribute(m, owner.cls, owner, attr, where)
    if isinstance(owner, ModuleVal):
        return resolve(m, owner.name, attr)
    if isinstance(owner, Intrinsic) and owner.qualname == "builtins.super" and owner.data:
        return super_attribute(m, owner, attr, where)
    if isinstance(owner, Intrinsic):
        qualname = f"{owner.qualname}.{attr}"
        if qualname in m.intrinsics.values:
            return m.intrinsics.values[qualname]
        handler = m.intrinsics.handler(f"{owner.qualname}.__getattr__")
        if handler is not None:
            found = handler(Call(m, owner, owner.qualname, [attr], {}, None, None))
            if found is not UNSET:
                return found
        return Intrinsic(qualname, owner.data)
    if isinstance(owner, FuncVal):
        return Top(f"{where}: attribute {attr} of a function")
    return Top(f"{where}: attribute {attr} of a {type(owner).__name__}")


def _instance_attribute(m: Machine, obj: Instance, attr: str, where: str) -> Any:
    if not obj.path and attr in m.heap.aliases.get(obj.oid, ()):
        return obj
    store = m.heap.objects.get(obj.oid, {})
    key = obj.key(attr)
    if key in store:
        if obj.oid in m.heap.tracked:
            m.reads.add(key)
        return store[key]
    if m.heap.deeper.under(store, key):
        return obj.child(attr)  # a deeper path of the flat store
    cls = obj.cls if not obj.path else m.heap.path_classes.get((obj.oid, obj.path))
    classes = [cls] if cls is not None else []
    if obj.oid in m.heap.flat and cls is None and not obj.path:  # the running method's object
        running = next((f.owner for f in reversed(m.stack) if f.site is not None), None)
        classes = [c for c in (running, *m.heap.roles.get(obj.oid, ())) if c is not None]
    for cls in dict.fromkeys(classes):
        found = class_attribute(m, cls, obj, attr, where)
        if found is not MISSING:
            return found
    if m.heap.is_closed(obj.oid, obj.path):
        return MISSING
    if obj.oid in m.heap.flat and not obj.path:
        for cls in dict.fromkeys(classes):
            found = flat.missing_field(m, cls, obj, attr, where)
            if found is not MISSING:
                return found
    return Top(f"{where}: {_kind(obj)}.{attr} is not known")


def method_of(m: Machine, obj: Instance, attr: str, where: str, found: Any) -> Any:
    """The method named `attr` of the classes a flat object stands for, where its store
    holds a plain value of that name; `found` when there is no such method."""
    if obj.oid not in m.heap.flat or obj.path:
        return found
    running = next((f.owner for f in reversed(m.stack) if f.site is not None), None)
    for cls in dict.fromkeys(c for c in (running, *m.heap.roles.get(obj.oid, ())) if c):
        made = class_attribute(m, cls, obj, attr, where)
        if isinstance(made, FuncVal):
            return made
    return found


def class_attribute(m: Machine, cls: ClassVal, bound: Any, attr: str, where: str) -> Any:
    """An attribute found along the class's MRO: a method (bound to `bound` where given), a
    property (run on `bound`), a class value, an enum member."""
    if cls.ref is None:
        qualname = f"{cls.qualname}.{attr}"
        if qualname in m.intrinsics.values:
            return m.intrinsics.values[qualname]
        if m.intrinsics.handler(qualname) is not None:
            return Intrinsic(qualname, bound)  # a plug-in's method, bound to the object
        return MISSING
    order, outside = m.source.mro(cls.ref)
    for ref in order:
        site = m.source.method(ref, attr)
        if site is not None:
            return _method_value(m, ref, site, bound)
        value = m.source.class_attribute(ref, attr)
        if value is not None:
            return _class_value(m, ref, attr, value)
    given = m.intrinsics.values.get(f"{cls.qualname}.{attr}")  # set at run time (`setattr`)
    if given is not None:
        return given
    for base in outside:
        value = m.intrinsics.values.get(f"{base}.{attr}")
        if value is not None:
            return value
        handler = m.intrinsics.handler(f"{base}.{attr}")
        if handler is not None:
            return Intrinsic(f"{base}.{attr}", bound)
    return MISSING


def _class_value(m: Machine, ref: ClassRef, attr: str, node: ast.expr) -> Any:
    """A class body's `attr = <expr>`, evaluated once per run (as at class creation, where an
    object that defines `__set_name__` learns its name: SGLang's `envs.X` fields), or the
    enum member it makes."""
    key = (ref.qualname, attr)
    if key not in m.class_values:
        home = m.source.class_val(ref.qualname)
        with m.module_frame(ref.module.module) as frame:
            frame.class_body = ref
            made = _expr(m, node)
        if _is_enum(m, ref):
            made = EnumMember(home, attr, made)
        elif isinstance(made, Instance) and made.cls is not None:
            hook = lookup(m, made, "__set_name__", f"{ref.file}:{node.lineno}")
            if isinstance(hook, FuncVal):
                m.invoke(hook, [home, attr], {})
        m.class_values[key] = made
    return m.class_values[key]


def class_body_name(m: Machine, ref: ClassRef, name: str, where: str) -> Any:
    """A name of a class body read further down the same body (`ALL = (DECODE, PREFILL)`)."""
    node = m.source.class_attribute(ref, name)
    if node is None:
        return MISSING
    value = _class_value(m, ref, name, node)
    return value.value if isinstance(value, EnumMember) else value


def class_subscript(m: Machine, cls: ClassVal, key: Any, where: str) -> Any:
    """`Enum["NAME"]`: the member of that name."""
    if cls.ref is None or not _is_enum(m, cls.ref):
        return Top(f"{where}: subscript of the class {cls.name}")
    if not isinstance(key, str):
        return Top(f"{where}: {cls.name}[...] of an unknown name", reads_of(key))
    found = class_attribute(m, cls, None, key, where)
    return found if isinstance(found, EnumMember) else Top(f"{where}: {cls.name}[{key!r}]")


def _method_value(m: Machine, ref: ClassRef, site: FunctionSite, bound: Any) -> Any:
    node = site.node
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    kind = "method"
    for decorator in node.decorator_list:
        name = ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
        kind = _DECORATED.get(name.rsplit(".", 1)[-1], kind)
    owner = m.source.class_val(ref.qualname)
    if kind == "static":
        return FuncVal(site, owner, None, "static")
    if kind == "class":
        cls = bound.cls if isinstance(bound, Instance) and bound.cls is not None else owner
        return FuncVal(site, owner, cls, "class")
    if kind == "property":
        if bound is None or isinstance(bound, ClassVal):
            return Top(f"{site.where}: the property {site.qualname} of a class")
        return m.invoke(FuncVal(site, owner, bound, "property"), [], {})
    return FuncVal(site, owner, bound, "method" if bound is not None else "function")


def _is_enum(m: Machine, ref: ClassRef) -> bool:
    order, outside = m.source.mro(ref)
    names = [b for c in order for b in c.facts.bases] + outside
    return any(
        n.rsplit(".", 1)[-1] in {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"} for n in names
    )


def _kind(value: Any) -> str:
    if isinstance(value, Instance):
        if value.path:
            return value.path
        return value.cls.name if value.cls is not None else "the object"
    return type(value).__name__


def super_proxy(m: Machine, where: str) -> Any:
    """`super()`: the running method's object, looked up past its class in the MRO."""
    frame = m.stack[-1]
    owner, bound = frame.owner, frame.bound
    if owner is None or owner.ref is None or bound is None:
        return Top(f"{where}: super() outside a method")
    cls = bound.cls if isinstance(bound, Instance) and bound.cls is not None else owner
    if cls.ref is None:
        return Top(f"{where}: super() of an object outside the tree")
    return Intrinsic("builtins.super", (cls, owner, bound))


def super_attribute(m: Machine, proxy: Intrinsic, attr: str, where: str) -> Any:
    cls, owner, bound = proxy.data
    order, _ = m.source.mro(cls.ref)
    names = [r.qualname for r in order]
    start = names.index(owner.qualname) + 1 if owner.qualname in names else len(order)
    for ref in order[start:]:
        site = m.source.method(ref, attr)
        if site is not None:
            return _method_value(m, ref, site, bound)
    # Past the tree's classes: a base outside it whose method a plug-in stands for
    # (`super().__init__(**kwargs)` reaching transformers' `PretrainedConfig.__init__`).
    for base in m.source.mro(cls.ref)[1]:
        if f"{base}.{attr}" in m.intrinsics.calls:
            return Intrinsic(f"{base}.{attr}", bound)
    return Top(f"{where}: super().{attr} is outside the tree")
