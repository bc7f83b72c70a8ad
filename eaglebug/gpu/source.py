"""The interface every GPU source offers: the real one (NVML) and the simulated one alike."""

from __future__ import annotations

from typing import Protocol

from eaglebug.gpu.snapshot import BoxSnapshot


class GpuSource(Protocol):
    """Something that can look at the box's GPUs. `sample()` never raises for GPU trouble:
    a missing driver, an n/a field or a lost GPU are values in the snapshot."""

    def sample(self) -> BoxSnapshot:
        """Read every GPU and GPU process now."""
        ...

    def close(self) -> None:
        """Release what the source holds (NVML's session); sampling again reopens it."""
        ...

    def describe(self) -> str:
        """Where the numbers come from, for the screen: "NVML", "simulated (demo)"."""
        ...
