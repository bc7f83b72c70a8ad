"""A launch's processes, wherever they went, and stopping every one of them.

SGLang starts one scheduler per rank, a detokenizer and helpers; some of those outlive their
parent, move to a new process group or call `setsid()`, and a process may fork in its own
SIGTERM handler. A launch is therefore found three ways, each bounded to processes created
since the launch began (a reused pid is never taken for one of ours): the root and its
descendants; every process of the root's session (orphans that lost their parent); and every
process whose environment carries the launch's tag (`EAGLEBUG_LAUNCH`, inherited by all
descendants, whatever session they moved to). A process of another launch or another user is
never signalled. `stop_tree` walks again after every signal until nothing of the launch is left.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

LAUNCH_ENV = "EAGLEBUG_LAUNCH"  # the launch's tag, in the environment of all its processes
_CREATE_SLACK_S = 0.05  # create times are rounded to clock ticks
_ROUND_S = 0.1  # how often the tree is walked again while it winds down


@dataclass(frozen=True)
class LaunchId:
    """What identifies a launch's processes (from its state record)."""

    pid: int
    create_time: float  # the root's, from psutil
    tag: str = ""  # the EAGLEBUG_LAUNCH value, "" for launches recorded before tags


@dataclass(frozen=True)
class StopResult:
    terminated: tuple[int, ...]  # exited on SIGTERM
    killed: tuple[int, ...]  # needed SIGKILL
    survivors: tuple[int, ...]  # still there after SIGKILL (should be empty)


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def root_process(launch: LaunchId) -> psutil.Process | None:
    """The launch's own process if it still runs (pid and create time both match)."""
    try:
        proc = psutil.Process(launch.pid)
        if abs(proc.create_time() - launch.create_time) > 0.01:
            return None  # the pid was reused by another process
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None
    return proc if _alive(proc) else None


def _belongs(proc: psutil.Process, launch: LaunchId, me: int, by_session: bool) -> bool:
    try:
        if proc.pid == me or proc.create_time() < launch.create_time - _CREATE_SLACK_S:
            return False
        if by_session and os.getsid(proc.pid) == launch.pid:
            return True
        return bool(launch.tag) and proc.environ().get(LAUNCH_ENV) == launch.tag
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return False


def members(launch: LaunchId) -> dict[int, psutil.Process]:
    """Every live process of the launch, by pid (empty when the whole launch is gone)."""
    found: dict[int, psutil.Process] = {}
    root = root_process(launch)
    if root is not None:
        found[root.pid] = root
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            for child in root.children(recursive=True):
                found[child.pid] = child
    # The session id is the root's pid. While the root runs, or no process has that pid, the
    # session is the launch's (the kernel does not reuse a pid a session still holds); once
    # another process has the pid, its session is someone else's.
    by_session = root is not None or not psutil.pid_exists(launch.pid)
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid not in found and _belongs(proc, launch, me, by_session):
            found[proc.pid] = proc
    for proc in list(found.values()):  # children of orphans carry no tag if they cleared it
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            for child in proc.children(recursive=True):
                found.setdefault(child.pid, child)
    return {pid: proc for pid, proc in found.items() if _alive(proc)}


def is_alive(launch: LaunchId) -> bool:
    """Whether anything of the launch still runs: the root, or children it left behind."""
    return root_process(launch) is not None or bool(members(launch))


def _signal_all(procs: dict[int, psutil.Process], signum: int) -> None:
    for proc in procs.values():
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.send_signal(signum)


def stop_tree(
    launch: LaunchId,
    grace_s: float,
    kill_wait_s: float = 10.0,
    reap: Callable[[], None] = lambda: None,
) -> StopResult:
    """SIGTERM everything of the launch, again for what appears, SIGKILL what is left.

    `grace_s` bounds the SIGTERM phase, `kill_wait_s` the SIGKILL phase. `reap` collects the
    exit status of children this process started (so they do not stay zombies).
    """
    if not (math.isfinite(grace_s) and grace_s >= 0):
        raise ValueError(f"grace_s must be a finite number >= 0, not {grace_s!r}")
    seen: dict[int, psutil.Process] = {}
    termed: set[int] = set()
    killed: set[int] = set()

    def walk() -> dict[int, psutil.Process]:
        reap()
        current = members(launch)
        seen.update(current)
        return current

    def phase(
        current: dict[int, psutil.Process],
        signum: int,
        signalled: set[int],
        budget_s: float,
        again: bool,
    ) -> dict[int, psutil.Process]:
        """Signal, wait a round, walk again, until nothing is left or the budget is spent.
        `again`: signal every process each round (SIGKILL), else only the new ones (SIGTERM)."""
        deadline = time.monotonic() + budget_s
        while current:
            targets = current if again else {p: c for p, c in current.items() if p not in signalled}
            _signal_all(targets, signum)
            signalled.update(targets)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            psutil.wait_procs(list(current.values()), timeout=min(_ROUND_S, left))
            current = walk()
        return current

    current = phase(walk(), signal.SIGTERM, termed, grace_s, again=False)
    phase(current, signal.SIGKILL, killed, kill_wait_s, again=True)
    reap()
    survivors = set(members(launch))
    return StopResult(
        terminated=tuple(sorted(set(seen) - killed - survivors)),
        killed=tuple(sorted(killed - survivors)),
        survivors=tuple(sorted(survivors)),
    )
