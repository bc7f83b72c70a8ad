"""Work over many files, shared with one forked helper process (a `Mapper`, `source/mapper.py`).

Why: the cold audit's biggest costs are per-file and independent (looking at ~2,000 runtime
files as bytes, parsing the consumer candidates, the flag search), and a GPU box has cores to
spare. `eaglebug/checks/` starts no process (its ruff rules forbid it), so the headless CLI and
the TUI's checks' worker (`checkprocess.py`, single-threaded) hand this mapper to the index;
the tests' in-process sessions keep the in-process default.

How: the items' indexes, largest first, go into a pipe; `fork()` gives the helper the job and
the items as they are (nothing else is sent to it). Both processes take the next index from the
pipe until it is empty, so a few slow items (a large file to parse) do not leave one process
idle while the other works. The helper writes its pickled results to a second pipe and leaves
with `os._exit`, never running the parent's cleanup or flushing its buffers. If anything about
the helper fails, the parent does whatever has no result: the results are the same either way,
only slower. Only for a single-threaded process (forking a threaded one can deadlock the
child), and only where `fork` exists.

The same helper makes one value in the background (`in_background`, a `Pending`): the tree's
listing while the engine loads, and the analyses the index starts ahead
(`checks/source/ahead.py`). Every helper ends with the process that forked it.

How many at once: no more processes work than the machine has cores for this process (its CPU
affinity). A cold preflight starts two analyses ahead and maps files besides: on two cores,
three processes at once gave each about two thirds of a core, and the longest analysis (the
memory stage) came last. A pool of tokens, one per core beyond this process's own, in a pipe
that every helper inherits (as GNU make's jobserver does), says whether a core is free: a
helper is forked only with a token, and its token goes back when it is reaped. Without one,
the work is done here (a `Pending` computes when its value is asked), with the same result.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, cast

from eaglebug.checks import InProcess

T = TypeVar("T")
R = TypeVar("R")

# Below this much work (bytes of source) a fork costs more than it saves.
_MIN_WEIGHT = 400_000
_INDEX = 4  # bytes per index in the pipe; reads of 4 bytes from a pipe are atomic
_MAX_TOKENS = 15_000  # the whole queue must fit in one pipe buffer (64 KiB on Linux)


_POOL: list[tuple[int, int]] = []  # (read, write) ends of the token pipe, once made


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _every_token() -> bytes:
    """A token for each core but this process's own (a pipe's buffer holds them all)."""
    return b"t" * min(max(_cores() - 1, 0), 4096)


def _pool() -> tuple[int, int] | None:
    """The token pipe this process and its helpers share: made by the first process of a run
    that forks, with a token for each core but its own; inherited by every helper after."""
    if not _POOL:
        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            return None
        os.set_blocking(read_fd, False)  # no token: the work is done here, not waited for
        os.write(write_fd, _every_token())
        _POOL.append((read_fd, write_fd))
    return _POOL[0]


def refill() -> None:
    """Make every core free again, between runs of a long-lived process (the TUI's checks'
    worker) when none of its helpers is running: a token comes back when its helper is reaped,
    and a helper killed mid-run (its work no longer wanted) takes its own helpers' tokens with
    it, never reaped by anyone."""
    pool = _pool()
    if pool is None:
        return
    with contextlib.suppress(BlockingIOError, OSError):
        while os.read(pool[0], 4096):
            pass
    with contextlib.suppress(OSError):
        os.write(pool[1], _every_token())


def _token() -> bool:
    """Take a free core's token, if there is one."""
    pool = _pool()
    if pool is None:
        return False
    try:
        return os.read(pool[0], 1) == b"t"
    except (BlockingIOError, OSError):
        return False


def _give_back() -> None:
    with contextlib.suppress(OSError):
        os.write(_POOL[0][1], b"t")


class _Helper:
    """A forked process that computes one value and sends it back pickled, then leaves."""

    def __init__(self, pid: int, results: int) -> None:
        self.pid = pid
        self.results = results  # the pipe its pickled value comes through

    @classmethod
    def start(cls, compute: Callable[[], object]) -> _Helper | None:
        """Fork one running `compute()`; None where a helper cannot be had (no fork, other
        threads, no free core: then the caller does the work itself)."""
        if not hasattr(os, "fork") or threading.active_count() > 1:
            return None
        if not _token():
            return None
        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            _give_back()
            return None
        sys.stdout.flush()  # nothing buffered is inherited twice (the helper never flushes)
        sys.stderr.flush()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            _give_back()
            return None
        if pid == 0:  # the helper: the value, to the pipe, and gone
            status = 0
            try:
                end_with_parent(parent)
                os.close(read_fd)
                data = pickle.dumps(compute(), pickle.HIGHEST_PROTOCOL)
                with os.fdopen(write_fd, "wb") as out:
                    out.write(data)
            except BaseException:
                status = 1
            os._exit(status)
        os.close(write_fd)
        return cls(pid, read_fd)

    def kill(self) -> None:
        """Stop the helper now (its value is not wanted) and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.close(self.results)
        try:
            os.waitpid(self.pid, 0)
        finally:
            _give_back()

    def result(self) -> tuple[bool, object]:
        """(True, the value), or (False, None) when the helper failed; reaps it either way."""
        try:
            chunks = []
            while chunk := os.read(self.results, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(self.results)
            try:
                status = os.waitpid(self.pid, 0)[1]
            finally:
                _give_back()
        if os.waitstatus_to_exitcode(status) != 0:
            return False, None
        try:
            return True, pickle.loads(b"".join(chunks))
        except Exception:
            return False, None


def end_with_parent(parent: int) -> None:
    """In a helper (or the TUI's checks' worker): be killed when the process that forked it
    ends, or rather the thread that did (Linux's `PR_SET_PDEATHSIG`), so a `kill -9` of
    eaglebug leaves nothing of it computing on. Elsewhere (or if the call fails) it ends when
    it finds the pipe to its parent broken."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the call above took effect
        os._exit(1)


def _take(
    fd: int,
    job: Callable[[T], R],
    items: Sequence[T],
    batches: list[list[int]],
    progress: Callable[[int], None] | None = None,
) -> dict[int, R]:
    """Do batches of items, as their numbers come out of the pipe, until it is empty;
    `progress(batches left in the pipe)` after each."""
    done: dict[int, R] = {}
    while len(raw := os.read(fd, _INDEX)) == _INDEX:
        for i in batches[int.from_bytes(raw, "little")]:
            done[i] = job(items[i])
        if progress is not None:
            progress(_queued(fd) // _INDEX)
    return done


def _queued(fd: int) -> int:
    """Bytes still in a pipe (Linux's and the BSDs' FIONREAD); 0 where it cannot be asked."""
    try:
        import fcntl
        import termios

        room = bytearray(4)
        fcntl.ioctl(fd, termios.FIONREAD, room)
    except (ImportError, OSError, AttributeError):
        return 0
    return int.from_bytes(room, sys.byteorder)


def forked_map(
    job: Callable[[T], R],
    items: Sequence[T],
    weights: Sequence[int],
    progress: Callable[[int, int], None] | None = None,
) -> list[R]:
    """`job` over `items`, in order, with a forked helper doing about half the work;
    `progress(done, total)`, when given, hears in this process how many items both processes
    have taken from the queue (each a file a front end counts as done)."""
    if len(items) < 2 or sum(weights) < _MIN_WEIGHT:
        return InProcess(progress)(job, items, weights)
    try:
        queue_r, queue_w = os.pipe()
    except OSError:
        return InProcess(progress)(job, items, weights)
    order = sorted(range(len(items)), key=lambda i: -weights[i])
    size = -(-len(order) // _MAX_TOKENS)  # items per batch: 1 unless the tree is huge
    batches = [order[k : k + size] for k in range(0, len(order), size)]
    queued = b"".join(k.to_bytes(_INDEX, "little") for k in range(len(batches)))
    while queued:
        queued = queued[os.write(queue_w, queued) :]
    os.close(queue_w)
    helper = _Helper.start(lambda: _take(queue_r, job, items, batches))

    def taken(left: int) -> None:
        if progress is not None:
            progress(min(len(items), (len(batches) - left) * size), len(items))

    try:
        results = _take(queue_r, job, items, batches, taken if progress is not None else None)
    finally:
        os.close(queue_r)
        ok, helped = helper.result() if helper is not None else (False, None)
    if ok and isinstance(helped, dict):
        results.update(helped)
    for i in range(len(items)):
        if i not in results:  # the helper failed: its items are done here, with the same result
            results[i] = job(items[i])
    if progress is not None:
        progress(len(items), len(items))
    return [results[i] for i in range(len(items))]


class ForkedMap:
    """A `Mapper` (`checks/source/mapper.py`) that shares the work with a helper (`forked_map`)
    and tells `progress(done, total)`: a worker process's checks, shown by the TUI."""

    def __init__(self, progress: Callable[[int, int], None] | None = None) -> None:
        self.progress = progress

    def __call__(
        self, job: Callable[[T], R], items: Sequence[T], weights: Sequence[int]
    ) -> list[R]:
        return forked_map(job, items, weights, self.progress)


class Pending(Generic[R]):
    """`compute()` made by a forked helper while this process goes on; calling the object
    waits for the value. If the helper cannot be had or fails, the value is computed here
    when asked for. A value no one will ask for must be `cancel`led: the helper is killed and
    reaped, never left to run on (or to wait on a pipe) after the run that wanted it."""

    def __init__(self, compute: Callable[[], R]) -> None:
        self._compute = compute
        self._helper = _Helper.start(compute)
        self._done: list[R] = []

    def __call__(self) -> R:
        if not self._done and self._helper is not None:
            helper, self._helper = self._helper, None
            ok, value = helper.result()
            if ok:
                self._done.append(cast(R, value))
        if not self._done:
            self._done.append(self._compute())
        return self._done[0]

    def cancel(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:
            helper.kill()


def in_background(compute: Callable[[], R]) -> Pending[R]:
    """`compute()` made by a forked helper while this process goes on (loading the rest of
    the engine, say; an analysis the run will want later): see `Pending`."""
    return Pending(compute)
