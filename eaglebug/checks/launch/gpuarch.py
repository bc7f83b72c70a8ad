"""A GPU architecture as a compute capability: `--gpu-arch sm90`, or what NVML reports.

Kept apart from the attention rules that use it, so the CLI reads `--gpu-arch` (and a warm
preflight answers from its cache) without loading the tree interpreter.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from eaglebug.checks.contract.errors import InputError

_ARCH = re.compile(r"^sm_?(\d{2,3})([a-z]?)$")


class GpuArch(NamedTuple):
    capability: tuple[int, int] | None  # None: no GPU in sight and no --gpu-arch
    source: str  # "--gpu-arch sm90", "NVML (NVIDIA H200)"

    @property
    def name(self) -> str:
        if self.capability is None:
            return "an unknown GPU"
        return f"sm{self.capability[0]}{self.capability[1]}"


def parse_gpu_arch(text: str) -> GpuArch:
    """`sm90`, `sm100`, `sm_120`, `9.0`: the compute capability a GPU reports."""
    word = text.strip().lower()
    match = _ARCH.match(word)
    if match:
        digits = match.group(1)
        return GpuArch((int(digits[:-1]), int(digits[-1])), f"--gpu-arch {text}")
    major, dot, minor = word.partition(".")
    if dot and major.isdigit() and minor.isdigit() and 0 < int(major) < 100:
        return GpuArch((int(major), int(minor)), f"--gpu-arch {text}")
    raise InputError(
        f"--gpu-arch {text!r}: not a GPU architecture",
        "give the compute capability as sm80, sm90, sm100, sm120 (or 9.0)",
    )
