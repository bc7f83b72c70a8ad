"""The log: follows the launch's log, highlights milestones and errors, folds what every
rank printed into one row, wraps long lines, pins the crash line, filters, and stops following
while the user reads further up (End resumes).

The panel keeps no lines: its `LogIndex` keeps where each line starts and reads lines back from
the file, so `e` (the crash line, else the first error), `/` (the filter) and scrolling reach
the whole log, whatever its size. The first error and the filter are searched in the file in a
thread worker; each search has a generation, and a result that a newer search (or rows removed
from the index) made stale is dropped. The rows folded by rank (`eaglebug.logs.fold`) are kept
as the lines arrive, by offset like the index, so `f` unfolds and folds at once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from typing import Literal

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Input
from textual.worker import get_current_worker

from eaglebug.checks import Finding
from eaglebug.logs.index import IndexView, LogIndex, LogPart, divider_text, search
from eaglebug.tui.messages import LogSearched
from eaglebug.tui.runner import run_guarded
from eaglebug.tui.widgets.crash_pin import CrashPin
from eaglebug.tui.widgets.log_view import ERROR, LogView, Matches

POST_EVERY_S = 0.1  # a filter's matches reach the view at most this often while it searches
SEEN_AFTER_S = 0.5  # on screen this long (not following), the crash line has been read
Kind = Literal["filter", "first_error"]


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
        Binding(
            "enter",
            "crash_line",
            "Crash line",
            show=False,
            tooltip="Go to the crash line pinned above the log",
            id="log.crash_line",
        ),
    ]

    filter_text: reactive[str] = reactive("")
    searching: reactive[bool] = reactive(False)  # a filter's search is still reading the file

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "log"
        self.index = LogIndex()
        self.progress_line: str | None = None
        self._subtitle = ""
        self._pattern: re.Pattern[str] | None = None
        self._searches: dict[Kind, int] = {"filter": 0, "first_error": 0}
        self._seen_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield CrashPin(id="log-pin")
        yield LogView(self.index, id="log-view")
        filter_input = Input(placeholder="filter: show only lines containing…", id="log-filter")
        filter_input.display = False
        yield filter_input

    def on_mount(self) -> None:
        # Whatever scrolled the view (End, Home, the mouse, e), the subtitle says whether the
        # log is following (the view's own watcher has updated `following` by then).
        self.watch(self.view, "scroll_y", lambda: self._scrolled(), init=False)

    @property
    def view(self) -> LogView:
        return self.query_one("#log-view", LogView)

    @property
    def lines(self) -> Sequence[str]:
        """Every row of the log (dividers included), read back on access."""
        return self.index

    @property
    def following(self) -> bool:
        return self.view.following

    @property
    def pin(self) -> CrashPin:
        return self.query_one("#log-pin", CrashPin)

    # -- new lines --------------------------------------------------------------------------
    def add(self, parts: Sequence[LogPart], live: str | None) -> None:
        view, index = self.view, self.index
        generation = index.generation
        keep = None if view.following else view.top_row()
        removed = 0
        texts: list[str] = []
        dividers: list[int] = []  # positions in `texts`
        folds = view.folds
        for part in parts:
            gone = index.add(part)
            if gone:
                folds.forget_removed()
                removed += gone
            if part.restart is not None:
                dividers.append(len(texts))
                texts.append(divider_text(part.restart.label))
            if part.lines:
                lines = [line.text for line in part.lines]
                folds.add(index.segments[-1], lines)
                texts.extend(lines)
        pattern = self._pattern
        if pattern is not None and index.generation != generation:
            self._start_filter()  # rows moved: the matches are searched again
        elif pattern is not None and view.matches is not None:
            first = len(index) - len(texts)
            kept = set(dividers)
            view.matches.newer.extend(
                first + k for k, text in enumerate(texts) if k in kept or pattern.search(text)
            )
        view.grew(texts, removed, keep if not removed else None)
        self.progress_line = live
        self._show_following()
        self._place_pin()

    # -- the crash line -----------------------------------------------------------------------
    def show_crash(self, findings: Sequence[Finding]) -> None:
        """Pin the crash line of the newest failure among the watch's findings."""
        if self.pin.track(findings, self.index):
            self._place_pin()

    def _place_pin(self) -> None:
        pin, view = self.pin, self.view
        crash = pin.crash
        if crash is None or crash.seen:
            pin.show_if(False)
            return
        row = pin.row(self.index)
        at = view.position(row) if row is not None else None
        visible = at is not None and view.on_screen(at)
        if visible and not view.following and self._seen_timer is None:
            # The user brought it on screen; read, once it stays there (Home flies past it).
            self._seen_timer = self.set_timer(SEEN_AFTER_S, self._seen)
        pin.show_if(not visible)

    def _seen(self) -> None:
        self._seen_timer = None
        crash, view = self.pin.crash, self.view
        row = self.pin.row(self.index)
        at = view.position(row) if row is not None else None
        if crash is not None and at is not None and view.on_screen(at) and not view.following:
            crash.seen = True
        self._place_pin()

    def go_to_crash(self) -> bool:
        """Scroll the crash line near the top; False when no failure has one."""
        pin = self.pin
        if pin.crash is None:
            return False
        row = pin.row(self.index)
        if row is None:
            self.notify("the crash line is no longer in the log")
            return True
        if self.view.matches is not None and self.view.matches.position(row) is None:
            self.action_clear_filter()
        at = self.view.position(row)
        pin.crash.seen = True
        self.view.jump(max((at or 0) - 2, 0))
        self._show_following()
        self._place_pin()
        return True

    def action_crash_line(self) -> None:
        if not self.go_to_crash():
            self.notify("no crash in the log so far")

    def jump_to_error(self) -> None:
        """`e`: the crash line of the newest failure, else the first error line."""
        if not self.go_to_crash():
            self.jump_to_first_error()

    # -- folding and wrapping -----------------------------------------------------------------
    def toggle_fold(self) -> None:
        self.view.set_folded(not self.view.folded)
        self._retitle()
        self._show_following()
        self._place_pin()

    def toggle_wrap(self) -> None:
        self.view.set_wrap(not self.view.wrap)
        self._retitle()
        self._show_following()
        self._place_pin()

    def _retitle(self) -> None:
        view, text = self.view, self.filter_text
        words = [f"filter: {text}" + (" (searching…)" if self.searching else "")] if text else []
        if not view.folded:
            words.append("every line")
        if not view.wrap:
            words.append("no wrap")
        self.border_title = " — ".join(["log", " · ".join(words)]) if words else "log"

    # -- the filter -------------------------------------------------------------------------
    def watch_filter_text(self, text: str) -> None:
        self._pattern = re.compile(re.escape(text), re.IGNORECASE) if text else None
        self._retitle()
        self._start_filter()

    def _start_filter(self) -> None:
        view = self.view
        generation = self._next("filter")
        if self._pattern is None:
            self.searching = False
            view.show(None)
            return
        view.show(Matches(split=len(self.index)))
        self.searching = True
        self._search("filter", generation, self.index.view(), self._pattern, None)

    def watch_searching(self, searching: bool) -> None:
        if self.filter_text:
            self._retitle()

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

    # -- the first error --------------------------------------------------------------------
    def jump_to_first_error(self) -> None:
        """Scroll the first error line on show near the top (following stops there), or say
        there is none; the whole log is searched, in a worker."""
        generation = self._next("first_error")
        self._search("first_error", generation, self.index.view(), ERROR, self.view.matches)

    # -- searching --------------------------------------------------------------------------
    def _next(self, kind: Kind) -> int:
        self._searches[kind] += 1
        return self._searches[kind]

    def _search(
        self,
        kind: Kind,
        generation: int,
        view: IndexView,
        pattern: re.Pattern[str],
        shown: Matches | None,
    ) -> None:
        def work() -> None:
            worker = get_current_worker()

            def stale() -> bool:
                return worker.is_cancelled or self._searches[kind] != generation

            def post(rows: list[int], done: bool) -> None:
                self.post_message(LogSearched(kind, generation, view.generation, rows, done))

            batches = search(view, pattern, dividers=kind == "filter", cancelled=stale)
            if kind == "first_error":
                post(_first(batches, shown), True)
                return
            pending: list[int] = []
            posted = time.monotonic()
            for batch in batches:
                pending += batch
                if pending and time.monotonic() - posted > POST_EVERY_S:
                    post(pending, False)
                    pending, posted = [], time.monotonic()
            if not stale():
                post(pending, True)

        run_guarded(self, work, "log", group=f"log-{kind}")

    # -- following --------------------------------------------------------------------------
    def _show_following(self) -> None:
        paused = "" if self.view.following else "  [paused — End follows]"
        subtitle = ((self.progress_line or "") + paused).strip()
        if subtitle != self._subtitle:  # setting it repaints the whole panel, even unchanged
            self._subtitle = subtitle
            self.border_subtitle = subtitle

    def _scrolled(self) -> None:
        self._show_following()
        self._place_pin()

    def action_follow(self) -> None:
        self.view.follow()
        self._show_following()

    # -- handlers -----------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._place_pin)  # once the view has its new size

    @on(LogSearched)
    def _searched(self, message: LogSearched) -> None:
        message.stop()
        if message.generation != self._searches[message.kind]:
            return  # a newer search of the same kind is under way
        if message.index_generation != self.index.generation:
            if message.kind == "filter":
                self._start_filter()
            else:
                self.jump_to_first_error()
            return
        view = self.view
        if message.kind == "filter":
            if view.matches is not None:
                view.matches.found.extend(message.rows)
                view.grew([])
            self.searching = not message.done
            return
        row = message.rows[0] if message.rows else None
        at = None if row is None else view.position(row)
        if at is None:
            self.notify("no error in the log so far")
            return
        view.jump(max(at - 2, 0))
        self._show_following()
        self._place_pin()


def _first(batches: Iterable[list[int]], shown: Matches | None) -> list[int]:
    """The first row found that is on show (every row is, without a filter)."""
    for batch in batches:
        for row in batch:
            if shown is None or shown.position(row) is not None:
                return [row]
    return []
