"""GPU memory for preflight, read through the one NVML choke point (`eaglebug.gpu.nvml_source`).

A host without a driver is a state (None here), not a crash.
"""

from __future__ import annotations

from typing import Any

from eaglebug.gpu.nvml_source import NvmlSource


def smallest_gpu_memory(nvml_module: Any = None) -> tuple[int, str] | None:
    """(total bytes, "NVML (N x name)") of the smallest GPU here: tensor parallel shards are equal.

    None when NVML is unavailable or no GPU answers. `nvml_module` replaces `pynvml` in tests.
    """
    source = NvmlSource(nvml_module, with_processes=False)
    try:
        box = source.sample()
    finally:
        source.close()
    sizes = [(gpu.total_bytes, gpu.name) for gpu in box.gpus if gpu.state == "ok"]
    sizes = [(total, name) for total, name in sizes if total > 0]
    if not sizes:
        return None
    total_bytes, name = min(sizes, key=lambda size: size[0])
    return total_bytes, f"NVML ({len(box.gpus)} x {name})"


def compute_capability(nvml_module: Any = None) -> tuple[tuple[int, int], str] | None:
    """((major, minor), "NVML (N x name)") of the oldest GPU here, or None without NVML."""
    source = NvmlSource(nvml_module, with_processes=False)
    try:
        found = source.capabilities()
    finally:
        source.close()
    if not found:
        return None
    capability, name = min(found)
    return capability, f"NVML ({len(found)} x {name})"
