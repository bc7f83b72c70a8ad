"""Syntax trees kept across the indexes of one long-lived process, by the bytes they came from.

Why: the TUI checks the launch again after every flag, fix or relaunch, each time with a new
index (the tree may have changed: a fix commits to it). The facts of unchanged files come from
the store, but the evaluator needs their syntax trees, and parsing them again was most of a
re-check (2.6 s of a re-check on 0.5.23, 1.0 s with the trees kept). A tree is kept under the
digest of its file's path and bytes (`store.digest`): a file a fix changed is a new key, so a
kept tree is always the one its bytes give. Bounded as an index's own trees are
(`PARSED_SOURCE_BYTES` of source), oldest use first out.

A one-shot command (the CLI) builds one index and has nothing to share; it passes none. A
process that builds many indexes over the same trees without threading one set of trees
through each (a test worker running test after test over the same releases) can have every
index it builds keep them in one: `keep_in_process`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from eaglebug.checks.contract.limits import PARSED_SOURCE_BYTES
from eaglebug.checks.source.facts import Parsed


class ParsedTrees:
    """Parsed files by content digest, shared by the indexes a session builds one after
    another (or at once: the session's checks and a fix's re-audit run on different threads)."""

    def __init__(self, limit_bytes: int = PARSED_SOURCE_BYTES) -> None:
        self.limit_bytes = limit_bytes
        self._trees: OrderedDict[str, tuple[Parsed, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0  # trees handed over instead of parsed (what a re-check saved)

    def get(self, key: str) -> Parsed | None:
        with self._lock:
            hit = self._trees.get(key)
            if hit is None:
                return None
            self._trees.move_to_end(key)
            self.hits += 1
            return hit[0]

    def peek(self, key: str) -> Parsed | None:
        """`get` in a helper forked off the process that kept the trees: it reads what it
        inherited, without the lock (a thread of the parent may have held it at the fork; the
        helper has no other thread), and changes nothing."""
        hit = self._trees.get(key)
        return hit[0] if hit is not None else None

    def put(self, key: str, parsed: Parsed, size: int) -> None:
        with self._lock:
            if key in self._trees:
                return
            self._trees[key] = (parsed, size)
            self._bytes += size
            while self._bytes > self.limit_bytes and len(self._trees) > 1:
                _, (_, dropped) = self._trees.popitem(last=False)
                self._bytes -= dropped

    def __len__(self) -> int:
        return len(self._trees)


_IN_PROCESS: list[ParsedTrees | None] = [None]


def keep_in_process(trees: ParsedTrees | None) -> ParsedTrees | None:
    """From now on, every index this process builds without trees of its own keeps its syntax
    trees in `trees` (None: each its own again); returns what was kept before, to put back."""
    before, _IN_PROCESS[0] = _IN_PROCESS[0], trees
    return before


def kept_in_process() -> ParsedTrees | None:
    """The trees `keep_in_process` named, if any."""
    return _IN_PROCESS[0]
