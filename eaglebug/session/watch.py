"""The launch watch: one thread that follows the current launch's log and says what it means.

Shaped like `gpu.sampler.Sampler`: a daemon thread, a callback, frozen snapshots. Each beat it
reads the state file (which launch is current), follows that launch's log with a `LogFollower`
(switching to the new log when a relaunch records one), feeds every line to the log analyzer
(`checks.logparse.LogAnalyzer`), records the launch's phase in the state file
(`Session.record_phase`) and, when anything changed, publishes a `WatchSnapshot`: the new lines
by offset (with a `LogSource` to read them back from, see `eaglebug.logs.index`), the live
progress bar, the phase and progress, the newest bar of the weight load or the CUDA graph
capture as the log printed it (`checks.read_bar`: done of total and the bar's own rate, for the
header's time left), the log's findings resolved to the audited tree's classes
(`Session.resolve`), the milestones, and the launch's number and times.

Stalls. A launch can hang without a word (a rank waiting in a collective, a CUDA graph capture
that never returns): each beat, the time since the log last moved (a line, a redrawn progress
bar) and since the memory of the GPUs the launch sees last moved (`memory_moved_at`, the
sampler's; `Session.launch_gpus`: a neighbour's job on another GPU says nothing) is handed to
`LogAnalyzer.stalled` with the phase's limit, and the `log.stalled` warning it gives joins the
findings until either moves again. Both clocks are injected (`clock`, `wall_clock`), so the
tests step through twenty minutes without waiting for them. A log that was already quiet when
the watch started on it counts from the file's modification time.

Nothing here blocks the UI or dies with it: a log that cannot be read, a corrupt state file or
a bug become a `Problem` reported once (through `on_problem`), and the watch tries again.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks import Bar, Finding, InputError, read_bar
from eaglebug.logs.follow import LogFollower, LogLine, LogProgress, LogRestarted
from eaglebug.logs.index import LogPart, LogSource, Restart
from eaglebug.session.problems import Problem, guarded
from eaglebug.session.session import Session

if TYPE_CHECKING:  # the analyzer loads on the watch's thread, after the first frame
    from eaglebug.checks import LogAnalyzer

RETRY_S = 1.0  # after a failed beat


@dataclass(frozen=True)
class WatchSnapshot:
    """What the watch knows after one read of the log; `parts` are the lines new since the
    previous snapshot (a view keeps their offsets), everything else is the whole state."""

    sequence: int
    path: str | None  # the log followed
    parts: tuple[LogPart, ...]
    live: str | None  # the \r-progress bar being drawn, if this read saw one
    phase: str
    bar: Bar | None  # the newest state of the weight load's or the graph capture's bar
    findings: tuple[Finding, ...]  # resolved to the audited tree's classes
    milestones: tuple[str, ...]
    launch_number: int | None
    started_at: float | None  # wall clock of the current launch
    last_ready_s: float | None  # how long the newest launch that got ready took
    # NVML's numbers of the GPUs the current launch sees, where its words narrow them
    # (`Session.launch_gpus`); None: every GPU
    gpus: frozenset[int] | None = None


class LaunchWatch:
    """Follows the current launch's log on a daemon thread every `interval_s`."""

    def __init__(
        self,
        session: Session,
        on_snapshot: Callable[[WatchSnapshot], None],
        *,
        interval_s: float = 0.2,
        on_problem: Callable[[Problem], None] | None = None,
        memory_moved_at: Callable[[frozenset[int] | None], float | None] | None = None,
        stall_limits: dict[str, float] | None = None,  # in seconds by phase, over the defaults
        clock: Callable[[], float] = time.monotonic,  # the clock of `memory_moved_at`
        wall_clock: Callable[[], float] = time.time,  # the clock of file times
    ) -> None:
        self.session = session
        self.interval_s = interval_s
        self.stall_limits = dict(stall_limits or {})
        self._on_snapshot = on_snapshot
        self._on_problem = on_problem
        self.memory_moved_at = memory_moved_at
        self._clock = clock
        self._wall_clock = wall_clock
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._republish = False
        self._gpus: frozenset[int] | None = None  # the current launch's (`launch_gpus`)
        self._thread: threading.Thread | None = None
        self._latest: WatchSnapshot | None = None
        self._problem: str | None = None  # the last problem reported (each is said once)
        # The follower's state, touched only by the thread that steps.
        self._watching: Path | None = None
        self._follower: LogFollower | None = None
        self._source: LogSource | None = None
        self._analyzer: LogAnalyzer | None = None
        self._raw: list[Finding] = []
        self._findings: tuple[Finding, ...] = ()
        self._stalled: Finding | None = None
        self._moved_at = self._clock()  # when the log last moved (a line, a progress bar)
        self._old_bytes = 0  # what the log held when the watch started on it
        self._live_seen: str | None = None  # the progress bar as last drawn
        self._bar: Bar | None = None  # the newest loading or capturing bar read
        self._phase = "idle"
        self._launch: tuple[int | None, float | None, float | None] = (None, None, None)
        self._sequence = 0

    # -- the thread ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="eaglebug-launch-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Stop and join the thread; False if a read still hung after `timeout_s`."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                return False
        self._thread = None
        if self._follower is not None:
            self._follower.close()
        return True

    def republish(self) -> None:
        """Publish again soon, even with nothing new: the checks changed what findings resolve to."""
        self._republish = True
        self._wake.set()

    def latest(self) -> WatchSnapshot | None:
        return self._latest

    def beat(self) -> bool | None:
        """One beat of the thread: `step()`, with what goes wrong reported (once) instead of
        raised; None when it went wrong."""
        return guarded(self.step, "log", self.session.config.workdir, self._report)

    def _run(self) -> None:
        while not self._stop.is_set():
            behind = self.beat()
            if self._stop.is_set():
                break
            if behind is None:
                self._wake.wait(RETRY_S)
            elif not behind:
                self._wake.wait(self.interval_s)
            self._wake.clear()

    def _report(self, problem: Problem) -> None:
        if problem.text() != self._problem and self._on_problem is not None:
            self._on_problem(problem)
        self._problem = problem.text()

    # -- one beat -----------------------------------------------------------------------------
    def step(self) -> bool:
        """Read what is new, publish a snapshot if anything changed; True when more is waiting."""
        from eaglebug.checks import LogAnalyzer  # after the first frame

        state = self.session.server.state()
        record = state.latest
        path = self.session.config.log_path or (Path(record.log) if record else None)
        parts: list[LogPart] = []
        if path != self._watching or self._analyzer is None:
            self._switch(path, parts)
        analyzer = self._analyzer or LogAnalyzer()
        self._analyzer = analyzer
        republish, self._republish = self._republish, False
        lines: list[LogLine] = []
        restart: Restart | None = None
        live: str | None = None
        fed = False
        for event in self._poll():
            if isinstance(event, LogLine):
                fed = True
                lines.append(event)
                analyzer.feed(event.text, event.offset)
                self._note_bar(event.text)
            elif isinstance(event, LogProgress):
                live = event.text
                analyzer.note_progress(event.text)
                self._note_bar(event.text)
            else:
                if lines or restart is not None:
                    parts.append(LogPart(restart, tuple(lines)))
                lines = []
                restart = self._restart(event)
                if event.reason in {"truncated", "replaced"}:
                    analyzer.reset()
                    self._bar = None
        if lines or restart is not None:
            parts.append(LogPart(restart, tuple(lines)))
        if self._moved(parts, live):
            self._moved_at = self._clock()

        news = bool(parts) or live is not None or republish
        if fed or parts or republish:
            raw = analyzer.findings()
            if raw != self._raw or republish:
                self._raw = raw
                nodes = self.session.config.rank_nodes
                if nodes is not None:  # several nodes' logs, merged: which node printed each
                    from eaglebug.checks import with_nodes

                    raw = with_nodes(raw, nodes())
                self._findings = tuple(self.session.resolve(raw))
                news = True
        phase = analyzer.phase if path is not None else "idle"
        own_log = record is not None and path is not None and Path(record.log) == path
        if phase != self._phase:
            if own_log:
                self.session.record_phase(phase, analyzer.ready)
            self._phase = phase
            news = True
        readies = [r.ready_after_s for r in state.launches if r.ready_after_s is not None]
        launch = (
            record.number if own_log and record else None,
            record.started_at if own_log and record else None,
            readies[-1] if readies else None,
        )
        if launch != self._launch:
            self._launch = launch
            news = True
        gpus = self.session.launch_gpus(record)
        if gpus != self._gpus:
            self._gpus = gpus
            news = True
        stalled = self._stall(analyzer) if path is not None else None
        previous = self._stalled
        if stalled is not None and previous is not None and stalled.message == previous.message:
            stalled = previous  # the same minute: nothing new to say
        if stalled != self._stalled:
            self._stalled = stalled
            news = True
        if news:
            self._publish(path, parts, live, analyzer)
        self._problem = None  # a beat went through: the next problem is news again
        return self._follower is not None and self._follower.behind

    def _note_bar(self, text: str) -> None:
        """Keep the newest state of a bar the header counts (the load's, the capture's)."""
        bar = read_bar(text)
        if bar is not None and bar.kind is not None:
            self._bar = bar

    def _moved(self, parts: list[LogPart], live: str | None) -> bool:
        """Whether the launch wrote something: a line past what the file held when the watch
        started on it (catching up on old lines is not news), a restart, a bar that moved."""
        moved = False
        for part in parts:
            if part.restart is not None and part.restart.label in {"truncated", "replaced"}:
                self._old_bytes, moved = 0, True
            if part.lines and part.lines[-1].offset >= self._old_bytes:
                moved = True
        if live is not None:
            moved = moved or (self._live_seen is not None and live != self._live_seen)
            self._live_seen = live
        return moved

    def _stall(self, analyzer: LogAnalyzer) -> Finding | None:
        """`log.stalled` when neither the log nor the GPUs' memory moved for longer than the
        phase allows (None in a phase without a limit: ready, crashed)."""
        moved = self._moved_at
        memory = None
        if self.memory_moved_at is not None:  # the launch's own GPUs (None: every one)
            memory = self.memory_moved_at(self._gpus)
        if memory is not None:
            moved = max(moved, memory)
        return analyzer.stalled(
            max(self._clock() - moved, 0.0), self.stall_limits, gpus_watched=memory is not None
        )

    def _switch(self, path: Path | None, parts: list[LogPart]) -> None:
        """Follow another log (a relaunch recorded a new one) from its start."""
        from eaglebug.checks import LogAnalyzer

        if self._follower is not None:
            self._follower.close()
        self._watching = path
        self._follower = LogFollower(path, from_start=True) if path is not None else None
        self._source = self._new_source()
        self._analyzer = LogAnalyzer()
        self._raw, self._findings, self._phase = [], (), "idle"
        quiet_s, self._old_bytes = self._quiet_for(path)
        self._stalled, self._moved_at, self._live_seen = None, self._clock() - quiet_s, None
        self._bar = None
        if path is not None:
            parts.append(LogPart(Restart(path.name, self._source), ()))

    def _quiet_for(self, path: Path | None) -> tuple[float, int]:
        """How long the file has not changed, and its size (0, 0 for a log not written yet)."""
        try:
            info = os.stat(path) if path is not None else None
        except OSError:
            info = None
        if info is None:
            return 0.0, 0
        return max(self._wall_clock() - info.st_mtime, 0.0), info.st_size

    def _poll(self) -> list[LogLine | LogProgress | LogRestarted]:
        if self._follower is None:
            return []
        try:
            return self._follower.poll()
        except OSError as exc:
            raise InputError(
                f"{self._watching}: cannot read the log ({exc.strerror or exc})",
                "check the file's permissions; eaglebug tries again every second",
            ) from exc

    def _new_source(self) -> LogSource | None:
        fd = self._follower.dup_file() if self._follower is not None else None
        name = self._watching.name if self._watching is not None else "log"
        return LogSource(fd, name) if fd is not None else None

    def _restart(self, event: LogRestarted) -> Restart:
        if event.reason in {"appeared", "replaced"}:
            self._source = self._new_source()  # the follower reads the new file already
        return Restart(event.reason, self._source, lost=event.reason == "truncated")

    def _publish(
        self, path: Path | None, parts: list[LogPart], live: str | None, analyzer: LogAnalyzer
    ) -> None:
        self._sequence += 1
        snapshot = WatchSnapshot(
            sequence=self._sequence,
            path=str(path) if path is not None else None,
            parts=tuple(parts),
            live=live,
            phase=self._phase if path is not None else "idle",
            bar=self._bar,
            findings=self._findings + ((self._stalled,) if self._stalled is not None else ()),
            milestones=tuple(m.label for m in analyzer.milestones),
            launch_number=self._launch[0],
            started_at=self._launch[1],
            last_ready_s=self._launch[2],
            gpus=self._gpus,
        )
        self._latest = snapshot
        self._on_snapshot(snapshot)
