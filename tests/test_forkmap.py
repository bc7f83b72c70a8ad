"""The CLI's helper process (`eaglebug/session/forkmap.py`): the same results as doing it all here,
in order, whoever did each item; and a helper that dies costs only time."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from eaglebug.session import forkmap
from eaglebug.session.forkmap import forked_map, in_background

REPO = Path(__file__).resolve().parent.parent
BIG = [200_000] * 40  # weights above the threshold below which nothing is forked


def square_with_pid(n: int) -> tuple[int, int]:
    return n * n, os.getpid()


def _run_once() -> tuple[list[int], set[int]]:
    parent = os.getpid()
    took, told = os.pipe()  # the helper says it took an item; this process waits to hear it
    mine, said_mine = os.pipe()  # and the other way: this process says it took one

    def job(n: int) -> tuple[int, int]:
        if os.getpid() != parent:
            os.write(told, b".")
            # Wait (bounded) until this process has an item too: a helper forked off a large
            # process starts long before the fork returns here, and could take every item.
            select.select([mine], [], [], 10.0)
        else:
            os.write(said_mine, b".")
            # The first item handed out (largest weight first): wait to hear that the helper
            # took one (bounded: with no helper, nobody tells).
            if n == 39 and select.select([took], [], [], 10.0)[0]:
                os.read(took, 1)
        return square_with_pid(n)

    items = list(range(40))
    weights = [*BIG[:-1], BIG[-1] + 1]
    try:
        results = forked_map(job, items, weights)
    finally:
        for fd in (took, told, mine, said_mine):
            os.close(fd)
    return [r for r, _ in results], {pid for _, pid in results}


def test_results_come_back_in_order_and_the_helper_did_some() -> None:
    """In order every time; the helper's share reached the parent in at least one of three
    runs (a helper that dies, on a loaded machine, costs only time: its items are redone)."""
    assert threading.active_count() == 1, "another test left a thread running: no fork here"
    seen = []
    for _ in range(3):
        values, pids = _run_once()
        assert values == [n * n for n in range(40)]
        seen.append(pids)
        if os.getpid() in pids and len(pids) == 2:
            return
    raise AssertionError(f"the helper's results never reached the parent: {seen}")


def test_progress_counts_up_to_every_item_for_both_processes() -> None:
    """The TUI's worker shows how far a check is: counts that never go back, never past
    the total, and end at it (whoever did the items); small work tells each item here."""
    assert threading.active_count() == 1, "another test left a thread running: no fork here"
    told: list[tuple[int, int]] = []
    results = forked_map(square_with_pid, list(range(40)), BIG, lambda d, t: told.append((d, t)))
    assert [r for r, _ in results] == [n * n for n in range(40)]
    assert told[-1] == (40, 40) and {t for _, t in told} == {40}
    assert [d for d, _ in told] == sorted(d for d, _ in told) and told[0][0] >= 1
    small: list[tuple[int, int]] = []
    forked_map(square_with_pid, list(range(5)), [10] * 5, lambda d, t: small.append((d, t)))
    assert small == [(n, 5) for n in range(1, 6)]


def test_small_work_is_done_here() -> None:
    results = forked_map(square_with_pid, list(range(5)), [10] * 5)
    assert {pid for _, pid in results} == {os.getpid()}


def test_a_helper_that_dies_leaves_its_items_to_this_process() -> None:
    parent = os.getpid()

    def dies_in_the_helper(n: int) -> int:
        if os.getpid() != parent:
            os._exit(3)  # the helper vanishes mid-way, results unsent
        return n + 1

    items = list(range(40))
    assert forked_map(dies_in_the_helper, items, BIG) == [n + 1 for n in items]


def test_with_other_threads_running_nothing_is_forked() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        results = forked_map(square_with_pid, list(range(40)), BIG)
    finally:
        stop.set()
        other.join()
    assert {pid for _, pid in results} == {os.getpid()}


def test_in_background_hands_the_helpers_result_back() -> None:
    made = in_background(lambda: (os.getpid(), [1, 2, 3]))
    pid, value = made()
    assert value == [1, 2, 3] and pid != os.getpid()
    assert made() == (pid, value), "asked again, the same result"


def test_in_background_computes_here_when_the_helper_fails() -> None:
    parent = os.getpid()

    def compute() -> int:
        if os.getpid() != parent:
            raise RuntimeError("the helper fails")
        return 7

    assert in_background(compute)() == 7


def test_no_more_helpers_at_once_than_free_cores(cores: Callable[[int], None]) -> None:
    """On two cores one helper works beside this process; a second value asked meanwhile is
    made here when asked, and the core is free again once the first helper is reaped."""
    cores(2)
    first = in_background(os.getpid)
    second = in_background(os.getpid)
    assert second() == os.getpid(), "no free core: made here"
    assert first() != os.getpid()
    third = in_background(os.getpid)
    assert third() != os.getpid(), "the first helper's core came back when it was reaped"


def test_a_cancelled_helper_gives_its_core_back(cores: Callable[[int], None]) -> None:
    cores(2)
    in_background(lambda: select.select([], [], [])).cancel()  # never ends: killed
    assert in_background(os.getpid)() != os.getpid()


def test_on_one_core_nothing_is_forked(cores: Callable[[int], None]) -> None:
    cores(1)
    results = forked_map(square_with_pid, list(range(40)), BIG)
    assert [r for r, _ in results] == [n * n for n in range(40)]
    assert {pid for _, pid in results} == {os.getpid()}
    assert in_background(os.getpid)() == os.getpid()


def test_a_helpers_own_work_shares_the_same_cores(cores: Callable[[int], None]) -> None:
    """A helper that starts work of its own (the memory stage maps the files it parses) takes
    its helpers from the same pool: holding the only free core, it does that work itself."""
    cores(2)
    helper, inner = in_background(lambda: (os.getpid(), in_background(os.getpid)()))()
    assert helper != os.getpid() and inner == helper
    cores(3)
    helper, inner = in_background(lambda: (os.getpid(), in_background(os.getpid)()))()
    assert len({os.getpid(), helper, inner}) == 3, "a third core: the helper's helper runs"


def test_cores_a_killed_helpers_own_helper_held_come_back_at_refill(
    cores: Callable[[int], None],
) -> None:
    """A helper killed mid-run (its work no longer wanted) takes with it the core its own
    helper held, which no one reaps; the TUI's worker refills the pool between requests."""
    cores(3)
    started, said = os.pipe()

    def stuck() -> None:
        in_background(lambda: select.select([], [], []))  # its own helper, on the third core
        os.write(said, b".")
        select.select([], [], [])

    try:
        busy = in_background(stuck)
        assert select.select([started], [], [], 30.0)[0], "the helper's helper never started"
        busy.cancel()
    finally:
        os.close(started)
        os.close(said)
    first, second = in_background(os.getpid), in_background(os.getpid)
    assert second() == os.getpid() and first() != os.getpid(), "one core lost"
    forkmap.refill()
    first, second = in_background(os.getpid), in_background(os.getpid)
    assert second() != os.getpid() and first() != os.getpid()


_ORPHAN_SCRIPT = """
import os, select
from eaglebug.session import forkmap
from eaglebug.session.forkmap import in_background

forkmap._cores = lambda: 2  # a core for the helper, on whatever machine runs the test

def compute():
    os.write(1, f"{os.getpid()}\\n".encode())
    select.select([], [], [])  # the helper never finishes on its own

made = in_background(compute)
select.select([], [], [])  # nor does this process: the test kills it
"""


def test_a_helper_ends_with_the_process_that_forked_it() -> None:
    """`kill -9` of eaglebug mid-run: its helper is killed with it, not left computing."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT], stdout=subprocess.PIPE, cwd=REPO
    )
    assert parent.stdout is not None
    try:
        line = parent.stdout.readline()
        helper = int(line)
        ended = os.pidfd_open(helper)  # readable once the helper has ended
    finally:
        parent.kill()
        parent.wait()
    try:
        in_time = bool(select.select([ended], [], [], 30.0)[0])
        if not in_time:  # not left running after the test, whatever it says
            signal.pidfd_send_signal(ended, signal.SIGKILL)
    finally:
        os.close(ended)
    assert in_time, f"helper {helper} outlived its parent"
