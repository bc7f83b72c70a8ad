"""CPython's cyclic garbage collector, set for the checks while they run.

Why: a check builds millions of small objects (syntax trees, the evaluator's values) and
almost no garbage cycles; memory is freed by reference counts. With the default thresholds a
collection starts every 700 allocations, and every tenth of those visits the whole heap:
in a long-lived process (the TUI) that heap holds the parsed trees the session keeps for
the next check, so a cold check there spent about as long collecting as checking. While a
check runs, collections start every 50,000 allocations and the objects that were there
before it began are left out of them (`gc.freeze`); after the last check ends, the
collector is as it was (the app's own cycles are collected as before).

The headless CLI uses the same setting for its short commands, and no collector at all for
the tree commands, whose process ends right after (`cli/parser.py`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

THRESHOLDS = (50_000, 20, 100)

_lock = threading.Lock()
_running = 0  # checks inside `few_collections` now, in any thread
_saved: tuple[int, int, int] = gc.get_threshold()


@contextlib.contextmanager
def few_collections() -> Iterator[None]:
    """Collect rarely while the body runs (nested and concurrent uses share one setting,
    restored when the last ends)."""
    global _running, _saved
    with _lock:
        if _running == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(*THRESHOLDS)
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0:
                gc.set_threshold(*_saved)
                gc.unfreeze()
