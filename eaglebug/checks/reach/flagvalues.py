"""When the value a flag is assigned is truthy: presence tests, and helpers returning them.

`self.enabled = isinstance(model, P)` or `= hasattr(model, "x")` makes the flag a presence test
of the model, so `if self.enabled: model.x()` is as guarded as `if hasattr(model, "x")`.
The same holds for a flag assigned the result of a function of the same module that returns
something truthy only under such a test (sglang 0.5.22's DSpark worker:
`self._target_hidden_projection_enabled = _configure_target_hidden_projection(target_model=...)`,
which returns `False` unless `isinstance(target_model, _SupportsDSparkTargetHiddenProjection)`).
The callee is walked with its parameters bound to what the caller passes.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from eaglebug.checks.reach.conditions import (
    And,
    ArgConds,
    Cond,
    Const,
    HasAttr,
    IsInstance,
    Not,
    Opaque,
    Or,
    Origin,
    Pred,
    negated,
    substitute,
)
from eaglebug.checks.reach.consumers import assignments
from eaglebug.checks.reach.scanner import FunctionScanner, Stack
from eaglebug.checks.reach.shapes import exits_early
from eaglebug.checks.source.classfacts import FunctionNode, dotted, function_params

# (class name or None, function name) -> the function, for the callee of an assignment.
Lookup = Callable[[str | None, str], FunctionNode | None]
# Builds a scanner for a function (its class, scope, parameters bound to references).
MakeReader = Callable[[str | None, FunctionNode, dict[str, Origin]], FunctionScanner]


def decisive(cond: Cond) -> bool:
    """Does this condition test the model for an attribute, or the algorithm (so the audit
    can decide it: `self.is_dspark = spec_algorithm.is_dspark()` is the predicate itself)?"""
    match cond:
        case HasAttr() | IsInstance() | Pred():
            return True
        case Not(inner):
            return decisive(inner)
        case And(parts) | Or(parts):
            return any(decisive(c) for c in parts)
    return False


def value_paths(
    reader: FunctionScanner,
    value: ast.expr,
    cls_name: str | None,
    lookup: Lookup,
    make_reader: MakeReader,
    depth: int = 0,
) -> list[tuple[Cond, ...]] | None:
    """The conditions under which `value` is truthy, one tuple per way it can be; None when
    they are not known (the assignment then counts as truthy wherever it runs)."""
    if isinstance(value, ast.Call):
        called = _callee(value.func, cls_name, lookup)
        if called is not None and depth < 2:
            owner, fn = called
            params, args = _bind(reader, fn, value, owner is not None)
            callee = make_reader(owner, fn, params)
            callee.collect_aliases(assignments(fn))
            paths: list[tuple[Cond, ...]] = []
            _returns(callee, fn.body, (), owner, lookup, make_reader, depth, paths)
            return [tuple(substitute(c, args) for c in path) for path in paths]
    test = reader.cond(value)
    return [(test,)] if decisive(test) else None


def _callee(
    func: ast.expr, cls_name: str | None, lookup: Lookup
) -> tuple[str | None, FunctionNode] | None:
    if isinstance(func, ast.Name):
        fn = lookup(None, func.id)
        return (None, fn) if fn is not None else None
    if isinstance(func, ast.Attribute) and dotted(func.value) == "self" and cls_name:
        fn = lookup(cls_name, func.attr)
        return (cls_name, fn) if fn is not None else None
    return None


def _bind(
    reader: FunctionScanner, fn: FunctionNode, call: ast.Call, method: bool
) -> tuple[dict[str, Origin], ArgConds]:
    """The callee's parameters that receive a model reference, and what the others receive."""
    names = function_params(fn)[1 if method else 0 :]
    pairs = [(names[i], a) for i, a in enumerate(call.args) if i < len(names)]
    pairs += [(k.arg, k.value) for k in call.keywords if k.arg]
    params: dict[str, Origin] = {}
    args: ArgConds = {}
    for name, arg in pairs:
        origin = reader.origin(arg)
        if origin is not None:
            params[name] = origin
        elif isinstance(arg, ast.Constant):
            args[name] = (Const(bool(arg.value)), Const(arg.value is None))
        else:
            args[name] = (reader.cond(arg), Opaque(f"{ast.unparse(arg)} is None"))
    return params, args


def _returns(
    reader: FunctionScanner,
    body: list[ast.stmt],
    stack: Stack,
    cls_name: str | None,
    lookup: Lookup,
    make_reader: MakeReader,
    depth: int,
    out: list[tuple[Cond, ...]],
) -> None:
    """The conditions of each `return` of something that may be truthy."""
    for stmt in body:
        if isinstance(stmt, ast.Return):
            value = stmt.value
            if value is None or (isinstance(value, ast.Constant) and not value.value):
                return
            conds = tuple(negated(reader.cond(node), negate) for node, negate in stack)
            inner = value_paths(reader, value, cls_name, lookup, make_reader, depth + 1)
            out.extend([conds + path for path in inner] if inner is not None else [conds])
            return
        if isinstance(stmt, (ast.If, ast.While)):
            _returns(
                reader,
                stmt.body,
                (*stack, (stmt.test, False)),
                cls_name,
                lookup,
                make_reader,
                depth,
                out,
            )
            _returns(
                reader,
                stmt.orelse,
                (*stack, (stmt.test, True)),
                cls_name,
                lookup,
                make_reader,
                depth,
                out,
            )
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody):
                _returns(reader, block, stack, cls_name, lookup, make_reader, depth, out)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            _returns(reader, stmt.body, stack, cls_name, lookup, make_reader, depth, out)
        if isinstance(stmt, ast.If) and not stmt.orelse and exits_early(stmt.body):
            stack = (*stack, (stmt.test, True))
