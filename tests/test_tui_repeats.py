"""What repeats reads as one row: a progress bar printed at every update, eaglebug's own polls;
and a ready demo looks like a real launch (its simulated GPUs busy serving).

The real app over real logs: a launch's log file grows line by line with a real launch's bars
(`fixtures/logs/bars/`, the corpus; `eaglebug watch --log FILE`'s app), and the demo's stand-in
reaches ready and is polled by the real acceptance watch. The header's time left is read with
the app's clock pinned, then moved, never waited for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)

from eaglebug.demo import DemoScenario
from eaglebug.logs.follow import LogFollower, LogLine
from eaglebug.tui.app import EaglebugApp
from eaglebug.tui.widgets.header import PhaseHeader
from eaglebug.tui.widgets.log_panel import LogPanel
from tests.live import hermetic_demo_env, prepared_demo
from tests.test_tui import demo, painted, phase, run, until
from tests.test_tui_acceptance import launch_until_ready
from tests.test_tui_log import app_for

LOGS = Path(__file__).parent / "fixtures" / "logs"
CAPTURE = LOGS / "bars" / "capture_dp_ep_newlines.log"
READY_LOG = LOGS / "corpus" / "ready_eagle3_llama31_8b_draft_context_warning.log"
NOW_S = 1_769_769_434.0


class Clock:
    """The app's wall clock, moved by the test."""

    def __init__(self) -> None:
        self.now_s = NOW_S

    def __call__(self) -> float:
        return self.now_s


def header(app: EaglebugApp) -> str:
    return app.main.query_one(PhaseHeader).render().plain


def raw_lines(path: Path) -> list[bytes]:
    """The file's lines as written, each with its newline (and its `\\r`, if any)."""
    return path.read_bytes().splitlines(keepends=True)


def watching_an_empty_log(tmp_path: Path) -> tuple[Path, Clock, EaglebugApp]:
    """`eaglebug watch --log FILE`'s app over a log nothing has written yet, its clock pinned."""
    log = tmp_path / "server.log"
    log.touch()
    clock = Clock()
    return log, clock, app_for(log, tmp_path, clock=clock)


def test_a_capture_bar_is_one_row_that_updates_and_the_header_counts_down(tmp_path: Path) -> None:
    log, _clock, app = watching_an_empty_log(tmp_path)
    lines = raw_lines(CAPTURE)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        view = logs.view
        with log.open("ab") as out:
            for k, line in enumerate(lines, start=1):  # a line per beat, as the capture goes
                out.write(line)
                out.flush()
                await until(pilot, lambda k=k: len(logs.lines) == 1 + k, f"line {k}")
        await until(pilot, lambda: phase(app) == "cuda_graph", "the capture's phase")
        # The divider, the begin line, the blank line tqdm starts with, one row for the bar.
        assert view.row_count == 4
        await pilot.pause()
        assert painted(view, 3).startswith("Capturing batches (bs=1 avail_mem=10.17 GB): 100%")
        assert "6/6" in header(app) and "left" not in header(app)  # done: nothing left

    run(app, script, size=(120, 40))


def test_the_header_says_what_is_left_from_the_bars_own_rate(tmp_path: Path) -> None:
    log, clock, app = watching_an_empty_log(tmp_path)
    capture = raw_lines(CAPTURE)
    three = next(k for k, line in enumerate(capture) if b" 3/6 [00:32<00:30, 10.19s/it]" in line)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        log.write_bytes(b"".join(capture[: three + 1]))
        await until(pilot, lambda: len(logs.lines) == 2 + three, "the capture at 3/6")
        await until(pilot, lambda: "cuda graph 3/6" in header(app), "the header's count")
        # 3 batches left at 10.19 s each: 30.57 s, as the bar's own rate says.
        assert "cuda graph 3/6 · 0:30 left" in header(app)
        clock.now_s += 12.0  # no new state for 12 s: the header counts down by itself
        assert "cuda graph 3/6 · 0:18 left" in header(app)
        clock.now_s += 60.0
        assert "cuda graph 3/6 · 0:00 left" in header(app)

    run(app, script, size=(120, 40))


def test_a_shard_bar_redrawn_with_carriage_returns_is_one_row_and_counted(tmp_path: Path) -> None:
    """0.5.9's loader: each update `\\r` + the bar + `\\n` (a docs-CI notebook's launch)."""
    lines = raw_lines(READY_LOG)
    two = next(k for k, line in enumerate(lines) if b"| 2/4 [00:08<00:08,  4.05s/it]" in line)
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(lines[: two + 1]))
    with LogFollower(log, from_start=True) as follower:
        expected = sum(isinstance(event, LogLine) for event in follower.poll())
    clock = Clock()
    app = app_for(log, tmp_path, clock=clock)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        view = logs.view
        await until(pilot, lambda: len(logs.lines) == 1 + expected, "the log so far")
        await until(pilot, lambda: "loading 2/4" in header(app), "the load's count")
        assert "loading 2/4 · 0:08 left" in header(app)  # 2 shards at 4.05 s each
        assert [t for t in view.lines if "checkpoint shards" in t] == [
            "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]"
        ]  # the row is the bar's first line ...
        row = next(y for y, t in enumerate(view.lines) if "checkpoint shards" in t)
        await pilot.pause()
        assert painted(view, row) == (  # ... showing its newest state
            "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:08<00:08,  4.05s/it]"
        )
        # f shows every state as printed, and folds them again.
        await pilot.press("f")
        await until(pilot, lambda: not view.folded, "f")
        assert sum("checkpoint shards" in t for t in view.lines) == 3
        await pilot.press("f")
        await until(pilot, lambda: view.folded, "f again")
        assert sum("checkpoint shards" in t for t in view.lines) == 1

    run(app, script, size=(120, 40))


@pytest.fixture
def silent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DemoScenario]:
    """`eaglebug demo --scenario silent --fast`: its launch reaches ready."""
    hermetic_demo_env(monkeypatch)
    yield from prepared_demo(tmp_path / "demo", story="silent")


def test_eaglebugs_polls_of_a_ready_server_fold_into_one_row_that_counts_them(
    silent: DemoScenario,
) -> None:
    app = demo(silent, accept_interval_s=0.1)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        logs = app.main.query_one(LogPanel)
        view = logs.view

        def polls_in_log() -> int:
            return sum('"GET /server_info HTTP/1.1"' in t for t in logs.lines)

        await launch_until_ready(pilot, app)

        def serving_gpus_busy() -> bool:  # the demo's GPUs follow the stand-in's phase
            snapshot = app.session.latest_gpus
            return snapshot is not None and all(
                (gpu.utilization_pct or 0) >= 55 for gpu in snapshot.gpus
            )

        await until(pilot, serving_gpus_busy, "the GPUs busy serving")
        await until(pilot, lambda: polls_in_log() >= 3, "three polls in the log")
        # Reading just below the polls' row: the next poll folds that row away above the
        # screen, and the text being read stays where it is.
        at = next(y for y, t in enumerate(view.lines) if '"GET /server_info' in t)
        await until(pilot, lambda: view.max_scroll_y > at + 1, "a screenful after the polls")
        view.jump(at + 1)
        top, seen = view.top_row(), polls_in_log()
        await until(pilot, lambda: polls_in_log() > seen, "the next poll")
        await pilot.pause()
        assert not view.following and view.top_row() == top
        app.accept_watch.close()  # no more polls: every one it made is in the log file now
        path = app.session.log_path()
        assert path is not None
        count = path.read_text().count('"GET /server_info HTTP/1.1"')
        await until(pilot, lambda: polls_in_log() == count, "every poll in the panel")
        summaries = [y for y, t in enumerate(view.lines) if '"GET /server_info' in t]
        assert len(summaries) == 1  # the newest poll's row stands for them all
        view.jump(summaries[0])  # on screen, at the top
        await pilot.pause()
        text = painted(view, summaries[0])
        assert text.startswith("⋯ ") and "polls by eaglebug (/server_info) folded" in text
        assert int(text.split()[1]) == count
        assert not any('"GET /server_info' in t for t in view.lines[: summaries[0]])
        # The log's other access lines stay (the warmup's POST /generate).
        assert any('"POST /generate HTTP/1.1" 200' in t for t in view.lines)
        await pilot.press("f")
        await until(pilot, lambda: not view.folded, "f")
        assert sum('"GET /server_info' in t for t in view.lines) >= count

    run(app, script, size=(120, 40))
