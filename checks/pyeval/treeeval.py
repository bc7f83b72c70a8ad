"""Running a few lines of the audited tree on known values, without running the tree.

Some of SGLang's behaviour is a short computation over a model's config: which capture layers
`set_eagle3_layers_to_capture` sets (`[val + 1 for val in layer_ids]`, or the default
`[2, num_layers // 2, num_layers - 3]`), whether a draft's `__init__` loads its lm_head from the
target. Those lines are evaluated here over their `ast`, with the config's values and nothing
else: any name, call or attribute this evaluator does not know makes the result `UNKNOWN`, and
a check that gets `UNKNOWN` says nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.pyeval.memops import (  # the tree's operators, as memeval applies them
    BINOPS,
    COMPARE,
)


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


class ConfigObject:
    """A Hugging Face config as the tree sees it: attributes are the config.json keys."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)


_BUILTINS: dict[str, Callable[..., Any]] = {
    "list": list,
    "len": len,
    "max": max,
    "min": min,
    "int": int,
    "sorted": sorted,
}


@dataclass
class Scope:
    """Local names, and what `self.config` is."""

    names: dict[str, Any] = field(default_factory=dict)
    config: ConfigObject | None = None


def evaluate(node: ast.expr, scope: Scope) -> Any:
    try:
        return _eval(node, scope)
    except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, RecursionError):
        return UNKNOWN


def _eval(node: ast.expr, scope: Scope) -> Any:
    match node:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name):
            return scope.names.get(name, UNKNOWN)
        case ast.Attribute(value=ast.Name(id="self"), attr="config") if scope.config:
            return scope.config
        case ast.Attribute(value=base, attr=attr):
            owner = _eval(base, scope)
            if isinstance(owner, ConfigObject):
                return owner.values.get(attr, UNKNOWN)
            return UNKNOWN
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            values = [_eval(e, scope) for e in elts]
            return UNKNOWN if any(v is UNKNOWN for v in values) else values
        case ast.ListComp(elt=elt, generators=[gen]) if isinstance(gen.target, ast.Name):
            source = _eval(gen.iter, scope)
            if source is UNKNOWN or gen.ifs or not isinstance(source, (list, tuple)):
                return UNKNOWN
            out = []
            for item in source:
                local = Scope({**scope.names, gen.target.id: item}, scope.config)
                value = _eval(elt, local)
                if value is UNKNOWN:
                    return UNKNOWN
                out.append(value)
            return out
        case ast.BinOp(left=left, op=op, right=right) if type(op) in BINOPS:
            a, b = _eval(left, scope), _eval(right, scope)
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            return BINOPS[type(op)](a, b)
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            value = _eval(operand, scope)
            return UNKNOWN if value is UNKNOWN else not value
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            value = _eval(operand, scope)
            return UNKNOWN if value is UNKNOWN else -value
        case ast.BoolOp(op=op, values=values):
            return _boolop(isinstance(op, ast.And), values, scope)
        case ast.Compare(left=left, ops=[op], comparators=[right]) if type(op) in COMPARE:
            a, b = _eval(left, scope), _eval(right, scope)
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            return COMPARE[type(op)](a, b)
        case ast.Subscript(value=value, slice=index):
            owner, key = _eval(value, scope), _eval(index, scope)
            if owner is UNKNOWN or key is UNKNOWN:
                return UNKNOWN
            return owner[key]
        case ast.Call(
            func=ast.Name(id="getattr"), args=[obj, ast.Constant(value=str() as key), *rest]
        ):
            owner = _eval(obj, scope)
            if not isinstance(owner, ConfigObject) or len(rest) > 1:
                return UNKNOWN
            if key in owner.values:
                return owner.values[key]
            return _eval(rest[0], scope) if rest else UNKNOWN
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _BUILTINS:
            values = [_eval(a, scope) for a in args]
            if any(v is UNKNOWN for v in values):
                return UNKNOWN
            return _BUILTINS[name](*values)
    return UNKNOWN


def _boolop(is_and: bool, values: list[ast.expr], scope: Scope) -> Any:
    result: Any = is_and
    for node in values:
        value = _eval(node, scope)
        if value is UNKNOWN:
            return UNKNOWN
        if is_and and not value:
            return value
        if not is_and and value:
            return value
        result = value
    return result


def touches(stmts: list[ast.stmt], attributes: frozenset[str]) -> bool:
    """Does any statement assign `....<attribute>` or call a method named one of them?
    (Reading one, as a loop over `self.layers_to_capture` does, changes nothing.)"""
    for stmt in stmts:
        for node in ast.walk(stmt):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                targets = [node.func]
            if any(isinstance(t, ast.Attribute) and t.attr in attributes for t in targets):
                return True
    return False


@dataclass
class Effects:
    """What a simulated body did to the attributes asked about (by dotted target text)."""

    assigned: dict[str, Any] = field(default_factory=dict)  # "self.model.layers_to_capture"
    calls: list[tuple[str, list[Any], int]] = field(default_factory=list)  # (callee, args, line)
    returned: bool = False
    lines: dict[str, int] = field(default_factory=dict)  # target -> line of the assignment
    kinds: dict[str, str] = field(default_factory=dict)  # target -> call | alias | value


def simulate(stmts: list[ast.stmt], scope: Scope, tracked: frozenset[str]) -> Effects | None:
    """Run a body's straight-line code and if/else over known values.

    `tracked` names the attributes whose assignments (and method calls) are recorded. A branch
    whose test is unknown is skipped when it touches none of them (an early `return`, such as
    `if not self.pp_group.is_last_rank: return`, is skipped too: the path followed is the rank
    that does the work); otherwise the result is None (cannot tell).
    """
    effects = Effects()
    if _run(stmts, scope, tracked, effects) is None:
        return None
    return effects


def _run(stmts: list[ast.stmt], scope: Scope, tracked: frozenset[str], out: Effects) -> bool | None:
    """True: fell through; False: returned; None: cannot tell."""
    for stmt in stmts:
        match stmt:
            case ast.Expr(value=ast.Constant()) | ast.Pass():
                continue
            case ast.Return():
                out.returned = True
                return False
            case ast.If(test=test, body=body, orelse=orelse):
                value = evaluate(test, scope)
                if value is UNKNOWN:
                    if touches(body, tracked) or touches(orelse, tracked):
                        if all(isinstance(s, ast.Return) for s in body) and not orelse:
                            continue
                        return None
                    continue
                went = _run(body if value else orelse, scope, tracked, out)
                if went is not True:
                    return went
            case ast.Assign(targets=[target], value=value):
                _assign(target, value, scope, tracked, out, stmt.lineno)
            case ast.AnnAssign(target=target, value=value) if value is not None:
                _assign(target, value, scope, tracked, out, stmt.lineno)
            case ast.Expr(value=ast.Call(func=ast.Attribute(attr=attr) as func, args=args)):
                if attr in tracked:
                    out.calls.append(
                        (ast.unparse(func), [evaluate(a, scope) for a in args], stmt.lineno)
                    )
            case _:
                if touches([stmt], tracked):
                    return None
    return True


def _assign(
    target: ast.expr,
    value: ast.expr,
    scope: Scope,
    tracked: frozenset[str],
    out: Effects,
    line: int,
) -> None:
    result = evaluate(value, scope)
    if isinstance(target, ast.Name):
        scope.names[target.id] = result
    elif isinstance(target, ast.Attribute):
        owner = evaluate(target.value, scope)
        if isinstance(owner, ConfigObject) and result is not UNKNOWN:
            owner.values[target.attr] = result
        elif target.attr in tracked:
            key = ast.unparse(target)
            out.assigned[key] = result
            out.kinds[key] = (
                "call" if isinstance(value, ast.Call) else "alias" if result is UNKNOWN else "value"
            )
            out.lines[key] = line
