"""Listing a tree's `.py` files with their stamps: the one pass over its folders.

Only `os` calls and no other engine module, so a caller that knows it will need the listing
can have it made elsewhere (a helper process, `eaglebug/session/forkmap.py`) while it loads the rest of
the engine; `source/files.py` makes it here otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

Stamp = tuple[str, int, int]  # (path relative to the tree root, size, mtime in ns)


@dataclass(frozen=True)
class Listing:
    # Each regular `.py` file, and each warning (text) where the walk met it: a FIFO named
    # *.py, a folder that cannot be listed.
    found: tuple[Stamp | str, ...]
    folders: tuple[tuple[str, int], ...]  # every folder walked, with its mtime (-1: unknown)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def list_tree(root: str, top: str) -> Listing:
    """The files under `top` (the package folder), relative to `root` (its parent)."""
    root_len = len(root) + 1
    found: list[Stamp | str] = []
    folders = [(top[root_len:], _mtime(top))]
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    _entry(entry, root, root_len, stack, found, folders)
        except OSError as exc:
            found.append(f"{folder}: cannot list ({exc.strerror})")
    return Listing(tuple(found), tuple(folders))


def _entry(
    entry: os.DirEntry[str],
    root: str,
    root_len: int,
    stack: list[str],
    found: list[Stamp | str],
    folders: list[tuple[str, int]],
) -> None:
    """One entry of a folder. An entry that cannot be stat'ed (a symlink loop: `a.py -> b.py
    -> a.py`) is a warning of its own, never the loss of the folder's other files (a user's
    wrapper beside it would go unaudited)."""
    try:
        if entry.is_dir(follow_symlinks=False):
            if entry.name != "__pycache__" and not entry.name.startswith("."):
                stack.append(entry.path)
                folders.append((entry.path[root_len:], _mtime(entry.path)))
        elif entry.name.endswith(".py"):
            if entry.is_file():  # a FIFO or device named *.py never ends
                stat = entry.stat()
                rel = entry.path[root_len:].replace(os.sep, "/")
                found.append((rel, stat.st_size, stat.st_mtime_ns))
            elif not entry.is_dir():
                rel = os.path.relpath(entry.path, root)
                found.append(f"{rel}: skipped, not a regular file")
    except OSError as exc:
        found.append(f"{os.path.relpath(entry.path, root)}: skipped ({exc.strerror})")
