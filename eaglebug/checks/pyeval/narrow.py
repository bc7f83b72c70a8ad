"""Narrowing: on each side of an undecided test, the tested name holds only what makes the
test go that way.

`if self.page_size is None: self.page_size = 1` on `page_size` = one of (64, None) leaves 64 on
the path where the test is false, not (64, None): without this the merge after the branch keeps
a None that SGLang never has there (0.5.9's `_handle_page_size` after the TRT-LLM backends set
64). The tests narrowed are those a type checker narrows on: a comparison of a local name or an
attribute with a value (`is`, `is not`, `==`, `!=`, `in`, `not in`), its truth (`if x:`), `not`
of one, and on the true side each part of an `and` (on the false side each part of an `or`).
Only a value that is `OneOf` is narrowed; an unknown stays unknown.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval import exprs, ops
from eaglebug.checks.pyeval.values import Instance, OneOf, one_of, truth

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.machine import Machine


def narrow(m: Machine, test: ast.expr, taken: bool) -> None:
    """Narrow what `test` names on the path where it is `taken`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        narrow(m, test.operand, not taken)
        return
    if isinstance(test, ast.BoolOp):
        # `a and b` true: both true; `a or b` false: both false. Otherwise nothing is known
        # of any one part.
        if isinstance(test.op, ast.And) == taken:
            for part in test.values:
                narrow(m, part, taken)
        return
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        target, op = test.left, test.ops[0]
        if not (_narrowable(target) and _plain(test.comparators[0])):
            return
        other = exprs.expr(m, test.comparators[0])
        _keep(m, target, lambda v: truth(ops.compare(op, v, other, m.budget, "")) is taken)
        return
    if _narrowable(test):
        _keep(m, test, lambda v: truth(v) is taken)


def _narrowable(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) or (
        isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    )


def _plain(node: ast.expr) -> bool:
    """A value read again without effects: a constant, a name, an attribute, a display of
    them (not a call, which would run twice)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_plain(e) for e in node.elts)
    if isinstance(node, ast.Attribute):
        return _plain(node.value)
    return isinstance(node, (ast.Constant, ast.Name))


def _keep(m: Machine, target: ast.expr, keeps: Any) -> None:
    """Keep, of the alternatives `target` holds, those `keeps` says the path has."""
    frame = m.stack[-1]
    if isinstance(target, ast.Name):
        value = frame.locals.get(target.id)
        if isinstance(value, OneOf):
            kept = [v for v in value.values if keeps(v)]
            if kept:
                frame.locals[target.id] = one_of(kept, m.budget.alternatives)
        return
    assert isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
    owner = frame.locals.get(target.value.id)
    if not isinstance(owner, Instance) or owner.oid not in m.heap.objects:
        return
    key = owner.key(target.attr)
    value = m.heap.objects[owner.oid].get(key)
    if isinstance(value, OneOf):
        kept = [v for v in value.values if keeps(v)]
        if kept and len(kept) < len(value.values):
            m.heap.set(owner.oid, key, one_of(kept, m.budget.alternatives))
