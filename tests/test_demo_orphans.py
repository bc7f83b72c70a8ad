"""The demo's stand-in server ends with the demo, however the demo ends.

`eaglebug demo` runs in a real pseudo-terminal (as in tmux or over SSH), a launch is started
with the keys a user presses (`r`, `y`), and then the demo process dies the way a closed
terminal or a killed pane ends it: SIGHUP, or SIGKILL (no cleanup code runs at all), or a
terminal that closes under a demo that ignores SIGHUP (started under `nohup`; no signal comes).
The stand-in it started lives in a session of its own, so no signal reaches it; it must notice
that its demo is gone and exit, leaving no process of the launch behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import psutil
import pytest

from eaglebug.server.state import load_state
from tests import gitrepo
from tests.live import session_pids, wait_for

_ANSI = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|.)")


class Terminal:
    """A pseudo-terminal with `eaglebug demo` in it; what it printed, without escapes."""

    def __init__(
        self, env: dict[str, str], cwd: Path, sighup: signal.Handlers = signal.SIG_DFL
    ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.master = master
        # A shell in a terminal gives its commands SIGHUP's default action (`sighup`), and
        # `nohup` ignores it; an ignored signal stays ignored across exec. The demo gets the
        # disposition asked for, whatever this test's runner inherited.
        inherited = signal.signal(signal.SIGHUP, sighup)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "eaglebug", "demo"],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=env,
                cwd=cwd,
                start_new_session=True,  # the terminal's session, as a shell in tmux has
                close_fds=True,
            )
        finally:
            signal.signal(signal.SIGHUP, inherited)
        os.close(slave)
        self._output = bytearray()
        self._lock = threading.Lock()
        self._quit_r, self._quit_w = os.pipe()  # wakes the reader, which holds `master` open
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            ready, _, _ = select.select([self.master, self._quit_r], [], [])
            if self._quit_r in ready:
                return
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._output += chunk

    def text(self) -> str:
        with self._lock:
            raw = bytes(self._output)
        return _ANSI.sub(b"", raw).decode("utf-8", "replace")

    def press(self, key: str) -> None:
        os.write(self.master, key.encode())

    def hang_up(self) -> None:
        """The terminal goes away, as sshd closes a dropped connection's pseudo-terminal
        (a read in progress would keep it open: the reader ends first)."""
        os.write(self._quit_w, b"x")
        self._reader.join(timeout=60)
        os.close(self.master)
        self.master = -1

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(timeout=120)
        if self.master >= 0:
            self.hang_up()
        os.close(self._quit_r)
        os.close(self._quit_w)


HANGUP = 0  # no signal: the terminal closes under a demo that ignores SIGHUP (`nohup`)


@pytest.mark.parametrize(
    "ending", [signal.SIGHUP, signal.SIGKILL, HANGUP], ids=["SIGHUP", "SIGKILL", "hangup"]
)
def test_the_stand_in_exits_when_the_demo_is_gone(tmp_path: Path, ending: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EAGLEBUG_", "SGLANG_"))}
    env.update(gitrepo.HERMETIC_ENV)
    env.update({"XDG_CACHE_HOME": str(tmp_path / "cache"), "TERM": "xterm-256color"})
    env["EAGLEBUG_DEMO_SECONDS"] = "120"  # the launch is still loading when the demo dies
    terminal = Terminal(env, tmp_path, signal.SIG_IGN if ending == HANGUP else signal.SIG_DFL)
    launch_pids: set[int] = set()
    try:
        wait_for(lambda: "checked in" in terminal.text(), "the demo's first checks")
        terminal.press("r")
        wait_for(lambda: "Launch now?" in terminal.text(), "the launch confirmation")
        terminal.press("y")
        [workdir] = (tmp_path / "cache" / "eaglebug" / "demo").glob("*/work")

        def launched() -> bool:
            record = load_state(workdir).latest
            return record is not None and bool(session_pids(record.pid))

        wait_for(launched, "the stand-in server")
        record = load_state(workdir).latest
        assert record is not None
        assert "Load weight begin" in terminal.text() or psutil.pid_exists(record.pid)
        launch_pids = session_pids(record.pid)
        if ending == HANGUP:
            terminal.hang_up()
            # Textual alone would read end-of-file at 100 % of a core for ever.
            assert terminal.proc.wait(timeout=120) == 128 + signal.SIGHUP
        else:
            os.kill(terminal.proc.pid, ending)
            terminal.proc.wait(timeout=120)
        wait_for(lambda: session_pids(record.pid) == set(), "the stand-in to exit", 15.0)
    finally:
        terminal.close()
        for pid in launch_pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
