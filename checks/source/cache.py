"""The two cache files of an audited tree, written through a temporary file and a rename.

- facts: per-file facts keyed by path, size and mtime (`source/files.py`): large, read only
  when a question needs the files;
- answers: tree-wide answers for one state of the tree, with its fingerprint (`answers.py`):
  small, read first, and on a warm run the only file read.

Two audits running at once each see either the old file or a complete new one; a file that
cannot be read is ignored.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pickle
import zlib
from pathlib import Path
from typing import Any

# Bump when the shape of cached facts changes; older caches are then ignored.
SCHEMA = 7
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
    """The folders of the `eaglebug` distribution: the package and the engine (separate
    folders in an editable install, one inside the other in a wheel)."""
    folders: list[str] = []
    for name in ("eaglebug", "eaglebug.checks"):
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            if not any(folder.startswith(seen + os.sep) or folder == seen for seen in folders):
                folders.append(folder)
    return folders


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "eaglebug"


def _digest(tree_root: Path) -> str:
    """A short name for the tree's cache files (each file also says which tree it is for)."""
    return f"{zlib.crc32(str(tree_root).encode()):08x}"


def cache_path(tree_root: Path) -> Path:
    return cache_dir() / f"facts-{_digest(tree_root)}.pickle"


def answers_path(tree_root: Path) -> Path:
    return cache_dir() / f"answers-{_digest(tree_root)}.pickle"


def _read(path: Path, tree_root: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            payload = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError):
        return {}
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        return {}
    if payload.get("code") != code_stamp():
        return {}
    if payload.get("tree") != str(tree_root):
        return {}
    return payload


def _write(path: Path, tree_root: Path, payload: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written only costs speed next time."""
    import tempfile  # only runs that learnt something write

    payload = {"schema": SCHEMA, "code": code_stamp(), "tree": str(tree_root), **payload}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(payload, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def load(tree_root: Path) -> dict[str, Any]:
    """The cached facts: {"entries": relative path -> FileEntry}, or {}."""
    payload = _read(cache_path(tree_root), tree_root)
    return payload if isinstance(payload.get("entries"), dict) else {}


def save(tree_root: Path, entries: dict[str, Any]) -> None:
    _write(cache_path(tree_root), tree_root, {"entries": entries})


def load_answers(tree_root: Path) -> dict[str, Any]:
    """The cached answers: {"fingerprint", "walk_warnings", "answers"}, or {}."""
    payload = _read(answers_path(tree_root), tree_root)
    return payload if isinstance(payload.get("answers"), dict) else {}


def save_answers(tree_root: Path, payload: dict[str, Any]) -> None:
    _write(answers_path(tree_root), tree_root, payload)
