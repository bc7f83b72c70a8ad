"""The TUI under what goes wrong and what overlaps: it never dies, never interleaves, never
shows a stale result, and its cursor stays on the finding the user chose.

The real app on the real demo scenario, driven through Pilot as in `test_tui.py` (whose
helpers these tests share); every wait polls the app's own state with a deadline.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)
from textual.widgets import OptionList, Static  # noqa: TID251 (a UI test drives Textual)

from eaglebug.demo import DemoScenario
from eaglebug.server.state import load_state, state_dir
from eaglebug.session.checking import CheckResult
from eaglebug.session.controller import ApplyPatch, Relaunch
from eaglebug.session.problems import ERRORS_LOG
from eaglebug.session.progress import CheckProgress
from eaglebug.session.session import Session
from eaglebug.tui.app import EaglebugApp, build_app
from eaglebug.tui.demo import demo_gpus, demo_session
from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.screens.diff import DiffModal
from eaglebug.tui.widgets.checks_panel import ChecksPanel
from tests import gitrepo
from tests.live import recorded_launch
from tests.test_tui import (
    FAST,
    KIMI,
    answer,
    checks_settled,
    demo,
    head,
    interface_errors,
    panel,
    run,
    select,
    text_of,
    until,
)
from tests.test_tui import _hermetic as _hermetic

CRASH_LOG = Path(__file__).parent / "fixtures" / "logs" / "missing_method_8ranks.log"
SET_EAGLE3 = "set_eagle3_layers_to_capture"


def errors_of(notes: list[Notify]) -> list[tuple[str, str]]:
    return [
        (n.notification.title, n.notification.message)
        for n in notes
        if n.notification.severity == "error"
    ]


async def to_the_diff(pilot: Pilot[None], app: EaglebugApp) -> None:
    await until(pilot, lambda: checks_settled(app), "the first checks")
    await select(
        pilot,
        app,
        lambda f: f.attribute == SET_EAGLE3 and f.id.startswith("interface."),
        SET_EAGLE3,
    )
    await pilot.press("p")
    await until(pilot, lambda: isinstance(app.screen, DiffModal), "the diff")


# -- git refusals ---------------------------------------------------------------------------


def test_a_dubious_repository_is_a_notification_and_the_repo_is_untouched(
    scenario: DemoScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's "dubious ownership" (a repository owned by another user, usual on shared GPU
    boxes) refuses every git call: `p`, `y` and `u`, `y` say so with git's remedy; the app
    carries on; the repository's bytes, index and HEAD are exactly as they were."""
    app = demo(scenario)
    repo, kimi = scenario.sglang_root, scenario.sglang_root / KIMI

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await to_the_diff(pilot, app)
        before = gitrepo.everything(repo, kimi)
        monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
        await pilot.press("y")
        await until(pilot, lambda: bool(errors_of(notes)), "the refusal")
        title, message = errors_of(notes)[0]
        assert title == "not applied"
        assert "dubious ownership" in message
        assert f"git config --global --add safe.directory {repo}" in message
        assert "internal error" not in message and "Traceback" not in message
        await pilot.press("u")
        await answer(pilot, app, ConfirmModal, "y")
        await until(pilot, lambda: len(errors_of(notes)) == 2, "the undo's refusal")
        assert errors_of(notes)[1][0] == "undo" and "dubious ownership" in errors_of(notes)[1][1]
        await until(pilot, lambda: app.controller.idle(), "the controller to be idle")
        monkeypatch.delenv("GIT_TEST_ASSUME_DIFFERENT_OWNER")
        assert gitrepo.everything(repo, kimi) == before
        assert load_state(scenario.workdir).patches == []
        # Still alive and working: a re-check runs to the end.
        assert app.is_running and app.screen is app.main
        shown = app.main.check_result
        await pilot.press("a")
        await until(
            pilot, lambda: app.main.check_result is not shown and checks_settled(app), "a re-check"
        )
        assert interface_errors(app) == {"get_embed_and_head", SET_EAGLE3}

    run(app, script)


def test_an_internal_error_is_a_notification_with_its_traceback_on_file(
    scenario: DemoScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = demo(scenario)
    kimi = scenario.sglang_root / KIMI
    original = kimi.read_bytes()

    def broken(self: Session, patch: object) -> object:
        raise RuntimeError("the patch planner broke")

    monkeypatch.setattr(Session, "apply", broken)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await to_the_diff(pilot, app)
        await pilot.press("y")
        await until(pilot, lambda: bool(errors_of(notes)), "the notification")
        title, message = errors_of(notes)[0]
        log = scenario.workdir / ".eaglebug" / ERRORS_LOG
        assert title == "not applied"
        assert message.startswith("internal error: RuntimeError: the patch planner broke")
        assert f"traceback in {log}" in message
        text = log.read_text()
        assert "Traceback (most recent call last)" in text and "in broken" in text
        assert kimi.read_bytes() == original
        # The app goes on: p opens the diff again.
        assert app.is_running and app.screen is app.main
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, DiffModal), "the diff again")
        await pilot.press("n")

    run(app, script)


def test_a_corrupt_state_file_is_a_notification_not_an_exit(scenario: DemoScenario) -> None:
    app = demo(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks")
        state_dir(scenario.workdir).mkdir(parents=True, exist_ok=True)
        (state_dir(scenario.workdir) / "state.json").write_text("{not json")
        await pilot.press("r")  # reads the state file on the UI thread
        await until(pilot, lambda: any(t == "relaunch" for t, _ in errors_of(notes)), "r's error")
        message = next(m for t, m in errors_of(notes) if t == "relaunch")
        assert "not a state file" in message and "mv " in message  # the diagnosis and the hint
        # The launch watch reads it too: one notification, and it keeps watching.
        await until(pilot, lambda: any(t == "log" for t, _ in errors_of(notes)), "the watch's")
        assert sum(t == "log" for t, _ in errors_of(notes)) == 1
        assert app.is_running and app.screen is app.main
        assert app.launch_watch._thread is not None and app.launch_watch._thread.is_alive()
        (state_dir(scenario.workdir) / "state.json").unlink()  # nothing was launched

    run(app, script)


# -- overlapping actions --------------------------------------------------------------------


def test_a_patch_confirmed_during_a_relaunch_waits_for_it(
    scenario: DemoScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = demo(scenario)
    imported = head(scenario)
    gate = threading.Event()
    real = Session.relaunch

    def held(self: Session, wait_gpu_s: float = 120.0) -> object:
        assert gate.wait(60), "the test never let the relaunch go"
        return real(self, wait_gpu_s)

    monkeypatch.setattr(Session, "relaunch", held)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks")
        await pilot.press("r")
        await answer(pilot, app, ConfirmModal, "y")
        await until(pilot, lambda: app.controller.running == Relaunch(), "the relaunch")
        await to_the_diff(pilot, app)
        await pilot.press("y")
        await until(pilot, lambda: app.controller.queued() == ["apply the patch"], "the queue")
        # Confirmed, but waiting: the relaunch is still the one job under way, nothing committed.
        assert app.controller.running == Relaunch()
        assert head(scenario) == imported
        assert any(n.notification.message == "apply the patch: waits for relaunch" for n in notes)
        gate.set()
        await until(pilot, lambda: head(scenario) != imported, "the commit")
        await until(pilot, lambda: app.controller.idle() and checks_settled(app), "the end")
        state = load_state(scenario.workdir)
        assert len(state.launches) == 1 and len(state.patches) == 1
        assert state.launches[0].started_at < state.patches[0].applied_at
        assert [type(a) for a in app.controller.submitted] == [Relaunch, ApplyPatch]

    run(app, script)


class FirstChecksHeld(Session):
    """The first run of the checks waits for `gate` and says it took 111 s."""

    gate = threading.Event()
    runs = 0

    def run_checks(self, progress: Callable[[CheckProgress], None] | None = None) -> CheckResult:
        type(self).runs += 1
        first = type(self).runs == 1
        if first:
            assert self.gate.wait(60), "the test never let the first checks go"
        result = super().run_checks(progress)
        if first:
            result.took_s = 111.0
        return result


def test_a_superseded_check_result_never_reaches_the_screen(scenario: DemoScenario) -> None:
    FirstChecksHeld.gate = threading.Event()
    FirstChecksHeld.runs = 0
    session = FirstChecksHeld(demo_session(scenario).config)
    app = build_app(session, demo_gpus(session, scenario), **FAST)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: FirstChecksHeld.runs == 1, "the first checks to start")
        await pilot.press("a")  # a newer request while the first is under way
        await until(pilot, lambda: app.controller.requested_generation == 2, "the request")
        FirstChecksHeld.gate.set()
        await until(pilot, lambda: checks_settled(app), "the checks")
        result = app.main.check_result
        assert result is not None and result.took_s != 111.0
        assert app.main.check_generation == 2
        assert app.controller.dropped == [1]
        state = text_of(app.main.query_one("#checks-state", Static))
        assert "111" not in state and state.startswith("checked in")

    run(app, script)


# -- the cursor -----------------------------------------------------------------------------


def test_the_cursor_stays_on_its_finding_when_a_log_finding_lands_above_it(
    scenario: DemoScenario,
) -> None:
    log = recorded_launch(scenario, "launch-001.log", started_at=0.0)
    app = demo(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks")
        chosen = await select(
            pilot,
            app,
            lambda f: f.id == "interface.missing" and f.attribute == SET_EAGLE3,
            SET_EAGLE3,
        )
        listing = app.main.query_one("#checks-list", OptionList)
        at = listing.highlighted
        assert at is not None
        shutil.copyfile(CRASH_LOG, log)  # the launch crashes: a log finding, sorted first
        await until(
            pilot,
            lambda: any(f.id.startswith("log.") for f in panel(app).findings),
            "the log finding",
        )
        findings = app.main.query_one(ChecksPanel).findings
        assert findings[0].id == "log.missing_interface_method"  # it landed above the cursor
        assert listing.highlighted == at + 1
        current = panel(app).current
        assert current is not None and current.key == chosen.key
        # p acts on the finding the user chose, not on whatever row is now at its old place.
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, DiffModal), "the diff")
        assert isinstance(app.screen, DiffModal) and SET_EAGLE3 in app.screen.patch.methods
        await pilot.press("n")

    run(app, script)
