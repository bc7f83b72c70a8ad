"""The launch's speculative algorithm as the tree's own `SpeculativeAlgorithm` member.

Why: the memory arithmetic asks the runner's `spec_algorithm` (`is_none()`, `is_eagle()`, ...),
and what each predicate answers is the tree's, not eaglebug's. The member is made by the tree's
own `SpeculativeAlgorithm.from_string`; where the reading cannot make it (a registry filled at
import), a stand-in member whose predicates answer as the tree's own run of each on each
member said (`speculative/algorithms.py`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.memory.reading import evaluate
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import EnumMember, Instance, Intrinsic, Top
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import algorithm_facts

_SPEC_MEMBER = "sglang.speculative.member"  # a member of the tree's SpeculativeAlgorithm


def member(index: TreeIndex, algorithm: str | None) -> object:
    """The launch's algorithm as the tree's own `SpeculativeAlgorithm.from_string` makes it
    (the `NONE` member without one; its `is_eagle()` and the rest then run from the tree)."""
    facts = algorithm_facts(index)
    if facts.source is None:
        return Top("this tree's SpeculativeAlgorithm is not read")
    try:  # the name server args leave (`NEXTN` is `EAGLE` by the time the runner reads it)
        name = facts.canonical(algorithm) if algorithm else None
    except InputError:
        return Top(f"{algorithm} is not an algorithm of this tree")
    call = ast.parse("SpeculativeAlgorithm.from_string(name)", mode="eval").body
    found = evaluate(index, facts.source, call, {}, names={"name": name})
    if isinstance(found, (EnumMember, Instance)):
        return found
    # A registry the reading cannot fill (0.5.6-0.5.7: members are registered at import, the
    # class is no enum): the stand-in member, whose predicates answer as the tree's own run of
    # each on each member said (`speculative/algorithms.py`).
    if facts.predicates and (name or "NONE") in facts.members:
        return Intrinsic(_SPEC_MEMBER, name or "NONE")
    return Top("this tree's SpeculativeAlgorithm is not read")


def register(m: Machine, predicates: Mapping[str, frozenset[str]]) -> None:
    """A `SpeculativeAlgorithm` member by name (`member`): its `is_*()` predicates answer
    with the tree's own answers for that member, its `name` is the member's."""

    def attribute(call: Call) -> Any:
        name = str(call.args[0]) if call.args else ""
        held = call.callee.data if isinstance(call.callee, Intrinsic) else None
        if name == "name":
            return held
        if name in predicates:
            return Intrinsic(f"{_SPEC_MEMBER}.predicate", (name, held))
        return Top(f"{_SPEC_MEMBER}.{name} is not read")

    def predicate(call: Call) -> Any:
        data = call.callee.data if isinstance(call.callee, Intrinsic) else None
        if not isinstance(data, tuple):
            return Top(f"{call.where}: a predicate of an unknown member")
        name, held = data
        return held in predicates.get(name, frozenset())

    m.intrinsics.call(f"{_SPEC_MEMBER}.__getattr__", attribute)
    m.intrinsics.call(f"{_SPEC_MEMBER}.predicate", predicate)
