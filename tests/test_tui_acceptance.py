"""After `ready`, the TUI watches the draft's acceptance: the header, the probe key, the finding.

The real app, the real demo: the stand-in serves SGLang's routes over HTTP on the loopback,
the acceptance watch polls them, `s` runs the real probe. Every wait polls the app's state with
a deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)

from eaglebug.checks.logs.acceptance import Report
from eaglebug.demo import DemoScenario
from eaglebug.server.state import load_state, save_state
from eaglebug.tui.app import EaglebugApp
from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.widgets.header import PhaseHeader, sparkline
from tests.live import hermetic_demo_env, kill_launches
from tests.test_demo import apply_fix
from tests.test_tui import ENV_VAR, answer, demo, phase, run, shown, until


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_demo_env(monkeypatch)


@pytest.fixture
def fixed(tmp_path: Path) -> Iterator[DemoScenario]:
    """A demo whose launch reaches ready: the delegations committed, the env var pending."""
    prepared = DemoScenario.prepare(tmp_path / "demo", fast=True)
    apply_fix(prepared)
    state = load_state(prepared.workdir)
    state.pending_env = {ENV_VAR: "1"}
    save_state(prepared.workdir, state)
    yield prepared
    kill_launches(prepared.workdir)


def header_text(app: EaglebugApp) -> str:
    return app.main.query_one(PhaseHeader).render().plain


async def launch_until_ready(pilot: Pilot[None], app: EaglebugApp) -> None:
    await until(pilot, lambda: app.main.check_result is not None, "the first checks")
    await pilot.press("r")
    await answer(pilot, app, ConfirmModal, "y")
    await until(pilot, lambda: phase(app) == "ready", "the launch to be ready")


def test_after_ready_the_header_shows_the_acceptance_and_s_probes(fixed: DemoScenario) -> None:
    app = demo(fixed, accept_interval_s=0.1)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await launch_until_ready(pilot, app)
        # The warmup request gave the server its first verify steps: the poll reads them.
        await until(pilot, lambda: "accept 3.20" in header_text(app), "the acceptance")
        await pilot.press("s")
        await until(
            pilot,
            lambda: any(
                n.notification.title == "probe" and "accept length 3.20" in n.notification.message
                for n in notes
            ),
            "the probe's answer",
        )
        snap = app.accept_watch.poll()
        assert [r.source for r in snap.reports].count("probe") == 1
        assert not any("runtime.low_acceptance" in line for line in shown(app))

    run(app, script)


def test_a_draft_that_stays_at_one_is_a_finding_in_the_checks(fixed: DemoScenario) -> None:
    app = demo(fixed, accept_interval_s=60.0)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await launch_until_ready(pilot, app)
        await until(pilot, lambda: "accept 3.20" in header_text(app), "the first poll")
        for _ in range(3):  # then three reports in a row at 1.0: the speed-up is gone
            app.accept_watch.add(Report(1.0, 0.0, "probe"))
        await until(
            pilot,
            lambda: any("runtime.low_acceptance" in line for line in shown(app)),
            "the watchdog's finding",
        )
        assert "accept 1.00" in header_text(app)
        finding = next(f for f in app.main.runtime_findings)
        assert finding.severity == "error"

    run(app, script)


def test_before_ready_s_says_the_probe_needs_a_ready_server(fixed: DemoScenario) -> None:
    app = demo(fixed)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: app.main.check_result is not None, "the first checks")
        await pilot.press("s")
        await until(
            pilot,
            lambda: any("needs a ready server" in n.notification.message for n in notes),
            "the refusal",
        )
        assert "accept" not in header_text(app)

    run(app, script)


def test_the_sparkline_runs_from_nothing_accepted_to_the_highest() -> None:
    assert sparkline([1.0, 4.0]) == "▁█"
    assert sparkline([1.0, 2.0, 3.0, 4.0])[0] == "▁"
    assert sparkline([3.0, 3.0]) == sparkline([3.0, 3.0], top=4.0)
