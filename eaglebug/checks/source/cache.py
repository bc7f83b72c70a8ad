"""eaglebug's cache files: a container of JSON values that is read, checked, and never run.

Why this format: a cache is data. The old pickles named the code that rebuilt them, so a file
planted in the cache folder ran that code (issue 24). A container here is one line that says
what it is, one line of JSON that describes it, then the values, each a JSON text (written by
`contract/codec.py`, decoded only when asked for, by the type its reader expects):

    eaglebug-cache 1\\n
    {"schema": 8, "code": "<stamp>", "tree": "<root or null>", "meta": {...},
     "index": [[key, length], ...]}\\n
    <value of the first key><value of the second>...

A file that is not exactly that (another magic line, a header of the wrong shape, lengths that
do not add up to the file's, another schema, another eaglebug's code, another tree, a FIFO,
a file over `limits.CACHE_FILE_BYTES`) is a miss: the run computes afresh and writes a new one.
A value that does not decode to its reader's type is a miss for that value alone.

Files are written to a temporary file and renamed, so two runs at once each see either the
old file or a complete new one. The files:

- `answers-<tree>`: the tree-wide answers of one tree, with its fingerprint (`answers.py`):
  small, read first, and on a warm run the only file read;
- `files-<tree>`: each file's stamp (size, mtime) and the hash of its bytes (`files.py`);
- `facts`: what was learnt from each file, by the hash of its bytes and path (`store.py`),
  shared by every tree: another release or checkout reuses the files they have in common;
- `trees-by-content`: which folder's answers were made for which content (`content.py`): the
  same files in another folder, or installed again, take them over.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import stat
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from eaglebug.checks.contract.limits import CACHE_FILE_BYTES

# Bump when the shape of what is cached changes; older caches are then ignored.
SCHEMA = 8
MAGIC = b"eaglebug-cache 1\n"
_code: list[str] = []  # the stamp of this eaglebug's own code, computed once


def code_stamp() -> str:
    """Which eaglebug wrote a cache: the size and mtime of every module of the engine and of
    the CLI that renders its answers, in every subfolder. Cached facts and answers are what this
    code computed, so an upgrade, or an edit while developing eaglebug, makes them be computed
    afresh. The folders come from the import system's specs (no import of the front ends)."""
    if not _code:
        stamps = []
        for folder in _code_folders():
            for dirpath, dirnames, filenames in os.walk(folder):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in filenames:
                    if name.endswith((".py", ".tcss")):
                        path = os.path.join(dirpath, name)
                        try:
                            st = os.stat(path)
                        except OSError:
                            stamps.append((path, -1, -1))
                            continue
                        stamps.append((path, st.st_size, st.st_mtime_ns))
        _code.append(f"{zlib.crc32(repr(sorted(stamps)).encode()):08x}")
    return _code[0]


def _code_folders() -> list[str]:
    """The folders of the `eaglebug` package (the engine and the CLI are inside it)."""
    spec = importlib.util.find_spec("eaglebug")
    return list(spec.submodule_search_locations or []) if spec else []


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "eaglebug"


def _digest(tree_root: Path) -> str:
    """A short name for the tree's cache files (each file also says which tree it is for)."""
    return f"{zlib.crc32(str(tree_root).encode()):08x}"


def files_path(tree_root: Path) -> Path:
    return cache_dir() / f"files-{_digest(tree_root)}.cache"


def answers_path(tree_root: Path) -> Path:
    return cache_dir() / f"answers-{_digest(tree_root)}.cache"


def store_path() -> Path:
    return cache_dir() / "facts.cache"


def content_index_path() -> Path:
    return cache_dir() / "trees-by-content.cache"


class Container(NamedTuple):
    """A cache file as read: its `meta` (JSON), and its values as JSON texts, by key."""

    meta: Any
    spans: Mapping[str, tuple[int, int]]  # key -> (start, end) in `data`
    data: bytes

    def value(self, key: str) -> bytes | None:
        span = self.spans.get(key)
        return None if span is None else self.data[span[0] : span[1]]


def read(path: Path, tree: Path | None) -> Container | None:
    """The container at `path` if it is one, of this schema and code, for `tree`; else None."""
    data = _read_capped(path)
    if data is None or not data.startswith(MAGIC):
        return None
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(data[len(MAGIC) : end])
    except (ValueError, RecursionError):
        return None
    if not isinstance(header, dict) or header.get("schema") != SCHEMA:
        return None
    if header.get("code") != code_stamp():
        return None
    if header.get("tree") != (str(tree) if tree is not None else None):
        return None
    index = header.get("index")
    if not isinstance(index, list):
        return None
    spans: dict[str, tuple[int, int]] = {}
    start = end + 1
    for item in index:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not isinstance(item[0], str)
            or type(item[1]) is not int
            or item[1] < 0
        ):
            return None
        spans[item[0]] = (start, start + item[1])
        start += item[1]
    if start != len(data):  # truncated, or something appended
        return None
    return Container(header.get("meta"), spans, data)


def _read_capped(path: Path) -> bytes | None:
    """A regular file's bytes, if it is no larger than the cap (a FIFO is never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > CACHE_FILE_BYTES:
            return None
        chunks = []
        left = st.st_size + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 24))):
            chunks.append(chunk)
            left -= len(chunk)
        return None if left <= 0 else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def write(path: Path, tree: Path | None, meta: Any, values: Mapping[str, bytes]) -> None:
    """Best effort: a cache that cannot be written only costs speed next time."""
    import tempfile  # only runs that learnt something write

    header = {
        "schema": SCHEMA,
        "code": code_stamp(),
        "tree": str(tree) if tree is not None else None,
        "meta": meta,
        "index": [[key, len(value)] for key, value in values.items()],
    }
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(MAGIC)
            handle.write(head)
            handle.write(b"\n")
            for value in values.values():
                handle.write(value)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
