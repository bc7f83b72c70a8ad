"""The run's mutable world, kept apart so that an undecided branch can fork it and merge it.

The heap holds every object the run made or was handed (an `Instance`'s attributes, a `Bag`'s
flat store), keyed by object id; `writes` remembers where each attribute was last written. A
frame is one function call: its locals (and the inputs each was computed from), the tests of
the path it is on, and what it returned so far.
"""

from __future__ import annotations

import ast
import itertools
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval.scope import ModuleTable
from eaglebug.checks.pyeval.values import ClassVal, FunctionSite, merged_mapping

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.machine import Machine

_ORDER = itertools.count()
_TEXTS: weakref.WeakKeyDictionary[ast.AST, str] = weakref.WeakKeyDictionary()


def source_text(node: ast.AST) -> str:
    """A test as written, for the path's tests and the assumptions: the same branch is run
    for every launch, GPU and hook that reaches it, and unparsing it again each time was a
    sixth of a warm index's preflight. Kept only while its syntax tree lives."""
    text = _TEXTS.get(node)
    if text is None:
        text = _TEXTS[node] = ast.unparse(node)
    return text


@dataclass(frozen=True)
class Write:
    """Where an attribute was last written; `order` says which of two writes came later, so
    that a merge keeps the branch's write over the one from before the fork."""

    value: Any
    rel: str
    line: int
    order: int = field(default_factory=lambda: next(_ORDER), compare=False)


class Deeper:
    """Which keys of a flat store have deeper keys under them (`model_config` of
    `model_config.hf_config.x`): an attribute read asks it at each miss, and a scan of the
    store's few hundred keys each time was an eighth of a memory check. Kept per store dict,
    valid while the dict is the same object and as long as it was: a store's keys are only
    ever added (`Heap.set`, a merge makes a new dict), in order, so the new ones are its last."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[dict[str, Any], int, set[str]]] = {}

    def under(self, store: dict[str, Any], key: str) -> bool:
        """Whether `store` holds a key that starts with `key + "."`."""
        if not store:
            return False
        held = self._held.get(id(store))
        if held is not None and held[0] is store:
            _, seen, parents = held
            if seen == len(store):
                return key in parents
        else:
            seen, parents = 0, set()
        for name in itertools.islice(store, seen, None):
            at = name.find(".")
            while at >= 0:
                parents.add(name[:at])
                at = name.find(".", at + 1)
        self._held[id(store)] = (store, len(store), parents)
        return key in parents


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
    # Objects that stand for whichever runtime object the running method belongs to (the
    # memory check's flat store): their methods are the running method's class's.
    flat: set[int] = field(default_factory=set)
    # The classes a flat object also stands for, searched after the running method's
    # (the memory check's store is the server args, the runner and the KV configurator).
    roles: dict[int, tuple[ClassVal, ...]] = field(default_factory=dict)
    # The class of the object at a path of a flat store (`model_config` is a ModelConfig: its
    # methods run on that path).
    path_classes: dict[tuple[int, str], ClassVal] = field(default_factory=dict)
    # Paths of a flat store that are complete objects (a config.json: a key it lacks is an
    # attribute it does not have), though the store as a whole is not.
    closed_paths: set[tuple[int, str]] = field(default_factory=set)
    deeper: Deeper = field(default_factory=Deeper)  # shared by every copy, as the dicts are

    # The objects whose attribute dict this heap owns; the others it shares with the heap it
    # was copied from, until it writes to them (copy on write: a fork copies nothing).
    owned: set[int] = field(default_factory=set)

    def copy(self) -> Heap:
        """A fork: the same objects, shared until written (`set` copies on write). Both sides
        give up their ownership: a write on either copies first."""
        self.owned = set()
        return Heap(
            objects=dict(self.objects),
            writes=dict(self.writes),
            closed=set(self.closed),
            tracked=set(self.tracked),
            counter=self.counter,
            aliases=self.aliases,
            flat=self.flat,
            roles=self.roles,
            path_classes=self.path_classes,
            closed_paths=self.closed_paths,
            deeper=self.deeper,
        )

    def is_closed(self, oid: int, path: str) -> bool:
        if oid in self.closed:
            return True
        return any(
            (oid, path[:i]) in self.closed_paths
            for i in range(len(path) + 1)
            if i == len(path) or path[i] == "."
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


def merge_locals(
    a: dict[str, Any], b: dict[str, Any], limit: int, chosen_by: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Two paths' locals as one: a name bound on one path only is unknown after the join.
    `chosen_by`: what the test that split them read (`one_of`)."""
    return merged_mapping(a, b, limit, chosen_by, "{key} is bound on one path only")


def merge_heaps(a: Heap, b: Heap, limit: int, chosen_by: frozenset[str] = frozenset()) -> Heap:
    """Both branches' heaps as one: an attribute written differently is `OneOf` (or unknown),
    chosen by what the test that split them read; an object made in one branch only is kept
    as it is there."""
    out = Heap(
        counter=a.counter,
        aliases={**a.aliases, **b.aliases},
        flat=a.flat | b.flat,
        path_classes={**a.path_classes, **b.path_classes},
        roles={**a.roles, **b.roles},
        closed_paths=a.closed_paths | b.closed_paths,
        deeper=a.deeper,
    )
    out.closed = a.closed | b.closed
    out.tracked = a.tracked | b.tracked
    for oid in a.objects.keys() | b.objects.keys():
        left, right = a.objects.get(oid), b.objects.get(oid)
        if left is None or right is None or left is right:
            out.objects[oid] = left if left is not None else right or {}
            continue  # shared, not owned: the next write copies it
        # an attribute set on one path only: whether it is set at all is not known
        out.objects[oid] = merged_mapping(
            left, right, limit, chosen_by, "{key} is set on one path only"
        )
        out.owned.add(oid)
    out.writes = dict(a.writes)
    for where, write in b.writes.items():
        mine = out.writes.get(where)
        if mine is None or write.order > mine.order:
            out.writes[where] = write
    return out


def merge_paths(
    heaps: list[Heap], limit: int, chosen_by: frozenset[str] = frozenset()
) -> tuple[Heap, int]:
    """The heaps several paths left, as one; and how many objects the merges walked."""
    out, walked = heaps[0], 0
    for heap in heaps[1:]:
        walked += len(heap.objects)
        out = merge_heaps(out, heap, limit, chosen_by)
    return out, walked


@dataclass(frozen=True)
class Test:
    """A test the path is on: as written, the inputs it read, and whether it was decided."""

    text: str
    reads: frozenset[str]
    definite: bool
    # What its value came from besides (`x == "a"` with x chosen by `--device`): a path that
    # returns under it was chosen by those too (`one_of`'s `chosen_by`).
    chosen_by: frozenset[str] = frozenset()


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
    # The state of each path that returned under an undecided test: the caller goes on from
    # any of them or the rest of the function's, so they are merged when the call ends.
    returned: list[Heap] = field(default_factory=list)
    returned_items: list[Any] = field(default_factory=list)  # `items.Changed`, alike
    returned_by: set[str] = field(default_factory=set)  # what the tests they returned under read
    # The `finally` bodies of the `try` statements the path is inside, outermost first.
    finals: list[list[ast.stmt]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.site.qualname if self.site is not None else "<module>"

    def definite(self) -> bool:
        return all(t.definite for t in self.tests)


@dataclass
class Call:
    """One call as a plug-in or observer sees it."""

    machine: Machine
    callee: Any
    qualname: str
    args: list[Any]
    kwargs: dict[str, Any]
    node: ast.Call | None
    frame: Frame | None
    reads: dict[int | str, frozenset[str]] = field(default_factory=dict)

    @property
    def where(self) -> str:
        frame = self.frame
        line = self.node.lineno if self.node is not None else 0
        return f"{frame.rel}:{line}" if frame is not None else f"<call>:{line}"


def same_bindings(locals_: dict[str, Any], before: dict[str, Any]) -> bool:
    """The same names bound to the very same values (a path that bound nothing anew)."""
    return locals_.keys() == before.keys() and all(locals_[k] is v for k, v in before.items())
