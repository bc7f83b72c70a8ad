"""The log panel reads like the diagnosis: ranks folded, long lines wrapped, the crash line
pinned, the log given the width, and a launch that stopped moving said so in the checks.

Each test runs the real app (`build_app`, as `eaglebug watch --log FILE` builds it) over a
log file and waits for the app's own state with a deadline (`until`), never a fixed sleep;
the stall test moves the app's injected monotonic clock instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from textual.app import App, ComposeResult  # noqa: TID251 (a UI test drives Textual)
from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)
from textual.widgets import Sparkline  # noqa: TID251 (a UI test drives Textual)

from eaglebug.gpu.simulated import SimulatedSource
from eaglebug.logs.index import LogIndex, display
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import EaglebugApp, build_app
from eaglebug.tui.widgets.checks_panel import ChecksPanel
from eaglebug.tui.widgets.header import PhaseHeader
from eaglebug.tui.widgets.log_panel import LogPanel
from eaglebug.tui.widgets.log_view import MAX_WRAPPED_LINES, LogView, wrap_points
from tests.test_tui import FAST, painted, run, shown, until
from tests.test_watch_stall import GRAPHS, LOADING, MINUTE, Clock

CRASH_LOG = Path(__file__).parent / "fixtures" / "logs" / "missing_method_8ranks.log"
CRASH_LINES = [display(raw) for raw in CRASH_LOG.read_bytes().split(b"\n")[:-1]]  # as shown
EXCEPTION = (
    "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute "
    "'set_eagle3_layers_to_capture'"
)
FOLDED = 8 * 7 + 64  # eight milestones every rank printed (seven copies each), 64 bar updates
GIB = 1024**3


def app_for(log: Path, tmp_path: Path, **options: object) -> EaglebugApp:
    """`eaglebug watch --log LOG`'s app: read-only, no checks, two GPUs whose memory stays."""
    session = Session(SessionConfig(tmp_path / "work", log_path=log, readonly=True))
    gpus = SimulatedSource(gpus=2, curve=lambda _gpu, _t_s: 10 * GIB, processes=False)
    return build_app(session, gpus, run_checks=False, **{**FAST, **options})


def crash_log(tmp_path: Path) -> Path:
    log = tmp_path / "server.log"
    shutil.copyfile(CRASH_LOG, log)
    return log


@pytest.fixture
def app(tmp_path: Path) -> EaglebugApp:
    """The watch of a copy of the crash log (`app_for`)."""
    return app_for(crash_log(tmp_path), tmp_path)


async def read_whole(pilot: Pilot[None], app: EaglebugApp) -> LogPanel:
    """The log panel, once the whole crash log is in it and its failure is pinned."""
    logs = app.main.query_one(LogPanel)
    await until(pilot, lambda: len(logs.lines) == 1 + len(CRASH_LINES), "the whole log")
    await until(pilot, lambda: logs.pin.crash is not None, "the crash line")
    await pilot.pause()
    return logs


def crash_position(view: LogView) -> int:
    rows = [r for r in range(len(view.index)) if view.index[r] == EXCEPTION]
    at = view.position(rows[0])
    assert at is not None
    return at


def test_eight_ranks_read_as_one_row_and_f_unfolds_them(app: EaglebugApp) -> None:

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = await read_whole(pilot, app)
        view = logs.view
        assert view.folded and view.row_count == len(logs.lines) - FOLDED
        at = next(y for y, text in enumerate(view.lines) if "Capture cuda graph begin" in text)
        view.jump(at)
        await pilot.pause()
        assert painted(view, at) == (
            "[2026-01-30 10:37:13 TP0-TP7] Capture cuda graph begin. This can take up to "
            "several minutes. avail mem=13.57 GB  ×8"
        )
        assert sum("Init torch distributed begin" in t for t in view.lines) == 1
        # f: every rank's line, the same line still at the top.
        await pilot.press("f")
        await until(pilot, lambda: not view.folded, "f to unfold")
        assert view.row_count == len(logs.lines)
        assert sum("Capture cuda graph begin" in t for t in view.lines) == 8
        assert view.lines[view.top].startswith("[2026-01-30 10:37:13 TP0] Capture cuda graph")
        assert painted(view, view.top).endswith("avail mem=13.57 GB")  # no ranks, no count
        assert str(logs.border_title) == "log — every line"
        # f again: folded again.
        await pilot.press("f")
        await until(pilot, lambda: view.folded, "f to fold")
        assert view.row_count == len(logs.lines) - FOLDED
        assert str(logs.border_title) == "log"
        # A filter shows every matching line, unfolded: /TP3 finds rank 3's own lines.
        await pilot.press("slash", *"TP3] Capture", "enter")
        await until(pilot, lambda: logs.filter_text != "" and not logs.searching, "the filter")
        assert [t for t in view.lines if not t.startswith("────")] == [
            t for t in CRASH_LINES if "TP3] Capture" in t
        ]

    run(app, script, size=(120, 40))


def test_the_crash_line_wraps_whole_at_120_columns_and_w_cuts_it(app: EaglebugApp) -> None:

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = await read_whole(pilot, app)
        view = logs.view
        # The pin says it, whole, while the line is far above the end.
        pin = logs.pin
        assert pin.display and EXCEPTION in str(getattr(pin.content, "plain", pin.content))
        assert pin.region.height >= 2 and logs.region.contains_region(pin.region)
        # e: the line itself, every character of it on screen.
        await pilot.press("e")
        at = crash_position(view)
        await until(pilot, lambda: view.top == at - 2, "e to go to the crash line")
        assert painted(view, at) == EXCEPTION
        assert view.region.width < len(EXCEPTION)  # it did take more than one screen line
        assert not pin.display
        # w: unwrapped, it is cut at the panel's edge (and scrolls sideways).
        await pilot.press("w")
        await until(pilot, lambda: not view.wrap, "w")
        cut = painted(view, at)
        assert cut != EXCEPTION and EXCEPTION.startswith(cut.rstrip())
        assert view.virtual_size.width >= len(EXCEPTION)
        assert str(logs.border_title) == "log — no wrap"
        await pilot.press("w")
        await until(pilot, lambda: view.wrap, "w again")
        assert painted(view, at) == EXCEPTION

    run(app, script, size=(120, 40))


def test_the_crash_line_is_pinned_until_scrolled_to_then_not(
    app: EaglebugApp, tmp_path: Path
) -> None:

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = await read_whole(pilot, app)
        view = logs.view
        assert view.following and logs.pin.display
        at = crash_position(view)
        await pilot.press("tab")  # from the checks to the log
        assert app.focused is view
        for _ in range(50):  # page up until the crash line is on screen
            if view.on_screen(at):
                break
            await pilot.press("pageup")
        assert view.on_screen(at)
        await until(pilot, lambda: not logs.pin.display, "the pin to go")
        crash = logs.pin.crash
        assert crash is not None
        await until(pilot, lambda: crash.seen, "the line to count as read")  # it stayed there
        # Back at the end, the line is off screen again, but it has been read: no pin.
        await pilot.press("end")
        await until(pilot, lambda: view.following, "End")
        await pilot.pause()
        assert not view.on_screen(at) and not logs.pin.display
        # A newer failure pins its own line.
        with (tmp_path / "server.log").open("a") as out:
            out.write(
                "[2026-01-30 10:37:20 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            )
            out.write('  File "/sglang/srt/managers/scheduler.py", line 3130, in run\n')
            out.write(
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n\n"
            )
            out.writelines(f"[2026-01-30 10:37:21] shutting down {i}\n" for i in range(60))
        await until(pilot, lambda: logs.pin.display, "the newer failure's pin")
        assert "Not enough memory" in str(getattr(logs.pin.content, "plain", ""))
        # Enter on the log goes to it.
        await pilot.press("enter")
        await until(pilot, lambda: not logs.pin.display, "Enter to go to it")
        assert "Not enough memory" in view.lines[view.top + 2]

    run(app, script, size=(130, 40))


@pytest.mark.parametrize("size", [(120, 40), (130, 40), (200, 50)])
def test_the_log_gets_the_most_width_side_by_side(app: EaglebugApp, size: tuple[int, int]) -> None:

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await read_whole(pilot, app)
        await until(pilot, lambda: bool(app.main.query(".gpu-row")), "the GPU rows")
        await pilot.pause()
        gpus, log, checks = (app.main.query_one(f"#{n}").region for n in ("gpus", "log", "checks"))
        assert gpus.right <= log.x and log.right <= checks.x
        assert log.width > gpus.width + checks.width - 16
        assert log.width >= 0.45 * size[0]
        sparks = [s for s in app.main.query(Sparkline) if s.display]
        assert bool(sparks) == (size[0] >= 200)  # sparklines only where there is room
        for row in app.main.query(".gpu-text"):  # a GPU's line is never cut
            assert row.region.width >= 28

    run(app, script, size=size)


def test_at_80x24_the_log_keeps_rows_under_its_pin(app: EaglebugApp) -> None:

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = await read_whole(pilot, app)
        assert app.main.has_class("narrow") and logs.pin.display
        assert logs.region.width == 80
        assert logs.pin.region.height == 2
        assert logs.view.scrollable_content_region.height >= 3

    run(app, script, size=(80, 24))


def test_a_launch_that_stops_moving_is_a_warning_in_the_checks_until_it_moves(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOADING + GRAPHS)
    clock = Clock()
    app = app_for(log, tmp_path, monotonic=clock)

    def warned() -> bool:
        return any(f.id == "log.stalled" for f in app.main.query_one(ChecksPanel).findings)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        await until(pilot, lambda: len(logs.lines) == 5, "the log")
        header = app.main.query_one(PhaseHeader)
        await until(pilot, lambda: header.phase == "cuda_graph", "the phase")
        assert not warned()
        clock.now += 6 * MINUTE  # capturing CUDA graphs is given 5 minutes
        await until(pilot, warned, "the stall warning")
        assert any(line.startswith("! log.stalled") for line in shown(app))
        finding = next(f for f in app.main.query_one(ChecksPanel).findings if f.id == "log.stalled")
        assert "6 min in cuda_graph" in finding.message
        with log.open("a") as out:
            out.write("[2026-01-30 10:43:13 TP0] Capture cuda graph end. Time elapsed: 360 s\n")
        await until(pilot, lambda: not warned(), "the warning to go")

    run(app, script, size=(130, 40))


def test_wrapping_cuts_near_the_edge_and_a_huge_line_shows_its_start() -> None:
    path = '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py"'
    assert wrap_points(path, 40) == [40, 80]  # a path is cut where the line ends
    words = "object has no attribute 'get_embed_and_head'"
    assert wrap_points(words, 30) == [24]  # after the space: the quoted name whole below
    assert wrap_points("ab " * 20, 10)[0] == 9  # after the space before the edge
    assert wrap_points("日本語" * 10, 10) == [5, 10, 15, 20, 25]  # two cells each

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield LogView(LogIndex(), id="v")

    async def main() -> None:
        app = One()
        async with app.run_test(size=(60, 20)):
            view = app.query_one(LogView)
            lines = view._render_row("x" * 64 * 1024, [], 50)
            assert len(lines) == MAX_WRAPPED_LINES
            assert lines[-1].text.startswith(f"… {64 * 1024 - 99 * 50} more characters")

    asyncio.run(main())
