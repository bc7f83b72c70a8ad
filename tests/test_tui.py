"""The TUI, driven through Textual's Pilot: the real app, the real demo scenario, real commits.

Every test builds the app with the same factory the CLI uses (`build_app`, through the demo's
`demo_session` / `demo_gpus`), presses keys, and waits for the app's own state with a deadline
(`await pilot.pause(...)` in a loop, never a fixed sleep as synchronisation). Launches use the
demo's fast knob (about a second to ready). No async plugin: each test runs its coroutine with
`asyncio.run`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import git
import pytest
from rich.console import Console
from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)
from textual.widgets import Footer, Input, OptionList, Static  # noqa: TID251 (a UI test drives Textual)

from eaglebug.checks.contract.findings import Finding
from eaglebug.demo import DemoScenario
from eaglebug.gpu.nvml_source import NvmlSource
from eaglebug.gpu.simulated import SimulatedSource
from eaglebug.logs.index import TAIL_ROWS
from eaglebug.server.state import load_state
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import EaglebugApp, build_app
from eaglebug.tui.demo import demo_gpus, demo_session
from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.screens.diff import DiffModal
from eaglebug.tui.screens.help import HelpScreen, key_text
from eaglebug.tui.screens.main import MainScreen
from eaglebug.tui.widgets.checks_panel import ChecksPanel
from eaglebug.tui.widgets.gpu_panel import GpuPanel
from eaglebug.tui.widgets.header import PhaseHeader
from eaglebug.tui.widgets.log_panel import LogPanel
from eaglebug.tui.widgets.log_view import LogView
from tests import fake_nvml
from tests.live import hermetic_demo_env

ENV_VAR = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
KIMI = Path("python/sglang/srt/models/kimi_k25.py")
INTERFACE_ERRORS = {"get_embed_and_head", "set_eagle3_layers_to_capture"}
WIDE = (130, 40)
FAST = {"sample_interval_s": 0.25, "follow_interval_s": 0.05}
DEADLINE_S = 240.0  # only a hung test waits this long; a loaded machine must not fail one


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_demo_env(monkeypatch)


def demo(
    scenario: DemoScenario, readonly: bool = False, apart: bool = False, **options: object
) -> EaglebugApp:
    """The demo's app; `apart`: its checks in a worker process, as `eaglebug demo` runs them."""
    session = demo_session(scenario, readonly, checks_apart=apart)
    return build_app(session, demo_gpus(session, scenario), **{**FAST, **options})


def run(
    app: EaglebugApp,
    script: Callable[[Pilot[None], list[Notify]], Awaitable[None]],
    size: tuple[int, int] = WIDE,
) -> list[Notify]:
    """Run the app headless, drive it with `script`, and return every notification it made."""
    notes: list[Notify] = []

    def hook(message: object) -> None:
        if isinstance(message, Notify):
            notes.append(message)

    async def main() -> None:
        async with app.run_test(size=size, message_hook=hook) as pilot:
            await script(pilot, notes)

    asyncio.run(main())
    return notes


# -- reading the app's state ----------------------------------------------------------------


async def until(
    pilot: Pilot[None], condition: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S
) -> None:
    """Let the app run until `condition()` holds; fail with `what` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


def panel(app: EaglebugApp) -> ChecksPanel:
    return app.main.query_one(ChecksPanel)


def shown(app: EaglebugApp) -> list[str]:
    """The checks list as the user reads it, one option per line."""
    listing = app.main.query_one("#checks-list", OptionList)
    return [
        str(getattr(listing.get_option_at_index(i).prompt, "plain", ""))
        for i in range(listing.option_count)
    ]


def errors(app: EaglebugApp) -> list[Finding]:
    return [f for f in panel(app).findings if f.severity == "error"]


def interface_errors(app: EaglebugApp) -> set[str]:
    return {f.attribute or "" for f in errors(app) if f.id.startswith("interface.")}


def checks_settled(app: EaglebugApp) -> bool:
    return app.main.check_result is not None and not app.main.checking


def phase(app: EaglebugApp) -> str:
    return app.main.query_one(PhaseHeader).phase


def text_of(widget: Static) -> str:
    return str(getattr(widget.content, "plain", widget.content))


async def select(
    pilot: Pilot[None], app: EaglebugApp, wanted: Callable[[Finding], bool], what: str
) -> Finding:
    """Move the checks cursor with the arrow keys onto the first finding that is `wanted`."""
    await until(pilot, lambda: any(wanted(f) for f in panel(app).findings), what)
    target = next(i for i, f in enumerate(panel(app).findings) if wanted(f))
    listing = app.main.query_one("#checks-list", OptionList)
    assert app.focused is listing
    await pilot.press("home", *["down"] * target)
    current = panel(app).current
    assert current is not None and wanted(current), f"cursor not on {what}: {current}"
    return current


async def select_set_eagle3(pilot: Pilot[None], app: EaglebugApp) -> Finding:
    """The cursor onto set_eagle3_layers_to_capture, the demo's check a patch fixes."""
    return await select(
        pilot,
        app,
        lambda f: f.attribute == "set_eagle3_layers_to_capture",
        "the set_eagle3_layers_to_capture check",
    )


async def select_context_length(pilot: Pilot[None], app: EaglebugApp) -> Finding:
    """The cursor onto config.context_length, the demo's check an env var fixes."""
    return await select(
        pilot, app, lambda f: f.id == "config.context_length", "the context-length check"
    )


def assert_untouched(scenario: DemoScenario, original: bytes, imported: git.Commit) -> None:
    """Kimi's file, the tree's repository and the state file as the test found them."""
    assert (scenario.sglang_root / KIMI).read_bytes() == original
    assert head(scenario) == imported
    state = load_state(scenario.workdir)
    assert (state.launches, state.patches, state.pending_env) == ([], [], {})


async def answer(pilot: Pilot[None], app: EaglebugApp, modal: type, key: str) -> None:
    await until(pilot, lambda: isinstance(app.screen, modal), f"the {modal.__name__}")
    await pilot.press(key)
    await until(pilot, lambda: app.screen is app.main, f"the {modal.__name__} to close")


def head(scenario: DemoScenario) -> git.Commit:
    return git.Repo(scenario.sglang_root).head.commit


def as_found(scenario: DemoScenario) -> tuple[bytes, git.Commit]:
    """Kimi's file and the tree's HEAD before the test acts, for `assert_untouched`."""
    return (scenario.sglang_root / KIMI).read_bytes(), head(scenario)


async def launch_dialog(pilot: Pilot[None], app: EaglebugApp) -> ConfirmModal:
    """The yes/no `r` opens."""
    await until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the launch dialog")
    assert isinstance(app.screen, ConfirmModal)
    return app.screen


# -- 1. the whole demo loop -----------------------------------------------------------------


def test_the_demo_loop_from_failing_checks_to_ready(scenario: DemoScenario) -> None:
    app = demo(scenario)
    kimi = scenario.sglang_root / KIMI
    original, imported = as_found(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        # The checks fail before anything launches: the two missing methods and the context.
        await until(pilot, lambda: checks_settled(app), "the first checks")
        assert len(errors(app)) == 3
        assert interface_errors(app) == INTERFACE_ERRORS
        assert {f.id for f in errors(app)} >= {"config.context_length"}
        state = text_of(app.main.query_one("#checks-state", Static))
        assert "3 errors" in state
        assert phase(app) == "idle"

        # r: the dialog says the launch is expected to fail, and where first (a weight load
        # saved); y: the first launch crashes in set_eagle3_layers_to_capture on all 8 ranks.
        await pilot.press("r")
        asked = await launch_dialog(pilot, app)
        assert (
            "The checks expect it to fail (3 errors), first set_eagle3_layers_to_capture "
            "at CUDA graphs." in str(asked.body)
        )
        assert asked.yes == "Launch anyway (y)"
        await answer(pilot, app, ConfirmModal, "y")
        await until(pilot, lambda: phase(app) == "crashed", "the first launch to crash")

        def crash() -> Finding | None:
            return next(
                (f for f in panel(app).findings if f.id == "log.missing_interface_method"), None
            )

        await until(
            pilot,
            lambda: (
                (found := crash()) is not None and len(found.to_json()["details"]["ranks"]) == 8
            ),
            "the log finding of all 8 ranks in the checks",
        )
        found = crash()
        assert found is not None and found.attribute == "set_eagle3_layers_to_capture"
        assert found.class_ and found.class_.endswith("KimiK25ForConditionalGeneration")
        assert any("log.missing_interface_method (8 ranks)" in line for line in shown(app))
        assert load_state(scenario.workdir).latest.outcome == "crashed"

        # Select the check, p: the diff; y: one commit that touches only kimi_k25.py.
        await until(pilot, lambda: checks_settled(app), "the checks after the launch")
        await select(
            pilot,
            app,
            lambda f: (
                f.id.startswith("interface.") and f.attribute == "set_eagle3_layers_to_capture"
            ),
            "the set_eagle3_layers_to_capture check",
        )
        before = app.main.check_result
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, DiffModal), "the diff")
        diff = app.screen
        assert isinstance(diff, DiffModal)
        assert "set_eagle3_layers_to_capture" in diff.patch.methods
        assert "+    def set_eagle3_layers_to_capture" in diff.patch.diff()
        await pilot.press("y")
        await until(
            pilot,
            lambda: app.main.check_result is not before and checks_settled(app),
            "the checks after the patch",
        )
        commit = head(scenario)
        assert list(commit.parents) == [imported]
        assert "Eaglebug-Fix:" in commit.message
        assert list(commit.stats.files) == [KIMI.as_posix()]
        assert kimi.read_bytes() != original
        assert interface_errors(app) == set()
        assert any("fixed: relaunch" in line for line in shown(app))
        assert any(n.notification.title == "patch applied" for n in notes)

        # The context length: select it, p, y: the env var is pending for the next launch.
        await select_context_length(pilot, app)
        await pilot.press("p")
        await answer(pilot, app, ConfirmModal, "y")
        await until(
            pilot,
            lambda: load_state(scenario.workdir).pending_env == {ENV_VAR: "1"},
            "the env var to be pending",
        )
        await until(
            pilot,
            lambda: any(
                "config.context_length" in line and "pending: next launch" in line
                for line in shown(app)
            ),
            "the check to show it pending",
        )

        # r: nothing the checks found stands (one fix committed, one pending), so no warning;
        # y: the next launch reaches ready; the state file records how long it took.
        await pilot.press("r")
        asked = await launch_dialog(pilot, app)
        assert "expect it to fail" not in str(asked.body)
        assert f"with {ENV_VAR}=1" in str(asked.body)
        assert asked.yes == "Yes (y)"
        await answer(pilot, app, ConfirmModal, "y")
        await until(pilot, lambda: phase(app) == "ready", "the launch to be ready")
        await until(
            pilot,
            lambda: load_state(scenario.workdir).latest.ready_after_s is not None,
            "ready_after_s in the state file",
        )
        latest = load_state(scenario.workdir).latest
        assert latest is not None and latest.number == 2
        assert latest.env_additions[ENV_VAR] == "1"
        assert latest.outcome == "ready"
        assert 0 < (latest.ready_after_s or 0) < DEADLINE_S

    run(app, script)


# -- 2. undo --------------------------------------------------------------------------------


async def patch_kimi(pilot: Pilot[None], app: EaglebugApp, scenario: DemoScenario) -> git.Commit:
    """Select set_eagle3_layers_to_capture, p, y; the commit it made."""
    await until(pilot, lambda: checks_settled(app), "the first checks")
    before = head(scenario)
    await select_set_eagle3(pilot, app)
    await pilot.press("p")
    await answer(pilot, app, DiffModal, "y")
    await until(pilot, lambda: head(scenario) != before, "the patch commit")
    await until(pilot, lambda: checks_settled(app) and not interface_errors(app), "the re-check")
    return head(scenario)


@pytest.mark.parametrize("apart", [False, True], ids=["here", "worker"])
def test_undo_reverts_the_patch_commit_and_the_errors_come_back(
    scenario: DemoScenario, apart: bool
) -> None:
    """Patch, undo, the errors back; with the checks (and the patch's re-audit) in this
    process, and in the worker process `eaglebug` runs them in, which ends with the app."""
    app = demo(scenario, apart=apart)
    kimi = scenario.sglang_root / KIMI
    original = kimi.read_bytes()
    workers: set[int | None] = set()

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        patched = await patch_kimi(pilot, app, scenario)
        workers.add(getattr(app.session.checks, "pid", None))
        assert kimi.read_bytes() != original

        await pilot.press("u")
        await answer(pilot, app, ConfirmModal, "y")
        await until(pilot, lambda: head(scenario) != patched, "the revert commit")
        revert = head(scenario)
        assert list(revert.parents) == [patched]
        assert revert.message.startswith("Revert")
        assert patched.hexsha in revert.message
        assert list(revert.stats.files) == [KIMI.as_posix()]
        assert kimi.read_bytes() == original
        await until(
            pilot,
            lambda: checks_settled(app) and interface_errors(app) == INTERFACE_ERRORS,
            "the interface errors to come back",
        )
        assert any(n.notification.title == "undone" for n in notes)
        workers.add(getattr(app.session.checks, "pid", None))

    run(app, script)
    if apart:  # one worker for every check and the re-audit, gone with the app
        (worker,) = workers
        assert worker is not None and worker != os.getpid()
        with pytest.raises(ProcessLookupError):
            os.kill(worker, 0)
    else:
        assert workers == {None}


# -- 3. what the TUI refuses, and what No and Escape leave alone ----------------------------


def test_a_dirty_file_is_refused_with_an_error_and_left_as_it_is(scenario: DemoScenario) -> None:
    app = demo(scenario)
    kimi = scenario.sglang_root / KIMI
    imported = head(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks")
        await select_set_eagle3(pilot, app)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, DiffModal), "the diff")
        # Someone edits the file while the diff is on screen: y must not overwrite it.
        kimi.write_bytes(kimi.read_bytes() + b"\n# a local edit nobody committed\n")
        dirty = kimi.read_bytes()
        await pilot.press("y")
        await until(
            pilot,
            lambda: any(n.notification.severity == "error" for n in notes),
            "the error notification",
        )
        refusal = next(n.notification for n in notes if n.notification.severity == "error")
        assert refusal.title == "not applied"
        assert "kimi_k25.py" in refusal.message
        assert kimi.read_bytes() == dirty
        assert head(scenario) == imported
        assert load_state(scenario.workdir).patches == []
        assert app.screen is app.main

    run(app, script)


@pytest.mark.parametrize("key", ["n", "escape"])
def test_no_and_escape_change_nothing(scenario: DemoScenario, key: str) -> None:
    app = demo(scenario)
    original, imported = as_found(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks")
        # The diff of the interface patch.
        await select_set_eagle3(pilot, app)
        await pilot.press("p")
        await answer(pilot, app, DiffModal, key)
        # The env-var fix of the context length.
        await select_context_length(pilot, app)
        await pilot.press("p")
        await answer(pilot, app, ConfirmModal, key)
        # Relaunch and undo.
        for action in ("r", "u"):
            await pilot.press(action)
            await answer(pilot, app, ConfirmModal, key)
        # No answer handed anything to the controller, the one place that acts.
        assert app.controller.submitted == []
        await until(pilot, lambda: checks_settled(app), "the checks")
        assert app.controller.idle()
        assert_untouched(scenario, original, imported)
        assert phase(app) == "idle"
        assert interface_errors(app) == INTERFACE_ERRORS
        assert not any(n.notification.severity == "error" for n in notes)

    run(app, script)


# -- 4. --readonly --------------------------------------------------------------------------


def footer_actions(app: EaglebugApp) -> set[str]:
    """The actions of the keys the footer shows (FooterKey is private: found by its name)."""
    return {
        str(getattr(key, "action", "")) for key in app.screen.query_one(Footer).query("FooterKey")
    }


def test_readonly_hides_and_ignores_patch_undo_and_relaunch(scenario: DemoScenario) -> None:
    app = demo(scenario, readonly=True)
    original, imported = as_found(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks")
        assert app.main.query_one(PhaseHeader).badge.startswith("DEMO")
        await until(pilot, lambda: "recheck" in footer_actions(app), "the footer")
        shown_actions = footer_actions(app)
        assert {"recheck", "first_error", "filter", "guide", "help", "quit"} <= shown_actions
        assert not {"patch", "undo", "relaunch"} & shown_actions
        for action in ("patch", "undo", "relaunch"):
            assert app.main.check_action(action, ()) is False

        await select_set_eagle3(pilot, app)
        for key in ("p", "u", "r"):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is app.main, f"{key} opened {app.screen}"
        await select_context_length(pilot, app)
        await pilot.press("p")
        await pilot.pause()
        # The key is disabled: no dialog, and nothing was handed to the controller to act on.
        assert app.screen is app.main
        assert app.controller.submitted == []
        assert_untouched(scenario, original, imported)
        # The palette offers no mutating command either.
        titles = {c.title for c in app.get_system_commands(app.main)}
        assert "check: rerun" in titles
        assert not {t for t in titles if t.startswith(("patch:", "server:"))}

    run(app, script)


# -- 5. no NVIDIA driver --------------------------------------------------------------------


def test_no_driver_is_a_state_of_the_gpu_panel_and_the_app_keeps_working(
    scenario: DemoScenario,
) -> None:
    nvml = fake_nvml.FakeNvml(init_error=fake_nvml.NVMLError_DriverNotLoaded)
    app = build_app(demo_session(scenario), NvmlSource(nvml_module=nvml), **FAST)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        gpu_state = app.main.query_one("#gpu-state", Static)
        await until(pilot, lambda: "no NVIDIA driver" in text_of(gpu_state), "the no-driver state")
        assert gpu_state.display
        assert app.main.query_one(GpuPanel).query(".gpu-row").nodes == []
        assert app.main.query_one(GpuPanel).border_subtitle == "NVML"
        # The rest of the app carries on: the checks ran, and run again on a.
        await until(pilot, lambda: checks_settled(app), "the first checks")
        assert interface_errors(app) == INTERFACE_ERRORS
        first = app.main.check_result
        await pilot.press("a")
        await until(
            pilot,
            lambda: app.main.check_result is not first and checks_settled(app),
            "the re-check",
        )
        assert interface_errors(app) == INTERFACE_ERRORS
        # The sampler goes on sampling (a state, not a dead thread), without hammering NVML.
        seen = app.session.latest_gpus
        await until(pilot, lambda: app.session.latest_gpus is not seen, "the next GPU sample")
        latest = app.session.latest_gpus
        assert latest is not None and latest.unavailable and not latest.gpus
        assert nvml.count("nvmlInit") == 1
        assert "no NVIDIA driver" in text_of(gpu_state)
        assert not any(n.notification.severity == "error" for n in notes)

    run(app, script)


# -- 6. 80x24 -------------------------------------------------------------------------------


def test_at_80x24_the_panels_stack_and_all_three_are_visible(scenario: DemoScenario) -> None:
    app = demo(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks")
        await until(pilot, lambda: bool(app.main.query(".gpu-row")), "the GPU rows")
        await pilot.pause()
        assert app.main.has_class("narrow")
        screen = app.main.region
        assert (screen.width, screen.height) == (80, 24)
        regions = {
            name: app.main.query_one(f"#{name}").region for name in ("gpus", "log", "checks")
        }
        for name, region in regions.items():
            assert region.width > 0 and region.height > 0, name
            assert screen.contains_region(region), f"{name} {region} is off the screen"
            assert region.width == 80, name
        # Stacked top to bottom, not overlapping.
        assert regions["gpus"].bottom <= regions["log"].y
        assert regions["log"].bottom <= regions["checks"].y
        # The checks are readable: the list shows the first errors.
        listing = app.main.query_one("#checks-list", OptionList)
        assert listing.region.height >= 3

    run(app, script, size=(80, 24))


def test_wide_screens_are_not_narrow(scenario: DemoScenario) -> None:
    app = demo(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(
            pilot,
            lambda: all(app.main.query(f"#{n}") for n in ("gpus", "log", "checks")),
            "the three panels",
        )
        assert not app.main.has_class("narrow")
        gpus, log, checks = (app.main.query_one(f"#{n}").region for n in ("gpus", "log", "checks"))
        assert gpus.right <= log.x and log.right <= checks.x
        assert gpus.y == log.y == checks.y

    run(app, script)


# -- 7. help and the command palette -------------------------------------------------------


def plain(renderable: object, width: int = 200) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_help_lists_every_binding_of_the_main_screen_with_its_tooltip(
    scenario: DemoScenario,
) -> None:
    app = demo(scenario, run_checks=False)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await pilot.press("question_mark")
        # The screen is current before its children are mounted: wait for the table itself.
        await until(
            pilot,
            lambda: isinstance(app.screen, HelpScreen) and bool(app.screen.query("#key-table")),
            "the help screen's key table",
        )
        table = app.screen.query_one("#key-table", Static)
        text = plain(table.content)
        lines = text.splitlines()
        for binding in MainScreen.BINDINGS:
            assert binding.tooltip, binding
            key = key_text(binding)
            assert any(
                line.split() and line.split()[0] == key and binding.tooltip in line
                for line in lines
            ), f"{key}: {binding.tooltip} not in the help"
        for binding in LogPanel.BINDINGS:
            assert binding.tooltip and binding.tooltip in text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, "the help to close")

    run(app, script)


def test_the_command_palette_offers_what_applies_now(scenario: DemoScenario) -> None:
    app = demo(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks")
        await select_set_eagle3(pilot, app)
        # Not read-only: the footer shows the mutating keys (the read-only test hides them).
        assert {"patch", "undo", "relaunch"} <= footer_actions(app)
        titles = [c.title for c in app.get_system_commands(app.main)]
        assert {"check: rerun", "patch: apply", "server: relaunch"} <= set(titles)
        assert "patch: undo" not in titles  # nothing applied yet
        apply = next(c for c in app.get_system_commands(app.main) if c.title == "patch: apply")
        assert "set_eagle3_layers_to_capture" in apply.help
        # Every custom command is namespaced.
        ours = [t for t in titles if ":" in t]
        assert all(t.split(":")[0] in {"check", "log", "guide", "patch", "server"} for t in ours)
        # The palette's patch command does what p does: the diff.
        apply.callback()
        await until(pilot, lambda: isinstance(app.screen, DiffModal), "the diff")
        await pilot.press("escape")

    run(app, script)


# -- 8. the log panel -----------------------------------------------------------------------


def log_line(i: int) -> str:
    if i == 50:
        return "RuntimeError: CUDA error: an illegal memory access was encountered"
    word = "needle" if i % 10 == 0 else "hay"
    return f"[2026-11-30 12:00:00 TP0] step {i:04d} {word}"


def append(log: Path, numbers: range) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.writelines(log_line(i) + "\n" for i in numbers)


def view_text(view: LogView) -> list[str]:
    return list(view.lines)


def read_to(logs: LogPanel, text: str) -> bool:
    """The panel's newest row is `text` (the log has been read that far)."""
    return len(logs.lines) > 0 and logs.lines[-1] == text


def watching(log: Path, tmp_path: Path) -> EaglebugApp:
    """`eaglebug watch --log LOG`'s app: read-only, no checks, the log and two GPUs."""
    session = Session(SessionConfig(tmp_path / "work", log_path=log, readonly=True))
    return build_app(session, SimulatedSource(gpus=2), run_checks=False, **FAST)


def test_log_panel_follows_filters_jumps_to_the_first_error_and_pauses(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    append(log, range(120))
    app = watching(log, tmp_path)
    every = [log_line(i) for i in range(120)]

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        view = logs.view
        await until(pilot, lambda: read_to(logs, every[-1]), "the log to be read")
        assert [line for line in logs.lines if not line.startswith("────")] == every
        # Following: the newest line is at the bottom.
        await until(pilot, lambda: view.is_vertical_scroll_end, "the view to follow")
        assert view.max_scroll_y > 0
        assert view_text(view)[-1] == every[-1]

        # / opens the filter; only the matching lines stay.
        await pilot.press("slash")
        field = logs.query_one("#log-filter", Input)
        await until(pilot, lambda: field.display and app.focused is field, "the filter input")
        await pilot.press(*"needle", "enter")
        await until(
            pilot, lambda: logs.filter_text == "needle" and not logs.searching, "the filter"
        )
        assert not field.display
        # (the "log restarted" divider stays, so a filtered view still shows where it began)
        divider = logs.lines[0]
        assert divider.startswith("──── log ")
        assert view_text(view) == [divider] + [line for line in every if "needle" in line]
        assert str(logs.border_title) == "log — filter: needle"
        # Escape shows every line again.
        assert app.focused is view
        await pilot.press("escape")
        await until(pilot, lambda: logs.filter_text == "", "the filter to clear")
        assert len(view.lines) == len(logs.lines)

        # e jumps to the first error: it is on screen, near the top, and following stops.
        await pilot.press("e")
        await until(pilot, lambda: not view.following, "e to scroll to the first error")
        shown_now = view_text(view)
        first_error = next(i for i, text in enumerate(shown_now) if "RuntimeError" in text)
        assert view.scroll_y <= first_error < view.scroll_y + view.scrollable_content_region.height
        assert view.scroll_y == first_error - 2
        assert not view.is_vertical_scroll_end
        assert "paused" in str(logs.border_subtitle)

        # End follows again, and says so.
        await pilot.press("end")
        await until(pilot, lambda: view.is_vertical_scroll_end, "End to scroll to the end")
        assert "paused" not in str(logs.border_subtitle)

        # Scrolling up pauses: new lines arrive, the view stays where the user put it.
        await pilot.press("pageup")
        await until(pilot, lambda: not view.is_vertical_scroll_end, "the page up")
        reading = view.scroll_y
        append(log, range(120, 160))
        await until(pilot, lambda: read_to(logs, log_line(159)), "the new lines")
        await pilot.pause()
        assert view_text(view)[-1] == log_line(159)  # written, just not scrolled to
        assert view.scroll_y == reading
        assert "paused" in str(logs.border_subtitle)

        # End resumes following: the next lines scroll into view.
        await pilot.press("end")
        await until(pilot, lambda: view.is_vertical_scroll_end, "End to scroll to the end")
        append(log, range(160, 200))
        await until(pilot, lambda: read_to(logs, log_line(199)), "more lines")
        await until(pilot, lambda: view.is_vertical_scroll_end, "the view to follow again")
        assert view.scroll_y > reading
        assert "paused" not in str(logs.border_subtitle)

    run(app, script)


def test_log_panel_takes_a_burst_and_keeps_the_text_being_read_in_place(tmp_path: Path) -> None:
    """20,000 lines at once: every one stays reachable (Home shows the first, read back from
    the file), the view follows; paused, the text under the reader stays put as lines come."""
    log = tmp_path / "server.log"
    append(log, range(20_000))
    app = watching(log, tmp_path)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        view = logs.view
        await until(pilot, lambda: read_to(logs, log_line(19_999)), "the burst to be read")
        await until(pilot, lambda: view.is_vertical_scroll_end, "the view to follow")
        assert len(view.lines) == 1 + 20_000  # the divider and every line
        assert logs.index.texts_held <= TAIL_ROWS  # the rest stay in the file
        assert view_text(view)[-1] == log_line(19_999)
        await pilot.press("tab")  # from the checks to the log
        assert app.focused is view
        await pilot.press("pageup", "pageup")
        await until(pilot, lambda: not view.following, "following to pause")
        top = view_text(view)[round(view.scroll_y)]
        append(log, range(20_000, 21_000))
        await until(pilot, lambda: read_to(logs, log_line(20_999)), "the next lines")
        await pilot.pause()
        assert view_text(view)[-1] == log_line(20_999)
        assert view_text(view)[round(view.scroll_y)] == top
        assert "paused" in str(logs.border_subtitle)
        # Home: the first line, 21,000 lines up, is on screen, as it is in the file.
        await pilot.press("home")
        await until(pilot, lambda: view.scroll_y == 0, "Home")
        assert shows(view, 1, log_line(0))

    run(app, script)


def rendered(view: LogView) -> list[str]:
    """The view's rows as painted now (the strips the screen shows), blanks trimmed."""
    return [
        "".join(segment.text for segment in view.render_line(y)).rstrip()
        for y in range(view.scrollable_content_region.height)
    ]


def shows(view: LogView, y: int, text: str) -> bool:
    """Row `y` of the view is painted as `text` (cut at the view's width)."""
    row = rendered(view)[y]
    return len(row) >= min(len(text), 30) and text.startswith(row)


def painted(view: LogView, position: int) -> str:
    """The screen lines of the row at `position`, joined (its wrapped lines, in order)."""
    return "".join(text for at, text in view.screen_lines() if at == position)


TRACEBACK = [
    "[2026-11-30 12:00:01 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "sglang/srt/managers/scheduler.py", line 2580, in run_scheduler_process',
    "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute 'get_embed_and_head'",
]


def test_e_and_the_filter_reach_a_traceback_6000_lines_up(tmp_path: Path) -> None:
    """A traceback, then 6,000 more lines (more than the old view's 5,000): `e` still jumps to
    it and `/` still finds it, both read from the file; the memory held stays bounded."""
    log = tmp_path / "server.log"
    with log.open("w", encoding="utf-8") as out:
        out.writelines(f"[2026-11-30 12:00:00 TP0] load step {i}\n" for i in range(10))
        out.writelines(line + "\n" for line in TRACEBACK)
        out.writelines(
            f"[2026-11-30 12:00:02 TP0] Decode batch. #token: {i:06d}, gen throughput 9.9\n"
            for i in range(6_000)
        )
    total = 10 + len(TRACEBACK) + 6_000
    app = watching(log, tmp_path)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        view = logs.view
        await until(pilot, lambda: len(logs.lines) == 1 + total, "the whole log")
        assert logs.index.texts_held <= TAIL_ROWS < total
        await pilot.press("e")
        await until(pilot, lambda: not view.following, "e to jump")
        assert not any(n.notification.message.startswith("no error") for n in notes)
        # e goes to the crash line (the finding's exception line), two rows below the top.
        crash = 1 + 10 + 2  # the divider, ten lines, the traceback's head and frame
        assert view.top == crash - 2
        assert painted(view, crash - 2) == TRACEBACK[0]  # wrapped: every character on screen
        assert painted(view, crash) == TRACEBACK[2]

        # / get_embed_and_head: the one line, from 6,000 lines up.
        await pilot.press("end", "slash", *"get_embed_and_head", "enter")
        await until(pilot, lambda: logs.filter_text and not logs.searching, "the filter")
        assert view_text(view) == [logs.lines[0], TRACEBACK[2]]
        # A new match arriving while filtered joins the end.
        with log.open("a", encoding="utf-8") as out:
            out.write(TRACEBACK[2].replace("TP3", "TP5") + "\n")
        await until(pilot, lambda: len(view.lines) == 3, "the new match")
        assert view_text(view)[-1] == TRACEBACK[2].replace("TP3", "TP5")

    run(app, script)


def test_e_says_so_when_the_log_has_no_error(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"[2026-11-30 12:00:00 TP0] fine {i}\n" for i in range(50)))
    app = watching(log, tmp_path)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        await until(pilot, lambda: len(logs.lines) == 51, "the log")
        await pilot.press("e")
        await until(
            pilot,
            lambda: any(n.notification.message == "no error in the log so far" for n in notes),
            "the answer",
        )
        assert logs.view.following

    run(app, script)


def test_a_truncated_log_gets_a_divider_and_only_what_the_file_still_holds(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    append(log, range(30))
    app = watching(log, tmp_path)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        await until(pilot, lambda: read_to(logs, log_line(29)), "the log")
        log.write_text("[2026-11-30 12:01:00 TP0] a new start\n")
        await until(pilot, lambda: read_to(logs, "[2026-11-30 12:01:00 TP0] a new start"), "it")
        assert list(logs.lines) == [
            "──── log truncated ────",
            "[2026-11-30 12:01:00 TP0] a new start",
        ]
        assert view_text(logs.view) == list(logs.lines)

    run(app, script)
