"""The rows of a followed log as byte offsets, read back from the file when they are needed.

A log view must reach every line of a log of any size (scrolling, the first error, a filter)
without keeping the lines. As Toolong does, a `LogIndex` keeps where each line starts (8 bytes
a line, in an `array`) and a descriptor of the file it came from; a line's text is read back
by offset (`os.pread`) and cleaned exactly as `LogFollower` cleaned it (ANSI removed, the last
state of a `\\r`-rewritten line, the marker of a line longer than `max_line_bytes`). Only the
texts of the newest rows stay in memory (`tail_rows`), so following a log never reads it twice.

Rows. The index is a list of segments, one per stretch of one file: each begins with a divider
row (`──── log launch-002.log ────`, `──── log truncated ────`, ...) followed by the
lines read from that file after it. A relaunch, a replaced or re-appeared file start a segment
with a new source; "deleted" and "truncated" start one on the same source. A truncated file's
earlier lines are gone from the file, so its earlier segments go from the index; so do the
oldest segments past `max_segments`. Either way `generation` counts up, as every row after them
moves (a search over an older generation is stale).

Searches (`search`) run on any thread over an `IndexView` (the segments as they were when it
was taken: lines are only ever appended) and read the file in blocks of about `BLOCK_BYTES`,
testing a whole block at once before its lines: a log of millions of lines is searched at the
speed of the regex engine, in bounded memory.
"""

from __future__ import annotations

import errno
import os
import re
import threading
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from eaglebug.logs.follow import (
    DEFAULT_MAX_LINE_BYTES,
    TRUNCATION_MARKER,
    LogLine,
    clean_line,
    strip_ansi,
)
from eaglebug.logs.rows import RowSequence

DIVIDER = "──── log "  # how a "log restarted" divider row starts
BLOCK_BYTES = 1 << 20  # what a search reads at once
MAX_SEGMENTS = 64
TAIL_ROWS = 4096


def divider_text(label: str) -> str:
    return f"{DIVIDER}{label} ────"


def display(raw: bytes, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> str:
    """A line's text as `LogFollower` shows it, from its bytes (without the newline)."""
    if len(raw) > max_line_bytes:
        text, _ = clean_line(raw[:max_line_bytes])
        return text + TRUNCATION_MARKER.format(dropped=len(raw) - max_line_bytes)
    return clean_line(raw)[0]


class LogSource:
    """One log file, open for reading back by offset: a descriptor of the very file the
    follower read (so a replaced path does not matter). Closed when dropped or `close`d."""

    def __init__(self, fd: int, name: str, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._fd = fd
        self._lock = threading.Lock()  # a read never races a close (the number may be reused)
        self.name = name
        self.max_line_bytes = max_line_bytes

    @classmethod
    def open(cls, path: Path, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> LogSource:
        return cls(os.open(path, os.O_RDONLY), path.name, max_line_bytes)

    def read(self, start: int, size: int) -> bytes:
        """Up to `size` bytes at `start` (fewer at the end of the file)."""
        with self._lock:
            if self._fd < 0:
                raise OSError(errno.EBADF, f"{self.name}: closed")
            return os.pread(self._fd, size, start)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __del__(self) -> None:
        self.close()

    def line(self, start: int, stop: int | None) -> str:
        """The text of the line at `start`; `stop` is where the next line starts, if known."""
        limit = self.max_line_bytes
        if stop is not None:
            length = stop - start  # with its newline
            raw = self.read(start, min(length, limit + 1))
            if length <= limit + 1:
                return display(raw.removesuffix(b"\n"), limit)
            text, _ = clean_line(raw[:limit])
            return text + TRUNCATION_MARKER.format(dropped=length - 1 - limit)
        raw = self.read(start, limit + 1)
        cut = raw.find(b"\n")
        if cut >= 0 or len(raw) <= limit:
            return display(raw[:cut] if cut >= 0 else raw, limit)
        length, pos = len(raw), start + len(raw)  # longer than the limit: count the rest
        while True:
            more = self.read(pos, BLOCK_BYTES)
            cut = more.find(b"\n")
            if cut >= 0 or not more:
                length += cut if cut >= 0 else 0
                break
            length, pos = length + len(more), pos + len(more)
        text, _ = clean_line(raw[:limit])
        return text + TRUNCATION_MARKER.format(dropped=length - limit)


@dataclass(frozen=True)
class Restart:
    """A divider: the log restarted (or another launch's log begins) with `label`."""

    label: str  # "launch-002.log", "truncated", "replaced", "deleted", "appeared"
    source: LogSource | None  # where the lines after it are read back from (None: nowhere yet)
    lost: bool = False  # the source was truncated: its earlier lines are gone


@dataclass(frozen=True)
class LogPart:
    """Lines of one file in order, after a divider when `restart` is set."""

    restart: Restart | None
    lines: tuple[LogLine, ...]


class Segment:
    """One stretch of one file: its divider and where each of its lines starts."""

    __slots__ = ("divider", "first_row", "offsets", "serial", "source")

    def __init__(self, divider: str | None, source: LogSource | None, serial: int) -> None:
        self.divider = divider
        self.source = source
        self.offsets = array("q")  # in bytes: where each line starts
        self.serial = serial
        self.first_row = 0

    @property
    def rows(self) -> int:
        return len(self.offsets) + (self.divider is not None)

    def text(self, local: int) -> str:
        """Line `local` of this segment (-1: the divider)."""
        if local < 0:
            return self.divider or ""
        if self.source is None:
            return ""
        stop = self.offsets[local + 1] if local + 1 < len(self.offsets) else None
        return self.source.line(self.offsets[local], stop)


@dataclass(frozen=True)
class IndexView:
    """The segments as they were: (segment, first row, lines then). Safe on any thread."""

    segments: tuple[tuple[Segment, int, int], ...]
    generation: int
    rows: int


class LogIndex(RowSequence[str]):
    """Every row of a followed log, by offset; `index[row]` is its text. One thread adds."""

    def __init__(self, max_segments: int = MAX_SEGMENTS, tail_rows: int = TAIL_ROWS) -> None:
        self.max_segments = max(max_segments, 1)
        self._segments: list[Segment] = []
        self._firsts: list[int] = []  # each segment's first row, for bisect
        self._rows = 0
        self._tail: deque[str] = deque(maxlen=max(tail_rows, 1))  # the newest rows' texts
        self._serials = 0
        self.generation = 0  # counts removals: every row after a removed one moved

    # -- adding ---------------------------------------------------------------------------
    def add(self, part: LogPart) -> int:
        """Add a part (a divider, then lines); returns how many rows went to make room."""
        removed = 0
        restart = part.restart
        if restart is not None:
            if restart.lost and restart.source is not None:
                removed += self._drop(lambda seg: seg.source is restart.source)
            self._start(divider_text(restart.label), restart.source)
            if len(self._segments) > self.max_segments:
                removed += self._drop(lambda seg: seg is self._segments[0])
        if part.lines:
            if not self._segments:
                self._start(None, None)
            segment = self._segments[-1]
            segment.offsets.extend([line.offset for line in part.lines])
            self._rows += len(part.lines)
            self._tail.extend([line.text for line in part.lines])
        return removed

    def _start(self, divider: str | None, source: LogSource | None) -> None:
        self._serials += 1
        segment = Segment(divider, source, self._serials)
        segment.first_row = self._rows
        self._segments.append(segment)
        self._firsts.append(self._rows)
        if divider is not None:
            self._rows += 1
            self._tail.append(divider)

    def _drop(self, gone: Callable[[Segment], bool]) -> int:
        kept = [seg for seg in self._segments if not gone(seg)]
        if len(kept) == len(self._segments):
            return 0
        before = self._rows
        self._segments = kept
        self._rows = 0
        self._firsts = []
        for seg in kept:
            seg.first_row = self._rows
            self._firsts.append(self._rows)
            self._rows += seg.rows
        self._tail.clear()  # the rows it held have moved; the files still hold the lines
        self.generation += 1
        return before - self._rows

    # -- reading --------------------------------------------------------------------------
    @property
    def texts_held(self) -> int:
        """Row texts kept in memory (the newest rows'); every other row is read back."""
        return len(self._tail)

    def __len__(self) -> int:
        return self._rows

    def row(self, row: int) -> str:
        tail_start = self._rows - len(self._tail)
        if row >= tail_start:
            return self._tail[row - tail_start]
        segment, local = self.locate(row)
        return segment.text(local)

    @property
    def segments(self) -> Sequence[Segment]:
        """The segments in order, oldest first (to read: only `add` changes them)."""
        return self._segments

    def segment_number(self, row: int) -> int:
        """Where in `segments` the segment of a row is."""
        return bisect_right(self._firsts, row) - 1

    def locate(self, row: int) -> tuple[Segment, int]:
        """The segment of a row and the row's line in it (-1: its divider)."""
        segment = self._segments[self.segment_number(row)]
        return segment, row - segment.first_row - (segment.divider is not None)

    def row_at_offset(self, offset: int) -> int | None:
        """The row of the line that holds byte `offset` of the file the newest rows come from
        (a finding's offset is in the file the watch reads now), or None if no row does."""
        newest = self._segments[-1].source if self._segments else None
        for segment in reversed(self._segments):
            if segment.source is not newest:
                break
            offsets = segment.offsets
            if offsets and offsets[0] <= offset:
                local = bisect_right(offsets, offset) - 1
                return segment.first_row + (segment.divider is not None) + local
        return None

    def find(self, start: int, text: str, within: int) -> int | None:
        """The first row from `start` (at most `within` rows on) that holds `text`."""
        for row in range(max(start, 0), min(start + within, self._rows)):
            if text in self[row]:
                return row
        return None

    def row_of(self, key: tuple[int, int]) -> int | None:
        """The row a `key` names now, or None once its segment is gone."""
        serial, local = key
        for segment in self._segments:
            if segment.serial == serial:
                return segment.first_row + (segment.divider is not None) + local
        return None

    def is_divider(self, row: int) -> bool:
        return self.locate(row)[1] < 0

    def key(self, row: int) -> tuple[int, int]:
        """A key for what a row shows that survives removals: (segment serial, line)."""
        segment, local = self.locate(row)
        return segment.serial, local

    def view(self) -> IndexView:
        return IndexView(
            tuple((seg, seg.first_row, len(seg.offsets)) for seg in self._segments),
            self.generation,
            self._rows,
        )


def search(
    view: IndexView,
    pattern: re.Pattern[str],
    *,
    start_row: int = 0,
    dividers: bool = False,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[list[int]]:
    """The rows whose text `pattern` finds, in order, in batches (one per block read);
    with `dividers`, every divider row too. Stops early when `cancelled()` says so."""
    for segment, first, lines in view.segments:
        batch: list[int] = []
        base = first + (segment.divider is not None)
        if dividers and segment.divider is not None and first >= start_row:
            batch.append(first)
        if segment.source is not None and lines:
            begin = max(start_row - base, 0)
            for found in _search_lines(segment, segment.source, begin, lines, pattern, cancelled):
                batch.extend(base + local for local in found)
                yield batch
                batch = []
                if cancelled():
                    return
        if batch:
            yield batch


def _search_lines(
    segment: Segment,
    source: LogSource,
    begin: int,
    lines: int,
    pattern: re.Pattern[str],
    cancelled: Callable[[], bool],
) -> Iterator[list[int]]:
    """The lines in [begin, lines) of a segment that match, a block at a time."""
    offsets = segment.offsets
    limit = source.max_line_bytes
    i = begin
    while i < lines and not cancelled():
        if i == lines - 1:  # the newest line: where it ends is not known yet
            yield [i] if pattern.search(segment.text(i)) else []
            return
        start = offsets[i]
        j = max(bisect_right(offsets, start + BLOCK_BYTES, i + 1, lines) - 1, i + 1)
        if j == i + 1 and offsets[j] - start > BLOCK_BYTES:  # one very long line
            yield [i] if pattern.search(segment.text(i)) else []
            i = j
            continue
        raw = source.read(start, offsets[j] - start)
        yield _block_matches(raw, offsets, i, j, limit, pattern)
        i = j


def _block_matches(
    raw: bytes, offsets: array[int], i: int, j: int, limit: int, pattern: re.Pattern[str]
) -> list[int]:
    """Lines [i, j) of one block (`raw`, newline-terminated) whose shown text matches.

    The block's text holds what its lines show (a `\\r`-rewritten line shows one of its states),
    so a block without a match is skipped whole; a line shown differently from its bytes is
    tested on what it shows. (A line cut at `max_line_bytes` shows a marker its bytes do not
    hold: a block with such a line is always tested line by line.)
    """
    text = strip_ansi(raw.decode("utf-8", "replace"))
    long_lines = len(raw) > limit + 1  # some line may be shown cut, with a marker
    if not long_lines and not pattern.search(text):
        return []
    base = offsets[i]
    special = long_lines or "\r" in text or b"\x1b" in raw
    found: list[int] = []
    for k, line in enumerate(text.split("\n")[: j - i]):
        if special:
            one = raw[offsets[i + k] - base : offsets[i + k + 1] - base - 1]
            if b"\r" in one or b"\x1b" in one or len(one) > limit:
                line = display(one, limit)
        if pattern.search(line):
            found.append(i + k)
    return found
