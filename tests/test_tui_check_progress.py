"""A cold run of the checks takes seconds: the screen is up before it, and says how far it is.

The real app over the demo's tree with an empty parse cache (every test has its own), and the
real engine: the session's progress callback is held at chosen reports (a gate the test opens),
so the test reads the screen while the checks are provably mid-run, with no sleep and no race.
The engine side runs on a real release (0.5.23): its stages in order, the files done of total
as the index walks the tree, the files parsed as the audit reaches them; how often counts are
said is the tracker's, with its clock moved by the test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)
from textual.widgets import Static  # noqa: TID251 (a UI test drives Textual)

from eaglebug.checks import STAGES
from eaglebug.demo import DemoScenario
from eaglebug.session.checking import CheckResult
from eaglebug.session.controller import ChecksProgressed
from eaglebug.session.progress import FIRST_STAGE, CheckProgress, ProgressTracker
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import EaglebugApp, build_app
from eaglebug.tui.demo import demo_gpus, demo_session
from eaglebug.tui.messages import CheckProgressed, ControllerReported
from eaglebug.tui.widgets.gpu_panel import GpuPanel
from eaglebug.tui.widgets.header import PhaseHeader
from tests.configs import kimi_k25, kimi_k25_eagle3, write_model
from tests.sglang_releases import release
from tests.test_tui import FAST, checks_settled, panel, run, until

GATE_S = 60.0  # the longest the checks wait for the test to open a gate


class GatedSession(Session):
    """The demo's session, its checks held at each report `stops` picks until the test goes on."""

    def __init__(self, config: SessionConfig, stops: list[Callable[[CheckProgress], bool]]) -> None:
        super().__init__(config)
        self.stops = stops
        self.reports: list[CheckProgress] = []
        self.held = threading.Event()  # the checks wait at a stop
        self.go = threading.Event()  # the test lets them go on

    def run_checks(self, progress: Callable[[CheckProgress], None] | None = None) -> CheckResult:
        def reported(report: CheckProgress) -> None:
            self.reports.append(report)
            if progress is not None:
                progress(report)
            if self.stops and self.stops[0](report):
                self.stops.pop(0)
                self.held.set()
                assert self.go.wait(GATE_S), "the test never let the checks go on"
                self.go.clear()

        return super().run_checks(reported)


def state_line(app: EaglebugApp) -> str:
    """The first line above the checks list: how far the checks are, or how they went."""
    return str(panel(app).query_one("#checks-state", Static).render()).split("\n")[0]


def test_the_screen_is_up_before_the_checks_and_says_how_far_they_are(
    scenario: DemoScenario,
) -> None:
    stops: list[Callable[[CheckProgress], bool]] = [
        lambda r: r.stage == FIRST_STAGE,  # before the engine has even loaded
        lambda r: r.total > 0,  # the walk of the tree: files done of total
    ]
    session = GatedSession(demo_session(scenario).config, stops)
    app = build_app(session, demo_gpus(session, scenario), **FAST)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, session.held.is_set, "the checks to start")
        session.held.clear()
        # The checks are held before the engine loaded: the whole screen is up already.
        await until(pilot, lambda: state_line(app) == "running the checks… starting", "state")
        header = app.main.query_one(PhaseHeader)
        assert header.render().plain.startswith(" eaglebug ")
        assert app.main.query_one(GpuPanel).display and not checks_settled(app)
        session.go.set()
        await until(pilot, session.held.is_set, "the walk of the tree")
        session.held.clear()
        report = session.reports[-1]
        assert report.stage == STAGES[0] and 0 < report.done <= report.total
        shown = f"running the checks… reading the tree · {report.done}/{report.total} files"
        await until(pilot, lambda: state_line(app) == shown, "the files done of total")
        session.go.set()
        await until(pilot, lambda: checks_settled(app), "the checks")
        assert state_line(app).startswith("checked in ")
        assert any(f.attribute == "set_eagle3_layers_to_capture" for f in panel(app).findings)
        # The stages came in the engine's order, each once.
        stages = [r.stage for r in session.reports]
        firsts = list(dict.fromkeys(stages))
        assert firsts[0] == FIRST_STAGE
        assert firsts[1:] == [s for s in STAGES if s in firsts]

    run(app, script, size=(120, 40))


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_counts_are_said_at_most_every_tenth_of_a_second_stages_and_batch_ends_always() -> None:
    reports: list[CheckProgress] = []
    clock = Clock()
    tracker = ProgressTracker(reports.append, clock=clock, every_s=0.1)
    tracker.stage("reading the tree")
    for done in range(1, 2142):  # a walk faster than a tenth of a second: only its end
        tracker.files(done, 2141)
    clock.now_s += 0.125
    tracker.files(5, 40)  # the next batch, past a tenth of a second: said
    tracker.files(6, 40)  # ... and not again at once
    tracker.stage("interface audit")
    for _ in range(3):
        tracker.parsed("sglang/srt/models/kimi_k25.py")
    clock.now_s += 0.25
    tracker.parsed("sglang/srt/models/deepseek_v2.py")  # said, with the count so far
    assert [r.text() for r in reports] == [
        "starting",
        "reading the tree",
        "reading the tree · 2141/2141 files",
        "reading the tree · 5/40 files",
        "interface audit",
        "interface audit · 4 files parsed",
    ]


def test_a_burst_of_progress_keeps_only_the_newest() -> None:
    older = CheckProgressed(ChecksProgressed(1, CheckProgress("reading the tree", 10, 2000)))
    newer = CheckProgressed(ChecksProgressed(1, CheckProgress("reading the tree", 30, 2000)))
    assert newer.can_replace(older)
    other = ControllerReported(ChecksProgressed(1, CheckProgress("models")))
    assert not newer.can_replace(other)


def test_a_cold_release_reports_every_stage_the_files_walked_and_parsed(tmp_path: Path) -> None:
    """0.5.23 and the seed launch (Kimi-K2.5 + EAGLE-3, --tp 8), cold: what the TUI hears."""
    target = write_model(tmp_path / "kimi", kimi_k25())
    draft = write_model(tmp_path / "eagle3", kimi_k25_eagle3())
    words = [
        *("python", "-m", "sglang.launch_server", "--model-path", str(target)),
        *("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)),
        *("--tp", "8"),
    ]
    (tmp_path / "work").mkdir()
    config = SessionConfig(
        tmp_path / "work", str(release("0.5.23")), words, readonly=True, gpu_arch="sm90"
    )
    reports: list[CheckProgress] = []
    result = Session(config).run_checks(reports.append)
    assert result.error is None
    stages = list(dict.fromkeys(r.stage for r in reports))
    assert stages == [FIRST_STAGE, *STAGES]
    walk = [r for r in reports if r.stage == STAGES[0] and r.total]
    big = max(r.total for r in walk)
    assert big > 1000  # the runtime's files, looked at as bytes
    batch = [r for r in walk if r.total == big]
    assert batch[-1].done == big  # the end of a batch is always said
    assert [r.done for r in batch] == sorted(r.done for r in batch)
    parsed = [r.parsed for r in reports if r.stage == "interface audit" and r.parsed]
    assert parsed == sorted(set(parsed))  # counting up, as the audit parses (if it took time)
    # The same checks without anyone listening find the same (warm now: from the cache).
    again = Session(config).run_checks()
    assert [f.key for f in again.findings] == [f.key for f in result.findings]


def test_the_state_line_is_laid_out_again_only_when_its_height_changes(
    scenario: DemoScenario,
) -> None:
    """Progress that keeps the lines' height repaints in place (no layout of the screen, ten
    times a second); text that wraps onto more lines, or fewer, gets the height it needs."""
    session = demo_session(scenario)
    app = build_app(session, demo_gpus(session, scenario), **FAST)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: checks_settled(app), "the checks")
        checks = panel(app)
        state = checks.query_one("#checks-state", Static)
        width = state.content_region.width
        checks.show_state("a" * (width - 5))
        await pilot.pause()
        height = state.size.height
        checks.show_state("b" * (width - 5))  # the same height: repainted in place
        await pilot.pause()
        assert state_line(app) == "b" * (width - 5) and state.size.height == height
        checks.show_state("c" * (width + 5))  # one more line
        await pilot.pause()
        assert state.size.height == height + 1
        checks.show_state("d")
        await pilot.pause()
        assert state_line(app) == "d" and state.size.height == height

    run(app, script, size=(120, 40))
