"""Tree-wide answers, kept for one state of the tree: its consumers, the flags' assignments,
the registry's exporters, the algorithms, the launch flags, whole audits, whole CLI answers.

Each answer is kept with the warnings that computing it gave, and a run that reuses it says
them again, so a warm run warns as the cold one did. The answers are saved with the tree's
fingerprint (`source/fingerprint.py`) in their own small cache file, read before anything else: a run
whose questions were all answered before reads that file, stats the tree, and nothing more.

Every answer is asked for with its type (`kind`): it is written as JSON by the codec
(`contract/codec.py`) and decoded only when asked for, into that type alone. A value that
does not decode (a planted or damaged file, a stale shape) is a miss: computed again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from eaglebug.checks.contract import codec
from eaglebug.checks.source import cache
from eaglebug.checks.source.fingerprint import Fingerprint
from eaglebug.checks.source.tree import SglangTree

T = TypeVar("T")
MISSING = object()
Content = tuple[str, dict[str, str]]  # `content.py`: the key, the files outside the runtime
# The fingerprint, the walk's and each answer's warnings, and the content they were made for
# (its key, the hashes of the files outside the runtime they read).
_Meta = tuple[Fingerprint, tuple[str, ...], dict[str, tuple[str, ...]], Content | None]


class Answers:
    """The answers for one tree, read from its cache file if its fingerprint still holds (or,
    after a walk, if the walk found the same files); kept in memory without the cache."""

    def __init__(self, tree: SglangTree, use_cache: bool) -> None:
        self.tree = tree
        self.use_cache = use_cache
        self._values: dict[str, object] = {}
        self._stored: dict[str, bytes] = {}  # as read (JSON), decoded when asked for
        self._warnings: dict[str, tuple[str, ...]] = {}
        self.fingerprint: Fingerprint | None = None
        self.walk_warnings: tuple[str, ...] = ()
        self.content: Content | None = None  # as the meta says (`_Meta`)
        self.dirty = False
        self._adopted: Fingerprint | None = None  # whose stamped files the answers depend on
        self._pending: tuple[_Meta, dict[str, bytes]] | None = None  # valid if the walk agrees
        # Did the saved fingerprint hold, checked without a walk (the walk's warnings, too,
        # then come from here)?
        self.quick = False
        # In a helper working ahead (`ahead.py`): each answer it computes, as it hands it back
        # (encoded, with its warnings), and those it drops (None).
        self.handing: dict[str, tuple[bytes, tuple[str, ...]] | None] | None = None
        if use_cache:
            self._load()

    def _load(self) -> None:
        read = _read(self.tree.root)
        if read is None:
            return
        meta, stored = read
        if meta[0].holds(str(self.tree.root)):
            self._adopt(meta, stored)
            self.fingerprint = meta[0]
            self.quick = True
        else:
            self._pending = (meta, stored)

    def _adopt(self, meta: _Meta, stored: dict[str, bytes]) -> None:
        fingerprint, self.walk_warnings, warnings, self.content = meta
        self._adopted = fingerprint
        self._stored = stored
        self._warnings = {k: v for k, v in warnings.items() if k in stored}

    @property
    def adopted(self) -> bool:
        """Were answers of an earlier run taken over?"""
        return self._adopted is not None

    def take_over(self, folder: Path, key: str, same: Callable[[dict[str, str]], bool]) -> bool:
        """The answers saved for `folder`, if they were made for content `key` and the files
        outside the runtime they read are the `same` here (`content.py`): taken over as if
        this tree's (its own walk's warnings and stamps stay)."""
        read = _read(folder)
        if read is None:
            return False
        meta, stored = read
        content = meta[3]
        if content is None or content[0] != key or not same(content[1]):
            return False
        walk_warnings = self.walk_warnings
        self._adopt(meta, stored)
        self.walk_warnings = walk_warnings
        self.dirty = True  # this folder's own answers file is written with them
        return True

    def settle(self, fingerprint: Fingerprint, walk_warnings: list[str]) -> None:
        """After a walk: keep what was read if the files are the same, and the new stamps."""
        if self._pending is not None and self._pending[0][0].same_files(fingerprint):
            self._adopt(*self._pending)
        self._pending = None
        if self.fingerprint != fingerprint:
            self.dirty = True
        self.fingerprint = fingerprint
        self.walk_warnings = tuple(walk_warnings)

    def depend_on(self, walked: Fingerprint | None, read: Callable[[str], bool]) -> None:
        """Before a save: keep the stamps of the files an answer may depend on, those this
        run `read` and those the answers adopted from an earlier run depended on (the
        stamps from this run's walk, `walked`, where there was one)."""
        base = walked if walked is not None else self.fingerprint
        if base is None:
            return
        before = self._adopted.checked() if self._adopted is not None else set()
        narrowed = base.narrowed(lambda rel: read(rel) or rel in before)
        if narrowed != self.fingerprint:
            self.fingerprint, self.dirty = narrowed, True
        self._adopted = narrowed

    def get(self, key: str, warnings: list[str], kind: object) -> object:
        """The answer under `key` (or `MISSING`), decoded as a `kind`, its warnings appended to
        `warnings`."""
        value = self._values.get(key, MISSING)
        if value is MISSING:
            stored = self._stored.get(key)
            if stored is None:
                return MISSING
            try:
                value = codec.loads(stored, kind)
            except codec.Invalid:  # another shape, a damaged or planted value: recompute it
                del self._stored[key]
                return MISSING
            self._values[key] = value
        for warning in self._warnings.get(key, ()):
            if warning not in warnings:
                warnings.append(warning)
        return value

    def has(self, key: str) -> bool:
        return key in self._values or key in self._stored

    def put(self, key: str, value: object, said: list[str], kind: object) -> None:
        """Keep `value` (a `kind`; written as it is now) with the warnings it gave."""
        self._values[key] = value
        warnings = self._warnings[key] = tuple(dict.fromkeys(said))
        self.dirty = True
        if not self.use_cache and self.handing is None:
            return
        self._stored.pop(key, None)  # the newest last (see `drop_oldest`)
        try:
            encoded = codec.dumps(value, kind).encode()
        except TypeError:
            # A value the codec cannot write (a literal the tree evaluated to something only
            # Python has) is kept for this run only.
            return
        if self.use_cache:
            self._stored[key] = encoded
        if self.handing is not None:
            self.handing[key] = (encoded, warnings)

    def take_handed(self, key: str, encoded: bytes, said: tuple[str, ...]) -> None:
        """An answer a helper computed (`ahead.py`), unless this process has one: decoded
        when asked for, and kept as if computed here."""
        if self.has(key):
            return
        self._stored[key] = encoded
        self._warnings[key] = said
        self.dirty = True
        if self.handing is not None:  # a helper's helper: handed on
            self.handing[key] = (encoded, said)

    def keys(self, prefix: str) -> list[str]:
        """The keys starting with `prefix`, the oldest first."""
        return list(
            dict.fromkeys(k for k in (*self._stored, *self._values) if k.startswith(prefix))
        )

    def drop_oldest(self, prefix: str, keep: int) -> None:
        """Forget all but the `keep` newest answers whose keys start with `prefix` (answers
        keyed by something that varies from run to run, such as an environment)."""
        for key in self.keys(prefix)[:-keep]:
            self.drop(key)

    def drop(self, key: str) -> None:
        self._stored.pop(key, None)
        self._values.pop(key, None)
        self._warnings.pop(key, None)
        self.dirty = True
        if self.handing is not None:
            self.handing[key] = None

    def answer(self, key: str, kind: object, warnings: list[str], compute: Callable[[], T]) -> T:
        """The answer under `key` (a `kind`), computed (and kept, with its warnings) if there
        is none."""
        value = self.get(key, warnings, kind)
        if value is not MISSING:
            return cast(T, value)
        mark = len(warnings)
        computed = compute()
        self.put(key, computed, warnings[mark:], kind)
        return computed

    @property
    def unsaved(self) -> bool:
        """Has this run something to write (`save`)?"""
        return self.use_cache and self.dirty and self.fingerprint is not None

    def save(self) -> None:
        if not self.unsaved or self.fingerprint is None:
            return
        warnings = {k: v for k, v in self._warnings.items() if k in self._stored}
        meta: Any = codec.encode(
            (self.fingerprint, self.walk_warnings, warnings, self.content), _Meta
        )
        cache.write(cache.answers_path(self.tree.root), self.tree.root, meta, self._stored)
        self.dirty = False


def _read(root: Path) -> tuple[_Meta, dict[str, bytes]] | None:
    """The answers saved for the tree at `root`, with their meta (None: none, or a file whose
    meta does not decode or whose fingerprint is cut short)."""
    read = cache.read(cache.answers_path(root), root)
    if read is None:
        return None
    try:
        meta: _Meta = codec.decode(read.meta, _Meta)
    except codec.Invalid:
        return None
    if not meta[0].consistent():
        return None
    return meta, {key: read.data[a:b] for key, (a, b) in read.spans.items()}
