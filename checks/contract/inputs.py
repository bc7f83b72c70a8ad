"""What eaglebug agrees to read: regular files only.

A FIFO named `x.py` in a tree, or passed as `--log`, would block a read forever; a device
never ends. Every source, config and log read checks this first and skips or refuses the rest.
"""

from __future__ import annotations

import stat
from pathlib import Path


def regular_file(path: Path) -> bool:
    """Whether `path` is (or links to) a regular file."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False
