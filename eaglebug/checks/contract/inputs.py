"""What eaglebug agrees to read: regular files only.

A FIFO named `x.py` in a tree, or passed as `--log`, would block a read forever; a device
never ends. Every source, config and log read checks this first and skips or refuses the rest.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.limits import LAUNCH_FILE_BYTES, mib


def regular_file(path: Path) -> bool:
    """Whether `path` is (or links to) a regular file."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


class OverLimit(Exception):
    """A file larger than what eaglebug agrees to read of its kind (`contract/limits.py`)."""

    def __init__(self, path: Path, size: int, limit: int) -> None:
        super().__init__(f"{path}: {mib(size)} is over the {mib(limit)} limit for this file")
        self.path, self.size, self.limit = path, size, limit


def read_limited(path: Path, limit: int) -> bytes:
    """A regular file's bytes, if it holds at most `limit` of them: `OverLimit` if it is
    larger (nothing is read), `OSError` if it cannot be read or is not a regular file (a FIFO
    is never waited on)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))  # its strerror says it
        if st.st_size > limit:
            raise OverLimit(path, st.st_size, limit)
        chunks, got = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - got)):
            chunks.append(chunk)
            got += len(chunk)
            if got > limit:  # it grew while being read
                raise OverLimit(path, got, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_named(path: Path, kind: str, limit: int = LAUNCH_FILE_BYTES) -> bytes:
    """A small file a command names (a compose file, an env file), whole; one input error
    when it cannot be read, is not a regular file (a FIFO is never waited on) or is over
    `limit` (then it is not `kind`)."""
    try:
        return read_limited(path, limit)
    except OverLimit:
        raise InputError(f"{path}: over {mib(limit)}, not {kind}", "check the path") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror})", "fix the path") from None
