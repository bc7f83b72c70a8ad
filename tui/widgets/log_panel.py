"""The log: follows the launch's log, highlights milestones and errors, filters, and stops
following while the user reads further up (End resumes)."""

from __future__ import annotations

import re
from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, RichLog

# Presentation only: what to colour. What a line *means* is checks.logparse's job.
_MILESTONE = re.compile(
    r"Load weight (begin|end)|KV Cache is allocated|Memory pool end|Capture cuda graph (begin|end)"
    r"|fired up and ready|Loading safetensors checkpoint shards"
)
_ERROR = re.compile(
    r"Traceback|Error\b|Exception|error:|hit an exception|sigquit|Killed", re.IGNORECASE
)
KEEP_LINES = 5000


def styled(line: str) -> Text:
    if _ERROR.search(line):
        return Text(line, style="bold red")
    if _MILESTONE.search(line):
        return Text(line, style="bold green")
    return Text(line)


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

    def compose(self) -> ComposeResult:
        yield RichLog(max_lines=KEEP_LINES, wrap=False, auto_scroll=False, id="log-view")
        filter_input = Input(placeholder="filter: show only lines containing…", id="log-filter")
        filter_input.display = False
        yield filter_input

    @property
    def view(self) -> RichLog:
        return self.query_one("#log-view", RichLog)

    @property
    def following(self) -> bool:
        view = self.view
        return view.max_scroll_y == 0 or view.is_vertical_scroll_end

    def add(self, lines: list[str], restarted: str | None, live: str | None) -> None:
        follow = self.following
        view = self.view
        if restarted:
            divider = f"──── log {restarted} ────"
            self.lines.append(divider)
            view.write(Text(divider, style="bold magenta"), scroll_end=follow)
        for line in lines:
            self.lines.append(line)
            if self._matches(line):
                view.write(styled(line), scroll_end=follow)
        self.progress_line = live
        self.border_subtitle = (
            (live or "") + ("" if follow else "  [paused — End follows]")
        ).strip()

    def _matches(self, line: str) -> bool:
        return not self.filter_text or self.filter_text.lower() in line.lower()

    def watch_filter_text(self, text: str) -> None:
        view = self.view
        view.clear()
        for line in self.lines:
            if self._matches(line):
                view.write(styled(line))
        view.scroll_end(animate=False)
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

    def action_follow(self) -> None:
        self.view.scroll_end(animate=False)
        self.border_subtitle = self.progress_line or ""

    def jump_to_first_error(self) -> bool:
        shown = [line for line in self.lines if self._matches(line)]
        for index, line in enumerate(shown):
            if _ERROR.search(line):
                self.view.scroll_to(y=max(index - 2, 0), animate=False)
                self.border_subtitle = "[paused — End follows]"
                return True
        return False
