"""A child process's peak RSS, measured where a test's point is memory.

Why a launcher: on Linux the peak RSS a process reports survives `exec`, and a child forked
from the (large) test process starts with the parent's resident pages, so a child that read
its own `RUSAGE_SELF` would report the test process's size, not its own (several GB late in
the suite). The command is started from a small launcher process instead, whose own child
starts small; the launcher reads that child's peak with `os.wait4` and prints it last.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(proc.pid, 0)
sys.stderr.write(f"\\nrss-kb {usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass(frozen=True)
class Measured:
    code: int
    out: str
    err: str
    rss_mb: float


def run_measured(
    argv: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> Measured:
    """Run `argv` to its end: exit code, stdout, stderr and its own peak RSS in MB. A child
    that outlives `timeout` is an AssertionError (it blocked), never a hang of the suite."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAUNCHER, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env if env is not None else dict(os.environ),
        start_new_session=True,  # the launcher and its child are killed together
    )
    try:
        out, err_text = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"{argv[:4]} blocked (killed after {timeout:g} s)") from None
    err, _, rss = err_text.rpartition("\nrss-kb ")
    return Measured(proc.returncode, out, err.rstrip("\n") + "\n", int(rss) / 1024)
