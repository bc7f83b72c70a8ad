"""The TUI's cost while nothing happens, and its key response while the log floods.

Why: eaglebug sits in a tmux pane for hours next to a server; idle it must cost next to
nothing, and when the server prints thousands of lines a second the keys must still answer.

Idle: `eaglebug demo`'s app (default 1 s GPU sampling, the demo's stand-in in fast mode, both
fixes applied and the env fix accepted through the Session, so the first launch goes to
"ready") runs in a child process on a pseudo-terminal of 130x40 with the real terminal driver.
Once the state file records the launch as ready (and a settling pause), the child's CPU time
(psutil, all threads) is read over `--seconds`. Baseline in the same run: a minimal Textual app
(a Static and a Footer) on the same terminal for the same time.

Flood: the app, in this process through `App.run_test()` (130x40), watches a log that a writer
thread grows by `--rate` lines a second (SGLang decode lines, in batches every 10 ms), with the
demo tree's checks on the right. Keys are posted to the app as the terminal driver posts them
(`post_message(Key)`: Pilot's `press` waits for the process to go idle, which a flood never
lets it do) and each is timed until its effect is on screen: the state changed and the next
refresh after it has run. Cursor keys in the checks list (the goal) and `/` + Escape (the
filter input appears and goes: a relayout, a focus change) each with and without the flood in
the same run; and how far the log panel is behind the writer. A benchmark: exit 0 whatever the
result, 1 only when the app fails (no ready launch, no key answered).

    python bench/tui_idle_and_flood.py [--seconds 10] [--rate 10000] [--presses 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
from textual import events  # noqa: TID251 (a TUI benchmark posts Textual's own key events)
from textual.widgets import Input, OptionList  # noqa: TID251

from eaglebug.demo import DemoScenario
from eaglebug.server.state import load_state
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import EaglebugApp, build_app
from eaglebug.tui.demo import demo_gpus
from eaglebug.tui.widgets.log_panel import LogPanel

IDLE_GOAL_PCT = 2.0  # of one core
KEY_GOAL_MS = 100.0  # p95, cursor keys under the flood
COLUMNS, ROWS = 130, 40
ENV_VAR = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"

# The child of the idle run: the demo with both fixes in, so the first launch is ready.
READY_DEMO = """
import sys
from pathlib import Path
from eaglebug.demo import DemoScenario
from eaglebug.tui.app import build_app
from eaglebug.tui.demo import demo_gpus, demo_session
scenario = DemoScenario.prepare(Path(sys.argv[1]), fast=True)
session = demo_session(scenario)
result = session.run_checks()
for patch in result.patches:
    session.apply(patch)
session.accept_env(sys.argv[2], "1")
build_app(session, demo_gpus(session, scenario), launch_when_clear=True).run()
"""
MINIMAL_APP = """
from textual.app import App
from textual.widgets import Footer, Static
class Minimal(App):
    BINDINGS = [("q", "quit", "Quit")]
    def compose(self):
        yield Static("a minimal Textual app")
        yield Footer()
Minimal().run()
"""


# -- idle -----------------------------------------------------------------------------------


class Terminal:
    """A child process on a pseudo-terminal whose output is read (and dropped) by a thread."""

    def __init__(self, code: str, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.master = master
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**os.environ, "TERM": "xterm-256color", **env},
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self.tail = b""
        self._done = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._done.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(self.master, 1 << 16)
                except OSError:
                    return
                if not chunk:
                    return
                self.tail = (self.tail + chunk)[-4000:]

    def cpu_s(self) -> float:
        times = psutil.Process(self.proc.pid).cpu_times()
        return float(times.user + times.system)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.master, b"q")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._done.set()
        self._reader.join(timeout=2)
        os.close(self.master)


def idle_share(term: Terminal, seconds: float) -> float:
    """Percent of one core the child used over `seconds` of wall time."""
    cpu0, wall0 = term.cpu_s(), time.perf_counter()
    time.sleep(seconds)
    return 100 * (term.cpu_s() - cpu0) / (time.perf_counter() - wall0)


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def measure_idle(seconds: float, settle_s: float, scratch: Path) -> tuple[float, float] | None:
    """(the ready demo's idle %, the minimal app's idle %) of one core; None if no ready."""
    cwd = scratch / "cwd"
    cwd.mkdir()
    env = {"XDG_CACHE_HOME": str(scratch / "cache")}
    minimal = Terminal(MINIMAL_APP, [], cwd, env)
    try:
        time.sleep(2.0)  # started and painted
        base_pct = idle_share(minimal, seconds)
    finally:
        minimal.close()

    root = scratch / "demo"
    workdir = root / "work"
    demo = Terminal(READY_DEMO, [str(root), ENV_VAR], cwd, env)
    try:

        def ready() -> bool:
            with contextlib.suppress(Exception):
                latest = load_state(workdir).latest
                return latest is not None and latest.ready_after_s is not None
            return False

        if not wait_until(ready, 60.0):
            tail = demo.tail.decode("utf-8", errors="replace")[-800:]
            print(f"error: the demo's launch never got ready; it wrote: {tail!r}", file=sys.stderr)
            return None
        time.sleep(settle_s)  # the last log lines and the checks settle
        pct = idle_share(demo, seconds)
    finally:
        demo.close()
        stop_launches(workdir)
    return pct, base_pct


def stop_launches(workdir: Path) -> None:
    """The stand-in servers outlive the app by design: end every process of every launch."""
    with contextlib.suppress(Exception):
        for record in load_state(workdir).launches:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(record.pid, signal.SIGKILL)


# -- flood ----------------------------------------------------------------------------------


class Writer(threading.Thread):
    """Appends SGLang-shaped decode lines to a log at a steady rate, in 10 ms batches."""

    def __init__(self, log: Path, rate: int) -> None:
        super().__init__(daemon=True)
        self.log, self.rate = log, rate
        self.written = 0
        self.stop = threading.Event()

    def run(self) -> None:
        batch = max(self.rate // 100, 1)
        started = time.monotonic()
        with self.log.open("a", encoding="utf-8") as out:
            while not self.stop.is_set():
                n = self.written
                out.write(
                    "".join(
                        f"[2026-11-30 12:00:00 TP{(n + i) % 8}] Decode batch. #running-req: 32, "
                        f"#token: {n + i:09d}, token usage: 0.05, gen throughput (token/s): "
                        f"1234.56, #queue-req: 0\n"
                        for i in range(batch)
                    )
                )
                out.flush()
                self.written += batch
                delay = started + self.written / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * fraction), len(ordered) - 1)]


async def answered(app: EaglebugApp, key: str, char: str | None, done: Callable[[], bool]) -> float:
    """Seconds from posting a key until its effect is true and the next refresh has run."""
    started = time.perf_counter()
    app.post_message(events.Key(key, char))
    while not done():
        await asyncio.sleep(0.0005)
        if time.perf_counter() - started > 10:
            raise TimeoutError(f"{key} not answered in 10 s")
    painted = asyncio.Event()
    app.screen.call_after_refresh(painted.set)
    await painted.wait()
    return time.perf_counter() - started


async def key_rounds(app: EaglebugApp, presses: int) -> tuple[list[float], list[float]]:
    """Latencies of cursor keys in the checks list, and of `/` then Escape (the filter)."""
    listing = app.main.query_one("#checks-list", OptionList)
    field_ = app.main.query_one("#log-filter", Input)
    cursor: list[float] = []
    for i in range(presses):
        key, step = ("down", 1) if i % 2 == 0 else ("up", -1)
        want = ((listing.highlighted or 0) + step) % listing.option_count
        cursor.append(await answered(app, key, None, lambda w=want: listing.highlighted == w))
        await asyncio.sleep(0.03)
    filtering: list[float] = []
    for _ in range(max(presses // 4, 5)):
        filtering.append(await answered(app, "slash", "/", lambda: bool(field_.display)))
        await asyncio.sleep(0.03)
        filtering.append(await answered(app, "escape", None, lambda: not field_.display))
        await asyncio.sleep(0.03)
    listing.focus()
    return cursor, filtering


@dataclass
class Flood:
    quiet: tuple[list[float], list[float]] | None = None  # (cursor, filter) latencies, in s
    flooded: tuple[list[float], list[float]] | None = None
    wall_s: float = 0.0
    written: int = 0  # lines the writer appended in the window
    cpu_pct: float = 0.0  # of one core, the whole process (the writer thread included)
    main_pct: float = 0.0  # the event loop's thread alone
    behind: int = 0  # lines the log panel was behind the writer at the end of the window
    catch_up_s: float = 0.0  # from the writer stopping to the panel showing its last line


def measure_flood(rate: int, presses: int, seconds: float, scratch: Path) -> Flood:
    scenario = DemoScenario.prepare(scratch / "flood-demo", fast=True)
    log = scratch / "flood.log"
    log.write_text("", encoding="utf-8")
    config = SessionConfig(
        scenario.workdir,
        str(scenario.sglang_root),
        scenario.preflight_words,
        log_path=log,
        demo_label="flood",
    )
    session = Session(config)
    app = build_app(session, demo_gpus(session, scenario))
    writer = Writer(log, rate)
    got = Flood()

    def token(line: str) -> int:
        return int(line.split("#token: ")[1][:9]) if "#token: " in line else -1

    async def run() -> None:
        async with app.run_test(size=(COLUMNS, ROWS)) as pilot:
            listing = app.main.query_one("#checks-list", OptionList)
            while app.main.check_result is None or listing.option_count < 2:
                await pilot.pause(0.05)
            got.quiet = await key_rounds(app, presses)
            panel = app.main.query_one(LogPanel)
            proc = psutil.Process()
            main_id = threading.main_thread().native_id

            def main_cpu() -> float:
                return next(
                    float(t.user_time + t.system_time) for t in proc.threads() if t.id == main_id
                )

            writer.start()
            await asyncio.sleep(1.0)  # the flood is on
            cpu0, main0, wall0 = time.process_time(), main_cpu(), time.perf_counter()
            written0 = writer.written
            got.flooded = await key_rounds(app, presses)
            rest = seconds - (time.perf_counter() - wall0)
            if rest > 0:
                await asyncio.sleep(rest)
            got.wall_s = time.perf_counter() - wall0
            got.cpu_pct = 100 * (time.process_time() - cpu0) / got.wall_s
            got.main_pct = 100 * (main_cpu() - main0) / got.wall_s
            got.written = writer.written - written0
            got.behind = writer.written - 1 - token(panel.lines[-1] if panel.lines else "")
            writer.stop.set()
            writer.join()
            stopped = time.perf_counter()
            while not panel.lines or token(panel.lines[-1]) != writer.written - 1:
                if time.perf_counter() - stopped > 30:
                    raise TimeoutError("the log panel did not catch up in 30 s")
                await pilot.pause(0.01)
            got.catch_up_s = time.perf_counter() - stopped

    asyncio.run(run())
    return got


# -- report ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="idle and flood windows")
    parser.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="idle: seconds after ready before measuring (the GPU sparklines keep moving until "
        "their 120-sample window is all after the load)",
    )
    parser.add_argument("--rate", type=int, default=10_000, help="log lines a second")
    parser.add_argument("--presses", type=int, default=100, help="cursor keys per round")
    parser.add_argument("--skip-idle", action="store_true")
    parser.add_argument("--skip-flood", action="store_true")
    args = parser.parse_args(argv)
    for name in (ENV_VAR, "EAGLEBUG_DEMO_TREE"):
        os.environ.pop(name, None)

    scratch = Path(tempfile.mkdtemp(prefix="eaglebug-idle-flood-"))
    try:
        if not args.skip_idle:
            idle = measure_idle(args.seconds, args.settle, scratch)
            if idle is None:
                return 1
            pct, base_pct = idle
            verdict = "goal met" if pct <= IDLE_GOAL_PCT else "GOAL MISSED"
            print(
                f"idle, {args.seconds:g} s each ({args.settle:g} s after ready), "
                f"terminal {COLUMNS}x{ROWS}, real driver"
            )
            print(f"  minimal Textual app       {base_pct:6.2f}% of one core")
            print(
                f"  eaglebug demo at ready    {pct:6.2f}% of one core   "
                f"({pct / base_pct if base_pct else float('inf'):.1f}x the minimal app)   "
                f"<= {IDLE_GOAL_PCT:g}%: {verdict}"
            )
        if not args.skip_flood:
            try:
                got = measure_flood(args.rate, args.presses, args.seconds, scratch)
            except TimeoutError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            assert got.quiet is not None and got.flooded is not None
            p95 = 1000 * percentile(got.flooded[0], 0.95)
            verdict = "goal met" if p95 <= KEY_GOAL_MS else "GOAL MISSED"
            rate = got.written / got.wall_s
            print(f"flood: {rate:,.0f} lines/s written for {got.wall_s:.1f} s (run_test, 130x40)")
            labels = ("cursor key (checks list)", "/ and Escape (filter)   ")
            for label, quiet, flood in zip(labels, got.quiet, got.flooded, strict=True):
                print(
                    f"  {label}  quiet p50 {1000 * percentile(quiet, 0.5):5.1f} ms "
                    f"p95 {1000 * percentile(quiet, 0.95):5.1f} ms   flood p50 "
                    f"{1000 * percentile(flood, 0.5):5.1f} ms p95 "
                    f"{1000 * percentile(flood, 0.95):5.1f} ms   "
                    f"(p95 {percentile(flood, 0.95) / percentile(quiet, 0.95):.1f}x quiet)"
                )
            print(
                f"  cursor key p95 under the flood  {p95:.1f} ms   <= {KEY_GOAL_MS:g} ms: {verdict}"
            )
            print(
                f"  CPU during the flood: {got.cpu_pct:.0f}% of one core for the process "
                f"(the writer thread included), {got.main_pct:.0f}% on the event loop's thread"
            )
            print(
                f"  log panel at the end of the window: {got.behind:,} lines behind the writer "
                f"({1000 * got.behind / rate:.0f} ms of log); caught up "
                f"{1000 * got.catch_up_s:.0f} ms after the writer stopped"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
