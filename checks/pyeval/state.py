"""The run's mutable world, kept apart so that an undecided branch can fork it and merge it.

The heap holds every object the run made or was handed (an `Instance`'s attributes, a `Bag`'s
flat store), keyed by object id; `writes` remembers where each attribute was last written. A
frame is one function call: its locals (and the inputs each was computed from), the tests of
the path it is on, and what it returned so far.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.pyeval.scope import ModuleTable
from eaglebug.checks.pyeval.values import ClassVal, FunctionSite, Top, one_of


@dataclass(frozen=True)
class Write:
    value: Any
    rel: str
    line: int


@dataclass
class Heap:
    objects: dict[int, dict[str, Any]] = field(default_factory=dict)
    writes: dict[tuple[int, str], Write] = field(default_factory=dict)
    # Objects whose store is complete (a missing key is a missing attribute), and those whose
    # reads are recorded (the server args: a refusal names the fields it read).
    closed: set[int] = field(default_factory=set)
    tracked: set[int] = field(default_factory=set)
    # Object ids come from one counter that every fork shares: two branches that each make an
    # object never give them the same id.
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    # Attribute names that answer the object itself (`get_exec().kernel` is the same args).
    aliases: dict[int, frozenset[str]] = field(default_factory=dict)

    # The objects whose attribute dict this heap owns; the others it shares with the heap it
    # was copied from, until it writes to them (copy on write: a fork copies nothing).
    owned: set[int] = field(default_factory=set)

    def copy(self) -> Heap:
        return Heap(
            dict(self.objects),
            dict(self.writes),
            set(self.closed),
            set(self.tracked),
            self.counter,
            self.aliases,
        )

    def new(self, attrs: dict[str, Any] | None = None) -> int:
        oid = next(self.counter)
        self.objects[oid] = dict(attrs or {})
        self.owned.add(oid)
        return oid

    def set(self, oid: int, key: str, value: Any) -> None:
        if oid not in self.owned:
            self.objects[oid] = dict(self.objects.get(oid, {}))
            self.owned.add(oid)
        self.objects[oid][key] = value


def merge_heaps(a: Heap, b: Heap, limit: int) -> Heap:
    """Both branches' heaps as one: an attribute written differently is `OneOf` (or unknown);
    an object made in one branch only is kept as it is there."""
    out = Heap(counter=a.counter, aliases={**a.aliases, **b.aliases})
    out.closed = a.closed | b.closed
    out.tracked = a.tracked | b.tracked
    for oid in a.objects.keys() | b.objects.keys():
        left, right = a.objects.get(oid), b.objects.get(oid)
        if left is None or right is None or left is right:
            out.objects[oid] = left if left is not None else right or {}
            continue  # shared, not owned: the next write copies it
        merged: dict[str, Any] = {}
        for key in left.keys() | right.keys():
            if key in left and key in right:
                x, y = left[key], right[key]
                merged[key] = x if x is y else one_of((x, y), limit)
            else:  # set on one path only: whether it is set at all is not known
                merged[key] = Top(f"{key} is set on one path only")
        out.objects[oid] = merged
        out.owned.add(oid)
    out.writes = {**a.writes, **b.writes}
    return out


@dataclass(frozen=True)
class Test:
    """A test the path is on: as written, the inputs it read, and whether it was decided."""

    text: str
    reads: frozenset[str]
    definite: bool


@dataclass
class Frame:
    site: FunctionSite | None  # None: a module's top level
    module: str
    rel: str
    table: ModuleTable | None
    locals: dict[str, Any] = field(default_factory=dict)
    local_reads: dict[str, frozenset[str]] = field(default_factory=dict)
    class_body: Any = None  # the ClassRef whose body runs (its earlier names are in scope)
    owner: ClassVal | None = None  # the class whose body defines the running method
    bound: Any = None  # the object the method runs on (for `super()`)
    tests: list[Test] = field(default_factory=list)
    returns: list[Any] = field(default_factory=list)
    in_try: int = 0  # inside a `try` with handlers: a raise may be caught
    loops: list[int] = field(default_factory=list)  # len(tests) where each unrolled loop began
    ended_by: str | None = None  # the raise that ended the call on its definite path

    @property
    def name(self) -> str:
        return self.site.qualname if self.site is not None else "<module>"

    def definite(self) -> bool:
        return all(t.definite for t in self.tests)
