"""Three-valued evaluation of the conditions guarding a use: True, False or unknown (None).

A use is dropped for an audit only when one of its guards is *definitely* false for the
algorithm, role and class at hand; anything the code does not pin down counts as possible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from eaglebug.checks.consumers import Cond, Origin

_DRAFT_FLAG = "is_draft_worker"
_MAX_FLAG_DEPTH = 3


@dataclass(frozen=True)
class GuardContext:
    algorithm: str
    role: str  # target | draft
    predicates: dict[str, frozenset[str]]
    flags: dict[str, list[tuple[Cond, ...]]]
    provides: Callable[[str], bool]  # does the audited class provide this attribute?
    origin_role: Callable[[Origin], str]
    class_name: str | None = None


def evaluate(cond: Cond, ctx: GuardContext, depth: int = 0) -> bool | None:
    kind = cond[0]
    if kind == "not":
        inner = evaluate(cast(Cond, cond[1]), ctx, depth)
        return None if inner is None else not inner
    if kind in {"and", "or"}:
        values = [evaluate(c, ctx, depth) for c in cast(tuple[Cond, ...], cond[1])]
        if kind == "and":
            return False if False in values else (None if None in values else True)
        return True if True in values else (None if None in values else False)
    if kind == "pred":
        members = ctx.predicates.get(str(cond[1]))
        return None if members is None else ctx.algorithm in members
    if kind == "flag":
        return _flag(str(cond[1]), ctx, depth)
    if kind == "hasattr":
        role = ctx.origin_role(cast(Origin, cond[1]))
        if role in {ctx.role, "any"}:
            return ctx.provides(str(cond[2]))
        return None
    if kind == "classname":
        role = ctx.origin_role(cast(Origin, cond[1]))
        if role in {ctx.role, "any"} and ctx.class_name is not None:
            return ctx.class_name == cond[2]
        return None
    return None


def _flag(name: str, ctx: GuardContext, depth: int) -> bool | None:
    if name == _DRAFT_FLAG:
        return ctx.role == "draft"
    assignments = ctx.flags.get(name)
    if not assignments or depth >= _MAX_FLAG_DEPTH:
        return None
    # The flag can only be truthy where one of its truthy assignments can run.
    for conds in assignments:
        if all(evaluate(c, ctx, depth + 1) is not False for c in conds):
            return None
    return False


def possible(conds: tuple[Cond, ...], ctx: GuardContext) -> bool:
    return all(evaluate(c, ctx) is not False for c in conds)
