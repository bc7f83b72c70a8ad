"""The launch phase of `LogAnalyzer`: each rank's milestones, the phase shown (the slowest
rank's), the phase a crash happened in, and the weight-loading bar. The base of the two
failure halves (`LineReading`, `TracebackReading`), which ask it the phase; the state it reads
is `LogAnalyzer.reset`'s.

Why apart: the phase is one small state machine every failure reader asks (`_phase_now`), and
a reader of it should not have to find it among the line and traceback handling.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eaglebug.checks.contract import codec
from eaglebug.checks.contract.numbers import int_text
from eaglebug.checks.logs import patterns as lp
from eaglebug.checks.logs.book import FindingBook, Where
from eaglebug.checks.logs.reports import desync, warmup_result
from eaglebug.checks.logs.results import Result
from eaglebug.checks.logs.traceback import Block

if TYPE_CHECKING:  # the reading halves build on this one: `At` is theirs
    from eaglebug.checks.logs.lines import At

MAX_MILESTONES = 512


@dataclass(frozen=True)
class Progress:
    """The newest weight-loading bar: `done` of `total` shards."""

    done: int
    total: int
    percent: int
    label: str

    def to_json(self) -> dict[str, Any]:
        return codec.named(self)


@dataclass(frozen=True)
class MilestoneEvent:
    phase: str
    label: str
    rank: str | None
    time: str | None
    line: int | None
    offset: int | None
    text: str


class PhaseReading:
    """The phase half of `LogAnalyzer` (see its state in `LogAnalyzer.reset`)."""

    _book: FindingBook
    _rank_phase: dict[str, str]
    _rank_time: dict[str, str | None]
    _reached: dict[str, str | None]
    _ready: bool
    _crashed_during: str | None
    _crash_blind: bool
    _progress: Progress | None
    _milestones: list[MilestoneEvent]
    _last_time: str | None
    _hints: list[str]
    _ranks_seen: set[str]
    _open_fatal: Callable[[], Block | None]  # `TracebackReading`'s

    @property
    def phase(self) -> str:
        if self._crashed_during is not None or self._open_fatal() is not None:
            return "crashed"
        if self._ready:
            return "ready"
        if not self._rank_phase:
            return "loading" if self._progress else "launching"
        slowest = min(self._behind().values(), key=lp.PHASE_ORDER.__getitem__)
        return "loading" if slowest == "launching" and self._progress else slowest

    def _behind(self) -> dict[str, str]:
        """The phase of each rank that is behind: a rank whose last milestone came in the same
        second as the first rank reached the furthest step is not (eight ranks log a step
        within a second; a log cut there has only some of them say the next one)."""
        furthest = max(self._rank_phase.values(), key=lp.PHASE_ORDER.__getitem__)
        reached = self._reached.get(furthest)
        return {
            rank: phase
            for rank, phase in self._rank_phase.items()
            if phase == furthest or reached is None or self._rank_time.get(rank) != reached
        }

    @property
    def crashed_during(self) -> str | None:
        """The phase the launch was in when it crashed; for a log that never says where it
        is (a fragment), the furthest phase its failures' frames and words point at."""
        crashed = self._crashed_during
        if crashed is None:
            block = self._open_fatal()
            crashed = block.phase if block is not None else None
        if crashed == "launching" and self._hints and self._crash_blind:
            return max(self._hints, key=lp.PHASE_ORDER.__getitem__)
        return crashed

    def _milestone(self, milestone: lp.Milestone, at: At, message: str) -> None:
        if milestone.phase == "ready":
            self._ready = True
        else:
            self._rank_phase[at.rank or ""] = milestone.phase
            self._rank_time[at.rank or ""] = at.time
            self._reached.setdefault(milestone.phase, at.time)
        if len(self._milestones) < MAX_MILESTONES:
            event = MilestoneEvent(
                milestone.phase,
                milestone.label,
                at.rank,
                at.time,
                at.line,
                at.offset,
                message[:300],
            )
            self._milestones.append(event)

    def _phase_now(self, rank: str | None = None) -> str:
        """The launch phase, or the one it crashed in; a failure on a rank is in that rank's
        phase, one that names no rank in the furthest phase any rank reached."""
        if self.crashed_during is not None:
            return self.crashed_during
        phase = self.phase
        if phase in {"ready", "crashed"} or not self._rank_phase:
            return phase
        furthest = max(self._rank_phase.values(), key=lp.PHASE_ORDER.__getitem__)
        if rank is not None and rank in self._rank_phase:
            return self._rank_phase[rank]
        if rank is not None and furthest != "launching":
            # A rank that never said it got as far as the others is still in the step before.
            return lp.PHASES[lp.PHASE_ORDER[furthest] - 1]
        return furthest

    def _rank_label(self, label: str | None) -> str | None:
        """torch's `rankN` is SGLang's `TPN` when every rank the log names is a TP rank (one
        node, no DP or PP); otherwise it stays `rankN`."""
        if label is None or not label.startswith("rank"):
            return label
        named = self._ranks_seen | set(self._rank_phase)
        if named and all(r.startswith("TP") and " " not in r for r in named if r):
            return f"TP{label[4:]}"
        return label

    def _seen_phase(self) -> bool:
        """Has the log said where the launch is (a milestone, a progress bar)?"""
        return bool(self._rank_phase) or self._ready or self._progress is not None

    def _crash(self, phase: str) -> None:
        if self._crashed_during is None:
            self._crashed_during = phase
            self._crash_blind = not self._seen_phase()  # nothing had said where it was
            if phase == "warmup":
                self._book.add(
                    warmup_result(), "error", Where(None, None, None, self._last_time, phase)
                )

    def _desync(self) -> Result | None:
        return desync(self._rank_phase, self._ranks_seen)


def bar_progress(bar: re.Match[str]) -> Progress | None:
    """A tqdm bar's counts (None for counts no bar has: a 5,000-digit one is no number)."""
    done, total, pct = (int_text(bar[k], lo=0) for k in ("done", "total", "pct"))
    if done is None or total is None or pct is None:
        return None
    return Progress(done, total, pct, bar["desc"].strip())
