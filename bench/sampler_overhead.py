"""CPU the GPU sampler costs: its share of one core at the default cadence, next to idle.

Why: eaglebug runs for hours in a tmux pane next to a model load; the sampler thread must stay
within 1% of one core. Runs the Sampler over N simulated GPUs (or the real NVML with
`--source nvml`) at the given interval for `--seconds`, and measures process CPU time
(`time.process_time`, all threads) against wall time; the baseline is the same process idle
for the same time, measured in the same run. A benchmark: exit 0 whatever the result, 1 only
if the sampler failed outright (no snapshots, or a source error).

    python bench/sampler_overhead.py [--seconds 10] [--gpus 8] [--interval 1.0] [--source nvml]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable

from eaglebug.gpu import BoxSnapshot, GpuSource, NvmlSource, Sampler, SimulatedSource

GOAL_PCT = 1.0  # of one core


def cpu_share(seconds: float, during: Callable[[], None] | None = None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of this process over `seconds` of the main thread waiting."""
    idle = threading.Event()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if during is not None:
        during()
    idle.wait(seconds)
    return time.process_time() - cpu0, time.perf_counter() - wall0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--source", choices=("simulated", "nvml"), default="simulated")
    args = parser.parse_args(argv)

    source: GpuSource = NvmlSource() if args.source == "nvml" else SimulatedSource(gpus=args.gpus)
    got: list[BoxSnapshot] = []
    sampler = Sampler(source, interval_s=args.interval, on_snapshot=got.append)

    base_cpu_s, base_wall_s = cpu_share(args.seconds)
    try:
        cpu_s, wall_s = cpu_share(args.seconds, during=sampler.start)
    finally:
        sampler.stop()
        source.close()

    if not got:
        print("error: the sampler took no snapshot", file=sys.stderr)
        return 1
    if got[-1].unavailable is not None:
        print(f"error: {source.describe()}: {got[-1].unavailable}", file=sys.stderr)
        return 1
    base_pct = 100 * base_cpu_s / base_wall_s
    pct = 100 * cpu_s / wall_s
    net_pct = max(pct - base_pct, 0.0)
    verdict = "goal met" if net_pct <= GOAL_PCT else "GOAL MISSED"
    print(
        f"source: {source.describe()}, {len(got[-1].gpus)} GPUs, "
        f"interval {sampler.interval_s:g} s, {args.seconds:g} s each"
    )
    print(f"idle baseline   {base_pct:6.3f}% of one core ({base_cpu_s * 1000:.1f} ms CPU)")
    print(
        f"with sampler    {pct:6.3f}% of one core ({cpu_s * 1000:.1f} ms CPU, "
        f"{len(got)} samples, {1000 * cpu_s / len(got):.2f} ms CPU per sample)"
    )
    print(f"sampler cost    {net_pct:6.3f}% of one core   <= {GOAL_PCT:g}%: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
