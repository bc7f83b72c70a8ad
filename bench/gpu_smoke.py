"""Runs eaglebug's real NVML path a few times and prints what it saw, GPU by GPU.

Why: the tests drive NVML through a stand-in module; this is the check on a real box that the
same code reads real GPUs (names, memory, utilisation, temperature, power, processes and their
SGLang roles) and how long one sample takes. On a host without a driver it prints the
unavailable state and exits 0 — that is a state, not a failure. Exit 1 only if sampling raises.

    python bench/gpu_smoke.py [--samples 3] [--interval 1.0] [--no-processes]
"""

from __future__ import annotations

import argparse
import sys
import time

from eaglebug.gpu import BoxSnapshot, NvmlSource
from eaglebug.gpu.nvml import smallest_gpu_memory

GIB = 2**30


def na(value: int | None, unit: str = "", scale: float = 1.0) -> str:
    return "n/a" if value is None else f"{value / scale:.0f}{unit}"


def show(box: BoxSnapshot) -> None:
    if box.unavailable is not None:
        print(f"  unavailable: {box.unavailable}")
        return
    for gpu in box.gpus:
        print(
            f"  GPU {gpu.index} {gpu.name:<28} {gpu.state:<4} "
            f"{gpu.used_bytes / GIB:7.2f}/{gpu.total_bytes / GIB:.2f} GiB  "
            f"util {na(gpu.utilization_pct, '%'):>4}  temp {na(gpu.temperature_c, 'C'):>4}  "
            f"power {na(gpu.power_mw, ' W', 1000):>6}  {gpu.uuid or 'uuid n/a'}"
        )
    for proc in box.processes:
        used = "n/a" if proc.used_bytes is None else f"{proc.used_bytes / GIB:.2f} GiB"
        who = "(hidden: another user or container)" if proc.hidden else (proc.name or "?")
        print(
            f"    pid {proc.pid:>7} on GPU {proc.gpu_index}  {used:>11}  "
            f"role {proc.role or '-':<22} {who}"
        )
    if not box.processes:
        print("    no GPU processes")
    if box.unsupported:
        print(f"  n/a for good: {sorted(box.unsupported)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--no-processes", action="store_true")
    args = parser.parse_args(argv)

    source = NvmlSource(with_processes=not args.no_processes)
    print(f"source: {source.describe()}")
    wall_s: list[float] = []
    cpu_s: list[float] = []
    box: BoxSnapshot | None = None
    try:
        for n in range(args.samples):
            if n:
                time.sleep(args.interval)
            wall0, cpu0 = time.perf_counter(), time.process_time()
            box = source.sample()
            wall_s.append(time.perf_counter() - wall0)
            cpu_s.append(time.process_time() - cpu0)
            print(f"sample {n + 1}/{args.samples} ({wall_s[-1] * 1000:.1f} ms):")
            show(box)
            if box.unavailable is not None:
                break
    except Exception as exc:  # the whole point of the layer is that this never happens
        print(f"error: sampling raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        source.close()
    if box is not None and box.unavailable is None and wall_s:
        later = wall_s[1:] or wall_s  # the first sample also starts NVML and reads names
        print(
            f"first sample {wall_s[0] * 1000:.1f} ms; later samples {min(later) * 1000:.1f}-"
            f"{max(later) * 1000:.1f} ms wall, {max(cpu_s[1:] or cpu_s) * 1000:.1f} ms CPU at most"
        )
    print(f"smallest_gpu_memory(): {smallest_gpu_memory()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
