"""Dicts and lists changed in place on the two paths of an undecided branch.

The reading's dicts and lists are Python's own, shared by every name that holds them, so a
change on one path of an undecided test (`if backend == "cutedsl_mla": args["prefill"] =
"trtllm_mla"`, with the backend unknown) would be seen by the other path, and after it, as if
it were certain. The heap's objects are forked and merged (`state.py`); these are kept apart
the same way: each container is copied before its first change on a path, given back its
items before the other path runs, and after both holds what either left (a key both set, one
of the two values; a key one set, unknown), as the heap's attributes are merged. A path that
returns under the test keeps what it changed for the function's caller (`Machine.invoke`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval.values import Top, merged_mapping, one_of

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.state import Frame, Heap

Container = dict[Any, Any] | list[Any]
_NESTED = 64  # a dict or list held by a name is looked into for such a list up to this size
# The methods that change a dict or a list in place.
CHANGES = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update",
     "setdefault", "popitem"}
)  # fmt: skip
# id -> (the container, its items before the first change on the path)
Changed = dict[int, tuple[Container, Container]]


def _copy(container: Container) -> Container:
    return dict(container) if isinstance(container, dict) else list(container)


def _restore(container: Container, items: Container) -> None:
    if isinstance(container, dict):
        container.clear()
        container.update(items)
    else:
        container[:] = items


def merged(a: Container, b: Container, limit: int, chosen_by: frozenset[str]) -> Container:
    """What a container holds after two paths left `a` and `b` in it (`chosen_by`: what the
    tests that split them read)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return merged_mapping(a, b, limit, chosen_by, "{key!r} is set on one path only")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = zip(a, b, strict=True)
        return [x if x is y else one_of((x, y), limit, chosen_by) for x, y in pairs]
    # Lists of different lengths (an append on one path): the reading has no list of unknown
    # length. It keeps both paths' items here, and the names that hold the list are made
    # unknown after the join (`Items.forget_unsized`): `"a" in seen` decides nothing.
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    return [*longer, *shorter[len(longer) :]] if isinstance(longer, list) else _copy(longer)


class Items:
    """The containers changed on each open path of undecided branches, innermost last."""

    def __init__(self) -> None:
        self.levels: list[Changed] = []
        # Lists two paths left of different lengths, not yet forgotten (`forget_unsized`).
        self.unsized: list[Container] = []

    def changing(self, container: Any) -> None:
        """Before `container` is changed in place: its items, the first time on this path."""
        if self.levels and isinstance(container, (dict, list)):
            self.levels[-1].setdefault(id(container), (container, _copy(container)))

    def open(self) -> None:
        self.levels.append({})

    def close(self, undo: bool) -> dict[int, tuple[Container, Container, Container]]:
        """The path's changes: id -> (container, items before, items after); `undo` gives
        each container back its items before the path (for the other path to start from)."""
        changed = self.levels.pop()
        out = {}
        for key, (container, before) in changed.items():
            out[key] = (container, before, _copy(container))
            if undo:
                _restore(container, before)
        return out

    def join(
        self,
        body: dict[int, tuple[Container, Container, Container]],
        other: dict[int, tuple[Container, Container, Container]],
        ended_body: bool,
        ended_else: bool,
        limit: int,
        chosen_by: frozenset[str],
    ) -> bool:
        """Both paths closed (the body's undone, the else path's left in place): each
        container holds what the paths that go on left in it. True when a path changed one."""
        for key in body.keys() | other.keys():
            container, before, _ = body[key] if key in body else other[key]
            after_body = body[key][2] if key in body else before
            after_else = other[key][2] if key in other else before
            if ended_else and ended_body:
                result = before
            elif ended_body:
                result = after_else
            elif ended_else:
                result = after_body
            else:
                result = merged(after_body, after_else, limit, chosen_by)
                self._sized(container, (after_body, after_else))
            if self.levels:  # an enclosing path gives it back its items before this branch
                self.levels[-1].setdefault(id(container), (container, before))
            _restore(container, result)
        return bool(body or other)

    def current(self) -> Changed:
        """Each container changed on the open paths, with what it holds now (a path that
        returns: the state the caller goes on from)."""
        out: Changed = {}
        for level in self.levels:
            for key, (container, _) in level.items():
                out[key] = (container, _copy(container))
        return out

    def returned(
        self, states: list[Changed], went_on: bool, limit: int, chosen_by: frozenset[str]
    ) -> None:
        """At a function's end: each container holds what any path that left it (those that
        returned early, `states`, and the end's, where one reached it) left in it."""
        seen: dict[int, Container] = {}
        for state in states:
            for key, (container, _) in state.items():
                seen[key] = container
        for key, container in seen.items():
            held = [state[key][1] for state in states if key in state]
            if went_on:
                held.append(_copy(container))
            result = held[0]
            for items in held[1:]:
                result = merged(result, items, limit, chosen_by)
            self._sized(container, held)
            self.changing(container)
            _restore(container, result)

    def _sized(self, container: Container, held: list[Container] | tuple[Container, ...]) -> None:
        if isinstance(container, list) and len({len(items) for items in held}) > 1:
            self.unsized.append(container)

    def forget_unsized(
        self,
        frames: Iterable[Frame],
        heap: Heap,
        chosen_by: frozenset[str],
        values: list[Any] | None = None,
        stores: Iterable[dict[Any, Any]] = (),
    ) -> int:
        """Whatever holds a list the paths left of different lengths holds an unknown from
        here (chosen by what the test read): a local, an attribute, a value of `values` (a
        call's returns) or of `stores` (module globals, class attributes), and an item of a
        dict, list or tuple held there (`d["k"].append(x)`). How many objects were walked.
        A closure's cell or a deeper container keeps both paths' items."""
        if not self.unsized:
            return 0
        ids = {id(c) for c in self.unsized}
        self.unsized.clear()
        unknown = Top("a list that one path of an undecided test added to", chosen_by)

        def swapped(value: Any) -> Any:
            if id(value) in ids:
                return unknown
            if isinstance(value, tuple) and any(id(v) in ids for v in value):
                return tuple(unknown if id(v) in ids else v for v in value)
            if isinstance(value, (dict, list)) and len(value) <= _NESTED:
                pairs = value.items() if isinstance(value, dict) else enumerate(value)
                keys = [k for k, v in pairs if id(v) in ids]
                if keys:
                    self.changing(value)  # an enclosing path gives it back its items
                    for key in keys:
                        value[key] = unknown
            return value

        def swap_in(mapping: dict[Any, Any], put: Any) -> None:
            for key, value in list(mapping.items()):
                new = swapped(value)
                if new is not value:
                    put(key, new)

        for i, value in enumerate(values or ()):
            values[i] = swapped(value)  # type: ignore[index]
        for frame in frames:
            swap_in(frame.locals, frame.locals.__setitem__)
        for store in stores:
            swap_in(store, store.__setitem__)
        for oid, attributes in list(heap.objects.items()):
            swap_in(attributes, lambda key, new, oid=oid: heap.set(oid, key, new))
        return len(heap.objects)
