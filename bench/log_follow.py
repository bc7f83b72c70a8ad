"""How fast `LogFollower` ingests an SGLang-shaped log, next to `wc -l` and `cat` on the same file.

Why: DESIGN.md promises that eaglebug follows a multi-GB launch log with bounded memory, and the
log issue asks for >= 200,000 lines/s on one core. This writes a realistic log into a temp file
(rank-prefixed lines from eight TP ranks, tqdm shard-loading bars rewritten with \\r, ANSI
colour, uvicorn access lines, decode-batch statistics, a traceback printed by every rank, a few
lines of invalid UTF-8 and a few very long lines), then measures, each as its own process with
its peak RSS from `os.wait4`:

    catch-up   LogFollower(from_start=True) polling the whole file to its end (best of N)
    growing    the same process appends the log in batches of ~1,000 lines (cut mid-line)
               and polls after each batch; only the polls are timed
    baselines  `wc -l` and `cat > /dev/null` on the same file (best of N, page cache warm)

and reports lines/s against the goal and the ratio to `wc -l`. Peak RSS must not grow with the
file: the follower keeps one chunk and one unfinished line, never the lines it returned.

This is a benchmark, not a test: it exits 0 whether or not the goals are met, and 1 only when
the follower's line count disagrees with `wc -l`.

    python bench/log_follow.py [--lines N] [--runs N] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

LINES_GOAL = 200_000  # lines/s, catch-up and growing
RSS_GOAL_MB = 64.0  # peak RSS of the follower process

RANKS = 8
SHARDS = 64


@dataclass(frozen=True)
class Run:
    seconds: float
    max_rss_mb: float
    stdout: bytes


def _rss_mb(ru_maxrss: int) -> float:
    # Linux reports kilobytes, macOS bytes.
    return ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else ru_maxrss / 1024


def run_child(argv: list[str]) -> Run:
    """Run one process to completion: wall seconds, its own peak RSS, its stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"error: {argv[0]} failed with status {status}")
        out.seek(0)
        return Run(seconds, _rss_mb(usage.ru_maxrss), out.read())


# -- the log ---------------------------------------------------------------------------------


def _stamp(second: int) -> str:
    h, rest = divmod(10 * 3600 + 36 * 60 + second, 3600)
    return f"2026-01-30 {h % 24:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _tqdm_line(second: int) -> bytes:
    """One shard-loading bar: every state after a \\r, the newline only at the end."""
    states = []
    for done in range(SHARDS + 1):
        pct = done * 100 // SHARDS
        states.append(
            f"\rLoading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{SHARDS} "
            f"[00:{done // 2:02d}<00:{(SHARDS - done) // 2:02d},  1.{done % 10}0it/s]"
        )
    return f"[{_stamp(second)} TP0] ".encode() + "".join(states).encode() + b"\n"


def _traceback(second: int) -> list[bytes]:
    lines = []
    for rank in range(RANKS):
        prefix = f"[{_stamp(second)} TP{rank}] "
        lines += [
            f"{prefix}Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler',
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank)",
            '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 418, in init',
            "    self.model.set_eagle3_layers_to_capture(layer_ids)",
            "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute "
            "'set_eagle3_layers_to_capture'",
        ]
    return [line.encode() for line in lines]


def generate(target_lines: int) -> Iterator[bytes]:
    """SGLang-shaped log lines (each ending in \\n), about ``target_lines`` of them."""
    rng = random.Random(20260130)
    green, yellow, reset = "\x1b[32m", "\x1b[33m", "\x1b[0m"
    written = 0
    second = 0
    while written < target_lines:
        second += 1
        stamp = _stamp(second)
        kind = rng.random()
        if kind < 0.55:
            rank = rng.randrange(RANKS)
            running = rng.randrange(1, 64)
            line = (
                f"[{stamp} TP{rank}] Decode batch. #running-req: {running}, "
                f"#token: {running * rng.randrange(200, 900)}, token usage: "
                f"{rng.random():.2f}, accept len: {1 + 3 * rng.random():.2f}, cuda graph: True, "
                f"gen throughput (token/s): {rng.uniform(100, 3000):.2f}, #queue-req: "
                f"{rng.randrange(8)}"
            ).encode()
        elif kind < 0.80:
            port = rng.randrange(30000, 60000)
            line = (
                f"[{stamp}] {green}INFO{reset}:     127.0.0.1:{port} - "
                f'"POST /v1/chat/completions HTTP/1.1" 200 OK'
            ).encode()
        elif kind < 0.95:
            rank = rng.randrange(RANKS)
            line = (
                f"[{stamp} TP{rank}] Load weight begin. avail mem={rng.uniform(60, 140):.2f} GB"
            ).encode()
        elif kind < 0.985:
            line = (
                f"[{stamp} TP{rng.randrange(RANKS)}] {yellow}WARNING{reset} "
                "The draft model's max_position_embeddings (131072) is shorter than the "
                "target's context length (262144)"
            ).encode()
        elif kind < 0.995:
            line = f"[{stamp} TP{rng.randrange(RANKS)}] weight name: ".encode() + b"\xff\xfe\xc3("
        elif kind < 0.9995:
            yield _tqdm_line(second)
            written += 1
            continue
        elif kind < 0.99995:
            for tb in _traceback(second):
                yield tb + b"\n"
            written += RANKS * 6
            continue
        else:
            line = f"[{stamp} TP0] server_args=".encode() + b"x" * 200_000
        yield line + b"\n"
        written += 1


def write_log(path: Path, target_lines: int) -> None:
    with path.open("wb") as out:
        batch: list[bytes] = []
        for line in generate(target_lines):
            batch.append(line)
            if len(batch) >= 10_000:
                out.write(b"".join(batch))
                batch.clear()
        out.write(b"".join(batch))


# -- the measured side (a child process) -------------------------------------------------------


def _vm_kib(field: str) -> int:
    """A ``Vm*`` field of /proc/self/status (this process's own, reset at exec), else 0."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass  # not Linux: the parent falls back to ru_maxrss
    return 0


def _report(
    lines: int, seconds: float, cpu_seconds: float, buffered: int, rss_start_kib: int
) -> None:
    print(
        json.dumps(
            {
                "lines": lines,
                "seconds": seconds,
                "cpu_seconds": cpu_seconds,
                "buffered": buffered,
                "rss_start_mb": rss_start_kib / 1024,
                "peak_rss_mb": _vm_kib("VmHWM") / 1024,
            }
        )
    )


def child_catch_up(path: str) -> None:
    sys.path.insert(0, str(REPO))
    from eaglebug.logs.follow import LogFollower, LogLine

    rss_start = _vm_kib("VmRSS")
    start, cpu_start = time.perf_counter(), time.process_time()
    lines = 0
    with LogFollower(path, from_start=True) as follower:
        while True:
            events = follower.poll()
            lines += sum(1 for e in events if type(e) is LogLine)
            if not follower.behind:
                break
        buffered = follower.buffered_bytes
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    _report(lines, seconds, cpu, buffered, rss_start)


def child_growing(source: str, scratch: str) -> None:
    """Append ``source`` to ``scratch`` in ~100 KiB pieces cut mid-line; time only the polls."""
    sys.path.insert(0, str(REPO))
    from eaglebug.logs.follow import LogFollower, LogLine

    piece_bytes = 100 * 1024 + 37  # ~1,000 lines, never aligned with a line
    Path(scratch).write_bytes(b"")
    rss_start = _vm_kib("VmRSS")
    lines = 0
    polled = cpu = 0.0
    max_buffered = 0
    with (
        open(source, "rb") as src,
        open(scratch, "ab", buffering=0) as out,
        LogFollower(scratch) as follower,
    ):
        while piece := src.read(piece_bytes):
            out.write(piece)
            start, cpu_start = time.perf_counter(), time.process_time()
            while True:
                events = follower.poll()
                lines += sum(1 for e in events if type(e) is LogLine)
                if not follower.behind:
                    break
            polled += time.perf_counter() - start
            cpu += time.process_time() - cpu_start
            max_buffered = max(max_buffered, follower.buffered_bytes)
    _report(lines, polled, cpu, max_buffered, rss_start)


# -- the report --------------------------------------------------------------------------------


def best(argv: list[str], runs: int) -> Run:
    results = [run_child(argv) for _ in range(runs)]
    return min(results, key=lambda r: r.seconds)


def follower_side(argv: list[str], runs: int) -> tuple[Run, dict[str, float]]:
    """Best of ``runs`` by the follower's own CPU time; its report, peak RSS filled in."""
    results = []
    for _ in range(runs):
        run = run_child(argv)
        report = json.loads(run.stdout)
        if not report["peak_rss_mb"]:  # no /proc: wait4's figure (includes the fork's parent)
            report["peak_rss_mb"] = run.max_rss_mb
        results.append((run, report))
    return min(results, key=lambda pair: pair[1]["cpu_seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=2_000_000, help="log lines to generate")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side; best counts")
    parser.add_argument("--keep", type=Path, help="write the log here and keep it")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="eaglebug-bench-log-"))
    try:
        log = args.keep or scratch / "server.log"
        started = time.perf_counter()
        write_log(log, args.lines)
        size_mb = log.stat().st_size / 1e6
        print(f"log: {log} ({size_mb:.0f} MB, written in {time.perf_counter() - started:.1f} s)")

        wc = best(["wc", "-l", str(log)], args.runs)
        cat = best(["sh", "-c", 'cat "$1" > /dev/null', "sh", str(log)], args.runs)
        newlines = int(wc.stdout.split()[0])
        me = [sys.executable, __file__]
        sides = {
            "LogFollower catch-up": follower_side([*me, "--child-catch-up", str(log)], args.runs),
            "LogFollower growing": follower_side(
                [*me, "--child-growing", str(log), str(scratch / "growing.log")], args.runs
            ),
        }

        print(f"lines (wc -l): {newlines:,}")
        print(
            f"{'side':<22}{'wall s':>9}{'lines/s':>12}{'CPU s':>8}{'lines/s':>12}{'peak RSS':>12}"
        )
        print(f"{'wc -l':<22}{wc.seconds:>9.3f}{newlines / wc.seconds:>12,.0f}")
        print(f"{'cat > /dev/null':<22}{cat.seconds:>9.3f}")
        failed = False
        for name, (_, out) in sides.items():
            print(
                f"{name:<22}{out['seconds']:>9.3f}{out['lines'] / out['seconds']:>12,.0f}"
                f"{out['cpu_seconds']:>8.3f}{out['lines'] / out['cpu_seconds']:>12,.0f}"
                f"{out['peak_rss_mb']:>9.1f} MB"
            )
            if out["lines"] != newlines:
                print(f"error: {name} returned {out['lines']:,} lines, wc -l counts {newlines:,}")
                failed = True
        print()
        for name, (_, out) in sides.items():
            rate = out["lines"] / out["cpu_seconds"]
            verdict = "PASS" if rate >= LINES_GOAL else "MISS"
            print(
                f"{name + ' lines/s (one core)':<44}{rate:>12,.0f}  goal >= {LINES_GOAL:,}  {verdict}"
            )
        for name, (_, out) in sides.items():
            peak, grew = out["peak_rss_mb"], out["peak_rss_mb"] - out["rss_start_mb"]
            verdict = "PASS" if peak <= RSS_GOAL_MB else "MISS"
            print(
                f"{name + ' peak RSS':<44}{peak:>9.1f} MB  goal <= {RSS_GOAL_MB:.0f} MB    {verdict}"
                f"  (+{grew:.1f} MB while following; unfinished line held at most "
                f"{out['buffered']:,.0f} bytes)"
            )
        catch = sides["LogFollower catch-up"][1]
        print(
            f"{'catch-up wall time / wc -l wall time':<44}{catch['seconds'] / wc.seconds:>10.1f}x"
            "  (information only)"
        )
        return 1 if failed else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child-catch-up":
        child_catch_up(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "--child-growing":
        child_growing(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
