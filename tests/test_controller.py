"""The controller without any UI: one worker, one queue, generations for the checks.

A fake session records when each of its methods starts and ends, and holds any of them on an
Event, so each test can put a job "under way" for as long as it needs and then prove, from
the controller's own state and the order of what ran, that nothing interleaved. No sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.session.checking import CheckResult, WorkerEnded
from eaglebug.session.controller import (
    AcceptEnv,
    ActionDone,
    ApplyPatch,
    ChecksFinished,
    ChecksRequested,
    Controller,
    Event,
    Launch,
    Note,
    Relaunch,
    Stop,
    Undo,
)
from eaglebug.session.problems import ERRORS_LOG, Problem
from eaglebug.session.progress import CheckProgress

WAIT_S = 240.0  # only a hung test waits this long


@dataclass
class FakeSession:
    """What the controller calls, each call recorded; `hold[name]` keeps it running."""

    workdir: Path
    runs: list[str] = field(default_factory=list)  # "start name" / "end name", in order
    hold: dict[str, threading.Event] = field(default_factory=dict)
    started: dict[str, threading.Event] = field(default_factory=dict)
    fail: dict[str, Exception] = field(default_factory=dict)
    findings: list[Any] = field(default_factory=list)
    checks: int = 0
    attached_record: Any = None

    @property
    def config(self) -> SimpleNamespace:
        return SimpleNamespace(workdir=self.workdir)

    @property
    def server(self) -> SimpleNamespace:
        return SimpleNamespace(attached=lambda: self.attached_record)

    def _call(self, name: str) -> None:
        self.runs.append(f"start {name}")
        self.started.setdefault(name, threading.Event()).set()
        if name in self.hold:
            assert self.hold[name].wait(WAIT_S), f"{name} was never released"
        if name in self.fail:
            self.runs.append(f"failed {name}")
            raise self.fail[name]
        self.runs.append(f"end {name}")

    def run_checks(self, progress: Callable[[CheckProgress], None] | None = None) -> CheckResult:
        self.checks += 1
        self._call(f"checks{self.checks}")
        return CheckResult(list(self.findings), [], [], None, float(self.checks))

    def apply(self, patch: Any) -> Any:
        self._call("apply")
        return SimpleNamespace(
            commit="0123456789abcdef",
            patch=SimpleNamespace(short_class="Kimi", methods=("get_embed_and_head",)),
        )

    def accept_env(self, name: str, value: str) -> None:
        self._call("env")

    def undo_last(self) -> Any:
        self._call("undo")
        return SimpleNamespace(reverted="fedcba9876543210", summary="Kimi: delegate")

    def relaunch(self) -> tuple[None, list[int], Any]:
        self._call("relaunch")
        return None, [], SimpleNamespace(number=2, pid=4242)

    def stop(self) -> Any:
        self._call("stop")
        return SimpleNamespace(survivors=())


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        with self._lock:
            return [e for e in self.events if isinstance(e, kind)]


@pytest.fixture
def session(tmp_path: Path) -> FakeSession:
    return FakeSession(tmp_path)


@pytest.fixture
def made(session: FakeSession) -> Iterator[Callable[..., tuple[Controller, Recorder]]]:
    controllers: list[Controller] = []

    def make(**options: Any) -> tuple[Controller, Recorder]:
        events = Recorder()
        controller = Controller(session, events, **options)  # type: ignore[arg-type]
        controller.start()
        controllers.append(controller)
        return controller, events

    yield make
    for session_hold in session.hold.values():
        session_hold.set()
    for controller in controllers:
        controller.close()


def started(session: FakeSession, name: str) -> None:
    assert session.started.setdefault(name, threading.Event()).wait(WAIT_S), f"{name} never ran"


def relaunch_held(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> tuple[Controller, Recorder]:
    """A controller whose relaunch is under way, held there until the test sets its event."""
    session.hold["relaunch"] = threading.Event()
    controller, events = made()
    assert controller.submit(Relaunch())
    started(session, "relaunch")
    return controller, events


PATCH = SimpleNamespace(file="kimi_k25.py")


def test_a_patch_confirmed_during_a_relaunch_waits_for_it_and_never_interleaves(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> None:
    controller, events = relaunch_held(session, made)
    assert controller.submit(ApplyPatch(PATCH))  # type: ignore[arg-type]
    # Under way: the relaunch; waiting behind it: the patch (and it says so).
    assert controller.running == Relaunch()
    assert controller.queued() == ["apply the patch"]
    assert "start apply" not in session.runs
    waits = [n for n in events.of(Note) if n.title == "queued"]
    assert waits and waits[-1].text == "apply the patch: waits for relaunch"

    session.hold["relaunch"].set()
    assert controller.wait_idle(WAIT_S)
    actions = [r for r in session.runs if not r.split()[1].startswith("checks")]
    assert actions == ["start relaunch", "end relaunch", "start apply", "end apply"]
    # Each rechecks after it: the second request took over the first one still queued.
    done = [e.action for e in events.of(ActionDone) if e.ok]
    assert done == [Relaunch(), ApplyPatch(PATCH)]  # type: ignore[arg-type]
    assert [e.generation for e in events.of(ChecksFinished)] == [controller.requested_generation]


def test_a_superseded_check_result_is_dropped_and_requests_coalesce(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> None:
    session.hold["checks1"] = threading.Event()
    controller, events = made()
    first = controller.request_checks()
    started(session, "checks1")
    second = controller.request_checks()
    third = controller.request_checks()  # joins the run still waiting: one more run, not two
    assert (first, second, third) == (1, 2, 3)
    assert controller.queued() == ["the checks"]
    session.hold["checks1"].set()
    assert controller.wait_idle(WAIT_S)

    assert session.checks == 2
    assert controller.dropped == [1]  # the run that was under way when 2 and 3 came
    finished = events.of(ChecksFinished)
    assert [(e.generation, e.result.took_s) for e in finished] == [(3, 2.0)]
    assert [e.generation for e in events.of(ChecksRequested)] == [1, 2, 3]


def test_the_same_action_twice_is_refused_while_the_first_is_under_way(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> None:
    controller, events = relaunch_held(session, made)
    assert not controller.submit(Relaunch())
    refusal = events.of(Note)[-1]
    assert (refusal.title, refusal.severity) == ("relaunch", "warning")
    assert refusal.text == "relaunch: already under way"
    assert controller.submitted == [Relaunch()]
    session.hold["relaunch"].set()
    assert controller.wait_idle(WAIT_S)
    assert session.runs.count("start relaunch") == 1


def test_failures_are_problems_and_the_worker_goes_on(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]], tmp_path: Path
) -> None:
    session.fail["apply"] = InputError(
        "git refused: detected dubious ownership in repository at '/r'",
        "git config --global --add safe.directory /r",
    )
    session.fail["undo"] = RuntimeError("boom")
    controller, events = made()
    controller.submit(ApplyPatch(PATCH))  # type: ignore[arg-type]
    controller.submit(Undo())
    controller.submit(AcceptEnv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "1"))
    assert controller.wait_idle(WAIT_S)

    refused, crashed = events.of(Problem)
    assert refused.title == "not applied" and not refused.internal
    assert refused.hint == "git config --global --add safe.directory /r"
    assert crashed.title == "undo" and crashed.internal
    assert crashed.message == "internal error: RuntimeError: boom"
    assert crashed.log == tmp_path / ".eaglebug" / ERRORS_LOG
    assert f"traceback in {crashed.log}" in crashed.text()
    logged = crashed.log.read_text()
    assert "Traceback (most recent call last)" in logged and "RuntimeError: boom" in logged
    # Neither stopped the worker: the env fix after them went through, and rechecked.
    assert [(e.action, e.ok) for e in events.of(ActionDone)] == [
        (ApplyPatch(PATCH), False),  # type: ignore[arg-type]
        (Undo(), False),
        (AcceptEnv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "1"), True),
    ]
    assert session.runs[-1] == "end checks1"


def test_a_check_that_crashes_is_a_problem_and_an_error_result(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> None:
    session.fail["checks1"] = KeyError("facts")
    controller, events = made()
    controller.request_checks()
    assert controller.wait_idle(WAIT_S)
    (problem,) = events.of(Problem)
    assert problem.internal and problem.message == "internal error: KeyError: 'facts'"
    (finished,) = events.of(ChecksFinished)
    assert finished.result.error == problem.message


def test_a_check_whose_worker_ended_says_so_without_a_traceback(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> None:
    """Killed, out of memory: not a bug of eaglebug's, so no errors-log entry; the checks
    panel says what happened and which key starts a fresh worker."""
    session.fail["checks1"] = WorkerEnded("the checks' process ended (killed by SIGKILL)")
    controller, events = made()
    controller.request_checks()
    assert controller.wait_idle(WAIT_S)
    assert events.of(Problem) == []
    (finished,) = events.of(ChecksFinished)
    assert finished.result.error == (
        "the checks' process ended (killed by SIGKILL) — press a to check again"
    )


def test_a_worker_that_crashed_saying_why_is_logged(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> None:
    """A worker that crashed and wrote its last words (faulthandler's stack): a bug, so its
    words go to the errors log, and the panel still says which key starts a fresh one."""
    words = 'Fatal Python error: Segmentation fault\n  File "engine.py", line 7 in walk'
    session.fail["checks1"] = WorkerEnded("the checks' process ended (killed by SIGSEGV)", words)
    controller, events = made()
    controller.request_checks()
    assert controller.wait_idle(WAIT_S)
    (problem,) = events.of(Problem)
    assert problem.internal and problem.log is not None
    assert words in problem.log.read_text(encoding="utf-8")
    (finished,) = events.of(ChecksFinished)
    assert finished.result.error == (
        "the checks' process ended (killed by SIGSEGV) — press a to check again"
    )


@pytest.mark.parametrize("blocked", [False, True])
def test_the_first_launch_waits_for_checks_without_errors(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]], blocked: bool
) -> None:
    if blocked:
        session.findings = [SimpleNamespace(severity="error"), SimpleNamespace(severity="info")]
    controller, events = made(launch_when_clear=True)
    controller.request_checks()
    assert controller.wait_idle(WAIT_S)
    if blocked:
        assert "start relaunch" not in session.runs
        note = events.of(Note)[-1]
        assert note.title == "not launched" and note.text.startswith("1 launch blocker(s)")
    else:
        assert controller.submitted == [Launch()]
        assert session.runs[-2:] == ["start relaunch", "end relaunch"]
        assert events.of(Note)[-1] == Note("launch", "launch 2 started (pid 4242)")
    # Only once: later checks never launch by themselves.
    controller.request_checks()
    assert controller.wait_idle(WAIT_S)
    assert session.runs.count("start relaunch") == (0 if blocked else 1)


def test_stop_says_what_it_stopped(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> None:
    controller, events = made()
    controller.submit(Stop())
    assert controller.wait_idle(WAIT_S)
    assert events.of(Note)[-1] == Note("stop", "no server is running")
    session.attached_record = SimpleNamespace(number=3, pid=77)
    controller.submit(Stop())
    assert controller.wait_idle(WAIT_S)
    assert events.of(Note)[-1] == Note("stop", "stopped launch 3")


def test_close_drops_what_waits(
    session: FakeSession, made: Callable[..., tuple[Controller, Recorder]]
) -> None:
    controller, _events = relaunch_held(session, made)
    controller.submit(Undo())
    controller.close(timeout_s=0.0)  # while the relaunch is still under way
    session.hold["relaunch"].set()
    assert controller.wait_idle(WAIT_S)
    assert session.runs[-1] == "end relaunch"
    assert "start undo" not in session.runs
    assert not controller.submit(Undo())
