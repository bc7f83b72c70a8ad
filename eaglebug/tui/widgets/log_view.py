"""The log's lines on screen: rows of a `LogIndex`, read back when they come into view.

A Line API widget: only the rows on screen are rendered (and cached as strips by what they
show), so neither a log growing by thousands of lines a second nor one of millions of lines
costs more than the screenful. What is on show is one of three sequences of index rows: every
row, the rows folded by rank (`eaglebug.logs.fold.Folds`: the default, so an 8-rank log reads
as one), or the rows a filter's search found (`Matches`, unfolded, so `/TP3` finds rank 3).

Long lines wrap by default (the line that says what went wrong is usually the longest), so
the view scrolls by rows, not by screen lines: the top row is `scroll_y`, the rows below it
are laid out wrapped until the screen is full, and the end of the scroll range is the row
from which the last rows just fill the screen. Only the rows on screen and the screenful at
the end are ever measured. Without wrapping (`w`), each row is one screen line and the view
scrolls sideways.

Following is a state: it stops when the view leaves the end (a key, the mouse, `e`) and
resumes when it is back there (End). While stopped, new lines do not move the text.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from eaglebug.logs.fold import Folds, folded_text
from eaglebug.logs.index import DIVIDER, LogIndex
from eaglebug.logs.rows import RowSequence

# Presentation only: what to colour. What a line *means* is checks.logparse's job.
MILESTONE = re.compile(
    r"Load weight (begin|end)|KV Cache is allocated|Memory pool end|Capture cuda graph (begin|end)"
    r"|fired up and ready|Loading safetensors checkpoint shards"
)
ERROR = re.compile(
    r"Traceback|Error\b|Exception|error:|hit an exception|sigquit|Killed", re.IGNORECASE
)
FOLD_MARK_CELLS = 16  # what a folded row's ranks and count may add to its width, unwrapped
WRAP_SLACK_CELLS = 16  # a wrapped line may end this far before the edge, at a space
MAX_WRAPPED_LINES = 100  # screen lines of one row, wrapped; the strip cache holds 1,024 rows


def styled(line: str) -> Text:
    if line.startswith(DIVIDER):
        return Text(line, style="bold magenta")
    if ERROR.search(line):
        return Text(line, style="bold red")
    if MILESTONE.search(line):
        return Text(line, style="bold green")
    return Text(line)


def poll_summary(count: int, paths: Sequence[str]) -> Text:
    """The row that stands for eaglebug's own polls of the server."""
    polls = "poll" if count == 1 else "polls"
    return Text(
        f"⋯ {count} {polls} by eaglebug ({', '.join(paths)}) folded · f", style="dim italic"
    )


class Rows(Protocol):
    """Index rows by position on show."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> int: ...
    def position(self, row: int) -> int | None: ...


class Matches(RowSequence[int]):
    """The rows a filter shows, in order: those a search of the rows up to `split` found, then
    the newer ones tested as they arrived (each part sorted, the first all below `split`)."""

    def __init__(self, split: int) -> None:
        self.split = split
        self.found = array("q")  # from the search, rows < split
        self.newer = array("q")  # rows >= split

    def __len__(self) -> int:
        return len(self.found) + len(self.newer)

    def row(self, i: int) -> int:
        found = len(self.found)
        return self.found[i] if i < found else self.newer[i - found]

    def position(self, row: int) -> int | None:
        """Where a row is on show, or None if it is not."""
        part, base = (self.found, 0) if row < self.split else (self.newer, len(self.found))
        at = bisect_left(part, row)
        return base + at if at < len(part) and part[at] == row else None


class ShownLines(RowSequence[str]):
    """The texts of the rows on show (read back on access; a folded row's own text)."""

    def __init__(self, view: LogView) -> None:
        self._view = view

    def __len__(self) -> int:
        return self._view.row_count

    def row(self, i: int) -> str:
        return self._view.index[self._view.row_at(i)]

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))


class LogView(ScrollView, can_focus=True):
    """The rows on show of a `LogIndex`, rendered when they come on screen."""

    def __init__(self, index: LogIndex, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = index
        self.folds = Folds(index)
        self.matches: Matches | None = None  # a filter's rows; None: no filter
        self.folded = True  # lines of several ranks as one row
        self.wrap = True
        self.following = True
        self._widest = 0  # in cells
        self._end_pending = False
        self._epoch = 0  # counts what changes every row's look (a toggle, rows removed)
        # (serial, line shown, ranks folded in, polls counted, wrap width) -> its screen lines
        self._strips: LRUCache[tuple[int, int, int, int, int], list[Strip]] = LRUCache(1024)
        self._screen_key: tuple[int, ...] = ()
        self._screen: list[tuple[int, int]] = []  # (position, line of it) per screen line

    # -- what is on show ----------------------------------------------------------------------
    @property
    def shown(self) -> Rows | None:
        """The rows on show (None: every row of the index)."""
        if self.matches is not None:
            return self.matches
        return self.folds if self.folded else None

    @property
    def row_count(self) -> int:
        shown = self.shown
        return len(shown) if shown is not None else len(self.index)

    def row_at(self, y: int) -> int:
        """The index row at position `y` on show."""
        shown = self.shown
        return shown[y] if shown is not None else y

    def position(self, row: int) -> int | None:
        """Where an index row is on show (a folded line: its row), None if it is not."""
        shown = self.shown
        return shown.position(row) if shown is not None else row

    @property
    def lines(self) -> ShownLines:
        return ShownLines(self)

    @property
    def top(self) -> int:
        """The position at the top of the screen."""
        return round(self.scroll_y)

    def on_screen(self, position: int) -> bool:
        """Whether the row at `position` starts on screen now."""
        if self.wrap:
            screen = self._layout()
            return bool(screen) and screen[0][0] <= position <= screen[-1][0]
        return self.top <= position < self.top + self.scrollable_content_region.height

    def screen_lines(self) -> list[tuple[int, str]]:
        """What each screen line shows now: the row's position and the line's text."""
        width, height = self.scrollable_content_region.size
        if self.wrap:
            return [(at, self._lines(at)[k].text) for at, k in self._layout()]
        left = round(self.scroll_x)
        rows = range(self.top, min(self.top + height, self.row_count))
        return [(at, self._lines(at)[0].crop(left, left + width).text) for at in rows]

    # -- changes ------------------------------------------------------------------------------
    def grew(self, texts: Iterable[str], removed: int = 0, keep_row: int | None = None) -> None:
        """Rows were added (their texts), and `removed` rows went before them; `keep_row`, the
        index row that was at the top, stays there while the view is not following (a row
        above it may have folded away: the previous poll when a new one came)."""
        widths = [cell_len(text) for text in texts]
        if widths:
            self._widest = max(self._widest, max(widths))
        if removed:
            self._strips.clear()
            self._epoch += 1
        self._size_to_rows()
        if self.following:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True, immediate=True)
            if not self._end_pending:  # a scrollbar that appears moves the end by a row
                self._end_pending = True
                self.call_after_refresh(self._keep_at_end)
        elif removed:
            # Keep the text the user is reading where it is while rows go above it.
            self.scroll_to(
                y=max(self.scroll_y - removed, 0), animate=False, force=True, immediate=True
            )
        elif keep_row is not None:
            at = self.position(keep_row)
            if at is not None and at != self.top:
                self.scroll_to(y=at, animate=False, force=True, immediate=True)
        self.refresh()

    def _keep_at_end(self) -> None:
        self._end_pending = False
        if self.following and not self.is_vertical_scroll_end:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True, immediate=True)

    def _size_to_rows(self) -> None:
        """The scroll range: rows (unwrapped), or up to the row the end fills the screen from."""
        if self.wrap:
            width = self.scrollable_content_region.width
            self.virtual_size = Size(width, self._end_top() + self.scrollable_content_region.height)
        else:
            extra = FOLD_MARK_CELLS if self.folded else 0
            self.virtual_size = Size(self._widest + extra, self.row_count)

    def _end_top(self) -> int:
        """The first position from which the last rows, wrapped, just fill the screen."""
        count, height = self.row_count, self.scrollable_content_region.height
        used, at = 0, count
        while at > 0:
            lines = len(self._lines(at - 1))
            if used + lines > height:
                break
            used, at = used + lines, at - 1
        return min(at, max(count - 1, 0))

    def _relaid(self, keep_row: int | None) -> None:
        """Every row may look different now: measure again, keep the same row at the top."""
        self._epoch += 1
        self._size_to_rows()
        if self.following:
            self.follow()
        elif keep_row is not None:
            at = self.position(keep_row)
            self.following = False
            self.scroll_to(y=at or 0, animate=False, force=True, immediate=True)
        self.refresh()

    def top_row(self) -> int | None:
        """The index row at the top of the screen (None: nothing on show)."""
        return self.row_at(self.top) if self.top < self.row_count else None

    def set_wrap(self, wrap: bool) -> None:
        keep = self.top_row()
        self.wrap = wrap
        self._relaid(keep)

    def set_folded(self, folded: bool) -> None:
        keep = self.top_row()
        self.folded = folded
        self._relaid(keep)

    def jump(self, y: int) -> None:
        """Put line `y` at the top (as far as it goes); following stops unless that is the end."""
        self.following = False
        self.scroll_to(y=y, animate=False, force=True, immediate=True)
        self.following = round(self.scroll_y) >= self.max_scroll_y

    def show(self, matches: Matches | None) -> None:
        """Show only these rows (None: every row, folded or not), from the end."""
        self.matches = matches
        self._epoch += 1
        self._size_to_rows()
        self.follow()
        self.refresh()

    def follow(self) -> None:
        self.following = True
        self.scroll_to(y=self.max_scroll_y, animate=False, force=True, immediate=True)

    # -- scrolling ----------------------------------------------------------------------------
    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.following = round(new_value) >= self.max_scroll_y

    def action_scroll_end(self) -> None:
        """End follows at once (an animated scroll could end short of a moving end)."""
        self.follow()

    def action_page_down(self) -> None:
        if not self.wrap:
            super().action_page_down()
            return
        screen = self._layout()
        if not screen:
            return
        last, line = screen[-1]
        whole = line == len(self._lines(last)) - 1
        target = max(last + 1 if whole else last, self.top + 1)
        self.scroll_to(y=min(target, self.max_scroll_y), animate=False, immediate=True)

    def action_page_up(self) -> None:
        if not self.wrap:
            super().action_page_up()
            return
        height, used, at = self.scrollable_content_region.height, 0, self.top
        while at > 0 and used + len(self._lines(at - 1)) <= height:
            used, at = used + len(self._lines(at - 1)), at - 1
        target = min(at, self.top - 1) if self.top > 0 else 0
        self.scroll_to(y=max(target, 0), animate=False, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        if self.wrap:
            self._size_to_rows()  # the end of the scroll range moved with the width
        if self.following:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True, immediate=True)

    # -- rendering ----------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if self.wrap:
            screen = self._layout()
            if y >= len(screen):
                return Strip.blank(width, self.rich_style)
            at, line = screen[y]
            strip = self._lines(at)[line]
            return strip.crop_extend(0, width, self.rich_style).apply_style(self.rich_style)
        scroll_x, scroll_y = self.scroll_offset
        at = scroll_y + y
        if at >= self.row_count:
            return Strip.blank(width, self.rich_style)
        strip = self._lines(at)[0]
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style).apply_style(
            self.rich_style
        )

    def _layout(self) -> list[tuple[int, int]]:
        """Each screen line's (position, line of that row), from the top row down, wrapped."""
        region = self.scrollable_content_region
        key = (self.top, region.width, region.height, len(self.index), self.row_count, self._epoch)
        if key != self._screen_key:
            screen: list[tuple[int, int]] = []
            at = self.top
            while len(screen) < region.height and at < self.row_count:
                screen.extend((at, k) for k in range(len(self._lines(at))))
                at += 1
            self._screen_key, self._screen = key, screen[: region.height]
        return self._screen

    def _lines(self, position: int) -> list[Strip]:
        """The screen lines of the row at `position`: one, or its wrapped lines."""
        row = self.row_at(position)
        folds = self.folds if self.matches is None and self.folded else None
        members = folds.members(row) if folds is not None else []
        shown = folds.shows(row) if folds is not None else row  # a bar: its newest update
        polls = folds.polls(row) if folds is not None else None
        width = max(self.scrollable_content_region.width, 1) if self.wrap else 0
        serial, local = self.index.key(shown)
        key = (serial, local, len(members), polls[0] if polls else 0, width)
        lines = self._strips.get(key)
        if lines is None:
            if polls is not None:
                text = poll_summary(*polls)
            else:
                try:
                    text = styled(self.index[shown])
                except OSError as exc:  # the file went away under a row that was never shown
                    text = styled(f"(this line cannot be read back: {exc.strerror or exc})")
            lines = self._strips[key] = self._render_row(text, members, width)
        return lines

    def _render_row(self, line: str | Text, members: list[str], width: int) -> list[Strip]:
        text = styled(line) if isinstance(line, str) else line
        if members:
            text = styled(folded_text(text.plain, members))
            text.append(f"  ×{len(members) + 1}", style="bold cyan")
        console = self.app.console
        if width <= 0:
            options = console.options.update(
                overflow="ignore", no_wrap=True, width=max(text.cell_len, 1)
            )
            segments = list(Segment.split_lines(console.render(text, options)))
            return [Strip(segments[0] if segments else [], text.cell_len)]
        cuts = wrap_points(text.plain, width) if text.cell_len > width else []
        tail: list[Text] = []
        if len(cuts) >= MAX_WRAPPED_LINES:  # a 64 KiB line is 1,200 lines: show the start
            keep = cuts[MAX_WRAPPED_LINES - 2]
            more = len(text.plain) - keep
            text, cuts = text[:keep], cuts[: MAX_WRAPPED_LINES - 2]
            tail = [Text(f"… {more} more characters (w: the line unwrapped)", style="dim")]
        pieces = [*text.divide(cuts), *tail]
        base = console.get_style(text.style)  # `render` leaves the line's own style out
        return [
            Strip(list(Segment.apply_style(piece.render(console, end=""), base)), piece.cell_len)
            for piece in pieces
        ]


def wrap_points(plain: str, width: int) -> list[int]:
    """Where a line is cut to fit `width` cells: after a space near the edge, else at the edge.

    A log line is mostly paths, numbers and names: moving a long word to the next line (as
    prose wrapping does) leaves `File` alone on a line and the path folded below it, so a word
    is cut where the line ends, as a terminal does, unless a space is close enough to cut at.
    """
    if not plain.isascii():  # wide characters: by cells, at the edge
        cuts, at = [], 0
        for chunk in chop_cells(plain, width)[:-1]:
            at += len(chunk)
            cuts.append(at)
        return cuts
    slack = min(WRAP_SLACK_CELLS, width // 3)
    cuts, start = [], 0
    while len(plain) - start > width:
        edge = start + width
        space = plain.rfind(" ", edge - slack, edge + 1)
        cut = space + 1 if space > start else edge
        cuts.append(cut)
        start = cut
    return cuts
