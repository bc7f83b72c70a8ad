"""The SGLang server process: launch detached, re-attach, stop the whole tree, wait for the GPUs.

A launch runs from an argv list (never a shell string) in its own session, so closing eaglebug
or losing the SSH connection leaves it running; its output goes to a new log file per launch
under `.eaglebug/logs/`. Stopping sends SIGTERM to every process of the tree (SGLang starts one
scheduler per rank plus a detokenizer), waits, SIGKILLs the survivors and reaps them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from eaglebug.checks.errors import InputError
from eaglebug.state import LaunchRecord, State, load_state, save_state, state_dir

# Seconds a process may take over its own clean shutdown before SIGKILL.
TERM_GRACE_S = 10.0


@dataclass(frozen=True)
class StopResult:
    terminated: tuple[int, ...]  # exited on SIGTERM
    killed: tuple[int, ...]  # needed SIGKILL
    survivors: tuple[int, ...]  # still there after SIGKILL (should be empty)


def _process(record: LaunchRecord) -> psutil.Process | None:
    """The launch's process if it is still the same one (pid and create time match)."""
    try:
        proc = psutil.Process(record.pid)
        if abs(proc.create_time() - record.create_time) > 0.01:
            return None  # the pid was reused by another process
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _is_zombie(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def _session_members(sid: int) -> list[psutil.Process]:
    """Every process in the launch's session: children that lost their parent are still there."""
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return members


class Server:
    """Launches and stops the server recorded in one working directory's `.eaglebug/` state."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._children: dict[int, subprocess.Popen[bytes]] = {}  # ours, to reap
        # One read-modify-write of the state file at a time (the TUI writes from several
        # workers: the log follower records phases while a relaunch appends a launch).
        self.state_lock = threading.RLock()

    @contextmanager
    def editing(self) -> Iterator[State]:
        """The state, saved when the block ends, with no other edit in between."""
        with self.state_lock:
            state = load_state(self.workdir)
            yield state
            save_state(self.workdir, state)

    def state(self) -> State:
        return load_state(self.workdir)

    def attached(self) -> LaunchRecord | None:
        """The newest launch whose process is still running (a reused pid does not count)."""
        record = self.state().latest
        if record is not None and record.outcome in {"running", "ready"} and _process(record):
            return record
        return None

    def is_running(self, record: LaunchRecord) -> bool:
        return _process(record) is not None

    def launch(self, argv: list[str], env_additions: dict[str, str]) -> LaunchRecord:
        if not argv:
            raise InputError("nothing to launch", "pass the command after --")
        running = self.attached()
        if running is not None:
            raise InputError(
                f"launch {running.number} (pid {running.pid}) is still running",
                "stop it first (eaglebug stop), or relaunch from the TUI",
            )
        with self.editing() as state:
            return self._launch(state, argv, env_additions)

    def _launch(self, state: State, argv: list[str], env_additions: dict[str, str]) -> LaunchRecord:
        number = (state.latest.number + 1) if state.latest else 1
        logs = state_dir(self.workdir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        log_path = logs / f"launch-{number:03d}-{stamp}.log"
        env = dict(os.environ)
        env.update(state.pending_env)
        env.update(env_additions)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(log_path, "wb") as log:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.workdir,
                    start_new_session=True,  # survives eaglebug and the SSH session
                    close_fds=True,
                )
            except OSError as exc:
                raise InputError(
                    f"cannot start {argv[0]}: {exc.strerror}", "check the command's first word"
                ) from None
        self._children[proc.pid] = proc
        try:
            create_time = psutil.Process(proc.pid).create_time()
        except psutil.NoSuchProcess:
            create_time = time.time()
        record = LaunchRecord(
            number=number,
            argv=list(argv),
            env_additions={**state.pending_env, **env_additions},
            log=str(log_path),
            pid=proc.pid,
            create_time=create_time,
            started_at=time.time(),
        )
        state.launches.append(record)
        state.pending_env = {}
        return record

    def update(self, number: int, **changes: object) -> None:
        """Record what was learned about a launch (phase, time to ready, outcome)."""
        with self.editing() as state:
            for record in state.launches:
                if record.number == number:
                    for key, value in changes.items():
                        setattr(record, key, value)

    def stop(self, record: LaunchRecord, grace_s: float = TERM_GRACE_S) -> StopResult:
        """SIGTERM the whole tree, wait, SIGKILL survivors, reap."""
        root = _process(record)
        members: dict[int, psutil.Process] = {}
        if root is not None:
            try:
                for proc in [root, *root.children(recursive=True)]:
                    members[proc.pid] = proc
            except psutil.NoSuchProcess:
                pass
        for proc in _session_members(record.pid):
            members.setdefault(proc.pid, proc)
        procs = list(members.values())
        for proc in procs:
            try:
                proc.send_signal(signal.SIGTERM)
            except psutil.NoSuchProcess:
                continue
        gone, alive = psutil.wait_procs(procs, timeout=grace_s)
        for proc in alive:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                continue
        killed_gone, still = psutil.wait_procs(alive, timeout=grace_s)
        # A killed process whose parent died too may linger as a zombie until init reaps it
        # (some container inits never do); it holds no memory and runs nothing: it is gone.
        zombies = [p for p in still if _is_zombie(p)]
        killed_gone = [*killed_gone, *zombies]
        still = [p for p in still if p not in zombies]
        self._reap()
        outcome = "stopped" if root is not None else record.outcome
        self.update(record.number, outcome=outcome if outcome != "running" else "exited")
        return StopResult(
            tuple(sorted(p.pid for p in gone)),
            tuple(sorted(p.pid for p in killed_gone)),
            tuple(sorted(p.pid for p in still)),
        )

    def _reap(self) -> None:
        for pid, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[pid]

    def poll_exit(self, record: LaunchRecord) -> int | None:
        """The exit code of a launch this process started, once it has ended."""
        child = self._children.get(record.pid)
        if child is None:
            return None
        return child.poll()


def wait_gpu_released(
    pids: Iterable[int],
    holders: Callable[[], list[int]],
    timeout_s: float = 60.0,
    interval_s: float = 0.5,
) -> list[int]:
    """Wait until none of `pids` holds GPU memory; return those that still do at the timeout.

    `holders` reports the pids currently holding GPU memory (from the GPU source's snapshot).
    """
    wanted = set(pids)
    deadline = time.monotonic() + timeout_s
    while True:
        left = sorted(wanted & set(holders()))
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(interval_s)
