"""The one place a session's actions run: one at a time, in order, on one worker thread.

A front end (the TUI) asks; the controller acts. Every mutating action (apply a patch, undo,
accept an env fix, relaunch, the first launch, stop) and every run of the checks is a job on
one queue, taken by one worker thread, so no two ever interleave: a patch confirmed while a
relaunch waits for GPU memory is applied after the relaunch, never during it, and the user is
told it waits. The same action asked for twice while the first is queued or running is refused.

Checks carry a generation. `request_checks()` returns a new one; a check job still waiting in
the queue takes the newest generation instead of queueing another run (bursts coalesce), and a
result whose generation is no longer the newest when it is ready is dropped, never published,
because a newer run is queued behind it. So a stale result never overwrites a fresh one.

The launch policy of `eaglebug -- LAUNCH COMMAND` lives here too: once the first checks are
published, launch if nothing is at error severity, otherwise say what blocks.

Everything that happens is reported as a frozen event through one callback, on the thread
that caused it (mostly the worker); a run of the checks reports how far it got as it goes
(`ChecksProgressed`: the stage, the files done of total), so a cold run of several seconds
shows where it is. Failures are `Problem`s (`eaglebug.session.problems`): an
`InputError` with its hint, anything else an internal error with its traceback in the log file.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Literal

from eaglebug.checks import InputError
from eaglebug.session.checking import CheckResult, WorkerEnded
from eaglebug.session.problems import Problem, guarded, problem_of
from eaglebug.session.progress import CheckProgress
from eaglebug.session.session import Session

if TYPE_CHECKING:
    from eaglebug.checks import Patch

Severity = Literal["information", "warning", "error"]


# -- what can be asked ------------------------------------------------------------------------


@dataclass(frozen=True)
class ApplyPatch:
    """Write the patch and commit it (one commit, touching only its file)."""

    patch: Patch
    label = "apply the patch"
    failed = "not applied"


@dataclass(frozen=True)
class AcceptFlag:
    """Give the next launch a flag (a flag fix: `--mem-fraction-static 0.81`)."""

    flag: str
    value: str  # "" for a switch
    label = "set the flag for the next launch"
    failed = "not accepted"


@dataclass(frozen=True)
class AcceptEnv:
    """Set an environment variable for the next launch."""

    variable: str
    value: str
    label = "set the env var for the next launch"
    failed = "not accepted"


@dataclass(frozen=True)
class Undo:
    """Revert eaglebug's newest commit."""

    label = "undo"
    failed = "undo"


@dataclass(frozen=True)
class Relaunch:
    """Stop the running tree, wait for its GPU memory, launch again."""

    label = "relaunch"
    failed = "relaunch"


@dataclass(frozen=True)
class Launch:
    """The first launch, once the checks found nothing at error severity."""

    label = "launch"
    failed = "launch"


@dataclass(frozen=True)
class Stop:
    """Stop the running tree (SIGTERM, wait, SIGKILL)."""

    label = "stop the server"
    failed = "stop"


Action = ApplyPatch | AcceptEnv | AcceptFlag | Undo | Relaunch | Launch | Stop
RECHECK_AFTER = (
    ApplyPatch,
    AcceptEnv,
    AcceptFlag,
    Undo,
    Relaunch,
)  # they change what the checks see


# -- what is reported --------------------------------------------------------------------------


@dataclass(frozen=True)
class Note:
    """Something to tell the user."""

    title: str
    text: str
    severity: Severity = "information"


@dataclass(frozen=True)
class ChecksRequested:
    """A run of the checks is queued: results older than `generation` are stale from now."""

    generation: int


@dataclass(frozen=True)
class ChecksProgressed:
    """The run of the checks of `generation` got further (a stage, files done of total)."""

    generation: int
    progress: CheckProgress


@dataclass(frozen=True)
class ChecksFinished:
    """The newest run of the checks is done."""

    generation: int
    result: CheckResult


@dataclass(frozen=True)
class ActionDone:
    """An action ended (`ok`: it did what it was asked); the state file may have changed."""

    action: Action
    ok: bool


Event = Note | ChecksRequested | ChecksProgressed | ChecksFinished | ActionDone | Problem


class _CheckJob:
    """A queued run of the checks; a newer request while it waits gives it its generation."""

    label = "the checks"

    def __init__(self, generation: int) -> None:
        self.generation = generation


_Job = Action | _CheckJob


class Controller:
    """Runs a session's actions and checks one at a time on a daemon worker thread."""

    def __init__(
        self,
        session: Session,
        report: Callable[[Event], None],
        *,
        launch_when_clear: bool = False,
    ) -> None:
        self.session = session
        self._report = report
        self.launch_when_clear = launch_when_clear
        self._cond = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._running: _Job | None = None
        self._requested = 0  # the newest generation of the checks asked for
        self._closed = False
        self._thread: threading.Thread | None = None
        self.submitted: list[Action] = []  # every action accepted, in order
        self.dropped: list[int] = []  # generations of check results that came too late

    # -- the worker ---------------------------------------------------------------------------
    def start(self) -> None:
        with self._cond:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._work, name="eaglebug-controller", daemon=True
            )
            self._thread.start()

    def close(self, timeout_s: float = 2.0) -> None:
        """Drop what is queued; wait a little for the job under way (the thread is a daemon)."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = self._running = self._queue.popleft()
                generation = job.generation if isinstance(job, _CheckJob) else 0
            try:
                workdir = self.session.config.workdir
                if isinstance(job, _CheckJob):
                    guarded(partial(self._check, generation), "checks", workdir, self._report)
                else:
                    guarded(partial(self._act, job), job.failed, workdir, self._report)
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

    # -- asking -------------------------------------------------------------------------------
    def submit(self, action: Action) -> bool:
        """Queue an action; False (and a note saying why) when it is queued or running already."""
        with self._cond:
            if self._closed:
                return False
            ahead = [j for j in (self._running, *self._queue) if j is not None]
            duplicate = any(job == action for job in ahead)
            if not duplicate:
                self._queue.append(action)
                self.submitted.append(action)
                self._cond.notify_all()
        if duplicate:
            self._report(Note(action.failed, f"{action.label}: already under way", "warning"))
            return False
        if ahead:
            waits = ", then ".join(job.label for job in ahead)
            self._report(Note("queued", f"{action.label}: waits for {waits}"))
        return True

    def request_checks(self) -> int:
        """Queue a run of the checks (or give the one still waiting this newer generation)."""
        with self._cond:
            self._requested += 1
            generation = self._requested
            waiting = next((j for j in self._queue if isinstance(j, _CheckJob)), None)
            if waiting is not None:
                waiting.generation = generation
            elif not self._closed:
                self._queue.append(_CheckJob(generation))
                self._cond.notify_all()
        self._report(ChecksRequested(generation))
        return generation

    # -- reading ------------------------------------------------------------------------------
    @property
    def requested_generation(self) -> int:
        """The newest generation of the checks asked for: only its result is published."""
        return self._requested

    @property
    def running(self) -> Action | None:
        """The action under way (not the checks)."""
        job = self._running
        return None if job is None or isinstance(job, _CheckJob) else job

    def queued(self) -> list[str]:
        """What waits, in order, by label."""
        with self._cond:
            return [job.label for job in self._queue]

    def idle(self) -> bool:
        with self._cond:
            return self._running is None and not self._queue

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until nothing is running or queued; False after `timeout_s`."""
        with self._cond:
            return self._cond.wait_for(lambda: self._running is None and not self._queue, timeout_s)

    # -- the jobs -----------------------------------------------------------------------------
    def _check(self, generation: int) -> None:
        def progressed(progress: CheckProgress) -> None:
            self._report(ChecksProgressed(generation, progress))

        try:
            result = self.session.run_checks(progressed)
        except InputError as exc:
            reason = exc.message + (f" — {exc.hint}" if exc.hint else "")
            result = CheckResult([], [], [], None, 0.0, reason)
        except WorkerEnded as exc:  # killed, out of memory: not a bug to trace
            if exc.last_words:  # it crashed, saying how: that is a bug, its words logged
                self._report(problem_of(exc, "checks", self.session.config.workdir))
            result = CheckResult([], [], [], None, 0.0, f"{exc} — press a to check again")
        except Exception as exc:  # reported with its traceback; the checks panel says so
            problem = problem_of(exc, "checks", self.session.config.workdir)
            self._report(problem)
            result = CheckResult([], [], [], None, 0.0, problem.message)
        with self._cond:
            current = generation == self._requested
            if not current:
                self.dropped.append(generation)
        if not current:
            return  # a newer run is queued behind this one: its result is the one to show
        self._report(ChecksFinished(generation, result))
        if self.launch_when_clear:
            self.launch_when_clear = False
            self._launch_if_clear(result)

    def _launch_if_clear(self, result: CheckResult) -> None:
        blockers = [f for f in result.findings if f.severity == "error"]
        if blockers:
            text = f"{len(blockers)} launch blocker(s): fix them (select, p) and press r to launch"
            self._report(Note("not launched", text, "warning"))
        elif result.error is not None:
            text = f"the checks could not run ({result.error}); press r to launch anyway"
            self._report(Note("not launched", text, "warning"))
        elif self.session.server.attached() is None:
            with self._cond:
                self._queue.appendleft(Launch())
                self.submitted.append(Launch())
                self._cond.notify_all()

    def _act(self, action: Action) -> None:
        try:
            notes = self._perform(action)
        except Exception:
            self._report(ActionDone(action, False))
            raise  # the runner turns it into the problem to show
        for note in notes:
            self._report(note)
        self._report(ActionDone(action, True))
        if isinstance(action, RECHECK_AFTER):
            self.request_checks()

    def _perform(self, action: Action) -> list[Note]:
        session = self.session
        match action:
            case ApplyPatch(patch=patch):
                applied = session.apply(patch)
                sha = (applied.commit or "")[:10]
                methods = ", ".join(applied.patch.methods)
                text = f"committed {sha}: {applied.patch.short_class} delegates {methods}"
                return [Note("patch applied", text)]
            case AcceptEnv(variable=name, value=value):
                session.accept_env(name, value)
                return [Note("pending", f"{name}={value} will be set for the next launch")]
            case AcceptFlag(flag=flag, value=value):
                session.accept_flag(flag, value)
                words = f"{flag} {value}".strip()
                return [Note("pending", f"the next launch runs with {words}")]
            case Undo():
                done = session.undo_last()
                return [Note("undone", f"reverted {done.reverted[:10]} ({done.summary})")]
            case Relaunch():
                self._report(Note("relaunch", "stopping the old tree, then launching…"))
                _stopped, holding, record = session.relaunch()
                notes = []
                if holding:
                    text = f"still holding GPU memory: {', '.join(map(str, holding))}"
                    notes.append(Note("relaunch", text, "warning"))
                text = f"launch {record.number} started (pid {record.pid})"
                return [*notes, Note("relaunch", text)]
            case Launch():
                _stopped, _holding, record = session.relaunch()
                return [Note("launch", f"launch {record.number} started (pid {record.pid})")]
            case Stop():
                running = session.server.attached()
                result = session.stop()
                if running is None or result is None:
                    return [Note("stop", "no server is running")]
                left = f"; still running: {list(result.survivors)}" if result.survivors else ""
                severity: Severity = "warning" if result.survivors else "information"
                return [Note("stop", f"stopped launch {running.number}{left}", severity)]
        raise AssertionError(f"unknown action {action!r}")  # pragma: no cover
