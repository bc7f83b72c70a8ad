"""The SGLang server process: launch detached, re-attach, stop the whole tree, wait for the GPUs.

A launch runs from an argv list (never a shell string) in its own session, so closing eaglebug
or losing the SSH connection leaves it running; its output goes to a new log file per launch
under `.eaglebug/logs/`. Every process of a launch carries its tag in the environment, so
`eaglebug.server.proctree` finds all of them, also those that left the session or whose root exited;
stopping walks them again after every signal (SGLang starts one scheduler per rank plus a
detokenizer), SIGKILLs what is left and reaps it. A launch is recorded in the state file before
anyone could need to find it: a server whose record cannot be written is stopped at once.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from eaglebug.checks import (
    InputError,
    carrying,
    is_compose,
    is_kubectl,
    shell_string,
    unwrapped,
    with_flags,
)
from eaglebug.server.proctree import (
    LAUNCH_ENV,
    LaunchId,
    StopResult,
    is_alive,
    members,
    root_process,
    stop_tree,
)
from eaglebug.server.state import (
    LaunchRecord,
    State,
    check_writable,
    load_state,
    save_state,
    state_dir,
)

# Seconds a process may take over its own clean shutdown before SIGKILL.
TERM_GRACE_S = 10.0


def launch_id(record: LaunchRecord) -> LaunchId:
    return LaunchId(record.pid, record.create_time, record.tag)


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
        """The newest launch of which anything still runs: its root, or children the root left
        behind when it exited (they hold GPU memory all the same). A reused pid does not count.
        """
        record = self.state().latest
        if record is not None and self.is_running(record):
            return record
        return None

    def is_running(self, record: LaunchRecord) -> bool:
        return is_alive(launch_id(record))

    def root_alive(self, record: LaunchRecord) -> bool:
        return root_process(launch_id(record)) is not None

    def processes(self, record: LaunchRecord) -> list[int]:
        """The pids of everything of the launch that still runs."""
        return sorted(members(launch_id(record)))

    def launch(
        self, argv: list[str], env_additions: dict[str, str], flags: dict[str, str] | None = None
    ) -> LaunchRecord:
        """Start `argv`. `flags`: the flag fixes the caller has put in it (recorded); None
        (`eaglebug launch`): the pending flag fixes go into it here."""
        if not argv:
            raise InputError("nothing to launch", "pass the command after --")
        wrapped, command = unwrapped(argv)
        runner = next((w for w in wrapped if w.container == "docker"), None)
        if runner is not None:
            raise InputError(
                f"eaglebug does not start containers ({runner.name}): the server's processes "
                "would be the container runtime's, and stop could not end them",
                "start it yourself (docker run -d --name sglang ...), its output into a file "
                "(docker logs -f sglang > server.log 2>&1 &), and watch that: "
                "eaglebug watch --log server.log",
            )
        if is_compose(command):
            runtime = os.path.basename(command[0]).partition("-")[0]  # `docker-compose` too
            raise InputError(
                f"eaglebug does not start containers ({runtime} compose): the server's "
                "processes would be the container runtime's, and stop could not end them",
                "start it yourself (docker compose up -d), its output into a file "
                "(docker compose logs -f > server.log 2>&1 &), and watch that: "
                "eaglebug watch --log server.log",
            )
        if is_kubectl(command):
            raise InputError(
                "eaglebug does not start pods (kubectl): the server runs on the cluster, where "
                "stop could not end it",
                "apply it yourself, its log into a file (kubectl logs -f POD > server.log 2>&1 "
                "&), and watch that: eaglebug watch --log server.log",
            )
        if shell_string(command) is not None:
            raise InputError(
                "eaglebug starts the launch command itself, not a shell string (bash -c "
                '"..."): a flag fix could not be added to it',
                "write the command as its words, without the shell",
            )
        if os.geteuid() != 0 and any(w.name == "sudo" for w in wrapped):
            raise InputError(
                "eaglebug runs as a user, and a launch through sudo runs as root: stop could "
                "not signal its processes",
                "run the launch without sudo, or eaglebug itself as the user the launch needs",
            )
        running = self.attached()
        if running is not None:
            what = "is still running" if self.root_alive(running) else "left processes running"
            raise InputError(
                f"launch {running.number} (pid {running.pid}) {what}",
                "stop it first (eaglebug stop), or relaunch from the TUI",
            )
        with self.editing() as state:
            if flags is None:
                flags = dict(state.pending_flags)
                argv = with_flags(argv, flags)
            return self._launch(state, argv, env_additions, flags)

    def _launch(
        self,
        state: State,
        argv: list[str],
        env_additions: dict[str, str],
        flags: dict[str, str] | None = None,
    ) -> LaunchRecord:
        """Start the server only once the state can be written, and record it at once; a
        server that cannot be recorded is stopped again (nothing runs that `stop` cannot find).
        """
        number = (state.latest.number + 1) if state.latest else 1
        logs = state_dir(self.workdir) / "logs"
        made = [d for d in (logs.parent, logs) if not d.exists()]
        check_writable(self.workdir)  # before a start, not after
        try:
            logs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"{logs}: cannot create the log folder ({exc.strerror})",
                "run eaglebug from a folder you can write to",
            ) from None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        log_path = logs / f"launch-{number:03d}-{stamp}.log"
        tag = f"{os.getpid()}-{number}-{uuid.uuid4().hex}"
        env = dict(os.environ)
        env.update(state.pending_env)
        env.update(env_additions)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env[LAUNCH_ENV] = tag
        # A wrapper that drops the environment (`env -i`, sudo's reset, Apptainer's
        # `--cleanenv`, srun's `--export=NONE`) would drop the tag (and unbuffered output) for every process of the
        # launch: `stop` would not find one that left the session.
        run = carrying(argv, {k: env[k] for k in (LAUNCH_ENV, "PYTHONUNBUFFERED")}, env)
        try:
            proc = self._start(run, env, log_path)
        except InputError:
            for folder in reversed(made):  # nothing ran: leave no trace of it
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
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
            tag=tag,
            flag_additions=dict(flags or {}),
        )
        pending = dict(state.pending_env)
        pending_flags = dict(state.pending_flags)
        state.launches.append(record)
        state.pending_env = {}
        state.pending_flags = {}
        try:
            save_state(self.workdir, state)
        except BaseException:
            state.launches.pop()
            state.pending_env = pending
            state.pending_flags = pending_flags
            stop_tree(launch_id(record), grace_s=0.0, reap=self._reap)
            raise
        return record

    def _start(
        self, argv: list[str], env: dict[str, str], log_path: Path
    ) -> subprocess.Popen[bytes]:
        try:
            with open(log_path, "wb") as log:
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
            with contextlib.suppress(OSError):
                log_path.unlink()  # nothing ran: no empty log left behind
            raise InputError(
                f"cannot start {argv[0]}: {exc.strerror}", "check the command's first word"
            ) from None
        self._children[proc.pid] = proc
        return proc

    def update(self, number: int, **changes: object) -> None:
        """Record what was learned about a launch (phase, time to ready, outcome)."""
        with self.editing() as state:
            for record in state.launches:
                if record.number == number:
                    for key, value in changes.items():
                        setattr(record, key, value)

    def stop(self, record: LaunchRecord, grace_s: float = TERM_GRACE_S) -> StopResult:
        """SIGTERM the whole launch (walked again after every signal), SIGKILL what is left."""
        root_was_alive = self.root_alive(record)
        result = stop_tree(
            launch_id(record), grace_s, kill_wait_s=max(grace_s, 5.0), reap=self._reap
        )
        if not result.survivors:
            if root_was_alive:
                outcome = "stopped"
            elif record.outcome in {"running", "ready"}:
                outcome = "exited"  # the root had ended on its own; its leftovers were stopped
            else:
                outcome = record.outcome
            self.update(record.number, outcome=outcome)
        return result

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
