"""`if hasattr(m, "a"): ... elif hasattr(m, "b"): ... else: raise`: one of the names is required.

sglang 0.5.18-0.5.23's `configure_aux_hidden_state_capture` calls `set_dspark_layers_to_capture`
if DSPARK and the model has it, else `set_dflash_layers_to_capture` if it has that, else raises
ValueError. Each call is guarded by its own hasattr, so neither is required alone; what the tree
requires is that one branch is taken. The scanner records such a chain as one use
(`Use.one_of`: each name with the test of its branch) and the audit reports it as one finding,
with the tree's own message from the raise.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from eaglebug.checks.reach.conditions import Cond, Origin
from eaglebug.checks.source.initfacts import template_text


@dataclass(frozen=True)
class Chain:
    links: tuple[ast.If, ...]  # the `if` and each `elif`
    raised: ast.Raise
    origin: Origin  # the model reference every branch tests
    alternatives: tuple[tuple[str, Cond], ...]  # each branch's name and its whole test


def read_chain(
    stmt: ast.If,
    origin_of: Callable[[ast.expr], Origin | None],
    cond_of: Callable[[ast.expr], Cond],
) -> Chain | None:
    """The chain starting at `stmt`, when each branch tests one model reference for a name."""
    found = raise_chain(stmt)
    if found is None:
        return None
    links, raised = found
    alternatives: list[tuple[str, Cond]] = []
    origins: set[Origin] = set()
    for link in links:
        tested = [(o, n) for s, n in hasattr_names(link.test) if (o := origin_of(s)) is not None]
        if not tested:
            return None  # a branch that does not test the model: not a requirement of it
        origins.add(tested[0][0])
        alternatives.append((tested[0][1], cond_of(link.test)))
    if len(origins) != 1:
        return None
    return Chain(tuple(links), raised, origins.pop(), tuple(alternatives))


def raise_chain(stmt: ast.If) -> tuple[list[ast.If], ast.Raise] | None:
    """The `if`/`elif` links of a chain whose final `else` ends in a raise, and that raise."""
    links: list[ast.If] = []
    node: ast.stmt = stmt
    while isinstance(node, ast.If):
        links.append(node)
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        if node.orelse and isinstance(node.orelse[-1], ast.Raise):
            return links, node.orelse[-1]
        return None
    return None


def hasattr_names(test: ast.expr) -> list[tuple[ast.expr, str]]:
    """The `hasattr(x, "name")` calls a test requires to be true (itself, or `and` parts)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [found for value in test.values for found in hasattr_names(value)]
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "hasattr"
        and len(test.args) == 2
        and isinstance(test.args[1], ast.Constant)
        and isinstance(test.args[1].value, str)
    ):
        return [(test.args[0], test.args[1].value)]
    return []


def raise_message(node: ast.Raise) -> str:
    """What the raise says, as the tree writes it (placeholders kept as `{...}`)."""
    exc = node.exc
    if isinstance(exc, ast.Call) and exc.args:
        parts = _text(exc.args[0])
        if parts is not None:
            return parts
    return ast.unparse(exc) if exc is not None else "raise"


def _text(node: ast.expr) -> str | None:
    """The message as written: a literal or an f-string, or two of them added."""
    text = template_text(node)
    if text is not None:
        return text
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return left + right if left is not None and right is not None else None
    return None
