"""A stand-in SGLang server for the tests: real processes, an SGLang-shaped log, no GPU.

It starts one child "rank" process per --ranks (one of them, --stubborn-rank, ignores
SIGTERM like a wedged scheduler), prints the launch milestones a real server prints, and then
either reports ready and serves forever (until signalled) or crashes with a traceback printed
by every rank, as --outcome says. Each rank stays alive as a real process until stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time


def stamp(rank: int | None) -> str:
    now = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"[{now} TP{rank}]" if rank is not None else f"[{now}]"


def say(rank: int | None, text: str) -> None:
    sys.stdout.write(f"{stamp(rank)} {text}\n")
    sys.stdout.flush()


def rank_main(rank: int, shards: int, outcome: str, stubborn: bool) -> int:
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    say(rank, "Load weight begin. avail mem=139.12 GB")
    if rank == 0:
        for done in range(1, shards + 1):
            pct = done * 100 // shards
            sys.stdout.write(
                f"\rLoading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{shards} [00:0{done}<00:00]"
            )
            sys.stdout.flush()
        sys.stdout.write("\n")
    say(
        rank,
        "Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=64.20 GB, mem usage=74.92 GB.",
    )
    if outcome == "crash":
        lines = [
            "Scheduler hit an exception: Traceback (most recent call last):",
            '  File "sglang/srt/model_executor/model_runner.py", line 622, in initialize',
            "    self.model.set_eagle3_layers_to_capture(",
            "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute 'set_eagle3_layers_to_capture'",
        ]
        for line in lines:
            say(rank, line)
        return 1
    say(rank, "KV Cache is allocated. #tokens: 1048576, K size: 30.00 GB, V size: 30.00 GB")
    say(rank, "Capture cuda graph begin. This can take up to several minutes. avail mem=33.10 GB")
    say(
        rank, "Capture cuda graph end. Time elapsed: 1.00 s. mem usage=2.10 GB. avail mem=31.00 GB."
    )
    while True:  # serve until signalled
        signal.pause()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--stubborn-rank", type=int, default=-1)
    parser.add_argument("--outcome", choices=["ready", "crash"], default="ready")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    args, _unknown = parser.parse_known_args()  # the real launch flags are accepted and ignored
    if args.rank is not None:
        return rank_main(args.rank, args.shards, args.outcome, args.rank == args.stubborn_rank)
    say(None, f"server_args=ServerArgs(tp_size={args.ranks}, pid={os.getpid()})")
    ranks = [
        subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--rank", str(r)])
        for r in range(args.ranks)
    ]
    if args.outcome == "crash":
        codes = [p.wait() for p in ranks]
        say(
            None,
            f"Rank processes exited with codes {codes}. Received sigquit from a child process.",
        )
        return 1
    say(None, "The server is fired up and ready to roll!")

    def stop(signum: int, frame: object) -> None:
        for p in ranks:
            p.terminate()
        for p in ranks:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    while True:
        signal.pause()


if __name__ == "__main__":
    raise SystemExit(main())
