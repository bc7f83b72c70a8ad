"""Regenerate `screenshots/*.svg` from the demo: `python scripts/screenshots.py`.

Plays the demo's whole story headless (`App.run_test`), with the real stand-in server and the
real scratch git repository, and saves an SVG (`App.save_screenshot`) at each step:

    main.svg        the checks ran, nothing launched yet: preflight's three launch blockers
    evidence.svg    Enter on set_eagle3_layers_to_capture: call sites, guards, delegate, fix
    diff.svg        p on it: the patch of the wrapper class as a diff, before y
    guide.svg       g: the guide's first step
    help.svg        ?: every key
    crashed.svg     r, y: the first launch crashes in set_eagle3_layers_to_capture, all ranks
    narrow.svg      the same at 80x24: the panels stack
    loading.svg     after the patch (p, y) and the env var (p, y): the second launch loading
    ready.svg       ... and ready

Each step waits for the app's own state (bounded), not for a fixed time, but the pictures are
not byte-stable: times, pids and scratch paths differ run to run. The byte-stable snapshots
are the tests' (`tests/test_snapshots.py`). Takes about a minute; leaves no process behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot  # noqa: TID251 (drives the Textual app)
from textual.screen import Screen  # noqa: TID251 (drives the Textual app)
from textual.widgets import OptionList  # noqa: TID251 (drives the Textual app)

from eaglebug.demo import DemoScenario
from eaglebug.tui.app import EaglebugApp, build_app
from eaglebug.tui.demo import demo_gpus, demo_session
from eaglebug.tui.screens.diff import DiffModal
from eaglebug.tui.screens.evidence import EvidenceScreen
from eaglebug.tui.screens.guide import GuideScreen
from eaglebug.tui.screens.help import HelpScreen
from eaglebug.tui.widgets.checks_panel import ChecksPanel
from eaglebug.tui.widgets.header import PhaseHeader

ROOT = Path(__file__).resolve().parents[1]
SIZE = (130, 40)
NARROW = (80, 24)
LAUNCH_S = 12.0  # how long the stand-in takes to ready: long enough to catch it loading
WAIT_S = 90.0  # upper bound on any one wait
CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


class Story:
    """The demo, step by step, saving a screenshot where the README wants one."""

    def __init__(self, pilot: Pilot[None], out: Path) -> None:
        self.pilot = pilot
        app = pilot.app
        assert isinstance(app, EaglebugApp)
        self.app = app
        self.out = out

    async def until(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            await self.pilot.pause(0.05)
        await self.pilot.pause()

    async def shot(self, name: str) -> None:
        await self.pilot.wait_for_scheduled_animations()
        await self.pilot.pause()
        saved = Path(self.app.save_screenshot(f"{name}.svg", str(self.out)))
        print(f"  {saved.relative_to(ROOT) if saved.is_relative_to(ROOT) else saved}")

    # -- what the app is doing --------------------------------------------------------------
    @property
    def checks(self) -> ChecksPanel:
        return self.app.main.query_one(ChecksPanel)

    def checked(self) -> bool:
        return self.app.main.check_result is not None and not self.app.main.checking

    def phase(self) -> str:
        return self.app.main.query_one(PhaseHeader).phase

    def launch_number(self) -> int:
        record = self.app.session.current_launch()
        return record.number if record else 0

    async def select(self, match: Callable[[str, str | None], bool]) -> None:
        """Highlight the first check whose (id, attribute) matches."""
        await self.until(
            lambda: any(match(f.id, f.attribute) for f in self.checks.findings), "the check"
        )
        index = next(i for i, f in enumerate(self.checks.findings) if match(f.id, f.attribute))
        self.checks.query_one(OptionList).highlighted = index
        await self.pilot.pause()

    async def press_until(self, key: str, shown: Callable[[], bool], what: str) -> None:
        await self.pilot.press(key)
        await self.until(shown, what)

    async def shot_of(self, key: str, screen: type[Screen[Any]], name: str, close: str) -> None:
        """`key` opens `screen` over the main one: its screenshot `name`, then `close` shuts it."""
        await self.press_until(key, lambda: isinstance(self.app.screen, screen), name)
        await self.shot(name)
        await self.press_until(close, lambda: self.app.screen is self.app.main, "the main screen")

    async def launch(self, number: int, phase: str) -> None:
        """r, y; then wait for this launch to reach `phase` (and the re-check after it)."""
        await self.press_until("r", lambda: self.app.screen is not self.app.main, "the confirm")
        await self.pilot.press("y")
        await self.until(lambda: self.launch_number() == number, f"launch {number}")
        await self.until(lambda: self.phase() == phase and self.checked(), f"launch {number}")

    # -- the story ----------------------------------------------------------------------------
    async def play(self) -> None:
        app, main = self.app, self.app.main
        await self.until(self.checked, "the first checks")
        await self.until(lambda: self.app.session.latest_gpus is not None, "a GPU sample")
        main.recheck()  # once the GPUs are known, so the memory check runs on them
        await self.until(self.checked, "the checks")
        await self.shot("main")

        interface = "interface.missing"
        await self.select(lambda i, a: i == interface and a == "set_eagle3_layers_to_capture")
        await self.shot_of("enter", EvidenceScreen, "evidence", close="escape")
        await self.shot_of("p", DiffModal, "diff", close="n")
        await self.shot_of("g", GuideScreen, "guide", close="escape")
        await self.shot_of("question_mark", HelpScreen, "help", close="escape")

        # Launch as the user would by hand: it crashes where SGLang 0.5.9 does.
        await self.launch(1, "crashed")
        await self.shot("crashed")
        await self.pilot.resize_terminal(*NARROW)
        await self.until(lambda: main.has_class("narrow"), "the narrow layout")
        await self.shot("narrow")
        await self.pilot.resize_terminal(*SIZE)
        await self.until(lambda: not main.has_class("narrow"), "the wide layout")

        # The patch: one commit in the scratch SGLang repository.
        await self.select(lambda i, a: i == interface and a == "set_eagle3_layers_to_capture")
        await self.press_until("p", lambda: isinstance(app.screen, DiffModal), "the diff")
        await self.pilot.press("y")
        await self.until(lambda: bool(app.session.server.state().patches), "the commit")
        await self.until(
            lambda: self.checked() and not any(i == interface for i, _ in self._errors()),
            "the re-check after the patch",
        )
        # The next launch would crash on the context length; accept the env var first.
        await self.select(lambda i, _a: i == "config.context_length")
        await self.press_until("p", lambda: app.screen is not main, "the env confirm")
        await self.pilot.press("y")
        await self.until(lambda: CONTEXT_ENV in app.session.pending_env(), "the pending env var")
        await self.until(lambda: self.checked() and not self._errors(), "no launch blocker")

        await self.press_until("r", lambda: app.screen is not main, "the confirm")
        await self.pilot.press("y")
        await self.until(lambda: self.launch_number() == 2, "launch 2")
        header = main.query_one(PhaseHeader)
        await self.until(
            lambda: header.phase == "loading" and header.bar is not None and header.bar.done >= 24,
            "launch 2 loading its weights",
        )
        await self.shot("loading")
        await self.until(lambda: self.phase() in {"ready", "crashed"}, "launch 2 to end")
        await self.until(self.checked, "the re-check")
        if self.phase() != "ready":
            raise RuntimeError(f"launch 2 did not get ready: {self.phase()}")
        await self.pilot.pause(1.5)  # a few more GPU samples of the running server
        await self.shot("ready")

    def _errors(self) -> list[tuple[str, str | None]]:
        result = self.app.main.check_result
        findings = result.findings if result else []
        return [(f.id, f.attribute) for f in findings if f.severity == "error"]


async def run(out: Path, scratch: Path) -> None:
    scenario = DemoScenario.prepare(scratch / "demo", seconds=LAUNCH_S)
    session = demo_session(scenario)
    app = build_app(session, demo_gpus(session, scenario), sample_interval_s=0.5)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await Story(pilot, out).play()
    finally:
        with contextlib.suppress(Exception):
            session.stop()  # the server outlives the app by design; not this one


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "screenshots", help="where the SVGs go (screenshots/)"
    )
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # The demo's own story, whatever this shell has set: no override of the context length,
    # no git config of the user's (hooks, signing) on the scratch repository's commits.
    os.environ.pop(CONTEXT_ENV, None)
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
    with tempfile.TemporaryDirectory(prefix="eaglebug-shots-") as scratch:
        os.environ["XDG_CACHE_HOME"] = scratch  # the parse cache, too, goes away afterwards
        print(f"demo story -> {out}")
        asyncio.run(run(out, Path(scratch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
