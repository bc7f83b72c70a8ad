"""The parse cache: per-file facts keyed by path, size and mtime, one file per audited tree.

Written through a temporary file and an atomic rename, so two audits running at once each
see either the old cache or a complete new one; a cache that cannot be read is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

# Bump when the shape of cached facts changes; older caches are then ignored.
SCHEMA = 6


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "eaglebug"


def cache_path(tree_root: Path) -> Path:
    digest = hashlib.sha1(str(tree_root).encode()).hexdigest()[:16]
    return cache_dir() / f"facts-{digest}.pickle"


def load(tree_root: Path) -> dict[str, Any]:
    """The cached payload: {"entries": per-file facts, "signature": ..., "memo": tree-wide facts}."""
    path = cache_path(tree_root)
    try:
        with path.open("rb") as handle:
            payload = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError):
        return {}
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        return {}
    if payload.get("tree") != str(tree_root) or not isinstance(payload.get("entries"), dict):
        return {}
    return payload


def save(tree_root: Path, entries: dict[str, Any], signature: str, memo: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written only costs speed next time."""
    path = cache_path(tree_root)
    payload = {
        "schema": SCHEMA,
        "tree": str(tree_root),
        "entries": entries,
        "signature": signature,
        "memo": memo,
    }
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
