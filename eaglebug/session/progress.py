"""How far a run of the checks is: the stage under way, and the files done of total.

Why: on a tree the checks have not seen (a new release, a cold cache) they take seconds, and a
screen that only says "running the checks…" for six seconds looks hung. The engine reports
through plain callbacks (`preflight(progress=...)` for each stage it starts,
`InProcess(progress=...)` for each file its mapper is done with, `TreeIndex(parsed=...)` for
each file it parses as the audit reaches it); `ProgressTracker` turns them into
`CheckProgress` values for the session's caller: every stage as it starts and every batch of
files as it ends, the counts in between at most ten times a second. A person reads no faster,
and each report costs the screen a repaint while the checks share the interpreter with it (a
report per file made a cold run in the TUI a third slower).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

FIRST_STAGE = "starting"  # before the engine said anything (its imports, locating the tree)
EVERY_S = 0.1  # the least time between two reports of counts within a stage


@dataclass(frozen=True)
class CheckProgress:
    """The stage the checks are in, and within it the files done of total (0 of 0: none) or,
    where the stage parses files as it reaches them (no total known), how many it parsed."""

    stage: str
    done: int = 0
    total: int = 0
    parsed: int = 0

    def text(self) -> str:
        """`reading the tree · 812/2034 files`, `interface audit · 212 files parsed`."""
        if self.total:
            return f"{self.stage} · {self.done}/{self.total} files"
        if self.parsed:
            return f"{self.stage} · {self.parsed} files parsed"
        return self.stage


class ProgressTracker:
    """The engine's callbacks in, `CheckProgress` out (on the thread that runs the checks)."""

    def __init__(
        self,
        report: Callable[[CheckProgress], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = EVERY_S,
    ) -> None:
        self._report = report
        self._clock = clock
        self._every_s = every_s
        self._stage = FIRST_STAGE
        self._parsed = 0  # files parsed in this stage
        self._last_s = clock()  # when counts were last reported
        self._report(CheckProgress(FIRST_STAGE))

    def stage(self, name: str) -> None:
        """`preflight`'s callback: a stage starts (always reported)."""
        self._stage, self._parsed, self._last_s = name, 0, self._clock()
        self._report(CheckProgress(name))

    def files(self, done: int, total: int) -> None:
        """The mapper's callback: `done` of `total` files looked at, in this batch (its end
        always reported)."""
        if done == total or self._due():
            self._report(CheckProgress(self._stage, done, total))

    def parsed(self, _rel: str) -> None:
        """The index's callback: one more file parsed in this stage."""
        self._parsed += 1
        if self._due():
            self._report(CheckProgress(self._stage, parsed=self._parsed))

    def _due(self) -> bool:
        now = self._clock()
        if now - self._last_s < self._every_s:
            return False
        self._last_s = now
        return True
