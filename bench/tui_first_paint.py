"""Time to first paint of `eaglebug demo`, next to the bare import of Textual's App.

Why: the TUI is what a user opens first thing on a box where a launch is about to cost 5-10
minutes; it must be on screen about as fast as a Textual app can be. Each run starts
`eaglebug demo --fast` (the console script's own entry point, `python -c` like the baseline)
under a pseudo-terminal of 130x40 and reads what it writes until the main screen is drawn (the
header, the GPU, log and checks panels and the footer are all in the output); that includes
preparing the demo's scratch git repository, importing Textual and eaglebug, and composing the
screen, as a user waits for it. Then `q` quits it. The baseline is
`python -c "import textual.app"` in the same run; best of N each. A benchmark: exit 0 whatever
the ratio, 1 only when the demo fails to paint.

    python bench/tui_first_paint.py [--runs 5] [--timeout 30]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

GOAL_RATIO = 3.0
COLUMNS, ROWS = 130, 40
ENTRY = "import sys; from eaglebug.tui.entry import main; sys.exit(main())"
# What the main screen shows once it is drawn (border titles, header, footer).
MARKERS = ("eaglebug", "─ GPUs ", "─ log ", "─ checks ", "Quit")
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|.)")


def run_baseline(cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import textual.app"], check=True, cwd=cwd)
    return time.perf_counter() - started


def _open_pty() -> tuple[int, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    return master, slave


def _stop(proc: subprocess.Popen[bytes], master: int) -> None:
    """q, then the whole session if it lingers."""
    try:
        os.write(master, b"q")
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            _drain(master, 0.05)
    except OSError:
        pass
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _drain(master: int, wait_s: float) -> bytes:
    ready, _, _ = select.select([master], [], [], wait_s)
    if not ready:
        return b""
    try:
        return os.read(master, 1 << 16)
    except OSError:  # the child closed the terminal
        return b""


def run_demo(scratch: Path, timeout_s: float) -> float | None:
    """Seconds from start to the first frame with the whole main screen; None if none came."""
    master, slave = _open_pty()
    # The demo's files go to a cache of their own; the working directory is another empty
    # folder, not the checkout (`python -c` puts it first on sys.path, where an `eaglebug`
    # folder, even the cache's, would shadow the installed package).
    env = {**os.environ, "TERM": "xterm-256color", "XDG_CACHE_HOME": str(scratch / "cache")}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, "demo", "--fast"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=scratch / "cwd",
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    written = b""
    seen = ""
    painted: float | None = None
    try:
        while time.perf_counter() - started < timeout_s and proc.poll() is None:
            chunk = _drain(master, 0.01)
            if not chunk:
                continue
            written += chunk
            # The whole output each time: an escape sequence may be cut between two reads.
            seen = _ANSI.sub("", written.decode("utf-8", errors="replace"))
            if all(marker in seen for marker in MARKERS):
                painted = time.perf_counter() - started
                break
    finally:
        _stop(proc, master)
        os.close(master)
    if painted is None:
        tail = seen[-600:].strip()
        print(f"error: no full frame in {timeout_s:g} s; it wrote: {tail!r}", file=sys.stderr)
    return painted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per demo start")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="eaglebug-paint-"))
    (scratch / "cwd").mkdir()
    try:
        run_baseline(scratch / "cwd")  # warm the page cache and the bytecode of both sides once
        if run_demo(scratch, args.timeout) is None:
            return 1
        baseline, demo = [], []
        for _ in range(args.runs):
            baseline.append(run_baseline(scratch / "cwd"))
            took = run_demo(scratch, args.timeout)
            if took is None:
                return 1
            demo.append(took)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base_s, demo_s = min(baseline), min(demo)
    ratio = demo_s / base_s
    verdict = "goal met" if ratio <= GOAL_RATIO else "GOAL MISSED"
    print(f"best of {args.runs}, terminal {COLUMNS}x{ROWS}")
    print(f'python -c "import textual.app"   {base_s * 1000:7.1f} ms')
    print(
        f"eaglebug demo --fast first paint  {demo_s * 1000:7.1f} ms   "
        f"(median {sorted(demo)[len(demo) // 2] * 1000:.1f} ms)"
    )
    print(f"ratio                             {ratio:7.2f}x   <= {GOAL_RATIO:g}x: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
