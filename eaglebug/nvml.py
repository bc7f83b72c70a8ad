"""The one place eaglebug talks to NVML (through `pynvml`, from nvidia-ml-py).

Every call goes through `nvml_call`, which initialises lazily and turns NVML's failures into
values (None) instead of exceptions, so a host without a driver is a state, not a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _Nvml:
    def __init__(self) -> None:
        self.module: Any = None
        self.error: str | None = None
        self.started = False

    def start(self) -> bool:
        if self.started:
            return self.module is not None
        self.started = True
        try:
            import pynvml
        except ImportError:
            self.error = "nvidia-ml-py is not installed"
            return False
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            self.error = f"no NVIDIA driver on this host ({exc})"
            return False
        self.module = pynvml
        return True


_NVML = _Nvml()


def nvml_call(fn: Callable[[Any], T]) -> T | None:
    """Run `fn(pynvml)`; None when NVML is missing or the call fails."""
    if not _NVML.start():
        return None
    try:
        return fn(_NVML.module)
    except _NVML.module.NVMLError:
        return None


def unavailable_reason() -> str | None:
    _NVML.start()
    return _NVML.error


def smallest_gpu_memory() -> tuple[int, str] | None:
    """(total bytes, "NVML (name)") of the smallest GPU here: tensor parallel shards are equal."""

    def read(nvml: Any) -> tuple[int, str] | None:
        count = nvml.nvmlDeviceGetCount()
        best: tuple[int, str] | None = None
        for i in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
            name = nvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            if best is None or total < best[0]:
                best = (total, f"NVML ({count} x {name})")
        return best

    return nvml_call(read)
