"""The demo's silent story: ready, but the draft's tokens are all rejected, and the way back.

`--speculative-algorithm EAGLE` for an EAGLE-3 draft crashes nothing; preflight flags it
(config.algorithm_mismatch, a flag fix), the stand-in reaches ready over real HTTP, the
acceptance is 1.0 and the watchdog says so, naming the flagged cause; `p` makes the flag pending
and the relaunch accepts about three tokens. Headless and in the TUI, with the real parts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)

from eaglebug.demo import DemoScenario
from eaglebug.demo.story import run_story
from eaglebug.server.state import load_state
from eaglebug.tui.app import EaglebugApp
from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.widgets.header import PhaseHeader
from tests.live import hermetic_demo_env, prepared_demo, session_pids
from tests.test_tui import answer, demo, launch_dialog, phase, run, select, shown, until


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_demo_env(monkeypatch)


@pytest.fixture
def silent(tmp_path: Path) -> Iterator[DemoScenario]:
    yield from prepared_demo(tmp_path / "demo", story="silent")


def test_the_silent_demo_starts_where_the_seed_story_ends(silent: DemoScenario) -> None:
    repo = git.Repo(silent.sglang_root)
    commits = list(repo.iter_commits())
    assert len(commits) == 2 and "Eaglebug-Fix:" in commits[0].message
    assert not repo.is_dirty(untracked_files=True)
    assert "EAGLE" in silent.server_flags and "EAGLE3" not in silent.server_flags
    assert DemoScenario.open(silent.root).story == "silent"


def test_an_unknown_scenario_is_refused(tmp_path: Path) -> None:
    from eaglebug.checks.contract.errors import InputError

    with pytest.raises(InputError, match="no demo scenario 'loud'"):
        DemoScenario.prepare(tmp_path / "demo", fast=True, story="loud")
    assert not (tmp_path / "demo").exists() or not any((tmp_path / "demo").iterdir())


def test_the_silent_story_headless_ends_with_the_speed_up_back(tmp_path: Path) -> None:
    said: list[str] = []
    code = run_story(fast=True, root=tmp_path / "demo", say=said.append, story="silent")
    text = "\n".join(said)
    assert code == 0, text
    assert "config.algorithm_mismatch" in text
    assert "probe: accept length 1.00" in text
    assert (
        "runtime.low_acceptance" in text and "preflight flagged config.algorithm_mismatch" in text
    )
    assert "accepted for the next launch: --speculative-algorithm EAGLE3" in text
    assert "probe: accept length 3.20" in text
    assert "the speed-up is back: 1.00 -> 3.20" in text
    latest = load_state(tmp_path / "demo" / "work").latest
    assert latest is not None and latest.flag_additions == {"--speculative-algorithm": "EAGLE3"}
    assert session_pids(latest.pid) == set()


def header_text(app: EaglebugApp) -> str:
    return app.main.query_one(PhaseHeader).render().plain


def test_the_silent_story_in_the_tui(silent: DemoScenario) -> None:
    app = demo(silent, accept_interval_s=0.1)

    def low() -> bool:
        return any("runtime.low_acceptance" in line for line in shown(app))

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: app.main.check_result is not None, "the first checks")
        assert any("config.algorithm_mismatch" in line for line in shown(app))
        # r: the dialog names the error, which no step of the launch stops on (no "fail");
        # y: it is ready, and it accepts nothing: the watchdog's finding joins the checks.
        await pilot.press("r")
        asked = await launch_dialog(pilot, app)
        assert "The checks found an error: config.algorithm_mismatch." in str(asked.body)
        assert "expect it to fail" not in str(asked.body)
        assert asked.yes == "Launch anyway (y)"
        await answer(pilot, app, ConfirmModal, "y")
        await until(pilot, lambda: phase(app) == "ready", "the launch to be ready")
        await until(pilot, low, "runtime.low_acceptance")
        assert "accept 1.00" in header_text(app)
        finding = app.main.runtime_findings[0]
        assert finding.severity == "error" and "config.algorithm_mismatch" in finding.message
        # The flagged cause: p, y makes its flag fix pending; r, y relaunches with it.
        await select(pilot, app, lambda f: f.id == "config.algorithm_mismatch", "the mismatch")
        await pilot.press("p")
        await answer(pilot, app, ConfirmModal, "y")
        await until(
            pilot,
            lambda: (
                load_state(silent.workdir).pending_flags == {"--speculative-algorithm": "EAGLE3"}
            ),
            "the flag to be pending",
        )
        await pilot.press("r")
        await answer(pilot, app, ConfirmModal, "y")
        await until(
            pilot,
            lambda: (
                (latest := load_state(silent.workdir).latest) is not None and latest.number == 2
            ),
            "the relaunch",
        )
        await until(pilot, lambda: phase(app) == "ready", "the relaunch to be ready")
        await until(pilot, lambda: "accept 3.20" in header_text(app), "the acceptance back")
        await until(pilot, lambda: not low(), "the watchdog's finding to go")
        latest = load_state(silent.workdir).latest
        assert latest is not None and "EAGLE3" in latest.argv

    run(app, script)
