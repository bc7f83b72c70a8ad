"""Three-valued evaluation of the conditions guarding a use: True, False or unknown (None).

A use is dropped for an audit only when one of its guards is *definitely* false for the
algorithm, role and class at hand; anything the code does not pin down counts as possible.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


def evaluate(cond: Cond, ctx: GuardContext) -> Tri:
    """`cond` for the class, role and algorithm `ctx` describes."""
    return _evaluate(cond, ctx, _Told(ctx), 0)


def possible(conds: tuple[Cond, ...], ctx: GuardContext) -> bool:
    """Can a use guarded by all of `conds` run here? (No guard definitely false.)"""
    told = _Told(ctx)
    return all(_evaluate(c, ctx, told, 0) is not False for c in conds)


# The questions `_evaluate` asks the context, each answered from it alone. Everything else it
# reads is `ctx.algorithm` and `ctx.role`, so the same answers to the same questions give the
# same value: what `GuardMemo` relies on.
_QUESTIONS: dict[str, Callable[[GuardContext, Any], object]] = {
    "pred": lambda ctx, name: (
        None if (members := ctx.predicates.get(name)) is None else ctx.algorithm in members
    ),
    "flag": lambda ctx, name: tuple(ctx.flags.get(name) or ()),
    "origin": lambda ctx, origin: ctx.origin_role(origin),
    "provides": lambda ctx, attribute: ctx.provides(attribute),
    "class": lambda ctx, _: ctx.class_name,
    "protocol": lambda ctx, cls: ctx.protocol_members(cls),
}

Asked = tuple[str, object, object]  # (question, its argument, the context's answer)


class _Told:
    """The context's answers, as `_evaluate` asks for them."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: GuardContext) -> None:
        self.ctx = ctx

    def __call__(self, question: str, argument: object = None) -> Any:
        return _QUESTIONS[question](self.ctx, argument)


class _Noted(_Told):
    """The same answers, each written down in the order asked."""

    __slots__ = ("asked",)

    def __init__(self, ctx: GuardContext) -> None:
        super().__init__(ctx)
        self.asked: list[Asked] = []

    def __call__(self, question: str, argument: object = None) -> Any:
        answer = _QUESTIONS[question](self.ctx, argument)
        self.asked.append((question, argument, answer))
        return answer


class GuardMemo:
    """`possible`, remembered across the audits of one index.

    Why: a survey audits thousands of classes, and each asks the same few dozen guards (75
    distinct guard lists in 289,000 questions on 0.5.23), whose evaluation was a fifth of a
    profile of it; with the memo the survey takes ~8% less time (keying by the guard lists
    costs back the rest). The value rests only on what the evaluation asked the
    context (which predicates hold for the algorithm, a flag's assignments, the class's
    attributes, its name, an origin's role), so an answer is reused where the same
    questions get the same answers now, and evaluated again where any differs. Exact, not
    a guess: a different class that answers the same gets the same value by construction.
    """

    VARIANTS = 16  # answers kept per guard list, algorithm and role; the oldest go first

    def __init__(self) -> None:
        self._seen: dict[tuple[tuple[Cond, ...], str, str], list[tuple[tuple[Asked, ...], bool]]]
        self._seen = {}

    def possible(self, conds: tuple[Cond, ...], ctx: GuardContext) -> bool:
        if not conds:
            return True
        key = (conds, ctx.algorithm, ctx.role)
        variants = self._seen.setdefault(key, [])
        for asked, value in variants:
            if all(_QUESTIONS[q](ctx, argument) == answer for q, argument, answer in asked):
                return value
        noted = _Noted(ctx)
        value = all(_evaluate(c, ctx, noted, 0) is not False for c in conds)
        variants.append((tuple(noted.asked), value))
        if len(variants) > self.VARIANTS:
            del variants[0]
        return value


def _evaluate(cond: Cond, ctx: GuardContext, ask: _Told, depth: int) -> Tri:
    match cond:
        case Not(inner):
            return tri_not(_evaluate(inner, ctx, ask, depth))
        case And(parts):
            return tri_and([_evaluate(c, ctx, ask, depth) for c in parts])
        case Or(parts):
            return tri_or([_evaluate(c, ctx, ask, depth) for c in parts])
        case Pred(name):
            found: Tri = ask("pred", name)
            return found
        case Flag(name):
            return _flag(name, ctx, ask, depth)
        case HasAttr(origin, attribute):
            if ask("origin", origin) in {ctx.role, "any"}:
                return bool(ask("provides", attribute))
            return None
        case Const(value):
            return value
        case IsInstance(origin, cls):
            members = ask("protocol", cls)
            if members is not None and ask("origin", origin) in {ctx.role, "any"}:
                return tri_and([bool(ask("provides", m)) for m in sorted(members)])
            return None
        case ClassIs(origin, name):
            if ask("origin", origin) in {ctx.role, "any"}:
                class_name = ask("class")
                if class_name is not None:
                    return bool(class_name == name)
            return None
    return None  # Opaque: whatever the test, the code does not pin it down


def _flag(name: str, ctx: GuardContext, ask: _Told, depth: int) -> Tri:
    if name == _DRAFT_FLAG:
        return ctx.role == "draft"
    assignments = ask("flag", name)
    if not assignments or depth >= _MAX_FLAG_DEPTH:
        return None
    # The flag can only be truthy where one of its truthy assignments can run.
    for conds in assignments:
        if all(_evaluate(c, ctx, ask, depth + 1) is not False for c in conds):
            return None
    return False
