"""Three-valued evaluation of the conditions guarding a use: True, False or unknown (None).

A use is dropped for an audit only when one of its guards is *definitely* false for the
algorithm, role and class at hand; anything the code does not pin down counts as possible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eaglebug.checks.pyeval.truth import Tri, tri_and, tri_not, tri_or
from eaglebug.checks.reach.conditions import (
    And,
    ClassIs,
    Cond,
    Const,
    Flag,
    HasAttr,
    IsInstance,
    Not,
    Or,
    Origin,
    Pred,
)

_DRAFT_FLAG = "is_draft_worker"
_MAX_FLAG_DEPTH = 3


def _no_protocols(_cls: str) -> frozenset[str] | None:
    return None


@dataclass(frozen=True)
class GuardContext:
    algorithm: str
    role: str  # target | draft
    predicates: dict[str, frozenset[str]]
    flags: dict[str, list[tuple[Cond, ...]]]
    provides: Callable[[str], bool]  # does the audited class provide this attribute?
    origin_role: Callable[[Origin], str]
    class_name: str | None = None
    # The members a runtime-checkable Protocol checks (`protocols.py`); None: not one.
    protocol_members: Callable[[str], frozenset[str] | None] = _no_protocols


def evaluate(cond: Cond, ctx: GuardContext, depth: int = 0) -> Tri:
    match cond:
        case Not(inner):
            return tri_not(evaluate(inner, ctx, depth))
        case And(parts):
            return tri_and([evaluate(c, ctx, depth) for c in parts])
        case Or(parts):
            return tri_or([evaluate(c, ctx, depth) for c in parts])
        case Pred(name):
            members = ctx.predicates.get(name)
            return None if members is None else ctx.algorithm in members
        case Flag(name):
            return _flag(name, ctx, depth)
        case HasAttr(origin, attribute):
            if ctx.origin_role(origin) in {ctx.role, "any"}:
                return ctx.provides(attribute)
            return None
        case Const(value):
            return value
        case IsInstance(origin, cls):
            members = ctx.protocol_members(cls)
            if members is not None and ctx.origin_role(origin) in {ctx.role, "any"}:
                return tri_and([ctx.provides(m) for m in sorted(members)])
            return None
        case ClassIs(origin, name):
            if ctx.origin_role(origin) in {ctx.role, "any"} and ctx.class_name is not None:
                return ctx.class_name == name
            return None
    return None  # Opaque: whatever the test, the code does not pin it down


def _flag(name: str, ctx: GuardContext, depth: int) -> Tri:
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
