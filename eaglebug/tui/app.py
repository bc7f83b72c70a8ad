"""The eaglebug app: three feeds, one screen.

The feeds live outside Textual (`eaglebug/`): the GPU `Sampler`, the `LaunchWatch` of the
current launch's log, the `AcceptanceWatch` that polls a ready server's acceptance, and the
`Controller` that runs every check and every mutating action one at a time. Each calls back on its own thread; the app wraps what it hands over in a Message
(`tui.messages`) for the main screen, which renders it. Problems from any of them are
notifications (`tui.runner`); nothing a feed does can end the app.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual import on
from textual.app import App, SystemCommand
from textual.message import Message
from textual.screen import Screen
from textual.types import NoActiveAppError

from eaglebug.gpu.sampler import Sampler
from eaglebug.gpu.snapshot import BoxSnapshot
from eaglebug.gpu.source import GpuSource
from eaglebug.session.acceptwatch import INTERVAL_S, AcceptanceSnapshot, AcceptanceWatch
from eaglebug.session.controller import ChecksProgressed, Controller, Event
from eaglebug.session.problems import Problem
from eaglebug.session.session import Session
from eaglebug.session.watch import LaunchWatch, WatchSnapshot
from eaglebug.tui.hangup import watch_hangup
from eaglebug.tui.messages import (
    AcceptanceSampled,
    CheckProgressed,
    ControllerReported,
    GpuSampled,
    ProblemReported,
    WatchUpdated,
)
from eaglebug.tui.runner import show_problem
from eaglebug.tui.screens.main import MainScreen

HANGUP_STATUS = 128 + signal.SIGHUP  # as a shell reports a command SIGHUP ended


class EaglebugApp(App[None]):
    CSS_PATH = "eaglebug.tcss"
    TITLE = "eaglebug"

    def __init__(
        self,
        session: Session,
        gpu_source: GpuSource,
        *,
        sample_interval_s: float = 1.0,
        follow_interval_s: float = 0.2,
        run_checks: bool = True,
        open_guide: bool = False,
        launch_when_clear: bool = False,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        stall_limits: dict[str, float] | None = None,
        accept_interval_s: float = INTERVAL_S,
    ) -> None:
        super().__init__()
        self.session = session
        self.gpu_source = gpu_source
        self.sampler = Sampler(
            gpu_source, interval_s=sample_interval_s, on_snapshot=self._sampled, clock=monotonic
        )
        # The watch tells a stalled launch from a quiet log by the sampler's memory (same clock).
        self.launch_watch = LaunchWatch(
            session,
            self._watched,
            interval_s=follow_interval_s,
            on_problem=self.report_problem,
            memory_moved_at=self.sampler.memory_moved_at,
            stall_limits=stall_limits,
            clock=monotonic,
            wall_clock=clock,
        )
        self.accept_watch = AcceptanceWatch(self._accepted, interval_s=accept_interval_s)
        self.controller = Controller(session, self._controlled, launch_when_clear=launch_when_clear)
        self.main = MainScreen(clock, run_checks=run_checks, open_guide=open_guide)
        self._stopping = threading.Event()
        self.hung_up = False  # the terminal is gone: nothing more may be printed to it

    def get_default_screen(self) -> Screen[None]:
        return self.main

    @property
    def workdir(self) -> Path:
        """The working folder: its `.eaglebug/` holds the state file and the errors log."""
        return self.session.config.workdir

    @property
    def winding_down(self) -> bool:
        """Shutdown has begun: the main screen's widgets may already be gone, so messages
        still arriving from the feeds have nothing to update."""
        return not self.is_running or self._stopping.is_set()

    def start_feeds(self) -> None:
        """Once the main screen is up."""
        self.controller.start()
        self.sampler.start()
        self.launch_watch.start()
        self.accept_watch.start()
        if not self.is_headless and sys.__stdin__ is not None:
            watch_hangup(sys.__stdin__.fileno(), self._terminal_gone)

    def _terminal_gone(self) -> None:
        """The terminal hung up and no SIGHUP ended the app (`tui/hangup.py`): end it as
        `q` would (a real server outlives eaglebug; the demo's stand-in ends with the demo),
        with the exit status a hangup gives."""
        self.hung_up = True
        if not self.is_running:  # it ended already: its loop would never run the call
            return
        with contextlib.suppress(RuntimeError):  # it ended meanwhile
            self.call_from_thread(self.exit, None, HANGUP_STATUS)

    def on_unmount(self) -> None:
        self._stopping.set()
        self.controller.close()
        self.launch_watch.stop()
        self.accept_watch.close()
        self.sampler.stop()
        self.gpu_source.close()
        self.session.close()  # the checks' worker process, if any

    # -- the feeds' callbacks (on their threads) -----------------------------------------------
    def _to_main(self, message: Message) -> None:
        """The check of `_stopping` races with shutdown: once the main screen is detached,
        Textual finds no app from it and raises on a post from another thread. The message
        had nothing left to update then."""
        if self._stopping.is_set():
            return
        with contextlib.suppress(NoActiveAppError):
            self.main.post_message(message)

    def _sampled(self, snapshot: BoxSnapshot) -> None:
        self._to_main(GpuSampled(snapshot))

    def _watched(self, snapshot: WatchSnapshot) -> None:
        self._to_main(WatchUpdated(snapshot))

    def _accepted(self, snapshot: AcceptanceSnapshot) -> None:
        self._to_main(AcceptanceSampled(snapshot))

    def _controlled(self, event: Event) -> None:
        if isinstance(event, ChecksProgressed):  # high-rate: coalesced in the queue
            self._to_main(CheckProgressed(event))
        else:
            self._to_main(ControllerReported(event))

    def report_problem(self, problem: Problem) -> None:
        """Show a problem of any thread's work as a notification."""
        if not self._stopping.is_set():
            self.post_message(ProblemReported(problem))

    @on(ProblemReported)
    def _show_problem(self, message: ProblemReported) -> None:
        if not self.winding_down:
            show_problem(self, message.problem)

    # -- the command palette -------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from self.main.commands() or []


def build_app(session: Session, gpu_source: GpuSource, **options: object) -> EaglebugApp:
    """The one way the CLI, the demo and the tests make the app."""
    return EaglebugApp(session, gpu_source, **options)  # type: ignore[arg-type]
