"""The statement shapes the use scanner (`scanner.py`) recognises by their syntax alone: how a
runner is named for a role, a body that exits early, `getattr(model, name, None)` followed by a
raise when it is None (a requirement, not an option).

Why apart: these read one statement or expression each and know nothing of the scanner's
stack of conditions; the scanner asks them while it walks a function.
"""

from __future__ import annotations

import ast

from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import dotted


def last_name(node: ast.expr) -> str | None:
    """The identifier an expression ends in: `a.b_runner[i]` and `a.b_runner(i)` -> b_runner."""
    while isinstance(node, (ast.Subscript, ast.Call)):
        node = node.value if isinstance(node, ast.Subscript) else node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def runner_role(runner_text: str, draft_worker_class: bool) -> str:
    """The role a runner's model plays, from how the runner is named where it is used."""
    lowered = runner_text.lower()
    if "draft" in lowered or "mtp" in lowered:
        return "draft"
    if "target" in lowered:
        return "target"
    if draft_worker_class and runner_text == "self.model_runner":
        return "draft"
    return "any"


def exits_early(body: list[ast.stmt]) -> bool:
    """A branch that leaves the function without raising (raising still crashes the launch)."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue, ast.Break))


def ends_in_raise(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)


def getattr_then_raise(stmt: ast.stmt, after: list[ast.stmt]) -> ast.Call | None:
    """`x = getattr(m, "a", None)` whose `None` a later `if x is None ...: raise` (in the same
    block, before `x` is bound again) turns into a refusal: the getattr call, else None.
    (sglang 0.5.14's DFLASH worker: `lm_head = getattr(target_model, "lm_head", None)`, then
    `if lm_head is None or not hasattr(lm_head, "weight"): raise RuntimeError(...)`.)"""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Call)
        and dotted(stmt.value.func) == "getattr"
        and len(stmt.value.args) == 3
        and isinstance(stmt.value.args[2], ast.Constant)
        and stmt.value.args[2].value is None
    ):
        return None
    name = stmt.targets[0].id
    for later in after:
        if isinstance(later, ast.If) and ends_in_raise(later.body) and _none_test(later.test, name):
            return stmt.value
        if name in {
            n.id
            for n in syntax.walk(later)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }:
            return None
    return None


def _none_test(test: ast.expr, name: str) -> bool:
    """Is `test` true when `name` is None: `name is None`, `not name`, or either in an `or`?"""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(_none_test(v, name) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return isinstance(test.operand, ast.Name) and test.operand.id == name
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == name
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def hasattr_call(args: list[ast.expr]) -> ast.Call:
    """`hasattr(a, b)` built from another call's first two arguments (to reuse its reading)."""
    return ast.Call(ast.Name("hasattr", ast.Load()), args[:2], [])
