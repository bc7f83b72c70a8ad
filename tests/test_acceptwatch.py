"""The acceptance watch against a real HTTP server on the loopback that answers as SGLang does.

Each poll is driven by the test (`poll()`), so nothing waits on the thread's beat; the thread
itself is checked once, through `watch()` waking it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from eaglebug.checks.logs.acceptance import Report, low_acceptance
from eaglebug.cli.probe import probe
from eaglebug.session.acceptwatch import AcceptanceSnapshot, AcceptanceWatch
from tests.fake_sglang import FakeSglang


def _watch() -> tuple[AcceptanceWatch, list[AcceptanceSnapshot]]:
    seen: list[AcceptanceSnapshot] = []
    # Each request's deadline is a ceiling (a local answer takes milliseconds): generous, so a
    # loaded machine never turns a slow answer into "no server".
    return AcceptanceWatch(seen.append, interval_s=60.0, timeout_s=30.0), seen


@pytest.fixture
def server() -> Iterator[FakeSglang]:
    fake = FakeSglang(accept=3.0)
    yield fake
    fake.close()


def _requests(fake: FakeSglang, n: int, tokens: int = 60) -> None:
    for _ in range(n):
        probe(fake.url, prompts=("p",), max_new_tokens=tokens, timeout_s=30.0)


def test_each_poll_reports_the_steps_since_the_last_not_the_average_since_start() -> None:
    fake = FakeSglang(accept=3.0)
    try:
        watch, _ = _watch()
        watch.watch(fake.url)
        _requests(fake, 2)  # 120 tokens in 40 steps: average 3.0 since start
        first = watch.poll()
        assert first.state == "polling" and first.latest is not None
        assert first.latest.length == pytest.approx(3.0) and first.latest.source == "server_info"
        fake.accept = 1.0  # the draft stops being accepted (a relaunch with a bad config, say)
        _requests(fake, 2)  # 120 more tokens in 120 steps: since start 240/160 = 1.5
        second = watch.poll()
        assert second.latest is not None and second.latest.length == pytest.approx(1.0)
        assert [r.length for r in second.reports] == pytest.approx([3.0, 1.0])
    finally:
        fake.close()


def test_an_idle_server_adds_no_report(server: FakeSglang) -> None:
    watch, _ = _watch()
    watch.watch(server.url)
    _requests(server, 1)
    watch.poll()
    again = watch.poll()  # no request in between: no new verify step
    assert len(again.reports) == 1


def test_metrics_are_read_where_server_info_is_not_served() -> None:
    fake = FakeSglang(accept=2.5, server_info=False, metrics=True)
    try:
        watch, _ = _watch()
        watch.watch(fake.url)
        _requests(fake, 2, tokens=50)
        snap = watch.poll()
        assert snap.latest is not None and snap.latest.source == "metrics"
        assert snap.latest.length == pytest.approx(2.5)
    finally:
        fake.close()


def test_a_server_that_goes_away_is_a_state_and_the_record_is_kept() -> None:
    fake = FakeSglang(accept=3.0)
    watch, seen = _watch()
    watch.watch(fake.url)
    _requests(fake, 1)
    assert watch.poll().latest is not None
    fake.close()
    gone = watch.poll()
    assert gone.state == "no server" and len(gone.reports) == 1
    assert seen[-1] == gone


def test_a_new_url_starts_a_new_record_and_none_stops(server: FakeSglang) -> None:
    watch, seen = _watch()
    watch.watch(server.url)
    _requests(server, 1)
    assert watch.poll().reports
    watch.watch(None)
    assert seen[-1].state == "idle" and seen[-1].reports == ()
    assert watch.poll().state == "idle"


def test_the_probes_reports_join_the_record_and_feed_the_watchdog(server: FakeSglang) -> None:
    watch, _ = _watch()
    watch.watch(server.url)
    for _ in range(3):
        snap = watch.add(Report(1.0, None, "probe"))
    assert [r.source for r in snap.reports] == ["probe"] * 3
    finding = low_acceptance(snap.reports)
    assert finding is not None and finding.severity == "error"


def test_the_thread_polls_when_told_to_watch(server: FakeSglang) -> None:
    polled = threading.Event()
    snapshots: list[AcceptanceSnapshot] = []

    def seen(snap: AcceptanceSnapshot) -> None:
        snapshots.append(snap)
        if snap.state == "polling":
            polled.set()

    watch = AcceptanceWatch(seen, interval_s=60.0)
    watch.start()
    try:
        watch.watch(server.url)  # wakes the thread at once, whatever the interval
        assert polled.wait(60.0)  # a ceiling: it returns when the thread polls
    finally:
        watch.close()
    assert any(s.state == "waiting" for s in snapshots)
