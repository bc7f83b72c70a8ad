"""The whole-file fast path: find the few lines worth parsing in big chunks of bytes.

A long SGLang log is almost all `Decode batch` lines. Instead of a Python loop over every line,
the file is read in 8 MiB chunks and searched with `bytes.find` for a few needles (and, until the
server is ready, one regex whose literal start `] ` lets the engine jump from line to line). Only
the lines around a hit go through `LogAnalyzer`: the `CONTEXT_LINES` before it (for the rank a
traceback inherits, and what a C++ abort printed), the hit, and every line after it while a
traceback is open. Lines in between are skipped without being decoded.

The contract with `LogAnalyzer.feed`: a line it would act on is one `interesting()` accepts, and
that is exactly what the needles and the regex find, so the fast path and feeding every line
give the same phase, progress and findings. Positions are byte offsets: counting every newline
of a 1 GB file would cost more than the search itself.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Protocol

from eaglebug.checks.logs import patterns as lp

CHUNK_BYTES = 8 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024  # of one line, decoded and fed


class Analyzer(Protocol):
    @property
    def ready(self) -> bool: ...

    @property
    def busy(self) -> bool: ...

    def feed_at(self, line: str, offset: int) -> None: ...


class _Hits:
    """The next hit of each needle in one buffer, searched again only once passed."""

    def __init__(self, buf: bytearray, end: int, serving: bool) -> None:
        self.buf, self.end, self.serving = buf, end, serving
        self.needles = [n.encode() for n in (lp.SERVING_NEEDLES if serving else lp.LAUNCH_NEEDLES)]
        self.regex = None if serving else lp.LAUNCH_SCAN
        self.next: list[int] = [-2] * (len(self.needles) + 1)

    def first(self, start: int) -> int:
        best = -1
        for i, needle in enumerate(self.needles):
            at = self.next[i]
            if at != -1 and at < start:
                at = self.next[i] = self.buf.find(needle, start, self.end)
            if at >= 0 and (best < 0 or at < best):
                best = at
        if self.regex is not None:
            at = self.next[-1]
            if at != -1 and at < start:
                m = self.regex.search(self.buf, start, self.end)
                at = self.next[-1] = m.start() if m else -1
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
    def __init__(self, analyzer: Analyzer, stream: io.RawIOBase, chunk_bytes: int) -> None:
        self.analyzer = analyzer
        self.stream = stream
        self.chunk_bytes = chunk_bytes

    def run(self) -> None:
        buf = bytearray(self.chunk_bytes)
        base = 0  # file offset of buf[0]
        size = 0  # bytes of buf in use
        floor = 0  # lines before buf[floor] were fed, or cannot be context any more
        skipping = False  # in the rest of a line too long to keep (it was cut)
        longest = max(4 * self.chunk_bytes, 2 * MAX_LINE_BYTES)
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
            else:
                end = size  # the last line has no newline
            fed_to = self._region(buf, base, floor, end)
            # Keep the last lines of this region as context for a hit early in the next one
            # (none after a cut line: what follows in the buffer is the rest of that line).
            keep = end if skipping else _back(buf, end, max(fed_to, floor), lp.CONTEXT_LINES)
            rest = size - keep
            buf[0:rest] = buf[keep:size]  # same length: moved in place
            base, size, floor = base + keep, rest, max(fed_to, floor, keep) - keep
            if not got:
                return

    def _region(self, buf: bytearray, base: int, floor: int, end: int) -> int:
        """Feed what matters in buf[floor:end] (whole lines); return where feeding stopped."""
        analyzer = self.analyzer
        pos = floor  # first line not yet looked at
        fed_to = floor
        hits = _Hits(buf, end, analyzer.ready)
        while pos < end:
            if analyzer.busy:
                pos = fed_to = self._feed_line(buf, base, pos, end)
                continue
            if hits.serving != analyzer.ready:
                hits = _Hits(buf, end, analyzer.ready)  # the server became ready
            hit = hits.first(pos)
            if hit < 0:
                break
            line_start = buf.rfind(b"\n", pos, hit) + 1 if hit > pos else pos
            line_start = max(line_start, pos)
            at = _back(buf, line_start, fed_to, lp.CONTEXT_LINES)
            while at <= line_start:
                at = self._feed_line(buf, base, at, end)
            pos = fed_to = at
        return fed_to

    def _feed_line(self, buf: bytearray, base: int, start: int, end: int) -> int:
        stop = _line_end(buf, start, end)
        raw = buf[start : min(stop, start + MAX_LINE_BYTES)]
        self.analyzer.feed_at(raw.decode("utf-8", "replace"), base + start)
        return stop


def scan_file(path: Path, analyzer: Analyzer, chunk_bytes: int = CHUNK_BYTES) -> None:
    """Feed `analyzer` the lines of `path` that can change what it knows."""
    with path.open("rb", buffering=0) as stream:
        _Scanner(analyzer, stream, chunk_bytes).run()
