"""A tree's content: the answers of the same files in another folder, or installed again.

Why: the tree answers (`answers.py`) are kept per folder and hold while its files' stamps
hold. The same files elsewhere (a second venv or conda env with the same SGLang, a docker
layer rebuilt, `pip install --force-reinstall`, which gives every file a new mtime) found
none and computed everything again: 2.8-3.2 s for the seed preflight on 0.5.23 with every
file's facts in the store, against 1.2 s once the tree answers are had. What a tree answer
says depends on the files' names and bytes, not on the folder (those of 0.5.23 and of a copy
of it are byte-identical, the replies aside, which are keyed by the folder), so a tree with
the same content takes them over, then computes only what they lack.

The content key: the release's version; every runtime file (`sglang/srt/`) by name and hash,
since any answer may read their facts; every other file by name, since adding or removing one
can change what a module name finds. The files outside the runtime that the answers read are
checked by hash when taken over (`extras`): a handful, read again. A file skipped for its size
counts by its size (it is never read).

`trees-by-content` (`cache.py`'s container) maps each key to the newest folder whose answers
have it, the newest `_KEPT` keys; the answers file says its own key, so a pointer that went
stale (that folder changed since) is a miss.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from eaglebug.checks.contract import codec
from eaglebug.checks.source import cache
from eaglebug.checks.source.facts import RUNTIME
from eaglebug.checks.source.files import SourceFiles, read_file
from eaglebug.checks.source.store import digest

_KEPT = 32
_UNREADABLE = "unreadable"


def content_key(files: SourceFiles, version: str | None) -> str:
    """The key of a walked tree's content (every runtime file hashed by the walk)."""
    h = hashlib.blake2b(f"{version}\0".encode(), digest_size=16)
    for rel in sorted(files.entries):
        entry = files.entries[rel]
        if rel.startswith(RUNTIME):
            h.update(f"{rel}\0{entry.digest or f'size:{entry.size}:{entry.error}'}\0".encode())
        else:
            h.update(f"{rel}\0\0".encode())
    return h.hexdigest()


def extras(root: Path, names: set[str]) -> dict[str, str]:
    """The hashes of the files outside the runtime among `names`, read now."""
    out = {}
    for rel in sorted(n for n in names if not n.startswith(RUNTIME)):
        try:
            out[rel] = digest(rel, read_file(str(root / rel), 0))
        except OSError:
            out[rel] = _UNREADABLE
    return out


def same_extras(root: Path, wanted: dict[str, str]) -> bool:
    """Do this tree's files outside the runtime have the hashes the answers were made with?"""
    return _UNREADABLE not in wanted.values() and extras(root, set(wanted)) == wanted


def _index() -> dict[str, str]:
    read = cache.read(cache.content_index_path(), None)
    if read is None:
        return {}
    out = {}
    for key in read.spans:
        raw = read.value(key)
        try:
            out[key] = codec.loads(raw or b"", str)
        except codec.Invalid:
            continue
    return out


def folder_with(key: str) -> Path | None:
    """The folder whose answers were last saved for this content, if any."""
    found = _index().get(key)
    return Path(found) if found is not None else None


def remember(key: str, root: Path) -> None:
    """This folder's answers are for this content (the newest `_KEPT` kept)."""
    index = _index()
    if index.get(key) == str(root) and list(index)[-1:] == [key]:
        return
    index.pop(key, None)
    index[key] = str(root)
    kept = list(index.items())[-_KEPT:]
    values = {k: codec.dumps(v, str).encode() for k, v in kept}
    cache.write(cache.content_index_path(), None, None, values)
