"""`eaglebug gpus`: one look at the GPUs, headless (scripts, CI, a quick look over SSH).

The source is the one the TUI would use: `--prometheus URL` (or `$EAGLEBUG_PROMETHEUS`) for
every node of a multi-node launch, `--simulate-gpus N`, else this host's NVML.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eaglebug.checks import InputError
from eaglebug.cli.output import safe, write_json
from eaglebug.gpu.snapshot import BoxSnapshot
from eaglebug.gpu.source import GpuSource

EXIT_OK = 0
GIB = 2**30


def gpu_source(prometheus: str | None, simulate: int | None) -> GpuSource:
    """The GPU source a command line asks for (the TUI's rule as well)."""
    if simulate:
        from eaglebug.gpu.simulated import SimulatedSource

        return SimulatedSource(gpus=simulate, label="--simulate-gpus")
    from eaglebug.gpu.prometheus import PrometheusSource

    try:
        remote = PrometheusSource.from_env(prometheus)
    except ValueError as exc:
        raise InputError(str(exc), "pass --prometheus http://HOST:9090") from None
    if remote is not None:
        return remote
    from eaglebug.gpu.nvml_source import NvmlSource

    return NvmlSource()


def snapshot_json(source: GpuSource, snapshot: BoxSnapshot) -> dict[str, Any]:
    nodes: dict[str, list[dict[str, Any]]] = {}
    for gpu in snapshot.gpus:
        nodes.setdefault(gpu.host or "localhost", []).append(
            {
                "index": gpu.index,
                "uuid": gpu.uuid,
                "name": gpu.name,
                "memory_used_bytes": gpu.used_bytes,
                "memory_total_bytes": gpu.total_bytes,
                "utilization_pct": gpu.utilization_pct,
                "state": gpu.state,
                "stale_s": round(gpu.stale_s) if gpu.stale_s is not None else None,
            }
        )
    return {
        "source": source.describe(),
        "unavailable": snapshot.unavailable,
        "nodes": [{"host": host, "gpus": gpus} for host, gpus in nodes.items()],
        "serving": [
            {"instance": s.instance, "accept_length": s.accept_length, "accept_rate": s.accept_rate}
            for s in snapshot.serving
        ],
    }


def gpus_command(args: argparse.Namespace) -> int:
    source = gpu_source(args.prometheus, args.simulate_gpus)
    try:
        snapshot = source.sample()
    finally:
        source.close()
    if not snapshot.gpus:
        why = snapshot.unavailable or f"{source.describe()} reports no GPU"
        hint = (
            "check that Prometheus runs there and scrapes the nodes' dcgm-exporter or "
            "nvitop-exporter (curl URL/api/v1/targets)"
            if source.describe().startswith("Prometheus")
            else "pass --prometheus URL for other nodes' GPUs (or set EAGLEBUG_PROMETHEUS), "
            "or --simulate-gpus N"
        )
        raise InputError(why, hint)
    if args.json:
        write_json(snapshot_json(source, snapshot))
        return EXIT_OK
    # Hosts, GPU names and instances are Prometheus labels: outside text, written safe.
    data = snapshot_json(source, snapshot)
    sys.stdout.write(f"{safe(data['source'])}\n")
    if snapshot.unavailable:
        sys.stdout.write(f"warning: {safe(snapshot.unavailable)}\n")
    for node in data["nodes"]:
        sys.stdout.write(f"{safe(node['host'])}\n")
        for gpu in node["gpus"]:
            used, total = gpu["memory_used_bytes"] / GIB, gpu["memory_total_bytes"] / GIB
            util = f"{gpu['utilization_pct']:3d}%" if gpu["utilization_pct"] is not None else " n/a"
            state = "" if gpu["state"] == "ok" else f"  {gpu['state']}"
            if gpu["stale_s"] is not None:
                state += f" {gpu['stale_s']} s"
            name = safe(gpu["name"])
            sys.stdout.write(
                f"  {gpu['index']:>2}  {name:<28.28} {used:7.1f}/{total:.0f} GiB {util}{state}\n"
            )
    for serving in data["serving"]:
        if serving["accept_length"] is not None:
            sys.stdout.write(
                f"SGLang {safe(serving['instance'])}: accept length "
                f"{serving['accept_length']:.2f}\n"
            )
    return EXIT_OK
