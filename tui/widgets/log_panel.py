"""The log: follows the launch's log, highlights milestones and errors, filters, and stops
following while the user reads further up (End resumes).

The view keeps plain strings and renders only the lines on screen, so a log growing by
thousands of lines a second costs a deque append per line, not a Rich render per line.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input

# Presentation only: what to colour. What a line *means* is checks.logparse's job.
_MILESTONE = re.compile(
    r"Load weight (begin|end)|KV Cache is allocated|Memory pool end|Capture cuda graph (begin|end)"
    r"|fired up and ready|Loading safetensors checkpoint shards"
)
_ERROR = re.compile(
    r"Traceback|Error\b|Exception|error:|hit an exception|sigquit|Killed", re.IGNORECASE
)
DIVIDER = "──── log "  # how a "log restarted" divider line starts
KEEP_LINES = 5000


def styled(line: str) -> Text:
    if line.startswith(DIVIDER):
        return Text(line, style="bold magenta")
    if _ERROR.search(line):
        return Text(line, style="bold red")
    if _MILESTONE.search(line):
        return Text(line, style="bold green")
    return Text(line)


class LogView(ScrollView, can_focus=True):
    """The lines on show, rendered when they come on screen (a Line API widget).

    Following is a state: it stops when the view leaves the end (a key, the mouse, `e`) and
    resumes when it is back there (End). While stopped, new lines do not move the text.
    """

    def __init__(self, max_lines: int = KEEP_LINES, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.following = True
        self._dropped = 0  # lines ever pushed out at the front: keeps cache keys stable
        self._widest = 0  # in cells
        self._strips: LRUCache[int, Strip] = LRUCache(1024)

    def write_lines(self, lines: Iterable[str]) -> None:
        """Add lines at the end; scroll to them while following."""
        maxlen = self.lines.maxlen or 0
        new = list(lines)[-maxlen:] if maxlen else list(lines)
        if not new:
            return
        dropped = max(len(self.lines) + len(new) - maxlen, 0) if maxlen else 0
        self.lines.extend(new)
        self._dropped += dropped
        self._widest = max(self._widest, max(cell_len(line) for line in new))
        self.virtual_size = Size(self._widest, len(self.lines))
        if self.following:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True)
        elif dropped:
            # Keep the text the user is reading where it is while the front drops away.
            self.scroll_to(y=max(self.scroll_y - dropped, 0), animate=False, force=True)
        self.refresh()

    def clear(self) -> None:
        self.lines.clear()
        self._strips.clear()
        self._dropped = 0
        self._widest = 0
        self.virtual_size = Size(0, 0)
        self.refresh()

    def follow(self) -> None:
        self.following = True
        self.scroll_to(y=self.max_scroll_y, animate=False, force=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.following = round(new_value) >= self.max_scroll_y

    def on_resize(self, event: events.Resize) -> None:
        if self.following:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        key = self._dropped + index
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = self._strip(self.lines[index])
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


class LogPanel(Vertical):
    BINDINGS = [
        Binding(
            "end",
            "follow",
            "Follow",
            tooltip="Scroll to the end and follow the log again",
            id="log.follow",
        ),
        Binding(
            "escape",
            "clear_filter",
            "Clear filter",
            show=False,
            tooltip="Show every line again",
            id="log.clear_filter",
        ),
    ]

    filter_text: reactive[str] = reactive("")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "log"
        self.lines: deque[str] = deque(maxlen=KEEP_LINES)
        self.progress_line: str | None = None
        self._subtitle = ""

    def compose(self) -> ComposeResult:
        yield LogView(KEEP_LINES, id="log-view")
        filter_input = Input(placeholder="filter: show only lines containing…", id="log-filter")
        filter_input.display = False
        yield filter_input

    def on_mount(self) -> None:
        # Whatever scrolled the view (End, Home, the mouse, e), the subtitle says whether the
        # log is following (the view's own watcher has updated `following` by then).
        self.watch(self.view, "scroll_y", lambda: self._show_following(), init=False)

    @property
    def view(self) -> LogView:
        return self.query_one("#log-view", LogView)

    @property
    def following(self) -> bool:
        return self.view.following

    def add(self, lines: list[str], restarted: str | None, live: str | None) -> None:
        view = self.view
        if restarted:
            divider = f"{DIVIDER}{restarted} ────"
            self.lines.append(divider)
            view.write_lines([divider])
        self.lines.extend(lines)
        view.write_lines(lines if not self.filter_text else filter(self._matches, lines))
        self.progress_line = live
        self._show_following()

    def _matches(self, line: str) -> bool:
        return (
            not self.filter_text
            or self.filter_text.lower() in line.lower()
            or line.startswith(DIVIDER)
        )

    def watch_filter_text(self, text: str) -> None:
        view = self.view
        view.clear()
        view.write_lines(filter(self._matches, self.lines))
        view.follow()
        self.border_title = f"log — filter: {text}" if text else "log"

    def open_filter(self) -> None:
        field = self.query_one("#log-filter", Input)
        field.display = True
        field.value = self.filter_text
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.filter_text = event.value.strip()
        event.input.display = False
        self.view.focus()

    def action_clear_filter(self) -> None:
        self.query_one("#log-filter", Input).display = False
        self.filter_text = ""

    def _show_following(self) -> None:
        paused = "" if self.view.following else "  [paused — End follows]"
        subtitle = ((self.progress_line or "") + paused).strip()
        if subtitle != self._subtitle:  # setting it repaints the whole panel, even unchanged
            self._subtitle = subtitle
            self.border_subtitle = subtitle

    def action_follow(self) -> None:
        self.view.follow()
        self._show_following()

    def jump_to_first_error(self) -> bool:
        """Scroll the first error line on show near the top; following stops there."""
        for index, line in enumerate(self.view.lines):
            if _ERROR.search(line):
                self.view.scroll_to(y=max(index - 2, 0), animate=False)
                self._show_following()
                return True
        return False
