"""How long `eaglebug diagnose` takes on a big SGLang log next to `grep -cE` with the same patterns.

Why: a server that ran for a day leaves a log of a gigabyte, almost all `Decode batch` lines, and
the one traceback that matters is near the end. The log analysis reads it in big chunks and only
parses the lines around what its patterns find; this checks that it stays close to grep:

    diagnose seconds / grep seconds   <= 2x
    peak RSS of the diagnose process  <= 150 MB

The log is generated (default ~1 GB, `--size-mb`): the launch of an 8-GPU EAGLE-3 server, then
decode/prefill batch lines and HTTP access lines with advancing timestamps, then all eight ranks
crashing with one CUDA out-of-memory traceback, and the SIGQUIT line. grep gets the failure
patterns of `eaglebug/checks/logs/patterns.py` (`GREP_FAILURE_PATTERN`) as one extended regex.

Both sides are separate processes timed the same way (best of `--runs`, after an untimed warm-up
that also fills the page cache and compiles the bytecode), so interpreter start-up counts for
diagnose as process start does for grep. The diagnose side is the installed `eaglebug` console
script beside this interpreter, as a user runs it (`eaglebug diagnose --log FILE --json`), else
`python -m eaglebug` (the row says which). An info row times the bare start-up
(`import eaglebug.cli.parser`) to show what imports cost.
Peak RSS comes from `os.wait4`. This is a benchmark: it exits 0 whether or not the goals are met,
1 only when diagnose fails (exit 2, JSON that does not parse, or the crash not found).

    python bench/log_scan.py [--size-mb 1024] [--runs 3] [--log FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from audit_vs_grep import Run, eaglebug_command, run_child
from report import verdict

REPO = Path(__file__).resolve().parent.parent
RATIO_GOAL = 2.0
RSS_GOAL_MB = 150.0
RANKS = 8


class DiagnoseFailed(Exception):
    """diagnose exited 2, printed JSON that does not parse, or missed the crash."""


# --- the log ------------------------------------------------------------------------------------


def _stamp(second: int) -> str:
    day, rest = divmod(second, 86400)
    hour, rest = divmod(rest, 3600)
    minute, sec = divmod(rest, 60)
    return f"2026-01-{30 + day:02d} {hour:02d}:{minute:02d}:{sec:02d}"


def _launch(t: int) -> list[str]:
    ranks = [f"TP{i}" for i in range(RANKS)]
    lines = [
        f"[{_stamp(t)}] server_args=ServerArgs(model_path='/models/Kimi-K2.5', tp_size=8, "
        "speculative_algorithm='EAGLE3', speculative_draft_model_path='/models/Kimi-K2.5-eagle3', "
        "context_length=131072, mem_fraction_static=0.85, port=30000)"
    ]
    for what in ("Init torch distributed begin.", "Load weight begin. avail mem=138.52 GB"):
        lines += [f"[{_stamp(t + 3)} {r}] {what}" for r in ranks]
    lines += [
        f"\rLoading safetensors checkpoint shards: {round(100 * n / 64):3d}% Completed | {n}/64 "
        f"[00:{min(n, 59):02d}<01:10,  1.12s/it]"
        for n in range(65)
    ]
    for what in (
        "Load weight end. elapsed=71.43 s, type=KimiK25ForConditionalGeneration, "
        "dtype=torch.bfloat16, avail mem=64.21 GB, mem usage=74.18 GB.",
        "KV Cache is allocated. #tokens: 1843200, KV size: 48.12 GB",
        "Memory pool end. avail mem=14.02 GB",
        "Capture cuda graph begin. This can take up to several minutes. avail mem=13.57 GB",
        "Capture cuda graph end. Time elapsed: 18.40 s. mem usage=2.31 GB. avail mem=11.26 GB.",
    ):
        lines += [f"[{_stamp(t + 80)} {r}] {what}" for r in ranks]
    lines += [
        f"[{_stamp(t + 100)}] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C "
        "to quit)",
        f"[{_stamp(t + 104)}] The server is fired up and ready to roll!",
    ]
    return lines


def _crash(t: int) -> list[str]:
    lines: list[str] = []
    site = "/usr/local/lib/python3.12/dist-packages/sglang/srt"
    for n in range(RANKS):
        lines += [
            f"[{_stamp(t)} TP{n}] Scheduler hit an exception: Traceback (most recent call last):",
            f'  File "{site}/managers/scheduler.py", line 3172, in run_scheduler_process',
            "    scheduler.event_loop_overlap()",
            f'  File "{site}/managers/scheduler.py", line 1104, in event_loop_overlap',
            "    batch_result = self.run_batch(batch)",
            "                   ^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{site}/speculative/eagle_worker.py", line 301, in forward_batch_generation',
            "    logits_output, verify_output, model_worker_batch, _ = self.verify(",
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {n} has "
            f"a total capacity of 139.72 GiB of which {0.4 + n / 10:.2f} GiB is free.",
            "",
        ]
    lines.append(
        f"[{_stamp(t)}] SIGQUIT received. signum=None, frame=None. "
        "It usually means one child failed."
    )
    return lines


def generate(path: Path, size_bytes: int, seed: int = 0) -> None:
    """An SGLang-shaped log of about `size_bytes`: launch, serving lines, an 8-rank crash."""
    rng = random.Random(seed)
    decode = (
        "[{ts} TP0] Decode batch, #running-req: {r}, #token: {tok}, token usage: 0.{u:02d}, "
        "accept len: {a:.2f}, accept rate: 0.{ar:02d}, cuda graph: True, gen throughput "
        "(token/s): {g:.1f}, #queue-req: {q}, \n"
    )
    prefill = (
        "[{ts} TP0] Prefill batch, #new-seq: 1, #new-token: {nt}, #cached-token: {ct}, token "
        "usage: 0.{u:02d}, #running-req: {r}, #queue-req: {q}, \n"
    )
    access = '[{ts}] INFO:     10.0.3.{h}:{p} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    head = "\n".join(_launch(0)) + "\n"
    t = 200
    with path.open("w", encoding="utf-8") as out:
        out.write(head)
        written = len(head)
        target = max(size_bytes - 4096, written)
        while written < target:
            ts = _stamp(t)
            block = []
            for _ in range(40):
                kind = rng.random()
                if kind < 0.85:
                    block.append(
                        decode.format(
                            ts=ts,
                            r=rng.randrange(1, 64),
                            tok=rng.randrange(1000, 400000),
                            u=rng.randrange(100),
                            a=rng.uniform(1.5, 3.5),
                            ar=rng.randrange(100),
                            g=rng.uniform(200, 3000),
                            q=rng.randrange(4),
                        )
                    )
                elif kind < 0.93:
                    block.append(
                        prefill.format(
                            ts=ts,
                            nt=rng.randrange(16, 8192),
                            ct=rng.randrange(0, 16384),
                            u=rng.randrange(100),
                            r=rng.randrange(64),
                            q=rng.randrange(4),
                        )
                    )
                else:
                    block.append(
                        access.format(ts=ts, h=rng.randrange(2, 250), p=rng.randrange(30000, 60000))
                    )
            text = "".join(block)
            out.write(text)
            written += len(text)
            t += 1
        out.write("\n".join(_crash(t)) + "\n")


# --- the two sides ------------------------------------------------------------------------------


def diagnose_env(scratch: Path) -> dict[str, str]:
    """Bytecode cached under `scratch`, as in an installed package."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    return env


def diagnose_argv(log: Path) -> list[str]:
    return [*eaglebug_command(), "diagnose", "--log", str(log), "--json"]


def check(run: Run) -> None:
    if run.exit_code != 1:
        raise DiagnoseFailed(f"exit {run.exit_code}: {run.stderr.decode(errors='replace')[-400:]}")
    try:
        data = json.loads(run.stdout)
    except json.JSONDecodeError as exc:
        raise DiagnoseFailed(f"JSON does not parse: {exc}") from exc
    oom = [f for f in data["findings"] if f["id"] == "log.oom"]
    if not oom or len(oom[0]["ranks"]) != RANKS or data["phase"] != "crashed":
        raise DiagnoseFailed(f"the 8-rank crash was not found: {json.dumps(data)[:400]}")


def best(argv: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[float, Run]:
    results = [run_child(argv, env=env) for _ in range(runs)]
    return min(r.seconds for r in results), max(results, key=lambda r: r.max_rss_mb)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=1024, help="log size to generate (MB)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per side (best counts)")
    parser.add_argument("--log", type=Path, help="use this log instead of generating one")
    parser.add_argument("--keep", type=Path, help="generate into (or reuse from) this folder")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="eaglebug-logbench-"))
    try:
        if args.log:
            log = args.log
        else:
            folder = args.keep or scratch
            folder.mkdir(parents=True, exist_ok=True)
            log = folder / f"sglang-{int(args.size_mb)}mb.log"
            if not log.exists():
                start = time.perf_counter()
                generate(log, int(args.size_mb * 1024 * 1024))
                print(f"generated {log} in {time.perf_counter() - start:.1f} s")
        size_mb = log.stat().st_size / (1024 * 1024)
        sys.path.insert(0, str(REPO))
        from eaglebug.checks.logs.patterns import GREP_FAILURE_PATTERN

        env = diagnose_env(scratch)
        grep_argv = ["grep", "-cE", GREP_FAILURE_PATTERN, str(log)]
        argv = diagnose_argv(log)
        run_child(grep_argv, capture=False)  # warm the page cache
        check(run_child(argv, env=env))  # untimed: compiles bytecode, checks the answer
        grep_s, _ = best(grep_argv, args.runs)
        diag_s, worst = best(argv, args.runs, env)
        check(worst)
        startup_s, _ = best([sys.executable, "-c", "import eaglebug.cli.parser"], args.runs, env)
        ratio = diag_s / grep_s
        how = "eaglebug diagnose" if len(argv) == 5 else "python -m eaglebug diagnose"
        print(f"log: {log} ({size_mb:,.0f} MB), best of {args.runs}")
        print(f"  grep -cE (failure patterns)    {grep_s:7.2f} s")
        print(
            f"  {how:<31}{diag_s:7.2f} s   ratio {ratio:.2f}x (goal <= {RATIO_GOAL:g}x)  ", end=""
        )
        print(verdict(ratio <= RATIO_GOAL))
        print(
            f"  peak RSS of diagnose           {worst.max_rss_mb:7.1f} MB  "
            f"(goal <= {RSS_GOAL_MB:g} MB)  {verdict(worst.max_rss_mb <= RSS_GOAL_MB)}"
        )
        print(f"  info: start-up (import eaglebug.cli.parser) {startup_s:.2f} s")
        return 0
    except DiagnoseFailed as exc:
        print(f"diagnose failed: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
