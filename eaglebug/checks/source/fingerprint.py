"""A tree's state in a few milliseconds: its folders' mtimes, then the saved files' stamps.

Answers that depend on the whole tree (`answers.py`) are valid while no `.py` file was added,
removed or changed. Adding, removing or renaming a file changes its folder's mtime, so the
folders are checked first; an edit in place does not, so every saved file is then stat'ed
(size and mtime). Both are stat calls on saved paths: no folder is listed, nothing is read.
When a folder changed, the walk decides: the answers still hold if the files are the same
(`same_files`), e.g. when only a `__pycache__` folder appeared.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass

from eaglebug.checks.source.walk import Stamp


@dataclass(frozen=True)
class Fingerprint:
    folders: tuple[str, ...]  # relative to the tree root
    folder_mtimes: bytes  # array("q") of mtimes in ns, one per folder (-1: not statable)
    files: str  # relative paths joined by "\0", in sorted order
    file_sizes: bytes  # array("q")
    file_mtimes: bytes  # array("q"), in ns

    @classmethod
    def of(cls, folders: list[tuple[str, int]], stamps: list[Stamp]) -> Fingerprint:
        ordered = sorted(stamps)
        return cls(
            folders=tuple(f for f, _ in folders),
            folder_mtimes=array("q", [m for _, m in folders]).tobytes(),
            files="\0".join(s[0] for s in ordered),
            file_sizes=array("q", [s[1] for s in ordered]).tobytes(),
            file_mtimes=array("q", [s[2] for s in ordered]).tobytes(),
        )

    def same_files(self, other: Fingerprint) -> bool:
        """The same `.py` files with the same sizes and mtimes (folders aside)?"""
        return (self.files, self.file_sizes, self.file_mtimes) == (
            other.files,
            other.file_sizes,
            other.file_mtimes,
        )

    def holds(self, root: str) -> bool:
        """Is the tree under `root` still in this state? (False when unsure.)

        Paths are stat'ed relative to the root's descriptor: thousands of stat calls are the
        whole cost of a warm run's check, and the kernel then walks one name, not the
        root's path again for each."""
        stat = os.stat
        mtimes = array("q")
        mtimes.frombytes(self.folder_mtimes)
        try:
            fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return False
        try:
            for folder, mtime in zip(self.folders, mtimes, strict=True):
                if stat(folder or ".", dir_fd=fd).st_mtime_ns != mtime:
                    return False
            sizes, file_mtimes = array("q"), array("q")
            sizes.frombytes(self.file_sizes)
            file_mtimes.frombytes(self.file_mtimes)
            names = self.files.split("\0") if self.files else []
            for name, size, mtime in zip(names, sizes, file_mtimes, strict=True):
                st = stat(name, dir_fd=fd)
                if st.st_size != size or st.st_mtime_ns != mtime:
                    return False
        except (OSError, ValueError):
            return False
        finally:
            os.close(fd)
        return True
