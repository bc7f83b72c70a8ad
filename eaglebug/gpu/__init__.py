"""The box's GPUs: snapshots, the sources that take them (NVML, simulated) and the sampler."""

from __future__ import annotations

from eaglebug.gpu.nvml_source import NvmlFailure, NvmlSource
from eaglebug.gpu.processes import sglang_role
from eaglebug.gpu.sampler import MIN_INTERVAL_S, Sampler
from eaglebug.gpu.simulated import SimulatedSource, keyframe_curve
from eaglebug.gpu.snapshot import BoxSnapshot, GpuProcess, GpuSnapshot
from eaglebug.gpu.source import GpuSource

__all__ = [
    "MIN_INTERVAL_S",
    "BoxSnapshot",
    "GpuProcess",
    "GpuSnapshot",
    "GpuSource",
    "NvmlFailure",
    "NvmlSource",
    "Sampler",
    "SimulatedSource",
    "keyframe_curve",
    "sglang_role",
]
