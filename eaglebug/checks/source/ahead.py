"""Work started ahead: an analysis the run will want later, made meanwhile by a helper process.

Why: after the tree's files are read, a cold preflight runs analyses that do not need each
other's results (the interface audit, the start-up walk, the memory stage), one after another
on one core, while a GPU box has many. A front end that may start processes (the CLI) hands
the index a `Background` (`eaglebug/session/forkmap.py`): `TreeIndex.ahead` forks a helper
that runs the analysis on its copy of the index as it is, and hands back what it learnt; the
run takes it where it would have computed it (`TreeIndex.join`, or the answer it asks for).

What a helper hands back (`Handed`) is exactly what the analysis would have left in this
process: its value, the tree answers it computed (encoded, as the answers file keeps them,
each with its warnings), the warnings it gave, the files it looked into (the answers'
fingerprint must stamp them), and the file entries it learnt facts for (the facts store keeps
them). Taking it over merges each part where this process does not have it already. An
analysis is a function of the tree and its inputs, so the result is the one the run would
have computed itself; if the helper cannot be had or fails, it is (`Pending`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from eaglebug.checks.source.facts import FileEntry

if TYPE_CHECKING:
    from eaglebug.checks.source.index import TreeIndex

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Pending(Protocol[R_co]):
    """A value being made elsewhere: calling it waits for it; `cancel` drops it."""

    def __call__(self) -> R_co: ...
    def cancel(self) -> None: ...


class Background(Protocol):
    """Starts `compute()` elsewhere (a forked helper) and returns its pending value."""

    def __call__(self, compute: Callable[[], R]) -> Pending[R]: ...


class Handed(NamedTuple):
    """What an analysis made ahead left behind, for the run to take over."""

    value: Any
    # key -> (encoded value, its warnings); None for an answer it dropped (`drop_oldest`)
    answers: dict[str, tuple[bytes, tuple[str, ...]] | None]
    warnings: list[str]
    looked: set[str]
    entries: dict[str, FileEntry]  # the entries it learnt something of, by file
    pid: int  # the process that made it (this one, when the helper could not be had)


def task(index: TreeIndex, compute: Callable[[], Any]) -> Callable[[], Handed]:
    """`compute` as a helper runs it. Where no helper could be had, the same function runs in
    the index's own process when the value is asked for: then it simply computes, in place."""
    owner = os.getpid()

    def made() -> Handed:
        if os.getpid() == owner:
            return Handed(compute(), {}, [], set(), {}, owner)
        return _in_helper(index, compute)

    return made


def _in_helper(index: TreeIndex, compute: Callable[[], Any]) -> Handed:
    """Run `compute` on the copy of the index the fork gave, and gather what it left. The
    copy forgets its parent's pending work (the pipes are the parent's), keeps the syntax
    trees it parses (they are the helper's own), and marks no entry as learnt but those it
    learns here."""
    index.forget_pending()
    files = index.files
    files.own_trees()
    for entry in files.entries.values():
        entry.dirty = False
    mark = len(index.warnings)
    looked_before = set(files.looked)
    index.answers.handing = {}
    try:
        value = compute()
    finally:
        answers, index.answers.handing = index.answers.handing, None
    return Handed(
        value,
        answers,
        index.warnings[mark:],
        files.looked - looked_before,
        {rel: entry for rel, entry in files.entries.items() if entry.dirty},
        os.getpid(),
    )


def take(index: TreeIndex, handed: Handed) -> Any:
    """Merge what a helper handed back into this process's index; its value."""
    if handed.pid == os.getpid():  # made here after all: it is all in place already
        return handed.value
    for key, answer in handed.answers.items():
        if answer is None:
            index.answers.drop(key)
        else:
            index.answers.take_handed(key, *answer)
    files = index.files
    files.looked.update(handed.looked)
    for rel, theirs in handed.entries.items():
        mine = files.entries.get(rel)
        if mine is not None and mine.digest in (None, theirs.digest):
            mine.merge(theirs)
    for warning in handed.warnings:
        if warning not in index.warnings:
            index.warnings.append(warning)
    return handed.value
