"""GPU memory for preflight, read through the one NVML choke point (`eaglebug.gpu.nvml_source`).

A host without a driver is a state (None here), not a crash.
"""

from __future__ import annotations

from typing import Any

from eaglebug.gpu.nvml_source import NvmlSource

Gpu = tuple[int, str | None, str, int, int]  # index, UUID, name, total and free bytes


def smallest_gpu_memory(
    nvml_module: Any = None,
) -> tuple[int, str, int, str, int, tuple[Gpu, ...]] | None:
    """(total bytes, "NVML (N x name)", least free bytes now, "NVML", GPUs here, each GPU) of
    the GPUs here: the smallest GPU's size (tensor parallel shards are equal), the least free
    on any of them, how many answer, and each one's figures (a launch that sees only some of
    them, by `CUDA_VISIBLE_DEVICES` or `--gpus`, is sized by its own: `checks.seen_by`).

    None when NVML is unavailable or no GPU answers. `nvml_module` replaces `pynvml` in tests.
    """
    source = NvmlSource(nvml_module, with_processes=False)
    try:
        box = source.sample()
    finally:
        source.close()
    gpus = [gpu for gpu in box.gpus if gpu.state == "ok" and gpu.total_bytes > 0]
    if not gpus:
        return None
    smallest = min(gpus, key=lambda gpu: gpu.total_bytes)
    # SGLang sizes the KV pool from the least free memory across its ranks.
    free_bytes = min(gpu.total_bytes - gpu.used_bytes for gpu in gpus)
    described = f"NVML ({len(box.gpus)} x {smallest.name})"
    each = tuple(
        (gpu.index, gpu.uuid, gpu.name, gpu.total_bytes, gpu.total_bytes - gpu.used_bytes)
        for gpu in gpus
    )
    return smallest.total_bytes, described, free_bytes, "NVML", len(gpus), each


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
