"""Folding: one row for a line that several ranks printed, for a progress bar printed again at
every update, and for the polls eaglebug itself sends the server.

Why: an 8-rank launch prints every start-up milestone eight times (`[... TP0] Capture cuda
graph begin ...` ... `[... TP7] ...`), so its log reads eight times as long as what happened
and the one line that differs drowns among the copies. `Folds` shows such lines as one row,
the first of them, with the ranks it stands for (`[2026-01-30 10:37:13 TP0-TP7] ... ×8`), the
way the diagnosis names one finding for eight ranks.

What folds: lines with SGLang's own rank prefix (`[time TP3] `, `[time DP1 TP1 EP1] `, after a
short lead another program may have put in front) whose texts are equal once the prefix's ranks
are taken out and every number is made the same (times, sizes, addresses), from ranks not yet in
the row, within `WINDOW_ROWS` rows of its first line. A line that a traceback's frames follow
stays as it is (its frames need it above them), and nothing folds across a divider: each
segment of the index folds on its own.

A progress bar (`checks.bars`: the weight load's, the CUDA graph capture's) that SGLang printed
again for every update, one line each (0.5.9's bar ends each update with a newline; `docker
logs` and pasted logs turn tqdm's `\r` into newlines too), is one row: the bar's first line,
showing its newest state, as a terminal shows it. The updates of one bar are the bar lines with
the same tag in front (each node of a merged log keeps its own bar), the same total and a count
that does not go back; a description may be set after the first state (tqdm's `  0%|` before
`Capturing batches`) and its numbers may change (`bs=16` ... `bs=1`).

Once a launch is ready, eaglebug's acceptance watch asks the server every few seconds
(`GET /server_info`, `/metrics`), and the server logs each request as an access line. Those
polls fold into one row, the newest poll's, which says how many there were: the log keeps
reading as what the server did, not as what eaglebug asked.

Like the `LogIndex` it sits on, it keeps no text: per segment, which of its lines are folded
(8 bytes each), into which line (8 bytes) and for which rank (2 bytes, an id of the rank's
label, or `NO_RANK` for a bar's update or a poll); a row's ranks are read from those when the
row is drawn, a bar's newest line from one number per bar. Positions on show map to
index rows in O(log n), so a folded log of any size renders as the whole one does. One thread
(the UI's) adds and reads.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from eaglebug.checks import bar_line
from eaglebug.logs.index import LogIndex, Segment

# SGLang's `[%(asctime)s{ms}{prefix}] ` (see checks.logpatterns.PREFIX_RX), with at least one
# rank, after a lead without `[` (a compose service name, a kubectl timestamp).
RANK_PREFIX = re.compile(
    r"(?P<lead>[^\[\n]{0,64}?)\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)+)\] "
)
NUMBER = re.compile(r"\d+")
WINDOW_ROWS = 64  # a line folds into a row at most this many lines above it
MAX_OPEN = 256  # rows still taking lines, per segment (the oldest stop first)
MAX_BAR_SLOTS = 8  # bars of one tag and total open at once (interleaved ones: a row each)
MAX_RANK_LABELS = 65_535  # distinct rank labels with an id; lines of others do not fold
NO_RANK = 0xFFFF  # the rank id of a line folded for another reason (a bar's update, a poll)
NO_HEAD = -1  # the row a folded poll went into: none (the newest poll's row counts them all)
METRICS_PATH = "/metrics"
# uvicorn's access line: `INFO:     127.0.0.1:51816 - "GET /server_info HTTP/1.1" 200 OK`
ACCESS = re.compile(r'"GET (?P<path>/[^ "?]*)[^ "]* HTTP/[\d.]+" \d{3}')


def fold_key(text: str) -> tuple[str, str] | None:
    """(what the line says with its ranks out and its numbers alike, its ranks), or None for a
    line without SGLang's rank prefix."""
    m = RANK_PREFIX.match(text)
    if m is None:
        return None
    said = NUMBER.sub("0", m["lead"]) + "\x00" + NUMBER.sub("0", text[m.end() :])
    return said, m["ranks"][1:]


def folded_text(text: str, members: Sequence[str]) -> str:
    """A folded row's text: its prefix names every rank it stands for (`TP0-TP7`)."""
    m = RANK_PREFIX.match(text)
    if m is None or not members:
        return text
    from eaglebug.checks import rank_summary, sort_ranks  # the engine's own words

    ranks = rank_summary(sort_ranks({m["ranks"][1:], *members}))
    return f"{text[: m.start('ranks')]} {ranks}{text[m.end('ranks') :]}"


def polled_paths() -> frozenset[str]:
    """What eaglebug's acceptance watch asks a ready server (`eaglebug.session.acceptwatch`):
    the `/server_info` routes of its rules and `/metrics`."""
    from eaglebug.checks import DEFAULT_RULES  # loads with the first access line, not the app

    return frozenset({*DEFAULT_RULES.server_info_paths, METRICS_PATH})


def _continues(text: str) -> bool:
    """A traceback's frame or header: the line above belongs with it."""
    return (text[:1] in (" ", "\t") and bool(text.strip())) or text.startswith("Traceback")


class _Open:
    """A row that lines may still fold into: its line and the ranks in it."""

    __slots__ = ("head", "ranks")

    def __init__(self, head: int, rank: str) -> None:
        self.head = head
        self.ranks = {rank}


class _OpenBar:
    """A bar that updates may still fold into: its first line, how far it got, what it says,
    and its newest line."""

    __slots__ = ("desc", "done", "head", "last")

    def __init__(self, head: int, desc: str, done: int) -> None:
        self.head = head
        self.desc = desc
        self.done = done
        self.last = head


class SegmentFolds:
    """One segment's folded lines (in its local line numbers) and the rows still open."""

    __slots__ = (
        "bars",
        "heads",
        "hidden",
        "last_key",
        "newest",
        "open",
        "poll_paths",
        "poll_row",
        "polls",
        "ranks",
    )

    def __init__(self) -> None:
        self.hidden = array("q")  # lines folded into another row, ascending
        self.heads = array("q")  # ... the line of the row each folded into (NO_HEAD: a poll)
        self.ranks = array("H")  # ... and its rank, an id of `Folds.rank_names` (or NO_RANK)
        self.open: dict[str, _Open] = {}  # by what the line says; oldest first
        self.last_key: str | None = None  # what the newest line said, if it had ranks
        self.bars: dict[str, list[_OpenBar]] = {}  # bars still updating, by tag and total
        self.newest: dict[int, int] = {}  # a bar's first line -> its newest update's line
        self.poll_row: int | None = None  # the newest poll's line: the row that counts them
        self.polls = 0
        self.poll_paths: list[str] = []  # the paths polled, in the order first seen


class Folds:
    """The rows of a `LogIndex` with the lines several ranks printed folded into one.

    A sequence of index rows by position on show (`folds[y]`), with `position(row)`; the view
    shows it as it shows a filter's matches."""

    def __init__(self, index: LogIndex, polled: frozenset[str] | None = None) -> None:
        """`polled`: the paths whose GET lines are eaglebug's polls (default `polled_paths()`)."""
        self.index = index
        self._polled = polled
        self.rank_names: list[str] = []
        self._rank_ids: dict[str, int] = {}
        self._segments: dict[int, SegmentFolds] = {}  # by segment serial
        self._live: SegmentFolds | None = None  # the segment lines are added to
        self._hidden = 0  # folded lines, all segments
        self._starts: list[int] = []  # each segment's first position on show
        self._starts_key = (-1, -1)

    # -- adding -----------------------------------------------------------------------------
    def add(self, segment: Segment, texts: Sequence[str]) -> None:
        """`texts` are the newest lines of `segment`, the index's last, just added to it."""
        folds = self._segments.get(segment.serial)
        if folds is None:
            folds = self._segments[segment.serial] = SegmentFolds()
            if self._live is not None:  # an older segment takes no more lines
                self._live.open.clear()
                self._live.bars.clear()
            self._live = folds
        line = len(segment.offsets) - len(texts)
        for text in texts:
            self._add(folds, line, text)
            line += 1

    def _add(self, folds: SegmentFolds, line: int, text: str) -> None:
        if self._fold_poll(folds, line, text) or self._fold_bar(folds, line, text):
            folds.last_key = None
            return
        key = fold_key(text)
        if key is None:
            if folds.last_key is not None and _continues(text):
                self._keep_above_frames(folds, line - 1, folds.last_key)
            folds.last_key = None
            return
        said, rank = key
        group = folds.open.get(said)
        rank_id = self._rank_id(rank)
        if (
            group is None
            or rank_id is None
            or rank in group.ranks
            or line - group.head > WINDOW_ROWS
        ):
            folds.open.pop(said, None)
            folds.open[said] = _Open(line, rank)  # at the end: the open rows stay oldest first
            self._prune(folds, line)
        else:
            group.ranks.add(rank)
            self._hide(folds, line, group.head, rank_id)
        folds.last_key = said

    def _fold_bar(self, folds: SegmentFolds, line: int, text: str) -> bool:
        """A line that is a progress bar: into the row of its bar, or the first row of one.

        Of the bars still open with its tag and total whose count it does not go back from,
        it goes to the one furthest along (two bars interleaved without a tag, one per
        pipeline stage, keep a row each once they are out of step); a finished bar takes only
        tqdm's closing repeat, straight after it, so the next bar over the same batch sizes
        (the draft's graphs after the target's) is a row of its own."""
        bar = bar_line(text)
        if bar is None:
            return False
        key = f"{bar.tag}\x00{bar.total}"
        desc = NUMBER.sub("0", bar.desc)
        slots = folds.bars.setdefault(key, [])
        newest = max(slots, key=lambda g: g.last, default=None)
        fits = [
            g
            for g in slots
            if g.done <= bar.done
            and (desc == g.desc or not desc or not g.desc)
            and (g.done < bar.total or g is newest)
        ]
        group = max(fits, key=lambda g: (g.done, g.last), default=None)
        if group is None:
            folds.bars.pop(key)
            slots.append(_OpenBar(line, desc, bar.done))
            folds.bars[key] = slots[-MAX_BAR_SLOTS:]  # at the end: the oldest key first
            while len(folds.bars) > MAX_OPEN:
                del folds.bars[next(iter(folds.bars))]
            return True
        self._hide(folds, line, group.head)
        group.done, group.desc, group.last = bar.done, desc or group.desc, line
        folds.newest[group.head] = line
        return True

    def _fold_poll(self, folds: SegmentFolds, line: int, text: str) -> bool:
        """An access line of a path eaglebug polls: the previous poll's row folds away, this
        one counts them all."""
        if '"GET /' not in text:
            return False
        m = ACCESS.search(text)
        if self._polled is None:
            self._polled = polled_paths()
        if m is None or m["path"] not in self._polled:
            return False
        previous = folds.poll_row
        if previous is not None:
            at = bisect_left(folds.hidden, previous)  # older than lines folded since
            folds.hidden.insert(at, previous)
            folds.heads.insert(at, NO_HEAD)
            folds.ranks.insert(at, NO_RANK)
            self._hidden += 1
        folds.poll_row = line
        folds.polls += 1
        if m["path"] not in folds.poll_paths:
            folds.poll_paths.append(m["path"])
        return True

    def _hide(self, folds: SegmentFolds, line: int, head: int, rank: int = NO_RANK) -> None:
        """The newest line folds into `head`'s row."""
        folds.hidden.append(line)
        folds.heads.append(head)
        folds.ranks.append(rank)
        self._hidden += 1

    def _keep_above_frames(self, folds: SegmentFolds, line: int, said: str) -> None:
        """Line `line` heads a traceback: shown as it is, and nothing more folds into it."""
        group = folds.open.get(said)
        if folds.hidden and folds.hidden[-1] == line:
            folds.hidden.pop()
            folds.heads.pop()
            rank = self.rank_names[folds.ranks.pop()]
            self._hidden -= 1
            if group is not None:
                group.ranks.discard(rank)
        elif group is not None and group.head == line:
            del folds.open[said]

    def _prune(self, folds: SegmentFolds, line: int) -> None:
        open_rows = folds.open
        while open_rows:
            oldest = next(iter(open_rows))
            if len(open_rows) <= MAX_OPEN and open_rows[oldest].head >= line - WINDOW_ROWS:
                return
            del open_rows[oldest]

    def _rank_id(self, rank: str) -> int | None:
        found = self._rank_ids.get(rank)
        if found is None and len(self.rank_names) < MAX_RANK_LABELS:  # ids below NO_RANK
            found = self._rank_ids[rank] = len(self.rank_names)
            self.rank_names.append(rank)
        return found

    def forget_removed(self) -> None:
        """After the index dropped segments: their folds go with them."""
        kept = {segment.serial for segment in self.index.segments}
        for serial in [s for s in self._segments if s not in kept]:
            gone = self._segments.pop(serial)
            self._hidden -= len(gone.hidden)
            if gone is self._live:
                self._live = None

    # -- reading ----------------------------------------------------------------------------
    @property
    def folded_lines(self) -> int:
        return self._hidden

    def __len__(self) -> int:
        return len(self.index) - self._hidden

    def __getitem__(self, y: int) -> int:
        """The index row at position `y` on show."""
        if y < 0:
            y += len(self)
        if not 0 <= y < len(self):
            raise IndexError(y)
        starts = self._starts_now()
        number = bisect_right(starts, y) - 1
        segment = self.index.segments[number]
        k, row = y - starts[number], segment.first_row
        if segment.divider is not None:
            if k == 0:
                return row
            k, row = k - 1, row + 1
        folds = self._segments.get(segment.serial)
        if folds is None or not folds.hidden:
            return row + k
        hidden = folds.hidden
        # The k-th line not folded: k plus the folded lines before it, which are those whose
        # line minus the folded lines before them is at most k (non-decreasing, so bisect).
        before = bisect_right(range(len(hidden)), k, key=lambda i: hidden[i] - i)
        return row + k + before

    def position(self, row: int) -> int:
        """Where a row is on show; a folded line is where the row it folded into is (a folded
        poll, where the next row on show is)."""
        number = self.index.segment_number(row)
        segment = self.index.segments[number]
        at = self._starts_now()[number]
        local = row - segment.first_row - (segment.divider is not None)
        if local < 0:
            return at
        at += segment.divider is not None
        folds = self._segments.get(segment.serial)
        if folds is None:
            return at + local
        hidden = folds.hidden
        i = bisect_left(hidden, local)
        if i < len(hidden) and hidden[i] == local and folds.heads[i] != NO_HEAD:
            local = folds.heads[i]
            i = bisect_left(hidden, local)
        return at + local - i  # a folded poll: where the next row on show is

    def members(self, row: int) -> list[str]:
        """The ranks of the lines folded into `row` (none: it stands for itself)."""
        segment, local = self.index.locate(row)
        folds = self._segments.get(segment.serial)
        if folds is None or local < 0 or not folds.hidden:
            return []
        hidden, heads = folds.hidden, folds.heads
        found: list[str] = []
        i = bisect_right(hidden, local)
        while i < len(hidden) and hidden[i] <= local + WINDOW_ROWS:
            if heads[i] == local and folds.ranks[i] != NO_RANK:
                found.append(self.rank_names[folds.ranks[i]])
            i += 1
        return found

    def shows(self, row: int) -> int:
        """The row whose text `row` shows: a bar's newest update, else the row itself."""
        segment, local = self.index.locate(row)
        folds = self._segments.get(segment.serial)
        newest = folds.newest.get(local) if folds is not None else None
        return row if newest is None else row + newest - local

    def polls(self, row: int) -> tuple[int, tuple[str, ...]] | None:
        """How many polls the row of the newest poll stands for, and their paths; None for any
        other row."""
        segment, local = self.index.locate(row)
        folds = self._segments.get(segment.serial)
        if folds is None or folds.poll_row != local:
            return None
        return folds.polls, tuple(folds.poll_paths)

    def _starts_now(self) -> list[int]:
        # Lines are only added to the last segment, so every segment's first position stays
        # until segments come or go.
        segments = self.index.segments
        key = (self.index.generation, len(segments))
        if key != self._starts_key:
            starts, at = [], 0
            for segment in segments:
                starts.append(at)
                folds = self._segments.get(segment.serial)
                at += segment.rows - (len(folds.hidden) if folds is not None else 0)
            self._starts, self._starts_key = starts, key
        return self._starts
