"""The header line: launch phase with progress and ETA, launch number, elapsed, last good time,
and once ready the draft's acceptance (length, rate, a sparkline of the polls)."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from eaglebug.checks import THRESHOLD
from eaglebug.session.acceptwatch import AcceptanceSnapshot

_PHASE_STYLE = {
    "launching": "bold cyan",
    "loading": "bold yellow",
    "kv_cache": "bold yellow",
    "cuda_graph": "bold yellow",
    "ready": "bold green",
    "crashed": "bold red",
    "idle": "dim",
}


_BARS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 12


def sparkline(values: list[float], top: float = 4.0) -> str:
    """Acceptance lengths as bars from 1.0 (nothing accepted) to `top` (or the highest seen)."""
    top = max(top, *values) if values else top
    span = max(top - 1.0, 1e-9)
    return "".join(
        _BARS[min(len(_BARS) - 1, max(0, round((v - 1.0) / span * (len(_BARS) - 1))))]
        for v in values
    )


def _clock(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class PhaseHeader(Static):
    phase: reactive[str] = reactive("idle")
    progress: reactive[tuple[int, int, int | None] | None] = reactive(None)
    launch_number: reactive[int | None] = reactive(None)
    started_at: reactive[float | None] = reactive(None)  # wall clock of the current launch
    last_ready_s: reactive[float | None] = reactive(None)
    badge: reactive[str] = reactive("")
    acceptance: reactive[AcceptanceSnapshot | None] = reactive(None)

    def __init__(self, *, id: str | None = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__(id=id)
        self.clock = clock  # wall clock for "elapsed" (tests pin it)
        self._progress_seen: list[tuple[float, int]] = []  # (clock, shards done) for the ETA
        self.ended_at: float | None = None

    def on_mount(self) -> None:
        self.set_interval(1.0, self.refresh)

    def watch_phase(self, phase: str) -> None:
        # A launch that crashed or is ready has stopped starting: its clock stops too.
        self.ended_at = self.clock() if phase in {"crashed", "ready"} else None

    def watch_started_at(self, started_at: float | None) -> None:
        self.ended_at = None

    def watch_progress(self, progress: tuple[int, int, int | None] | None) -> None:
        if progress is None:
            self._progress_seen.clear()
        elif not self._progress_seen or self._progress_seen[-1][1] != progress[0]:
            self._progress_seen.append((self.clock(), progress[0]))

    def eta_s(self) -> float | None:
        """Time left while loading, from the pace at which shards finished so far."""
        if self.progress is None or len(self._progress_seen) < 2:
            return None
        done, total, _ = self.progress
        (t0, d0), (t1, d1) = self._progress_seen[0], self._progress_seen[-1]
        if d1 <= d0 or t1 <= t0 or done >= total:
            return None
        return (total - done) * (t1 - t0) / (d1 - d0)

    def render(self) -> Text:
        text = Text(" eaglebug ", style="bold reverse")
        text.append("  ")
        text.append(self.phase.replace("_", " "), style=_PHASE_STYLE.get(self.phase, "bold"))
        if self.progress is not None and self.phase == "loading":
            done, total, percent = self.progress
            pct = percent if percent is not None else (100 * done // total if total else 0)
            text.append(f" {done}/{total} shards {pct}%")
            eta = self.eta_s()
            if eta is not None:
                text.append(f" ~{_clock(eta)} left", style="dim")
        if self.launch_number is not None:
            text.append(f"  │ launch {self.launch_number}")
        if self.started_at is not None:
            if self.ended_at is not None:
                text.append(f"  │ took {_clock(self.ended_at - self.started_at)}")
            else:
                text.append(f"  │ {_clock(self.clock() - self.started_at)} elapsed")
        if self.last_ready_s is not None and self.phase != "ready":
            text.append(f"  │ last ready in {_clock(self.last_ready_s)}", style="green")
        self._render_acceptance(text)
        if self.badge:
            text.append("  ")
            text.append(f" {self.badge} ", style="bold black on yellow")
        return text

    def _render_acceptance(self, text: Text) -> None:
        snap = self.acceptance
        if snap is None or snap.url is None or self.phase != "ready":
            return
        latest = snap.latest
        if latest is None:
            state = "no server" if snap.state == "no server" else "waiting for requests"
            text.append(f"  │ accept: {state}", style="dim")
            return
        style = "bold red" if latest.length < THRESHOLD else "bold green"
        text.append("  │ accept ")
        text.append(f"{latest.length:.2f}", style=style)
        if latest.rate is not None:
            text.append(f" · {100 * latest.rate:.0f}%")
        lengths = [r.length for r in snap.reports[-SPARK_POINTS:]]
        if len(lengths) > 1:
            text.append(f" {sparkline(lengths)}", style=style.replace("bold ", ""))
        if snap.state == "no server":
            text.append(" (no server)", style="dim")
