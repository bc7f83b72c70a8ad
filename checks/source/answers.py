"""Tree-wide answers, kept for one state of the tree: its consumers, the flags' assignments,
the registry's exporters, the algorithms, the launch flags, whole audits, whole CLI answers.

Each answer is kept with the warnings that computing it gave, and a run that reuses it says
them again, so a warm run warns as the cold one did. The answers are saved with the tree's
fingerprint (`source/fingerprint.py`) in their own small cache file, read before anything else: a run
whose questions were all answered before reads that file, stats the tree, and nothing more.
Values are unpickled only when asked for.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any, TypeVar, cast

from eaglebug.checks.source import cache
from eaglebug.checks.source.fingerprint import Fingerprint
from eaglebug.checks.source.tree import SglangTree

T = TypeVar("T")
MISSING = object()


class Answers:
    """The answers for one tree, read from its cache file if its fingerprint still holds (or,
    after a walk, if the walk found the same files); kept in memory without the cache."""

    def __init__(self, tree: SglangTree, use_cache: bool) -> None:
        self.tree = tree
        self.use_cache = use_cache
        self._values: dict[str, object] = {}
        self._stored: dict[str, bytes] = {}  # as read, unpickled when asked for
        self._warnings: dict[str, tuple[str, ...]] = {}
        self.fingerprint: Fingerprint | None = None
        self.walk_warnings: tuple[str, ...] = ()
        self.dirty = False
        self._pending: dict[str, Any] = {}  # read, but valid only if the walk agrees
        # Did the saved fingerprint hold, checked without a walk (the walk's warnings, too,
        # then come from here)?
        self.quick = False
        if use_cache:
            self._load()

    def _load(self) -> None:
        payload = cache.load_answers(self.tree.root)
        fingerprint = payload.get("fingerprint")
        if not isinstance(fingerprint, Fingerprint):
            return
        if fingerprint.holds(str(self.tree.root)):
            self._adopt(payload)
            self.fingerprint = fingerprint
            self.quick = True
        else:
            self._pending = payload

    def _adopt(self, payload: dict[str, Any]) -> None:
        stored = payload.get("answers")
        warnings = payload.get("warnings")
        walk = payload.get("walk_warnings")
        if isinstance(stored, dict) and isinstance(warnings, dict) and isinstance(walk, tuple):
            self._stored = stored
            self._warnings = warnings
            self.walk_warnings = walk

    def settle(self, fingerprint: Fingerprint, walk_warnings: list[str]) -> None:
        """After a walk: keep what was read if the files are the same, and the new stamps."""
        old = self._pending.get("fingerprint")
        if isinstance(old, Fingerprint) and old.same_files(fingerprint):
            self._adopt(self._pending)
        self._pending = {}
        if self.fingerprint != fingerprint:
            self.dirty = True
        self.fingerprint = fingerprint
        self.walk_warnings = tuple(walk_warnings)

    def get(self, key: str, warnings: list[str]) -> object:
        """The answer under `key` (or `MISSING`), its warnings appended to `warnings`."""
        value = self._values.get(key, MISSING)
        if value is MISSING:
            stored = self._stored.get(key)
            if stored is None:
                return MISSING
            try:
                value = pickle.loads(stored)
            except Exception:  # a stale class shape, a truncated value: recompute it
                del self._stored[key]
                return MISSING
            self._values[key] = value
        for warning in self._warnings.get(key, ()):
            if warning not in warnings:
                warnings.append(warning)
        return value

    def has(self, key: str) -> bool:
        return key in self._values or key in self._stored

    def put(self, key: str, value: object, said: list[str]) -> None:
        """Keep `value` (as it is now: it is pickled at once) with the warnings it gave."""
        self._values[key] = value
        if self.use_cache:
            self._stored.pop(key, None)  # the newest last (see `drop_oldest`)
            self._stored[key] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self._warnings[key] = tuple(dict.fromkeys(said))
        self.dirty = True

    def keys(self, prefix: str) -> list[str]:
        """The keys starting with `prefix`, the oldest first."""
        return list(
            dict.fromkeys(k for k in (*self._stored, *self._values) if k.startswith(prefix))
        )

    def drop_oldest(self, prefix: str, keep: int) -> None:
        """Forget all but the `keep` newest answers whose keys start with `prefix` (answers
        keyed by something that varies from run to run, such as an environment)."""
        for key in self.keys(prefix)[:-keep]:
            self._stored.pop(key, None)
            self._values.pop(key, None)
            self._warnings.pop(key, None)
            self.dirty = True

    def answer(self, key: str, warnings: list[str], compute: Callable[[], T]) -> T:
        """The answer under `key`, computed (and kept, with its warnings) if there is none."""
        value = self.get(key, warnings)
        if value is not MISSING:
            return cast(T, value)
        mark = len(warnings)
        computed = compute()
        self.put(key, computed, warnings[mark:])
        return computed

    def save(self) -> None:
        if not (self.use_cache and self.dirty and self.fingerprint is not None):
            return
        cache.save_answers(
            self.tree.root,
            {
                "fingerprint": self.fingerprint,
                "walk_warnings": self.walk_warnings,
                "answers": self._stored,
                "warnings": self._warnings,
            },
        )
        self.dirty = False
