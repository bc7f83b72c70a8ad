"""Listing a tree's `.py` files with their stamps: the one pass over its folders.

Only `os` calls and no other engine module, so a caller that knows it will need the listing
can have it made elsewhere (a helper process, `eaglebug/session/forkmap.py`) while it loads the rest of
the engine; `source/files.py` makes it here otherwise.
"""

from __future__ import annotations

import os
from stat import S_ISDIR, S_ISREG
from typing import NamedTuple

Stamp = tuple[str, int, int]  # (path relative to the tree root, size, mtime in ns)


class Listing(NamedTuple):
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
    """The files under `top` (the package folder), relative to `root` (its parent).

    Symlinked folders are not followed (a link to `.` would walk forever); a `.py` link is
    read where it points. An entry that cannot be looked at (a link in a loop, a dangling
    link, no permission) is one warning, and the rest of its folder is listed as usual."""
    root_len = len(root) + 1
    found: list[Stamp | str] = []
    folders = [(top[root_len:], _mtime(top))]
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            found.append(f"{folder}: cannot list ({exc.strerror})")
            continue
        for entry in entries:
            try:
                _list_entry(entry, root, root_len, found, folders, stack)
            except OSError as exc:
                rel = os.path.relpath(entry.path, root)
                found.append(f"{rel}: skipped, {exc.strerror or exc}")
    return Listing(tuple(found), tuple(folders))


def _list_entry(
    entry: os.DirEntry[str],
    root: str,
    root_len: int,
    found: list[Stamp | str],
    folders: list[tuple[str, int]],
    stack: list[str],
) -> None:
    if entry.is_dir(follow_symlinks=False):
        if entry.name != "__pycache__" and not entry.name.startswith("."):
            stack.append(entry.path)
            folders.append((entry.path[root_len:], _mtime(entry.path)))
    elif entry.name.endswith(".py"):
        stat = entry.stat()  # where a link points; a link in a loop or dangling raises
        if S_ISREG(stat.st_mode):
            rel = entry.path[root_len:].replace(os.sep, "/")
            found.append((rel, stat.st_size, stat.st_mtime_ns))
        elif not S_ISDIR(stat.st_mode):  # a FIFO or device named *.py never ends
            found.append(f"{os.path.relpath(entry.path, root)}: skipped, not a regular file")
