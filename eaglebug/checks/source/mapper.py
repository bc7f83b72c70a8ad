"""How work over many files is run: the `Mapper` a front end hands the index.

Why a protocol: the cold audit's costs are per file and independent (the byte-level look,
parsing what the extractors want, the flag search), and a box has cores to spare, but
`eaglebug/checks/` starts no process. The default does everything here, in order; the CLI and
the TUI's checks' worker hand in one that shares the work with a forked helper
(`eaglebug/session/forkmap.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Mapper(Protocol):
    """Runs `job` over `items` and returns the results in order; `weights` (one per item, e.g.
    file sizes) say how to split the work fairly. Results must pickle if the work is split
    across processes."""

    def __call__(
        self, job: Callable[[T], R], items: Sequence[T], weights: Sequence[int]
    ) -> list[R]: ...


class InProcess:
    """The default `Mapper`: everything here, in order. `progress(done, total)`, when given,
    hears of each item done (a front end shows how far a cold run is: files done of total)."""

    def __init__(self, progress: Callable[[int, int], None] | None = None) -> None:
        self.progress = progress

    def __call__(
        self, job: Callable[[T], R], items: Sequence[T], weights: Sequence[int]
    ) -> list[R]:
        if self.progress is None:
            return [job(item) for item in items]
        done: list[R] = []
        for item in items:
            done.append(job(item))
            self.progress(len(done), len(items))
        return done


in_process = InProcess()
