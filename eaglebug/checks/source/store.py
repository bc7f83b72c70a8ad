"""What was learnt from each file, kept by the hash of its path and bytes, for every tree at once.

Why by content: most files of one SGLang release are byte-identical in the next, in a checkout
on another branch, or in the same tree copied elsewhere. Keyed by path and mtime (as before),
each of those paid the whole cold cost again; keyed by `digest(rel, bytes)`, they find what
was learnt the first time. The path is part of the key because a module's facts depend on its
name (relative imports resolve from it), and the path relative to the tree root is its name.

One file (`cache.store_path()`), a container of records (`facts.Record`, JSON) written by
`cache.write`: read once per run, each record decoded only when its file is asked for. Runs
that learnt something merge what they learnt into the file as it is then, the records this
run used last, and trim the least recently used from the front past
`limits.FACTS_STORE_BYTES`. Each tree's own file (`cache.files_path`) says which digest each
path had at which size and mtime, so a warm tree is only stat'ed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from eaglebug.checks.contract import codec
from eaglebug.checks.contract.limits import FACTS_STORE_BYTES
from eaglebug.checks.source import cache
from eaglebug.checks.source.facts import FileEntry, Record

Stamps = dict[str, tuple[int, int, str]]  # path -> (size, mtime in ns, digest)
_STAMPS = "stamps"


def digest(rel: str, data: bytes) -> str:
    """The key of a file's facts: its path in the tree and its bytes."""
    h = hashlib.blake2b(rel.encode(), digest_size=16)
    h.update(b"\0")
    h.update(data)
    return h.hexdigest()


class Store:
    """The records of every file read before (empty without the cache)."""

    def __init__(self, use_cache: bool) -> None:
        self.use_cache = use_cache
        self._read = cache.read(cache.store_path(), None) if use_cache else None

    def has(self, key: str) -> bool:
        return self._read is not None and key in self._read.spans

    def entry(self, key: str, mtime_ns: int) -> FileEntry | None:
        """The file entry stored under `key`, or None (absent, or a record that does not
        decode: a miss, the file is read again)."""
        raw = self._read.value(key) if self._read is not None else None
        if raw is None:
            return None
        try:
            record = codec.loads(raw, Record)
        except codec.Invalid:
            return None
        return FileEntry.of(record, mtime_ns, key)

    def save(self, entries: Iterable[FileEntry]) -> None:
        """Merge this run's records into the store as it is now (another run may have
        written since), this run's last, and trim the oldest past the limit."""
        if not self.use_cache:
            return
        ours = {e.digest: e for e in entries if e.digest is not None}
        if not any(e.dirty for e in ours.values()):
            return
        now = cache.read(cache.store_path(), None)
        values: dict[str, bytes] = {}
        if now is not None:
            for key in now.spans:
                if key not in ours:
                    raw = now.value(key)
                    if raw is not None:
                        values[key] = raw
        for key, entry in ours.items():
            old = self._read.value(key) if self._read is not None and not entry.dirty else None
            values[key] = old if old is not None else codec.dumps(entry.record(), Record).encode()
        total = sum(len(v) for v in values.values())
        for key in list(values):
            if total <= FACTS_STORE_BYTES:
                break
            total -= len(values.pop(key))
        cache.write(cache.store_path(), None, None, values)
        for entry in ours.values():
            entry.dirty = False


def load_stamps(tree_root: Path) -> Stamps:
    read = cache.read(cache.files_path(tree_root), tree_root)
    raw = read.value(_STAMPS) if read is not None else None
    if raw is None:
        return {}
    try:
        stamps: Stamps = codec.loads(raw, Stamps)
    except codec.Invalid:
        return {}
    return stamps


def save_stamps(tree_root: Path, stamps: Stamps) -> None:
    cache.write(
        cache.files_path(tree_root),
        tree_root,
        None,
        {_STAMPS: codec.dumps(stamps, Stamps).encode()},
    )
