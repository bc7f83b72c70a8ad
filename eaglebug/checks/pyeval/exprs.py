"""Expressions for `machine.Machine`: names, attributes, operators, comprehensions and calls.

Each is Python's own meaning on the reading's values (`ops.py`); what a name is comes from the
frame, then the module (`objects.resolve`), then the builtins; what an attribute of an object
is, from `objects.py`; what a call does, from the tree's function (followed), a plug-in
(`intrinsics.py`, by the callee's qualified name) or a builtin. A method called on an unknown
receiver is unknown: never a builtin of the same name.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval import calls, flat, flow, objects, ops
from eaglebug.checks.pyeval.items import CHANGES
from eaglebug.checks.pyeval.state import Call, source_text
from eaglebug.checks.pyeval.values import (
    MISSING,
    UNSET,
    ClassVal,
    FunctionSite,
    FuncVal,
    Instance,
    Intrinsic,
    OneOf,
    Top,
    alternatives,
    one_of,
    reads_of,
    truth,
)

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.machine import Machine


def where(m: Machine, node: ast.AST) -> str:
    frame = m.stack[-1]
    return f"{frame.rel}:{getattr(node, 'lineno', 0)}"


def expr(m: Machine, node: ast.expr) -> Any:
    m.tick()
    match node:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name):
            return name_value(m, name, node)
        case ast.Attribute(value=base, attr=attr):
            return objects.attribute(m, expr(m, base), attr, where(m, node))
        case ast.Subscript(value=base, slice=index):
            owner, key = expr(m, base), expr(m, index)
            if isinstance(owner, ClassVal):
                return objects.class_subscript(m, owner, key, where(m, node))
            mapping = flat.view(m, owner)  # `quantization_config["quant_method"]`
            return ops.subscript(
                owner if mapping is None else mapping, key, m.budget, where(m, node)
            )
        case ast.Slice(lower=lower, upper=upper, step=step):
            parts = [expr(m, p) if p is not None else None for p in (lower, upper, step)]
            if any(isinstance(p, (Top, OneOf)) for p in parts):
                return Top(f"{where(m, node)}: a slice of unknowns", reads_of(*parts))
            return slice(*parts)
        case ast.BinOp():
            return binop_node(m, node, expr(m, node.left))
        case ast.UnaryOp(op=op, operand=operand):
            return ops.unary(op, expr(m, operand), m.budget, where(m, node))
        case ast.BoolOp(op=op, values=values):
            return boolop(m, isinstance(op, ast.And), values)
        case ast.Compare(left=left, ops=cmpops, comparators=rights):
            return compare(m, left, cmpops, rights, node)
        case ast.IfExp(test=test, body=body, orelse=orelse):
            tested, chosen_by = m.measured(test)
            told = truth(tested)
            if told is None:
                m.assume(f"{where(m, node)}: undecided: {source_text(test)}")
                made = (expr(m, body), expr(m, orelse))
                return one_of(made, m.budget.alternatives, chosen_by | reads_of(tested))
            return expr(m, body if told else orelse)
        case ast.NamedExpr(target=ast.Name(id=name), value=value):
            made = expr(m, value)
            m.stack[-1].locals[name] = made
            return made
        case ast.JoinedStr(values=parts):
            return ops.fstring(parts, lambda part: expr(m, part))
        case ast.List(elts=elts) | ast.Tuple(elts=elts) | ast.Set(elts=elts):
            return sequence(m, node, elts)
        case ast.Dict(keys=keys, values=values):
            return dict_literal(m, node, keys, values)
        case ast.ListComp() | ast.SetComp() | ast.GeneratorExp() | ast.DictComp():
            return comprehension(m, node)
        case ast.Lambda():
            frame = m.stack[-1]
            site = FunctionSite(frame.rel, frame.module, f"{frame.name}.<lambda>", node)
            return FuncVal(site, closure=tuple(frame.locals.items()))
        case ast.Call():
            return call(m, node)
        case ast.Starred(value=value):
            return expr(m, value)
    return Top(f"{where(m, node)}: {type(node).__name__} is not evaluated")


def name_value(m: Machine, name: str, node: ast.AST) -> Any:
    frame = m.stack[-1]
    if name in frame.locals:
        m.reads |= frame.local_reads.get(name, frozenset())
        return frame.locals[name]
    if frame.class_body is not None:  # a class body: its own earlier names first
        found = objects.class_body_name(m, frame.class_body, name, where(m, node))
        if found is not MISSING:
            return found
    table = frame.table
    if table is not None and (name in table.definitions or name in table.imports):
        return objects.resolve(m, frame.module, name)
    return objects.builtin(m, name, where(m, node))


def binop_node(m: Machine, node: ast.BinOp, left: Any) -> Any:
    right = expr(m, node.right)
    m.observer.on_binop(node, left, right, m.stack[-1])
    return ops.binop(node.op, left, right, m.budget, where(m, node))


def boolop(m: Machine, is_and: bool, values: list[ast.expr]) -> Any:
    """`and` / `or` with Python's short circuit; three-valued where an operand is unknown (its
    value is then unknown, but its truth may still be known: `x or "auto"` is truthy)."""
    unknown: list[Any] = []
    last: Any = None
    for node in values:
        value = expr(m, node)
        told = truth(value)
        if told is None:
            unknown.append(value)
            continue
        if told is not is_and:  # `and` stops at a falsy value, `or` at a truthy one
            if not unknown:
                return value
            # `and`: falsy either way, `or`: truthy either way; which value, not known
            return Top(
                f"an `{'and' if is_and else 'or'}` of unknowns", reads_of(*unknown), not is_and
            )
        last = value
    if unknown:
        return Top(
            unknown[0].why if isinstance(unknown[0], Top) else "alternatives",
            reads_of(*unknown),
        )
    return last


def compare(
    m: Machine, left: ast.expr, cmpops: list[ast.cmpop], rights: list[ast.expr], node: ast.expr
) -> Any:
    a = expr(m, left)
    result: Any = True
    for op, right in zip(cmpops, rights, strict=True):
        b = expr(m, right)
        mapping = flat.view(m, b) if isinstance(op, (ast.In, ast.NotIn)) else None
        outcome = ops.compare(op, a, b if mapping is None else mapping, m.budget, where(m, node))
        if outcome is False:
            return False
        if outcome is not True:
            result = outcome if result is True else Top("a chained comparison", reads_of(result))
        a = b
    return result


def sequence(m: Machine, node: ast.expr, elts: list[ast.expr]) -> Any:
    out: list[Any] = []
    for element in elts:
        if isinstance(element, ast.Starred):
            spread = expr(m, element.value)
            if isinstance(spread, (list, tuple, set, frozenset)):
                out.extend(spread)
                continue
            return Top(f"{where(m, element)}: *{ast.unparse(element.value)}", reads_of(spread))
        out.append(expr(m, element))
    if isinstance(node, ast.Tuple):
        return tuple(out)
    if isinstance(node, ast.Set):
        try:
            return set(out)
        except TypeError:
            return Top(f"{where(m, node)}: a set of unhashable values")
    return out


def dict_literal(
    m: Machine, node: ast.Dict, keys: list[ast.expr | None], values: list[ast.expr]
) -> Any:
    out: dict[Any, Any] = {}
    for key_node, value_node in zip(keys, values, strict=True):
        if key_node is None:  # `**spread`
            spread = expr(m, value_node)
            if not isinstance(spread, dict):
                return Top(f"{where(m, node)}: **{ast.unparse(value_node)}", reads_of(spread))
            out.update(spread)
            continue
        key = expr(m, key_node)
        if isinstance(key, (Top, OneOf)):
            return Top(f"{where(m, node)}: a dict key not known", reads_of(key))
        try:
            out[key] = expr(m, value_node)
        except TypeError:
            return Top(f"{where(m, node)}: an unhashable dict key")
    return out


def comprehension(
    m: Machine, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
) -> Any:
    """Over known sequences only (every generator, every `if`), as a list (a generator
    expression is consumed where it is written: `sum(...)`, `any(...)`)."""
    frame = m.stack[-1]
    saved = dict(frame.locals)
    results: list[Any] = []

    def run(index: int) -> Top | None:
        if index == len(node.generators):
            if isinstance(node, ast.DictComp):
                results.append((expr(m, node.key), expr(m, node.value)))
            else:
                results.append(expr(m, node.elt))
            return None
        gen = node.generators[index]
        items = expr(m, gen.iter)
        if not isinstance(items, (list, tuple, range, set, frozenset, dict, str)):
            return Top(f"{where(m, node)}: a comprehension over an unknown", reads_of(items))
        if len(items) > m.budget.loop:
            return Top(f"{where(m, node)}: a comprehension past {m.budget.loop} items")
        for item in list(items):
            _bind_target(m, gen.target, item)
            tests = [truth(expr(m, cond)) for cond in gen.ifs]
            if any(t is None for t in tests):
                return Top(f"{where(m, node)}: a comprehension's test not known")
            if all(tests):
                stopped = run(index + 1)
                if stopped is not None:
                    return stopped
        return None

    try:
        stopped = run(0)
    finally:
        frame.locals = saved
    if stopped is not None:
        return stopped
    if isinstance(node, ast.DictComp):
        try:
            return dict(results)
        except TypeError:
            return Top(f"{where(m, node)}: an unhashable dict key")
    if isinstance(node, ast.SetComp):
        try:
            return set(results)
        except TypeError:
            return Top(f"{where(m, node)}: a set of unhashable values")
    return results


def _bind_target(m: Machine, target: ast.expr, item: Any) -> None:
    frame = m.stack[-1]
    if isinstance(target, ast.Name):
        frame.locals[target.id] = item
    elif isinstance(target, (ast.Tuple, ast.List)):
        parts = (
            list(item)
            if isinstance(item, (list, tuple)) and len(item) == len(target.elts)
            else [Top("unpacked")] * len(target.elts)
        )
        for element, part in zip(target.elts, parts, strict=True):
            _bind_target(m, element, part)


# -- calls -------------------------------------------------------------------------------------
def call(m: Machine, node: ast.Call) -> Any:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    reads: dict[int | str, frozenset[str]] = {}
    # A `*x` or `**x` whose value is not known: the call's arguments are not known, so it is
    # not made (its value is unknown), but an observer still sees it with the arguments that
    # are (the layer walk records `Layer(a=1, **(dict(tp_size=1) if deepep else {}))`).
    spread: Top | None = None
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            items = expr(m, arg.value)
            if isinstance(items, (list, tuple)):
                args.extend(items)
            else:
                why = f"{where(m, node)}: *{ast.unparse(arg.value)} not known"
                spread = Top(why, reads_of(items))
            continue
        value, reads[len(args)] = m.measured(arg)
        args.append(value)
    for keyword in node.keywords:
        value, read = m.measured(keyword.value)
        if keyword.arg is None:
            if isinstance(value, dict):
                kwargs.update({str(k): v for k, v in value.items()})
            else:
                why = f"{where(m, node)}: **{ast.unparse(keyword.value)} not known"
                spread = Top(why, reads_of(value))
            continue
        kwargs[keyword.arg] = value
        reads[keyword.arg] = read
    func = node.func
    if isinstance(func, ast.Attribute):  # a method: the receiver is evaluated once
        receiver = expr(m, func.value)
        callee = _method(m, receiver, func.attr, args, kwargs, node)
        if callee is not _DONE:
            return callee
        callee = objects.attribute(m, receiver, func.attr, where(m, node))
        if isinstance(receiver, Instance) and not _callable(callee):
            # A flat store's field of the name (ModelRunner's `use_mla_backend` flag) and a
            # method of it (ServerArgs's `use_mla_backend()`): a call means the method.
            callee = objects.method_of(m, receiver, func.attr, where(m, node), callee)
    else:
        callee = expr(m, func)
    made = Call(m, callee, objects.qualname_of(callee), args, kwargs, node, m.stack[-1], reads)
    seen = m.observer.on_call(made)
    if seen is not UNSET:
        return seen
    if spread is not None:
        return spread
    return calls.call_value(m, made)


class _Done:
    pass


_DONE: Any = _Done()


def _method(
    m: Machine, receiver: Any, attr: str, args: list[Any], kwargs: dict[str, Any], node: ast.Call
) -> Any:
    """A method of a known builtin value (`"a".startswith(...)`, `d.get(k)`,
    `layers.append(x)`), or of alternatives of such; `_DONE` when the receiver is something
    else (a tree object, a plug-in's, an unknown: `objects` decides)."""
    here = where(m, node)
    if isinstance(receiver, Top):
        return _DONE  # an unknown receiver's method is unknown (`objects`): never a builtin
    held = alternatives(receiver) if isinstance(receiver, OneOf) else [receiver]
    if not all(ops.change_follows(v, attr, args, kwargs) for v in held):
        why = f"{here}: .{attr}() changes it in a way the reading does not follow"
        if isinstance(node.func, ast.Attribute):
            flow.forget(m, node.func.value, Top(why, reads_of(*args, *kwargs.values())))
        return Top(why, reads_of(*args, *kwargs.values()))
    if attr in CHANGES:  # kept apart on each path of an undecided test (`items.py`)
        for value in held:
            m.items.changing(value)
    if isinstance(receiver, OneOf) and all(
        isinstance(v, (str, dict, list, tuple)) for v in receiver.values
    ):
        made = [
            ops.method_of_value(v, attr, args, kwargs, m.budget, here)
            for v in alternatives(receiver)
        ]
        if any(v is None and attr not in {"append", "extend", "insert"} for v in made):
            return Top(f"{here}: .{attr}() of alternatives")
        return one_of(made, m.budget.alternatives)
    if isinstance(receiver, (str, dict, list, tuple)):
        made = ops.method_of_value(receiver, attr, args, kwargs, m.budget, here)
        if made is ops.NOT_MODELLED:
            return Top(f"{here}: {type(receiver).__name__}.{attr}() is not modelled")
        return made
    if isinstance(receiver, (int, float, bool)) or receiver is None:
        return Top(f"{here}: {type(receiver).__name__}.{attr}() is not modelled")
    mapping = flat.mapping_read(m, receiver, attr)  # `rope_scaling.get("factor", 1)`
    if isinstance(mapping, Top):  # changed earlier in a way the reading does not follow
        return Top(mapping.why, reads_of(mapping))
    if mapping is not None:
        return ops.method_of_value(mapping, attr, args, kwargs, m.budget, here)
    if attr in flat.DICT_WRITES and flat.as_mapping(m, receiver) is not None:
        flat.spoil(m, receiver, f"{here}: .{attr}() of {receiver.path}")
        return Top(f"{here}: .{attr}() of {receiver.path}")
    return _DONE


def _callable(value: Any) -> bool:
    return not (value is None or isinstance(value, (bool, int, float, str, list, tuple, dict)))


def is_class(value: Any) -> bool:
    return isinstance(value, ClassVal)


def is_object(value: Any) -> bool:
    return isinstance(value, (Instance, Intrinsic))
