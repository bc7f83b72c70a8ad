"""How far a run of the checks is: the stage under way, and the files done of total.

Why: on a tree the checks have not seen (a new release, a cold cache) they take seconds, and a
screen that only says "running the checks…" for six seconds looks hung. The engine reports
through plain callbacks (`preflight(progress=...)` for each stage it starts,
`InProcess(progress=...)` for each file its mapper is done with, `TreeIndex(parsed=...)` for
each file it parses as the audit reaches it); `ProgressTracker` turns them into
`CheckProgress` values for the session's caller, at most one per percent of a mapped batch, so
a 2,000-file walk is a hundred reports, not two thousand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

FIRST_STAGE = "starting"  # before the engine said anything (its imports, locating the tree)
STEPS = 100  # reports of a stage's files at most (one per percent)


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

    def __init__(self, report: Callable[[CheckProgress], None]) -> None:
        self._report = report
        self._stage = FIRST_STAGE
        self._last_done = 0
        self._parsed = 0  # files parsed in this stage
        self._report(CheckProgress(FIRST_STAGE))

    def stage(self, name: str) -> None:
        """`preflight`'s callback: a stage starts."""
        self._stage, self._last_done, self._parsed = name, 0, 0
        self._report(CheckProgress(name))

    def files(self, done: int, total: int) -> None:
        """The mapper's callback: `done` of `total` files looked at, in this batch."""
        if done < self._last_done:  # a new batch of files within the stage
            self._last_done = 0
        if done == total or done - self._last_done >= -(-total // STEPS):  # a percent, up
            self._last_done = done
            self._report(CheckProgress(self._stage, done, total))

    def parsed(self, _rel: str) -> None:
        """The index's callback: one more file parsed in this stage (each one reported: a
        parse takes milliseconds, and the UI keeps only the newest of a burst)."""
        self._parsed += 1
        self._report(CheckProgress(self._stage, parsed=self._parsed))
