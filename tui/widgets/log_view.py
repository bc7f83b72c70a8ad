"""The log's lines on screen: rows of a `LogIndex`, read back when they come into view.

A Line API widget: only the rows on screen are rendered (and cached as strips by what they
show), so neither a log growing by thousands of lines a second nor one of millions of lines
costs more than the screenful. With a filter the view shows the rows a search found
(`Matches`), in the same way.

Following is a state: it stops when the view leaves the end (a key, the mouse, `e`) and
resumes when it is back there (End). While stopped, new lines do not move the text.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from eaglebug.logindex import DIVIDER, LogIndex

# Presentation only: what to colour. What a line *means* is checks.logparse's job.
MILESTONE = re.compile(
    r"Load weight (begin|end)|KV Cache is allocated|Memory pool end|Capture cuda graph (begin|end)"
    r"|fired up and ready|Loading safetensors checkpoint shards"
)
ERROR = re.compile(
    r"Traceback|Error\b|Exception|error:|hit an exception|sigquit|Killed", re.IGNORECASE
)


def styled(line: str) -> Text:
    if line.startswith(DIVIDER):
        return Text(line, style="bold magenta")
    if ERROR.search(line):
        return Text(line, style="bold red")
    if MILESTONE.search(line):
        return Text(line, style="bold green")
    return Text(line)


class Matches(Sequence[int]):
    """The rows a filter shows, in order: those a search of the rows up to `split` found, then
    the newer ones tested as they arrived (each part sorted, the first all below `split`)."""

    def __init__(self, split: int) -> None:
        self.split = split
        self.found = array("q")  # from the search, rows < split
        self.newer = array("q")  # rows >= split

    def __len__(self) -> int:
        return len(self.found) + len(self.newer)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        found = len(self.found)
        return self.found[i] if i < found else self.newer[i - found]

    def position(self, row: int) -> int | None:
        """Where a row is on show, or None if it is not."""
        part, base = (self.found, 0) if row < self.split else (self.newer, len(self.found))
        at = bisect_left(part, row)
        return base + at if at < len(part) and part[at] == row else None


class ShownLines(Sequence[str]):
    """The texts of the rows on show (read back on access)."""

    def __init__(self, view: LogView) -> None:
        self._view = view

    def __len__(self) -> int:
        return self._view.row_count

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._view.index[self._view.row_at(i)]

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))


class LogView(ScrollView, can_focus=True):
    """The rows on show of a `LogIndex`, rendered when they come on screen."""

    def __init__(self, index: LogIndex, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = index
        self.shown: Matches | None = None  # None: every row
        self.following = True
        self._widest = 0  # in cells
        self._end_pending = False
        self._strips: LRUCache[tuple[int, int], Strip] = LRUCache(1024)

    @property
    def row_count(self) -> int:
        return len(self.shown) if self.shown is not None else len(self.index)

    def row_at(self, y: int) -> int:
        """The index row shown at line `y` of the view."""
        return self.shown[y] if self.shown is not None else y

    @property
    def lines(self) -> ShownLines:
        return ShownLines(self)

    def grew(self, texts: Iterable[str], removed: int = 0) -> None:
        """Rows were added (their texts), and `removed` rows went before them."""
        widths = [cell_len(text) for text in texts]
        if widths:
            self._widest = max(self._widest, max(widths))
        if removed:
            self._strips.clear()
        self.virtual_size = Size(self._widest, self.row_count)
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
        self.refresh()

    def _keep_at_end(self) -> None:
        self._end_pending = False
        if self.following and not self.is_vertical_scroll_end:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True, immediate=True)

    def jump(self, y: int) -> None:
        """Put line `y` at the top (as far as it goes); following stops unless that is the end."""
        self.following = False
        self.scroll_to(y=y, animate=False, force=True, immediate=True)
        self.following = round(self.scroll_y) >= self.max_scroll_y

    def show(self, matches: Matches | None) -> None:
        """Show only these rows (None: every row), from the end."""
        self.shown = matches
        self.virtual_size = Size(self._widest, self.row_count)
        self.follow()
        self.refresh()

    def follow(self) -> None:
        self.following = True
        self.scroll_to(y=self.max_scroll_y, animate=False, force=True, immediate=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.following = round(new_value) >= self.max_scroll_y

    def on_resize(self, event: events.Resize) -> None:
        if self.following:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True, immediate=True)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        at = scroll_y + y
        width = self.scrollable_content_region.width
        if at >= self.row_count:
            return Strip.blank(width, self.rich_style)
        row = self.row_at(at)
        key = self.index.key(row)
        strip = self._strips.get(key)
        if strip is None:
            try:
                text = self.index[row]
            except OSError as exc:  # the file went away under a row that was never shown
                text = f"(this line cannot be read back: {exc.strerror or exc})"
            strip = self._strips[key] = self._strip(text)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style).apply_style(
            self.rich_style
        )

    def _strip(self, line: str) -> Strip:
        console = self.app.console
        text = styled(line)
        options = console.options.update(
            overflow="ignore", no_wrap=True, width=max(text.cell_len, 1)
        )
        segments = list(Segment.split_lines(console.render(text, options)))
        return Strip(segments[0] if segments else [], text.cell_len)
