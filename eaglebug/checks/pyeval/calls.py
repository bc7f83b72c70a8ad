"""Calls for `machine.Machine`: a plug-in's answer where one is registered for the callee's
qualified name, else the tree's function run (`Machine.invoke`), a class of the tree made into
an `Instance` (a dataclass from its fields and `__post_init__`, else the `__init__` the MRO
gives), else Python's builtin (those that need the run: `getattr`, `super`, `isinstance`);
anything else is unknown, with the reason.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval import flat, ops
from eaglebug.checks.pyeval.intrinsics import DECLINE
from eaglebug.checks.pyeval.objects import (
    class_attribute,
    lookup,
    qualname_of,
    super_proxy,
)
from eaglebug.checks.pyeval.protocol import Thrown
from eaglebug.checks.pyeval.state import Call, Frame
from eaglebug.checks.pyeval.values import (
    MISSING,
    ClassVal,
    EnumMember,
    FuncVal,
    Instance,
    Intrinsic,
    ModuleVal,
    OneOf,
    Top,
    alternatives,
    one_of,
    reads_of,
    truth,
)

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.machine import Machine
    from eaglebug.checks.source.classes import ClassRef


# -- calls -------------------------------------------------------------------------------------
def call_value(m: Machine, call: Call) -> Any:
    callee = call.callee
    if isinstance(callee, OneOf):
        values = []
        for one in callee.values:
            call.callee, call.qualname = one, qualname_of(one)
            values.append(call_value(m, call))
        return one_of(values, m.budget.alternatives)
    handler = m.intrinsics.handler(call.qualname) if call.qualname else None
    if handler is not None:
        answered = handler(call)
        if answered is not DECLINE:
            return answered
    if isinstance(callee, Top):
        return Top(callee.why, reads_of(callee, *call.args))
    if isinstance(callee, FuncVal):
        return m.invoke(callee, call.args, call.kwargs, call.reads)
    if isinstance(callee, ClassVal):
        return construct(m, callee, call)
    if isinstance(callee, Intrinsic) and callee.qualname.startswith("builtins."):
        return builtin_call(m, callee.qualname[9:], call)
    if isinstance(callee, Intrinsic) and callee.qualname in ops.PURE:
        made = ops.pure_call(callee.qualname, call.args, call.kwargs, m.budget, call.where)
        return thrown(m, made)
    if isinstance(callee, Intrinsic):
        return Top(f"{call.where}: {callee.qualname}() is outside the tree")
    return Top(f"{call.where}: a call of a {type(callee).__name__}")


def construct(m: Machine, cls: ClassVal, call: Call) -> Any:
    """`Cls(...)`: a dataclass from its fields (defaults, `default_factory`, `__post_init__`),
    else the `__init__` the MRO gives, on a new object."""
    if cls.ref is None:
        return Top(f"{call.where}: {cls.qualname}() is outside the tree")
    made = Instance(m.heap.new(), cls)
    order, _ = m.source.mro(cls.ref)
    if any(_is_dataclass(m, ref) for ref in order):
        given = dict(call.kwargs)
        fields = _dataclass_fields(m, order)
        for (name, _, _), value in zip(fields, call.args, strict=False):
            given[name] = value
        for name, default, ref in fields:
            if name in given:
                value = given[name]
            elif default is not None:
                with m.module_frame(ref.module.module):
                    value = _field_default(m, default)
            else:
                value = Top(f"{call.where}: {cls.name}.{name} not given")
            m.write(made, name, value, ref.file, default.lineno if default else ref.facts.line)
        post = class_attribute(m, cls, made, "__post_init__", call.where)
        if isinstance(post, FuncVal):
            m.invoke(post, [], {})
        return made
    init = class_attribute(m, cls, made, "__init__", call.where)
    if isinstance(init, FuncVal):
        m.invoke(init, call.args, call.kwargs, call.reads)
    elif call.kwargs:
        for key, value in call.kwargs.items():
            m.write(made, key, value, cls.ref.file, cls.ref.facts.line)
    return made


def is_dataclass(m: Machine, cls: ClassVal) -> bool:
    return cls.ref is not None and any(_is_dataclass(m, r) for r in m.source.mro(cls.ref)[0])


def _is_dataclass(m: Machine, ref: ClassRef) -> bool:
    node = m.source.class_node(ref)
    return node is not None and any(
        ast.unparse(d.func if isinstance(d, ast.Call) else d).rsplit(".", 1)[-1] == "dataclass"
        for d in node.decorator_list
    )


def _dataclass_fields(
    m: Machine, order: list[ClassRef]
) -> list[tuple[str, ast.expr | None, ClassRef]]:
    """The fields in `dataclasses`' order: the bases' first, a redefinition in place."""
    out: dict[str, tuple[ast.expr | None, ClassRef]] = {}
    for ref in reversed(order):
        node = m.source.class_node(ref)
        if node is None or not _is_dataclass(m, ref):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if "ClassVar" in ast.unparse(stmt.annotation):
                    continue
                out[stmt.target.id] = (stmt.value, ref)
    return [(name, default, ref) for name, (default, ref) in out.items()]


def _field_default(m: Machine, node: ast.expr) -> Any:
    """`= v`, `field(default=v)`, `field(default_factory=f)`."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).rsplit(".", 1)[-1] == "field":
        for keyword in node.keywords:
            if keyword.arg == "default":
                return m.expr(keyword.value)
            if keyword.arg == "default_factory":
                factory = keyword.value
                if isinstance(factory, ast.Lambda):
                    return m.expr(factory.body)
                made = ast.Call(
                    func=factory, args=[], keywords=[], lineno=factory.lineno, col_offset=0
                )
                return m.expr(made)
        return Top(f"{m.stack[-1].rel}:{node.lineno}: field() without a default")
    return m.expr(node)


def thrown(m: Machine, made: Any) -> Any:
    """A builtin's exception inside a `try` of the running function is thrown to its `except`;
    anywhere else the call's value is unknown."""
    if isinstance(made, Top) and made.error is not None and m.stack and m.stack[-1].in_try:
        raise Thrown(made.error, made.why)
    return made


# -- binding ---------------------------------------------------------------------------------
def bind(
    m: Machine,
    frame: Frame,
    fn: FuncVal,
    args: list[Any],
    kwargs: dict[str, Any],
    reads: dict[int | str, frozenset[str]],
) -> None:
    """Python's parameter binding: positional-only, positional, defaults, `*args`,
    keyword-only, `**kwargs`; a parameter left with no value is unknown."""
    node = fn.site.node
    assert node is not None, "bind runs a parsed function"
    spec = node.args
    every = [a.arg for a in (*spec.posonlyargs, *spec.args)]
    first_default = len(every) - len(spec.defaults)
    positional = list(every)
    if fn.bound is not None and fn.kind in {"method", "class", "property"} and every:
        frame.locals[every[0]] = fn.bound
        positional = every[1:]
    for index, name in enumerate(every):
        if name in frame.locals and name not in positional:
            continue
        frame.locals[name] = (
            _default(m, spec.defaults[index - first_default], fn)
            if index >= first_default
            else Top(f"{fn.site.where}: {name} not given")
        )
    given = list(args)
    for i, (name, value) in enumerate(zip(positional, given, strict=False)):
        frame.locals[name] = value
        if i in reads:
            frame.local_reads[name] = reads[i]
    extra = given[len(positional) :]
    if spec.vararg is not None:
        frame.locals[spec.vararg.arg] = tuple(extra)
    for kw, default in zip(spec.kwonlyargs, spec.kw_defaults, strict=True):
        frame.locals[kw.arg] = (
            _default(m, default, fn)
            if default is not None
            else Top(f"{fn.site.where}: {kw.arg} not given")
        )
    rest: dict[str, Any] = {}
    names = set(positional) | {k.arg for k in spec.kwonlyargs}
    for key, value in kwargs.items():
        if key in names:
            frame.locals[key] = value
            if key in reads:
                frame.local_reads[key] = reads[key]
        else:
            rest[key] = value
    if spec.kwarg is not None:
        frame.locals[spec.kwarg.arg] = rest


def _default(m: Machine, node: ast.expr, fn: FuncVal) -> Any:
    table = m.source.table(fn.site.module)
    frame = Frame(None, fn.site.module, fn.site.rel, table)
    m.stack.append(frame)
    try:
        return m.expr(node)
    finally:
        m.stack.pop()


# -- builtins that need the run ------------------------------------------------------------------
def builtin_call(m: Machine, name: str, call: Call) -> Any:
    args, where = call.args, call.where
    if name == "isinstance" and len(args) == 2:
        return is_instance(m, args[0], args[1], where)
    if name in {"getattr", "hasattr"} and len(args) >= 2:
        return _getattr(m, name, args, where)
    if name == "issubclass" and len(args) == 2 and isinstance(args[0], ClassVal):
        kinds = args[1] if isinstance(args[1], tuple) else (args[1],)
        if all(isinstance(k, (ClassVal, Intrinsic)) for k in kinds):
            names = _class_names(m, args[0])
            return any(k.qualname in names for k in kinds)
        return Top(f"{where}: issubclass of unknowns")
    if name == "super":
        return super_proxy(m, where)
    if name == "object" and not args and not call.kwargs:  # a sentinel: `_UNSET = object()`
        return m.new_object(ClassVal("builtins.object"))
    if name == "type" and len(args) == 1:
        value = args[0]
        return (
            value.cls
            if isinstance(value, Instance) and value.cls is not None
            else Top(f"{where}: type()")
        )
    if name == "callable" and len(args) == 1:
        value = args[0]
        if isinstance(value, (FuncVal, ClassVal)):
            return True
        if value is None or isinstance(value, (bool, int, float, str, tuple, list, dict)):
            return False
        return Top(f"{where}: callable() of {type(value).__name__}")
    if name in {"print", "setattr", "id", "hash", "iter", "next", "open", "vars", "locals",
                "globals", "exec", "eval", "input", "repr", "format"}:  # fmt: skip
        if name == "repr" and len(args) == 1 and not isinstance(args[0], (Top, OneOf)):
            return repr(args[0])
        if (
            name == "setattr"
            and len(args) == 3
            and isinstance(args[0], Instance)
            and isinstance(args[1], str)
        ):
            m.write(
                args[0], args[1], args[2], m.stack[-1].rel, call.node.lineno if call.node else 0
            )
            return None
        return Top(f"{where}: {name}() is not evaluated")
    if name in ops.PURE:
        return thrown(m, ops.pure_call(name, args, call.kwargs, m.budget, where))
    return Top(f"{where}: {name}() is not evaluated")


def _getattr(m: Machine, name: str, args: list[Any], where: str) -> Any:
    owner, attr = args[0], args[1]
    if not isinstance(attr, str):
        return Top(f"{where}: {name} of an unknown name", reads_of(attr))
    if isinstance(owner, (Top, OneOf)):
        if isinstance(owner, OneOf):
            made = [_getattr(m, name, [v, *args[1:]], where) for v in owner.values]
            return one_of(made, m.budget.alternatives)
        return Top(owner.why, owner.reads)
    found = lookup(m, owner, attr, where)
    if name == "hasattr":
        if found is MISSING:
            return False
        if isinstance(found, Top) and flat.unset_cache(m, owner, attr, where):
            return False
        if isinstance(found, Top) and not isinstance(owner, Instance):
            return Top(found.why, found.reads)
        return True if not isinstance(found, Top) or isinstance(owner, Instance) else found
    if found is MISSING:
        return args[2] if len(args) > 2 else Top(f"{where}: no attribute {attr}")
    return found


def is_instance(m: Machine, value: Any, kinds: Any, where: str) -> Any:
    """`isinstance(value, kinds)` by qualified class names (the tree's MRO and the bases
    outside it); unknown where the value's class is not known."""
    if isinstance(value, OneOf):
        return one_of(
            (is_instance(m, v, kinds, where) for v in value.values), m.budget.alternatives
        )
    if isinstance(value, Top):
        return Top(value.why, value.reads)
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    plain = {"dict": dict, "list": list, "tuple": tuple, "int": int, "float": float, "str": str,
             "bool": bool, "set": set, "frozenset": frozenset, "type(None)": type(None)}  # fmt: skip
    if kinds == Intrinsic("builtins.type"):
        return isinstance(value, ClassVal)
    answers: list[Any] = []
    for kind in wanted:
        if isinstance(kind, Intrinsic) and kind.qualname.startswith("builtins."):
            python = plain.get(kind.qualname[9:])
            if python is None:
                answers.append(Top(f"{where}: isinstance of {kind.qualname}"))
            elif isinstance(value, (Instance, ClassVal, EnumMember, FuncVal, ModuleVal, Intrinsic)):
                answers.append(False)
            else:
                answers.append(isinstance(value, python))
            continue
        qualname = kind.qualname if isinstance(kind, (ClassVal, Intrinsic)) else None
        if qualname is None:
            answers.append(Top(f"{where}: isinstance of {type(kind).__name__}"))
        elif isinstance(value, EnumMember):
            answers.append(qualname in _class_names(m, value.cls))
        elif isinstance(value, Instance):
            cls = value.cls if not value.path else m.heap.path_classes.get((value.oid, value.path))
            if cls is None:
                closed = m.heap.is_closed(value.oid, value.path)
                answers.append(False if closed else Top(f"{where}: the class of an input"))
            else:
                answers.append(qualname in _class_names(m, cls))
        else:
            answers.append(False)
    if any(a is True for a in answers):
        return True
    unknown = [a for a in answers if isinstance(a, Top)]
    return Top(unknown[0].why) if unknown else False


def _class_names(m: Machine, cls: ClassVal) -> set[str]:
    if cls.ref is None:
        return {cls.qualname}
    order, outside = m.source.mro(cls.ref)
    return {r.qualname for r in order} | set(outside)


def truthy_alternatives(value: Any) -> list[Any]:
    return [v for v in alternatives(value) if truth(v)]
