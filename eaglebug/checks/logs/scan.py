"""The whole-file fast path: find the few lines worth parsing in big chunks of bytes.

A long SGLang log is almost all `Decode batch` lines. Instead of a Python loop over every line,
the file is read in 8 MiB chunks and searched for the literal text of what the readers act on
(the needles of `patterns.py`; before the server is ready also one regex whose literal start
`] ` lets the engine jump from line to line). Only the lines around a hit go through
`LogAnalyzer`: the `CONTEXT_LINES` before it (for the rank a traceback inherits, and what a C++
abort printed), the hit, and every line after it while a traceback is open. Lines in between
are skipped without being decoded. Every reader rides this one scan: the phase, the findings and
the memory lines (`MemoryLines`, fed by the analyzer before "ready").

The prefilter. `bytes.find` of one needle runs at 1-3 GB/s on a log (CPython's search skips by
the needle's last byte, which for `Error: ` is a space); a dozen needles, one pass each, cost
several times `grep -cE`. Searching for a single byte is `memchr`, over 10 GB/s. So each needle
is looked for by its rarest byte in the block being searched (counted on a sample of it), and
only where that byte occurs is the whole needle compared; a needle whose rare byte turns out
common (more false hits than one per `FALSE_HIT_BYTES` of the block) falls back to `bytes.find`
of the whole needle, so no block costs much more than a plain search. (Measured on the 1 GB benchmark log,
2 cores: `ahocorasick_rs` 1.0.3 and `google-re2` searched 0.25-0.4 GB/s, slower than this.)

Before "ready" the launch needles (a hundred) are searched in windows of `LAUNCH_WINDOW_BYTES`,
so a launch that becomes ready early in a chunk does not pay for them over the whole chunk.

The contract with `LogAnalyzer.feed`: a line it would act on is one `interesting()` accepts, and
that is exactly what the needles and the regex find, so the fast path and feeding every line
give the same phase, progress and findings. Positions are byte offsets: counting every newline
of a 1 GB file would cost more than the search itself.

Bounds: a line is kept up to `MAX_LINE_BYTES` (the rest is cut, and the analyzer is told, so the
front ends say so once); a line longer than the buffer is not read further than that; the file
must be a regular file (a FIFO would block the reader forever), checked on the open descriptor.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Protocol

from eaglebug.checks.logs import patterns as lp

CHUNK_BYTES = 8 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024  # of one line, decoded and fed
LAUNCH_WINDOW_BYTES = 256 * 1024  # before "ready": how far the launch needles are searched ahead
SAMPLE_BYTES = 16 * 1024  # of a block, to count how rare each needle's bytes are in it
# A false hit (the rare byte without its needle) costs a Python step (~4 us), about what `find`
# spends on 16 KiB: past one per `FALSE_HIT_BYTES` of what is left, search the whole needle.
FALSE_HIT_BYTES = 16 * 1024
MIN_FALSE_HITS = 64


class NotRegularFile(OSError):
    """The log is a FIFO, a device or a socket: reading it could block forever."""


class Analyzer(Protocol):
    @property
    def ready(self) -> bool: ...

    @property
    def busy(self) -> bool: ...

    def feed_at(self, line: str, offset: int, cut: bool = False) -> None: ...

    def note_cut(self, offset: int) -> None: ...


class _Prefilter:
    """The next hit of each needle in one block, each searched by its rarest byte."""

    def __init__(self, buf: bytearray, end: int, serving: bool, sample_from: int) -> None:
        self.buf, self.end, self.serving = buf, end, serving
        needles = lp.SERVING_NEEDLE_BYTES if serving else lp.LAUNCH_NEEDLE_BYTES
        sample = bytes(buf[max(sample_from, end - SAMPLE_BYTES) : end])
        counts: dict[int, int] = {}
        self.needles = needles
        self.rare: list[tuple[int, int]] = []  # (byte, its offset in the needle)
        for needle in needles:
            best = None
            for at, byte in enumerate(needle):
                seen = counts.get(byte)
                if seen is None:
                    seen = counts[byte] = sample.count(byte)
                if best is None or seen < best[0]:
                    best = (seen, byte, at)
            assert best is not None
            self.rare.append((best[1], best[2]))
        self.regex = None if serving else lp.LAUNCH_SCAN
        self.next: list[int] = [-2] * (len(needles) + 1)

    def _find(self, i: int, start: int) -> int:
        """Where needle `i` first occurs in buf[start:end], or -1."""
        needle = self.needles[i]
        byte, offset = self.rare[i]
        buf = self.buf
        last = self.end - len(needle) + offset + 1  # a rare byte past this starts no whole needle
        at = start + offset
        if last <= at:  # (and never a negative bound: `find` would count it from the end)
            return -1
        allowed = max(MIN_FALSE_HITS, (last - at) // FALSE_HIT_BYTES)
        while True:
            hit = buf.find(byte, at, last)
            if hit < 0:
                return -1
            if buf.startswith(needle, hit - offset):
                return hit - offset
            allowed -= 1
            if allowed < 0:
                return buf.find(needle, hit - offset + 1, self.end)
            at = hit + 1

    def first(self, start: int) -> int:
        best = -1
        following = self.next
        for i in range(len(self.needles)):
            at = following[i]
            if at != -1 and at < start:
                at = following[i] = self._find(i, start)
            if at >= 0 and (best < 0 or at < best):
                best = at
        if self.regex is not None:
            at = following[-1]
            if at != -1 and at < start:
                m = self.regex.search(self.buf, start, self.end)
                at = following[-1] = m.start() if m else -1
            if at >= 0 and (best < 0 or at < best):
                best = at
        return best


def _line_end(buf: bytearray, start: int, end: int) -> int:
    """Where the line starting at `start` ends (after its newline, or `end`)."""
    at = buf.find(b"\n", start, end)
    return end if at < 0 else at + 1


def _back(buf: bytearray, line_start: int, floor: int, lines: int) -> int:
    """The start of the line `lines` lines before `line_start`, not before `floor`."""
    at = line_start
    for _ in range(lines):
        if at <= floor:
            return floor
        prev = buf.rfind(b"\n", floor, at - 1)
        at = floor if prev < 0 else prev + 1
    return max(at, floor)


class _Scanner:
    def __init__(
        self, analyzer: Analyzer, stream: io.RawIOBase, chunk_bytes: int, until_ready: bool
    ) -> None:
        self.analyzer = analyzer
        self.stream = stream
        self.chunk_bytes = chunk_bytes
        self.until_ready = until_ready

    def run(self) -> None:
        buf = bytearray(self.chunk_bytes)
        base = 0  # file offset of buf[0]
        size = 0  # bytes of buf in use
        floor = 0  # lines before buf[floor] were fed, or cannot be context any more
        skipping = False  # in the rest of a line too long to keep (it was cut)
        longest = max(self.chunk_bytes, 2 * MAX_LINE_BYTES)
        while True:
            if len(buf) < size + self.chunk_bytes:
                buf.extend(bytes(size + self.chunk_bytes - len(buf)))
            with memoryview(buf) as view:
                got = self.stream.readinto(view[size : size + self.chunk_bytes]) or 0
            size += got
            if skipping:  # drop the rest of the cut line, as `feed` drops past LINE_CHARS
                newline = buf.find(b"\n", 0, size)
                skipping = newline < 0 and got > 0
                drop = size if newline < 0 else newline + 1
                buf[0 : size - drop] = buf[drop:size]
                base, size, floor = base + drop, size - drop, 0
            if size == 0:
                if got:
                    continue
                return
            if got:
                end = buf.rfind(b"\n", 0, size) + 1
                if end == 0:
                    if size < longest:
                        continue  # one very long line: read on to its end
                    end, skipping = size, True  # keep its start, drop the rest
                    self.analyzer.note_cut(base)
            else:
                end = size  # the last line has no newline
            fed_to = self._region(buf, base, floor, end, cut=skipping)
            if self.until_ready and self.analyzer.ready:
                return
            # Keep the last lines of this region as context for a hit early in the next one
            # (none after a cut line: what follows in the buffer is the rest of that line).
            keep = end if skipping else _back(buf, end, max(fed_to, floor), lp.CONTEXT_LINES)
            rest = size - keep
            buf[0:rest] = buf[keep:size]  # same length: moved in place
            base, size, floor = base + keep, rest, max(fed_to, floor, keep) - keep
            if not got:
                return

    def _region(self, buf: bytearray, base: int, floor: int, end: int, cut: bool) -> int:
        """Feed what matters in buf[floor:end] (whole lines); return where feeding stopped.
        `cut`: the region's last line is the start of a line too long to keep."""
        analyzer = self.analyzer
        pos = floor  # first line not yet looked at
        fed_to = floor
        hits: _Prefilter | None = None
        while pos < end:
            if self.until_ready and analyzer.ready:
                return fed_to
            if analyzer.busy:
                pos = fed_to = self._feed_line(buf, base, pos, end, cut)
                continue
            if hits is None or hits.serving != analyzer.ready or pos >= hits.end:
                hits = self._prefilter(buf, pos, end)
            hit = hits.first(pos)
            if hit < 0:
                if hits.end >= end:
                    break
                pos = hits.end  # nothing in this launch window: the next one
                continue
            line_start = buf.rfind(b"\n", pos, hit) + 1 if hit > pos else pos
            line_start = max(line_start, pos)
            at = _back(buf, line_start, fed_to, lp.CONTEXT_LINES)
            while at <= line_start:
                at = self._feed_line(buf, base, at, end, cut)
            pos = fed_to = at
        return fed_to

    def _prefilter(self, buf: bytearray, pos: int, end: int) -> _Prefilter:
        """The needles of the analyzer's phase over the rest of the region; before "ready", over
        the next launch window only (ending at a line's end)."""
        if self.analyzer.ready:
            return _Prefilter(buf, end, True, pos)
        stop = min(end, pos + LAUNCH_WINDOW_BYTES)
        if stop < end:
            newline = buf.find(b"\n", stop, end)
            stop = end if newline < 0 else newline + 1
        return _Prefilter(buf, stop, False, pos)

    def _feed_line(self, buf: bytearray, base: int, start: int, end: int, cut: bool) -> int:
        stop = _line_end(buf, start, end)
        longer = stop - start > MAX_LINE_BYTES and not (cut and stop == end)  # said once
        raw = buf[start : min(stop, start + MAX_LINE_BYTES)]
        self.analyzer.feed_at(raw.decode("utf-8", "replace"), base + start, cut=longer)
        return stop


def open_regular(path: Path) -> io.FileIO:
    """`path` opened for reading, refused (`NotRegularFile`) unless it is a regular file. The
    open does not block on a FIFO (O_NONBLOCK), and the check is on the open descriptor, so a
    file swapped for a FIFO in between is refused too."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"{path} is not a regular file")
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


class _NewestFirst(io.RawIOBase):
    """A log exported newest first, read as written: its lines from the last to the first, a
    block at a time from the end of the file (each block split and reversed in C)."""

    def __init__(self, raw: io.FileIO, block_bytes: int) -> None:
        self.raw = raw
        self.block_bytes = block_bytes
        self.pos = raw.seek(0, io.SEEK_END)
        self.carry = b""  # the earliest part read so far of a line that began further back
        self.out = b""
        self.first = True

    def readable(self) -> bool:
        return True

    def readinto(self, target: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self.out and (self.pos > 0 or self.carry):
            if self.pos == 0:  # the file's first line, which is the export's last
                self.out, self.carry = self.carry + b"\n", b""
                break
            start = max(0, self.pos - self.block_bytes)
            self.raw.seek(start)
            data = self.raw.read(self.pos - start) + self.carry
            self.pos = start
            if self.first and data.endswith(b"\n"):
                data = data[:-1]
            self.first = False
            lines = data.split(b"\n")
            self.carry = lines[0][:MAX_LINE_BYTES] if start > 0 else b""
            body = lines[1:] if start > 0 else lines
            self.out = b"\n".join(reversed(body)) + b"\n" if body else b""
        count = min(len(target), len(self.out))
        target[:count] = self.out[:count]
        self.out = self.out[count:]
        return count


def scan_file(
    path: Path, analyzer: Analyzer, chunk_bytes: int = CHUNK_BYTES, until_ready: bool = False
) -> None:
    """Feed `analyzer` the lines of `path` that can change what it knows (`until_ready`: stop
    once the server is ready, for a reader of the launch's lines only). A log exported newest
    first (`newest_first`) is read from its end, so its tracebacks read top-down again."""
    with open_regular(path) as stream:
        head = stream.read(64 * 1024) or b""
        stream.seek(0)
        source: io.RawIOBase = stream
        if lp.newest_first(head):
            source = _NewestFirst(stream, chunk_bytes)
        _Scanner(analyzer, source, chunk_bytes, until_ready).run()
