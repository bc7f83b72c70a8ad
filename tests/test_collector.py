"""The collector's setting while checks run (`session/collector.py`): set for the check, as it
was after, shared by checks that overlap on different threads, and in force inside the TUI
session's own check (read from its progress callback, which runs mid-check)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from eaglebug.demo import DemoScenario
from eaglebug.session.collector import THRESHOLDS, few_collections
from eaglebug.session.progress import CheckProgress
from eaglebug.tui.demo import demo_session
from tests.live import hermetic_demo_env


@pytest.fixture
def default_collector() -> Iterator[None]:
    """A known setting before each test, the caller's restored after."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_set_while_a_check_runs_and_as_it_was_after(default_collector: None) -> None:
    assert gc.get_freeze_count() == 0
    with few_collections():
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() > 0  # what was there before is left out of collections
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_restored_after_a_check_that_fails(default_collector: None) -> None:
    with pytest.raises(RuntimeError), few_collections():
        raise RuntimeError("a check that fails")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_overlapping_checks_keep_it_until_the_last_ends(default_collector: None) -> None:
    """The session's checks and a fix's re-audit run on different threads."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def second() -> None:
        first_in.wait()
        with few_collections():
            second_in.set()
            first_out.wait()
            seen.append(gc.get_threshold())  # the first has ended; this one still runs

    thread = threading.Thread(target=second)
    thread.start()
    with few_collections():
        first_in.set()
        second_in.wait()
    first_out.set()
    thread.join()
    assert seen == [THRESHOLDS]
    assert gc.get_threshold() == (700, 10, 10)


def test_the_sessions_check_runs_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, default_collector: None
) -> None:
    hermetic_demo_env(monkeypatch)
    session = demo_session(DemoScenario.prepare(tmp_path / "demo"))
    during: list[tuple[int, int, int]] = []

    def progress(_: CheckProgress) -> None:
        during.append(gc.get_threshold())

    result = session.run_checks(progress)
    assert result.error is None and result.findings
    assert during and set(during) == {THRESHOLDS}
    assert gc.get_threshold() == (700, 10, 10)
