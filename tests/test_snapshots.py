"""SVG snapshots of the real screens, built from the demo scenario with nothing left to chance.

Every input that reaches the screen is pinned: the wall clock (`clock=`), the simulated GPUs
(a fixed curve and an injected clock; the sampler's interval is an hour and the test takes the
samples by hand), the checks' duration (the panel prints it), the checks run once the GPUs are
known (the memory check reads them), the launch log (a fixture file, never a running server)
and the environment preflight reads. Every wait polls the app's own state, bounded. The scratch tree lives under `tmp_path`, which changes every run;
no screen here shows an absolute path, so two runs that pass prove that too.

`pytest tests/test_snapshots.py --snapshot-update` rewrites `tests/__snapshots__/` after a
deliberate change of the screens; look at the SVGs before committing them.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)
from textual.screen import Screen  # noqa: TID251 (a UI test drives Textual)
from textual.widgets import OptionList, Sparkline  # noqa: TID251 (a UI test drives Textual)

from eaglebug.demo import DemoScenario
from eaglebug.demo.memfile import DRIVER_IDLE_BYTES
from eaglebug.gpu.simulated import SimulatedSource
from eaglebug.session.checking import CheckResult
from eaglebug.session.progress import CheckProgress
from eaglebug.session.session import Session
from eaglebug.tui.app import EaglebugApp, build_app
from eaglebug.tui.demo import demo_session
from eaglebug.tui.screens.diff import DiffModal
from eaglebug.tui.screens.evidence import EvidenceScreen
from eaglebug.tui.screens.guide import GuideScreen
from eaglebug.tui.widgets.checks_panel import ChecksPanel
from eaglebug.tui.widgets.gpu_panel import GpuRow
from eaglebug.tui.widgets.header import PhaseHeader
from eaglebug.tui.widgets.log_panel import LogPanel
from tests import gitrepo
from tests.live import recorded_launch

Snap = Callable[..., bool]

FIXED_S = 1_769_769_434.0  # the pinned wall clock: 2026-01-30 10:37:14 UTC
CHECKS_TOOK_S = 0.2  # what the checks panel says they took
LAUNCH_AGO_S = 78.0  # the crashed launch started this long before FIXED_S
CRASH_LOG = Path(__file__).parent / "fixtures" / "logs" / "missing_method_8ranks.log"
GPUS = 8
SAMPLES = 6  # GPU samples in the sparklines
WIDE = (130, 40)
NARROW = (80, 24)
WAIT_S = 240.0  # upper bound on any one wait (a hung test); each test takes about 1.5 s


class PinnedSession(Session):
    """The demo's session, but the checks always "took" the same time (the panel prints it)."""

    def run_checks(self, progress: Callable[[CheckProgress], None] | None = None) -> CheckResult:
        result = super().run_checks(progress)
        result.took_s = CHECKS_TOOK_S
        return result


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer git config, no SGLang env var (preflight reads them), no colour opt-out."""
    gitrepo.hermetic(monkeypatch)
    for name in list(os.environ):
        if name.startswith(("SGLANG_", "EAGLEBUG_DEMO_")) or name == "NO_COLOR":
            monkeypatch.delenv(name)


@pytest.fixture
def scenario(tmp_path: Path) -> DemoScenario:
    return DemoScenario.prepare(tmp_path / "demo", tp=GPUS, fast=True)  # nothing is launched


def pinned_app(
    scenario: DemoScenario, *, crashed_log: Path | None = None, env: dict[str, str] | None = None
) -> EaglebugApp:
    """The demo's app with a pinned clock, idle simulated GPUs and, optionally, a crashed launch.

    The checks are started by the test (`checked`) once the first GPU sample is in, as the
    memory check depends on it.
    """
    if crashed_log is not None:
        log = recorded_launch(
            scenario,
            "launch-001-20260130-103600.log",
            started_at=FIXED_S - LAUNCH_AGO_S,
            phase="crashed",
            outcome="crashed",
            exit_code=1,
            env_additions=env or {},
        )
        shutil.copyfile(crashed_log, log)
    session = PinnedSession(demo_session(scenario).config)
    gpus = SimulatedSource(
        gpus=scenario.tp,
        total_bytes=scenario.gpu_bytes,
        curve=lambda _gpu, _t_s: DRIVER_IDLE_BYTES,  # no server holds memory
        processes=False,
        label="demo",
        clock=lambda: 0.0,
        wall_clock=lambda: FIXED_S,
    )
    return build_app(
        session,
        gpus,
        sample_interval_s=3600.0,  # one sample, when the app starts
        follow_interval_s=0.05,
        run_checks=False,
        clock=lambda: FIXED_S,
    )


async def until(pilot: Pilot[None], ready: Callable[[], bool], what: str) -> None:
    """Let the app run until `ready()` holds (bounded), then let it render."""
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)
    await pilot.pause()


def _gpus_shown(app: EaglebugApp, samples: int) -> bool:
    rows = app.main.query(GpuRow)
    return len(rows) == GPUS and all(
        len(row.query_one(Sparkline).data or []) == samples for row in rows
    )


async def checked(pilot: Pilot[None]) -> None:
    """A few GPU samples are on screen, then the checks ran and are shown."""
    app = pilot.app
    assert isinstance(app, EaglebugApp)
    await until(pilot, lambda: _gpus_shown(app, 1), "the first GPU sample")
    for _ in range(SAMPLES - 1):
        app.sampler.step()  # the next beats, by hand: the sampler's thread sleeps for an hour
    await until(pilot, lambda: _gpus_shown(app, SAMPLES), f"{SAMPLES} GPU samples")
    app.main.recheck()
    await until(
        pilot, lambda: app.main.check_result is not None and not app.main.checking, "the checks"
    )
    assert app.main.check_result is not None and app.main.check_result.error is None


async def checked_with_crash(pilot: Pilot[None]) -> None:
    """As `checked`, and the whole crash log is read: phase, lines and the log's finding."""
    app = pilot.app
    assert isinstance(app, EaglebugApp)
    lines = CRASH_LOG.read_bytes().count(b"\n")  # each one ends a line the panel keeps
    await checked(pilot)
    panel = app.main.query_one(LogPanel)
    header = app.main.query_one(PhaseHeader)
    await until(
        pilot,
        lambda: len(panel.lines) == 1 + lines and header.phase == "crashed",  # 1: the divider
        "the crash log",
    )
    await until(
        pilot,
        lambda: any(f.id.startswith("log.") for f in app.main.query_one(ChecksPanel).findings),
        "the log's finding in the checks panel",
    )


def highlight(app: EaglebugApp, attribute: str) -> None:
    panel = app.main.query_one(ChecksPanel)
    index = next(i for i, f in enumerate(panel.findings) if f.attribute == attribute)
    panel.query_one(OptionList).highlighted = index


def then(
    first: Callable[[Pilot[None]], Awaitable[None]],
    keys: tuple[str, ...],
    shown: Callable[[EaglebugApp], bool],
    attribute: str | None = None,
) -> Callable[[Pilot[None]], Awaitable[None]]:
    """`first`, then select a check by attribute, press keys and wait until `shown` holds."""

    async def run(pilot: Pilot[None]) -> None:
        await first(pilot)
        app = pilot.app
        assert isinstance(app, EaglebugApp)
        if attribute is not None:
            highlight(app, attribute)
            await pilot.pause()
        await pilot.press(*keys)
        await until(pilot, lambda: shown(app), f"the screen after {keys}")

    return run


def test_main_after_checks(snap_compare: Snap, scenario: DemoScenario) -> None:
    """The demo before any launch: idle GPUs, no log yet, preflight's three blockers."""
    assert snap_compare(pinned_app(scenario), terminal_size=WIDE, run_before=checked)


def test_main_crashed_launch(snap_compare: Snap, scenario: DemoScenario) -> None:
    """A launch crashed in set_eagle3_layers_to_capture on 8 ranks: phase, log and its finding."""
    app = pinned_app(scenario, crashed_log=CRASH_LOG)
    assert snap_compare(app, terminal_size=WIDE, run_before=checked_with_crash)


def test_main_launch_on_some_gpus(snap_compare: Snap, scenario: DemoScenario) -> None:
    """A launch given GPUs 4-7 of the eight (CUDA_VISIBLE_DEVICES): the GPU panel dims the
    others and its title says which the launch runs on."""
    app = pinned_app(scenario, crashed_log=CRASH_LOG, env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"})

    async def run(pilot: Pilot[None]) -> None:
        await checked_with_crash(pilot)
        rows = app.main.query(GpuRow)
        await until(
            pilot,
            lambda: [r.key[1] for r in rows if r.has_class("elsewhere")] == [0, 1, 2, 3],
            "GPUs 0-3 dimmed",
        )

    assert snap_compare(app, terminal_size=WIDE, run_before=run)


def on_set_eagle3(
    snap_compare: Snap, scenario: DemoScenario, key: str, screen: type[Screen[Any]]
) -> bool:
    """After the checks, `key` on set_eagle3_layers_to_capture opens `screen`: the snapshot."""
    run = then(
        checked,
        (key,),
        lambda app: isinstance(app.screen, screen),
        "set_eagle3_layers_to_capture",
    )
    return snap_compare(pinned_app(scenario), terminal_size=WIDE, run_before=run)


def test_evidence(snap_compare: Snap, scenario: DemoScenario) -> None:
    """Enter on set_eagle3_layers_to_capture: call sites, guards, delegate, the fix."""
    assert on_set_eagle3(snap_compare, scenario, "enter", EvidenceScreen)


def test_diff(snap_compare: Snap, scenario: DemoScenario) -> None:
    """p on set_eagle3_layers_to_capture: the patch as a diff, waiting for y or n."""
    assert on_set_eagle3(snap_compare, scenario, "p", DiffModal)


def test_guide(snap_compare: Snap, scenario: DemoScenario) -> None:
    """g: the guide's first step, built from this tree's own call sites."""
    run = then(checked, ("g",), lambda app: isinstance(app.screen, GuideScreen))
    assert snap_compare(pinned_app(scenario), terminal_size=WIDE, run_before=run)


def test_log_folded_at_120(snap_compare: Snap, scenario: DemoScenario) -> None:
    """120 columns, the crashed launch's log from its first line: what all eight ranks printed
    is one row each (`TP0-TP7 ... ×8`), long lines wrap, the crash line is pinned above."""

    def at_top(app: EaglebugApp) -> bool:
        view = app.main.query_one(LogPanel).view
        return view.scroll_y == 0 and app.focused is view

    run = then(checked_with_crash, ("tab", "home"), at_top)
    app = pinned_app(scenario, crashed_log=CRASH_LOG)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run)


def test_crash_line_at_120(snap_compare: Snap, scenario: DemoScenario) -> None:
    """120 columns, `e`: the crash line near the top, whole (wrapped), and the pin gone."""

    def gone(app: EaglebugApp) -> bool:
        logs = app.main.query_one(LogPanel)
        return not logs.view.following and not logs.pin.display

    run = then(checked_with_crash, ("e",), gone)
    app = pinned_app(scenario, crashed_log=CRASH_LOG)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run)


def test_narrow_80x24(snap_compare: Snap, scenario: DemoScenario) -> None:
    """80x24, with a crashed launch: the panels stack and stay readable."""
    app = pinned_app(scenario, crashed_log=CRASH_LOG)
    assert snap_compare(app, terminal_size=NARROW, run_before=checked_with_crash)
