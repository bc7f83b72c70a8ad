"""SGLang log text -> the launch phase, weight-loading progress and `log.<category>` findings.

`LogAnalyzer` takes one complete line at a time (`feed`), so a live follower can drive it; its
memory stays bounded (tracebacks are kept with a cap on their lines, findings are deduplicated
by category and normalised message, and eight ranks printing one traceback are one finding that
lists the ranks). `analyze_text` and `analyze_file` are the one-shot helpers; `analyze_file` reads
big chunks and only feeds the lines near what the pattern tables can match (`logs/scan.py`).

Phases: launching -> loading (weights, with n/N shards) -> kv_cache -> cuda_graph -> ready, or
crashed. Each rank moves through them on its own; the phase shown is the slowest rank's, so eight
ranks logging the same milestone a few seconds apart do not make it flicker, and a draft model
that starts loading after the target's CUDA graphs moves it back to loading.
"""

from __future__ import annotations

import re
from collections import deque
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.findings import Finding, Severity
from eaglebug.checks.logs import patterns as lp
from eaglebug.checks.logs.blocks import TracebackReading, severity_of, where_of
from eaglebug.checks.logs.book import (
    FindingBook,
    Where,
    finding_json,
    rank_summary,
    sort_ranks,
)
from eaglebug.checks.logs.lines import At, LineReading
from eaglebug.checks.logs.memory import MemoryLines, MemoryLog
from eaglebug.checks.logs.phases import MilestoneEvent, Progress, bar_progress
from eaglebug.checks.logs.reports import stalled, warmup_result
from eaglebug.checks.logs.results import Result
from eaglebug.checks.logs.traceback import Block, classify

__all__ = [
    "LogAnalyzer",
    "MilestoneEvent",
    "Progress",
    "analyze_file",
    "analyze_text",
    "finding_json",
    "rank_summary",
    "read_memory_file",
    "sort_ranks",
]

MAX_IMPORT_ERRORS = 8
LINE_CHARS = 64 * 1024  # characters of one line looked at


_NO_PREFIX = object()  # "the previous line had no SGLang prefix"


class LogAnalyzer(LineReading, TracebackReading):
    """Incremental: `feed` each complete line; read `phase`, `progress`, `findings()` any time."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new launch, or a truncated log)."""
        self.lines = 0
        self._rank_phase: dict[str, str] = {}
        self._rank_time: dict[str, str | None] = {}  # when each rank logged its last milestone
        self._reached: dict[str, str | None] = {}  # when the first rank reached each phase
        self._ready = False
        self._crashed_during: str | None = None
        self._crash_blind = False  # it crashed before the log said any phase
        self._progress: Progress | None = None
        self._milestones: list[MilestoneEvent] = []
        self._book = FindingBook()
        self._blocks: dict[str | None, Block] = {}  # unfinished tracebacks, by rank
        self._current: Block | None = None
        self._prev_rank: object = _NO_PREFIX  # str | None | _NO_PREFIX
        self._prev_lead_in = False  # the previous line could introduce a traceback
        self._last_time: str | None = None
        self._line_rank: str | None = None  # the rank a foreign prefix named (`[rank3]:`)
        self._line_level: str | None = None  # the log level a foreign prefix named (glog's E)
        self._ring: deque[str] = deque(maxlen=lp.CONTEXT_LINES)
        self._warmup_failure: str | None = None  # what the failed warmup request said
        self._hints: list[str] = []  # phases the failures' frames and words point at
        self._ranks_seen: set[str] = set()  # every rank a line named
        self._memory = MemoryLines()  # SGLang's memory lines, before "ready"
        self._terminate: tuple[str, ...] | None = None  # a C++ abort's first line, until what()
        self.lines_cut = 0  # lines longer than the reader keeps (their start was read)
        self.first_cut_offset: int | None = None

    # --- what it knows ------------------------------------------------------------------------

    @property
    def last_time(self) -> str | None:
        """The newest timestamp of a prefixed line (server local time)."""
        return self._last_time

    @property
    def progress(self) -> Progress | None:
        return self._progress

    @property
    def milestones(self) -> tuple[MilestoneEvent, ...]:
        return tuple(self._milestones)

    @property
    def memory(self) -> MemoryLog | None:
        """What the launch's own memory lines measured (None: it logged none)."""
        return self._memory.result()

    @property
    def ready(self) -> bool:
        """The server said it is ready: from here on only crash lines matter."""
        return self._ready

    @property
    def busy(self) -> bool:
        """A traceback is still open: the lines that follow belong to it."""
        return self._current is not None or bool(self._blocks)

    def interesting(self, line: str) -> bool:
        """Would `feed` act on this line beyond keeping it as context? (The scan's contract.)"""
        if self._ready:
            return any(n in line for n in lp.SERVING_NEEDLES)
        return bool(lp.LAUNCH_LINE_RX.search(line)) or any(n in line for n in lp.LAUNCH_NEEDLES)

    # --- input --------------------------------------------------------------------------------

    def feed(self, line: str, offset: int | None = None) -> None:
        """One complete line (its newline may be there or not); `offset` where it starts."""
        self.lines += 1
        self._feed(line, offset, self.lines)

    def feed_at(self, line: str, offset: int, cut: bool = False) -> None:
        """One line at byte `offset`, when lines in between were skipped (no line numbers);
        `cut`: the line was longer than the reader keeps, and this is its start."""
        if cut:
            self.note_cut(offset)
        self._feed(line, offset, None)

    def note_cut(self, offset: int | None) -> None:
        """A line longer than the reader keeps starts at `offset`: only its start is read."""
        self.lines_cut += 1
        if self.first_cut_offset is None:
            self.first_cut_offset = offset

    def note_progress(self, text: str) -> None:
        """The latest state of a tqdm bar still being drawn (no newline yet): progress only.

        SGLang 0.5.23's bar has no newline until it closes, so a live follower reports its states
        separately (`logfollow.LogProgress`); they are not lines and change nothing else.
        """
        if not self._ready and lp.PROGRESS_MARK in text:
            bars = list(lp.PROGRESS_RX.finditer(text))
            if bars:
                self._progress = bar_progress(bars[-1]) or self._progress

    def finish(self) -> None:
        """The log ended: tracebacks still open are complete or cut off."""
        if self._current is not None:
            self._close(self._current)
        for block in list(self._blocks.values()):
            self._close(block)

    def _feed(self, line: str, offset: int | None, line_no: int | None) -> None:
        if len(line) > LINE_CHARS:
            self.note_cut(offset)
            line = line[:LINE_CHARS]
        line = line.rstrip("\n")
        if line.startswith('{"log":'):
            line = lp.unwrap_record(line)
        if "\x1b" in line:
            line = lp.ANSI_RX.sub("", line)
        if "\r" in line or lp.PROGRESS_MARK in line:
            line = self._progress_line(line)
        line = line.rstrip("\r")
        self._age()
        line, self._line_rank, self._line_level = (
            lp.strip_foreign(line) if line else (line, None, None)
        )
        if line.endswith("across cluster]"):
            line = lp.RAY_REPEATED_RX.sub("", line)
        m = lp.PREFIX_RX.match(line)
        if m is None:
            took = self._unprefixed(line, offset, line_no)
        else:
            self._prefixed(m, line, offset, line_no)
            took = False
        self._ring.append("" if took else line)

    def _progress_line(self, line: str) -> str:
        """tqdm joins its updates with `\\r`: keep the newest bar, return what follows it."""
        if self._ready:
            return line.rsplit("\r", 1)[-1] if "\r" in line else line
        bars = list(lp.PROGRESS_RX.finditer(line))
        if not bars:
            return line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line
        last = bars[-1]
        self._progress = bar_progress(last) or self._progress
        rest = line[last.end() :]
        at = rest.find("[20")  # a log line glued after the bar
        return rest[at:] if at >= 0 and lp.PREFIX_RX.match(rest[at:]) else ""

    def _unprefixed(self, line: str, offset: int | None, line_no: int | None) -> bool:
        """A line without an SGLang prefix; True when a traceback took it."""
        prev_rank, self._prev_rank = self._prev_rank, _NO_PREFIX
        prev_lead_in, self._prev_lead_in = self._prev_lead_in, False
        if self._current is not None:
            if self._current.add(line):
                return True
            self._close(self._current)
        elif self._blocks and lp.TRACEBACK not in line:
            block = next(reversed(self._blocks.values()))  # lines of interleaved tracebacks
            if block.add(line):
                return True
            self._close(block)
        if not line or not self.interesting(line):
            return False
        if not self._ready and lp.SERVING_LINE_RX.match(line):  # unprefixed (0.3's uvicorn)
            at = At(self._rank_label(self._line_rank), line_no, offset, self._last_time)
            self._milestone(lp.SERVING_MILESTONE, at, line)
            return False
        if (
            not self._ready
            and line.lstrip().startswith(lp.FRAME_NEEDLE)
            and self._current is None
            and not self._blocks
            and lp.FRAME_RX.match(line)
        ):
            # A traceback whose header the log does not have (it starts inside one).
            self._open(At(self._line_rank, line_no, offset, self._last_time), None, "")
            assert self._current is not None
            self._current.add(line)
            return True
        if lp.TRACEBACK in line:
            # `logger.exception(msg)` prints the traceback on the lines after its message.
            rank = prev_rank if isinstance(prev_rank, str) and prev_lead_in else None
            wrapper = line[: line.index(lp.TRACEBACK)]
            self._open(At(rank, line_no, offset, self._last_time), None, wrapper)
            return True
        at = At(self._rank_label(self._line_rank), line_no, offset, self._last_time)
        if at.rank:
            self._ranks_seen.add(at.rank)
        if self._ready and line.startswith(lp.CPP_RAISED):
            self._cpp_abort(at)
            return False
        if not self._signals(line, at):
            self._single_line(line, at)
        return False

    def _cpp_abort(self, at: At) -> None:
        """A C++ exception's dump (`Exception raised from ... (most recent call first):`) while
        serving: read the abort's lines above it (`terminate called ...`, `what(): ...`, NCCL's
        "taking the entire process down"), which the serving scan does not look for on their
        own (their words are common in decode lines; this line's are not)."""
        for previous in list(self._ring):
            if previous and (
                lp.TERMINATE_RX.match(previous.strip())
                or lp.CPP_WHAT_RX.search(previous)
                or lp.FATAL_WORDS_RX.search(previous)
            ):
                self._single_line(previous, at)

    def _prefixed(
        self, m: re.Match[str], line: str, offset: int | None, line_no: int | None
    ) -> None:
        rank = m["ranks"].strip() or self._rank_label(self._line_rank)
        if m["level"]:
            self._line_level = m["level"]
        if rank:
            self._ranks_seen.add(rank)
        time = m["ts"]
        self._last_time = time
        self._prev_rank = rank
        self._prev_lead_in = bool(lp.LEAD_IN_RX.search(line, m.end()))
        if self._current is not None:
            if self._current.complete:
                self._close(self._current)
            self._current = None  # unfinished: waits in self._blocks for its other lines
        if not self.interesting(line):
            return
        message = line[m.end() :]
        at = At(rank, line_no, offset, time)
        handled = False  # a line a specific reader took is not also a one-line failure
        if lp.TRACEBACK in message:
            hit = lp.HIT_EXCEPTION_RX.search(message)
            process = hit[1] if hit else None
            if lp.WARMUP_FAILED_RX.search(message):
                process = "warmup"
            self._open(at, process, m["wrap"])
        if not self._ready:
            self._memory.feed(rank or "", message)
            for milestone in lp.MILESTONES:
                if milestone.rx.match(message):
                    self._milestone(milestone, at, message)
                    break
            allowed = lp.ALLOWED_CONTEXT_RX.match(message)
            if allowed:
                self._allowed_context(allowed, at)
                handled = True
            imported = lp.IMPORT_ERROR_RX.match(message)
            errors = self._book.import_errors
            if imported:
                handled = True
                if len(errors) < MAX_IMPORT_ERRORS:
                    errors.append(f"{imported['module']}: {imported['error'][:300]}")
        if self._signals(message, at) or handled or lp.TRACEBACK in message:
            return
        self._single_line(message, at)

    # --- findings -----------------------------------------------------------------------------

    def findings(self) -> list[Finding]:
        """A snapshot, in the order the problems first appeared; open tracebacks included."""
        pending: list[tuple[Result, Severity, Where]] = []
        for block in list(self._blocks.values()):
            if not block.complete:
                continue
            result = classify(block)
            if not (result.generic or result.interrupt):
                pending.append((result, severity_of(block, result), where_of(block)))
        crashed = self.crashed_during
        if crashed == "warmup" and self._warmup_failure:
            pending.append((warmup_result(self._warmup_failure), "error", _nowhere(crashed)))
        desync = self._desync() if crashed is not None else None
        if desync is not None and crashed is not None:
            pending.append((desync, "warning", _nowhere(crashed)))
        return self._book.snapshot(pending, crashed)

    def stalled(
        self, silent_s: float, after_s: dict[str, float] | None = None, gpus_watched: bool = False
    ) -> Finding | None:
        """`log.stalled` if nothing new came for longer than the phase allows (`gpus_watched`:
        the silence also counts GPU memory, which did not move either)."""
        return stalled(self.phase, self._last_time, silent_s, after_s, gpus_watched)

    def to_json(self) -> dict[str, Any]:
        """`{"phase", "progress", "findings"}` as the CLI prints it (plus `crashed_during`)."""
        return {
            "phase": self.phase,
            "crashed_during": self.crashed_during,
            "progress": self._progress.to_json() if self._progress else None,
            "findings": [finding_json(f) for f in self.findings()],
            **({"lines_cut": self.cut_json()} if self.lines_cut else {}),
        }

    def cut_json(self) -> dict[str, int | None]:
        """The lines longer than the reader keeps: how many, where the first starts, the cap."""
        return {
            "count": self.lines_cut,
            "first_offset": self.first_cut_offset,
            "kept_bytes": LINE_CHARS,
        }


def _nowhere(phase: str) -> Where:
    return Where(None, None, None, None, phase)


def analyze_text(text: str) -> LogAnalyzer:
    """Every line of `text` through a fresh analyzer (lines split on `\\n` only)."""
    analyzer = LogAnalyzer()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if lp.newest_first(text[: 64 * 1024].encode("utf-8", "replace")):
        lines.reverse()
    for line in lines:
        analyzer.feed(line)
    analyzer.finish()
    return analyzer


def analyze_file(path: str | Path, until_ready: bool = False) -> LogAnalyzer:
    """A whole log file through the fast byte-level scan (`logs/scan.py`); `until_ready`: only
    the launch, up to the server's "ready" (what the memory lines need). Raises `OSError`,
    `NotRegularFile` for a FIFO or a device."""
    from eaglebug.checks.logs.scan import scan_file

    analyzer = LogAnalyzer()
    scan_file(Path(path), analyzer, until_ready=until_ready)
    analyzer.finish()
    return analyzer


def read_memory_file(path: Path) -> MemoryLog | None:
    """The memory a launch's log measured, read by the one scan of the log reader up to the
    server's "ready" (the memory lines come before it). None when the log has none, cannot be
    read, or is not a regular file (a FIFO left where a log was would block the reader)."""
    try:
        return analyze_file(path, until_ready=True).memory
    except OSError:
        return None
