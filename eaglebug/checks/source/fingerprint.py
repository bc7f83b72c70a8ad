"""A tree's state in a few milliseconds: its folders' mtimes, then the saved files' stamps.

Answers that depend on the whole tree (`answers.py`) are valid while no `.py` file was added,
removed or changed. Adding, removing or renaming a file changes its folder's mtime, so the
folders are checked first; an edit in place does not, so every saved file is then stat'ed
(size and mtime). Both are stat calls on saved paths: no folder is listed, nothing is read.
When a folder changed, the walk decides: the answers still hold if the files are the same
(`same_files`), e.g. when only a `__pycache__` folder appeared.

Only the files an answer can depend on are stat'ed: the runtime's (`sglang/srt/`, whose facts
every index reads) and any other file a run read. A wheel's other files (its kernels, tests,
the diffusion runtime: 2,600 of 0.5.23's 4,700) are kept by name only, so adding or removing
one still counts (their folders' mtimes), but an edit in place is no question's business
until some run reads the file (`narrowed`). Half the stat calls is half a warm run's check.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from itertools import compress
from typing import NamedTuple

from eaglebug.checks.source.walk import Stamp

UNCHECKED = -2  # the size of a file kept by name only (-1 is a file that cannot be stat'ed)


class Fingerprint(NamedTuple):
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

    def consistent(self) -> bool:
        """Does every name have its stamps? (A damaged or planted cache file may decode into
        a fingerprint whose arrays are cut short: a miss, never an error.)"""
        files = len(self.names())
        return (
            len(self.folder_mtimes) == 8 * len(self.folders)
            and len(self.file_sizes) == len(self.file_mtimes) == 8 * files
        )

    def narrowed(self, checked: Callable[[str], bool]) -> Fingerprint:
        """The same state, with the stamps of the files not `checked` let go (names kept)."""
        sizes, mtimes = _stamps(self)
        for i, name in enumerate(self.names()):
            if not checked(name):
                sizes[i], mtimes[i] = UNCHECKED, UNCHECKED
        return self._replace(file_sizes=sizes.tobytes(), file_mtimes=mtimes.tobytes())

    def names(self) -> list[str]:
        return self.files.split("\0") if self.files else []

    def checked(self) -> set[str]:
        """The files whose stamps this fingerprint keeps."""
        sizes, _ = _stamps(self)
        return {n for n, size in zip(self.names(), sizes, strict=True) if size != UNCHECKED}

    def same_files(self, other: Fingerprint) -> bool:
        """The same `.py` files, each with the same size and mtime where both keep them
        (folders aside)?"""
        if self.files != other.files:
            return False
        (sizes, mtimes), (their_sizes, their_mtimes) = _stamps(self), _stamps(other)
        return all(
            (size, mtime) == (their_size, their_mtime) or UNCHECKED in (size, their_size)
            for size, mtime, their_size, their_mtime in zip(
                sizes, mtimes, their_sizes, their_mtimes, strict=True
            )
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
            sizes, file_mtimes = _stamps(self)
            names = self.names()
            for i in compress(range(len(sizes)), [size != UNCHECKED for size in sizes]):
                st = stat(names[i], dir_fd=fd)
                if st.st_size != sizes[i] or st.st_mtime_ns != file_mtimes[i]:
                    return False
        except (OSError, ValueError):
            return False
        finally:
            os.close(fd)
        return True


def _stamps(fingerprint: Fingerprint) -> tuple[array[int], array[int]]:
    sizes, mtimes = array("q"), array("q")
    sizes.frombytes(fingerprint.file_sizes)
    mtimes.frombytes(fingerprint.file_mtimes)
    return sizes, mtimes
