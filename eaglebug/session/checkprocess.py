"""The session's checks in a worker process of their own: the TUI's way.

Why: in the app's process a check shares one interpreter with the screen and cannot fork
helpers (the app has threads), so a cold check of a release took twice the CLI's time and the
app's memory grew by the engine's trees and tables, kept for the next check (a cold 0.5.23:
~230 MB). In a worker the check runs single-threaded as the CLI's does, with forked helpers
(`forkmap.py`), and keeps its trees between checks there; the app stays the size of the
screen and its feeds.

How: `python -m eaglebug.session.checkprocess IN OUT PARENT`, two pipes between the processes.
Each request is a pickled frame (`_send`) of a `checking` request; the worker answers with
frames of progress, then the value, or the exception with its traceback. One request at a
time (a lock: the session's checks and fixes come from the controller's one thread, the class
names a log names from the launch watch, which never waits for a check under way). The worker
ends when its request pipe closes (`close`, or the app ended however it ended) and, on Linux,
at once when the thread that started it ends (`PR_SET_PDEATHSIG`: the controller's thread,
which lives as long as the app), so no check computes on after eaglebug. If no worker can be
started the checks run in this process (`HereChecks`), the same checks, only slower. A worker
that crashes leaves its last words: its stderr's end (a crash's stack, from `faulthandler`) is
the cause of the `WorkerEnded` its check fails with, so the errors log has it.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeVar, cast

from eaglebug.session.checking import (
    AuditRequest,
    Checked,
    CheckRequest,
    Checks,
    HereChecks,
    Progress,
    RemoteTraceback,
    WorkerEnded,
)
from eaglebug.session.forkmap import end_with_parent
from eaglebug.session.progress import CheckProgress

if TYPE_CHECKING:
    from eaglebug.checks import Finding

T = TypeVar("T")
_SIZE = struct.Struct("<Q")
_CLOSE_WAIT_S = 1.0  # how long an idle worker gets to leave on its own at `close`
# How long an ended worker's stderr gets to reach its end (the reader thread scheduled, the
# helpers that share the pipe gone): at once, unless the box is loaded; paid only then.
_WORDS_WAIT_S = 5.0
_MAX_FRAME = 256 << 20  # a check's answer is ~40 KB on 0.5.23; anything this big is garbage
_LAST_WORDS = 16 << 10  # the end of the worker's stderr kept: a crash's stack, whole


def _frame(message: object) -> bytes:
    data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    return _SIZE.pack(len(data)) + data


def _write(out: IO[bytes], frame: bytes) -> None:
    out.write(frame)
    out.flush()


def _send(out: IO[bytes], message: object) -> None:
    _write(out, _frame(message))


def _receive(inp: IO[bytes]) -> object:
    """The next frame; EOFError when the other side has gone."""
    head = inp.read(_SIZE.size)
    if len(head) < _SIZE.size:
        raise EOFError
    (size,) = _SIZE.unpack(head)
    if size > _MAX_FRAME:
        raise EOFError(f"a frame of {size} bytes: not one of ours")
    data = inp.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class _StderrTail(threading.Thread):
    """Drains the worker's stderr, keeping its last `_LAST_WORDS` bytes: what a worker that
    dies says last (`faulthandler`'s stack of a crash, an error it could not answer with)
    goes to the errors log instead of nowhere, and nothing the worker writes lands on the
    app's screen or fills a pipe it would then block on."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(name="eaglebug-checks-stderr", daemon=True)
        self._stream = stream
        self._kept = bytearray()

    def run(self) -> None:
        with self._stream:
            while chunk := self._stream.read1(65536):  # type: ignore[attr-defined]
                self._kept += chunk
                del self._kept[: max(0, len(self._kept) - _LAST_WORDS)]

    def said(self, wait_s: float) -> str:
        """What it wrote, once it has closed its stderr (`wait_s` at most: its helpers,
        which share the pipe, end with it)."""
        self.join(wait_s)
        return bytes(self._kept).decode("utf-8", errors="replace").strip()


class _Worker:
    """One started worker process, its two pipes, and the reader of its stderr."""

    def __init__(self) -> None:
        to_worker, self_in = os.pipe()  # requests: read by the worker
        worker_out, from_worker = os.pipe()  # replies: written by the worker
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parents[2])  # this eaglebug, installed or not
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
        argv = [sys.executable, "-m", __name__, str(to_worker), str(from_worker), str(os.getpid())]
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,  # the app's terminal is the screen: see _StderrTail
                pass_fds=(to_worker, from_worker),
                env=env,
            )
        except BaseException:
            for fd in (to_worker, self_in, worker_out, from_worker):
                os.close(fd)
            raise
        os.close(to_worker)
        os.close(from_worker)
        assert self.process.stderr is not None
        self.stderr = _StderrTail(self.process.stderr)
        self.stderr.start()
        self.requests = os.fdopen(self_in, "wb")
        self.replies = os.fdopen(worker_out, "rb")
        self.heard = False  # it has said something (progress, an answer): it did start

    def never_ran(self) -> bool:
        """It ended with an error status before saying anything: it could not start."""
        status = self.process.returncode
        return not self.heard and status is not None and status > 0

    def ask(
        self, request: object, progress: Progress | None, meanwhile: Callable[[], object] | None
    ) -> object:
        """The worker's answer to `request`; its progress reports go to `progress`, and
        `meanwhile()` runs here while the worker works. Anything that leaves the exchange
        half-way (the worker gone, `progress` raising) ends the worker too: the next frame
        in the pipe would be taken for another request's answer."""
        frame = _frame(request)  # one that cannot be pickled is a bug here, not the worker gone
        settled = False
        try:
            self._exchange(lambda: _write(self.requests, frame))
            if meanwhile is not None:
                meanwhile()
            while True:
                reply = self._exchange(lambda: _receive(self.replies))
                self.heard = True
                match reply:
                    case ("progress", CheckProgress() as step):
                        if progress is not None:
                            progress(step)
                    case ("done", value):
                        settled = True
                        return value
                    case ("raised", BaseException() as exc, str(where)):
                        settled = True
                        raise exc from RemoteTraceback(where)
                    case _:
                        raise WorkerEnded(f"the checks' process answered {type(reply).__name__}")
        finally:
            if not settled:
                self.end(wait_s=0.0)

    def _exchange(self, step: Callable[[], T]) -> T:
        """One write or read of a frame; WorkerEnded if it fails (the worker gone, a frame
        cut short or unreadable)."""
        try:
            return step()
        except Exception as exc:
            status = self.end(wait_s=_CLOSE_WAIT_S)
            said = self.stderr.said(_WORDS_WAIT_S)
            ended = WorkerEnded(f"the checks' process ended ({_status_text(status)})", said)
            raise ended from (ended.__cause__ or exc)  # its words, where it said any

    def end(self, wait_s: float) -> int | None:
        """Close its pipes, give it `wait_s` to leave, else kill it; its exit status."""
        for stream in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            return self.process.wait(wait_s) if wait_s > 0 else self._killed()
        except subprocess.TimeoutExpired:
            return self._killed()

    def _killed(self) -> int:
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait()


def _status_text(status: int | None) -> str:
    if status is None:
        return "status unknown"
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exit status {status}"


def _load_reply_classes() -> None:
    """Import the modules whose classes a check's answer holds, while the worker computes
    it: unpickling the answer imports them otherwise, after it (the engine's results and
    its patches, with libcst: ~0.5 s, the demo's whole check twice over)."""
    from eaglebug.checks import Patch, PreflightResult  # noqa: F401


class ProcessChecks:
    """`Checks` in a worker process, started at the first check and kept for the next."""

    def __init__(self, fallback: Callable[[], Checks] = HereChecks) -> None:
        self._fallback = fallback
        self._here: Checks | None = None  # no worker could be started: the checks run here
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The worker's process id, while one runs."""
        worker = self._worker
        return worker.process.pid if worker is not None else None

    def start(self) -> None:
        """Start the worker if none runs: it loads the engine while the session makes the
        request (~0.2 s of a first check)."""
        with self._lock:
            self._started()

    def _started(self) -> _Worker | None:
        if self._worker is None and self._here is None and not self._closed:
            try:
                self._worker = _Worker()
            except (OSError, subprocess.SubprocessError):
                self._here = self._fallback()
        return self._worker

    def _ask(
        self,
        request: object,
        progress: Progress | None = None,
        meanwhile: Callable[[], object] | None = None,
    ) -> object:
        worker = self._worker  # started by the caller
        if worker is None:
            raise WorkerEnded("the checks' process was closed")
        try:
            return worker.ask(request, progress, meanwhile)
        finally:
            if worker.process.returncode is not None and self._worker is worker:
                self._worker = None  # it ended with this request: the next starts a fresh one

    def _run(
        self, request: tuple[str, object], progress: Progress | None, here: Callable[[Checks], T]
    ) -> T:
        """`request` answered by the worker, or `here(the checks here)` where none can run."""
        with self._lock:
            worker = self._started()
            if worker is None and self._here is not None:
                return here(self._here)
            try:
                return cast(T, self._ask(request, progress, _load_reply_classes))
            except WorkerEnded:
                if worker is None or not worker.never_ran():
                    raise
                # This python cannot run it (no eaglebug on its path, say): here from now on.
                self._here = self._fallback()
                return here(self._here)

    def check(self, request: CheckRequest, progress: Progress | None) -> Checked:
        return self._run(("check", request), progress, lambda c: c.check(request, progress))

    def reaudit(self, request: AuditRequest) -> list[Finding]:
        return self._run(("reaudit", request), None, lambda c: c.reaudit(request))

    def class_named(self, short: str) -> str | None:
        if not self._lock.acquire(blocking=False):
            return None  # a check is under way: the name stays short until it republishes
        try:
            if self._here is not None:
                return self._here.class_named(short)
            if self._worker is None:
                return None  # no check has run: no index to ask
            value = self._ask(("class_named", short))
        except WorkerEnded:
            return None
        finally:
            self._lock.release()
        return value if isinstance(value, str) else None

    def close(self) -> None:
        """End the worker: at once if a request is under way (the app is leaving); the
        thread in that request then reads the end of the pipe and reaps it."""
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is None:
            return
        if not self._lock.acquire(blocking=False):
            worker.process.kill()
            return
        try:
            worker.end(wait_s=_CLOSE_WAIT_S)
        finally:
            self._lock.release()


# -- the worker's side ---------------------------------------------------------------------------
def _answer(engine: HereChecks, request: object, out: IO[bytes]) -> object:
    match request:
        case ("check", CheckRequest() as check):
            return engine.check(check, lambda step: _send(out, ("progress", step)))
        case ("reaudit", AuditRequest() as audit):
            return engine.reaudit(audit)
        case ("class_named", str(short)):
            return engine.class_named(short)
    raise TypeError(f"not a request of the checks' process: {request!r:.200}")


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling whole, else a RuntimeError naming it."""
    try:
        pickle.loads(pickle.dumps(exc, pickle.HIGHEST_PROTOCOL))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def serve(read_fd: int, write_fd: int) -> None:
    """The worker's loop: requests in, answers out, until the request pipe closes."""
    from eaglebug.checks import TreeIndex, preflight  # noqa: F401  loaded before the first request
    from eaglebug.session.forkmap import ForkedMap, in_background, refill

    engine = HereChecks(mapper=ForkedMap, background=in_background, keep=True)

    with os.fdopen(read_fd, "rb") as inp, os.fdopen(write_fd, "wb") as out:
        while True:
            try:
                request = _receive(inp)
            except EOFError:
                return
            refill()  # each request's index is closed: none of its helpers runs on
            try:
                reply: tuple[object, ...] = ("done", _answer(engine, request, out))
            except BrokenPipeError:
                return  # the app has gone
            except Exception as exc:
                reply = ("raised", _portable(exc), traceback.format_exc())
            try:
                _send(out, reply)
            except BrokenPipeError:
                return


def main(argv: list[str]) -> None:
    read_fd, write_fd, parent = (int(word) for word in argv)
    faulthandler.enable()  # a crash's Python stack to stderr: the app keeps its end
    end_with_parent(parent)  # the thread that started it: the controller's, as long as the app
    status = 1
    try:
        serve(read_fd, write_fd)
        status = 0
    finally:  # nothing to clean: leave without tearing the engine's heap down
        os._exit(status)


if __name__ == "__main__":
    main(sys.argv[1:])
