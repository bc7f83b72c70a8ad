"""The header line: launch phase with progress and time left, launch number, elapsed, last good
time, and once ready the draft's acceptance (length, rate, a sparkline of the polls).

Progress is the bar the log printed for the step under way (`loading 53/64 · 0:03 left` while
the weights load, `cuda graph 4/6 · 0:19 left` while the graphs are captured): what is left
comes from the bar's own rate, as tqdm counts it, and counts down between two of its updates.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from eaglebug.checks import THRESHOLD, Bar
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


# The phase a bar of each kind counts (a bar is shown only while its step is under way).
_BAR_PHASE = {"loading": "loading", "capturing": "cuda_graph"}
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
    bar: reactive[Bar | None] = reactive(None)
    launch_number: reactive[int | None] = reactive(None)
    started_at: reactive[float | None] = reactive(None)  # wall clock of the current launch
    last_ready_s: reactive[float | None] = reactive(None)
    badge: reactive[str] = reactive("")
    acceptance: reactive[AcceptanceSnapshot | None] = reactive(None)

    def __init__(self, *, id: str | None = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__(id=id)
        self.clock = clock  # wall clock for "elapsed" and the time left (tests pin it)
        self._bar_seen = 0.0  # when the bar's newest state came (by `clock`)
        self.ended_at: float | None = None

    def on_mount(self) -> None:
        self.set_interval(1.0, self.refresh)

    def watch_phase(self, phase: str) -> None:
        # A launch that crashed or is ready has stopped starting: its clock stops too.
        self.ended_at = self.clock() if phase in {"crashed", "ready"} else None

    def watch_started_at(self, started_at: float | None) -> None:
        self.ended_at = None

    def watch_bar(self, bar: Bar | None) -> None:
        self._bar_seen = self.clock()

    def left_s(self) -> float | None:
        """Time left in the step under way, at its bar's own rate, counted down since the bar
        last moved; None without a bar for this phase or a rate."""
        bar = self.bar
        if bar is None or _BAR_PHASE.get(bar.kind or "") != self.phase or bar.done >= bar.total:
            return None
        remaining = bar.remaining_s
        if remaining is None:
            return None
        return max(remaining - (self.clock() - self._bar_seen), 0.0)

    def render(self) -> Text:
        text = Text(" eaglebug ", style="bold reverse")
        text.append("  ")
        text.append(self.phase.replace("_", " "), style=_PHASE_STYLE.get(self.phase, "bold"))
        bar = self.bar
        if bar is not None and _BAR_PHASE.get(bar.kind or "") == self.phase:
            text.append(f" {bar.done}/{bar.total}")
            left = self.left_s()
            if left is not None:
                text.append(f" · {_clock(left)} left")
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
