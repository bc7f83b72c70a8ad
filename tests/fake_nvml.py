"""A stand-in for `pynvml`: the same function, constant and exception names, scripted GPUs.

Pass an instance where eaglebug takes `nvml_module`. Each `FakeGpu` says what its device
functions return; `unsupported` names functions that raise NVMLError_NotSupported, `errors`
maps a function to an exception class raised on every call, and `lost` makes every call on
that GPU (handle included) raise NVMLError_GpuIsLost, as a GPU that fell off the bus does.
Every call is counted in `calls[(function, gpu index or None)]`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

GIB = 2**30

# Codes as in pynvml (NVML_ERROR_*).
_MESSAGES = {
    1: "Uninitialized",
    3: "Not Supported",
    4: "Insufficient Permissions",
    9: "Driver Not Loaded",
    10: "Timeout",
    12: "NVML Shared Library Not Found",
    15: "GPU is lost",
    999: "Unknown Error",
}


class NVMLError(Exception):
    value: ClassVar[int] = 999

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML Error with code {self.value}")


class NVMLError_Uninitialized(NVMLError):  # pynvml spells its classes this way
    value = 1


class NVMLError_NotSupported(NVMLError):
    value = 3


class NVMLError_NoPermission(NVMLError):
    value = 4


class NVMLError_DriverNotLoaded(NVMLError):
    value = 9


class NVMLError_Timeout(NVMLError):
    value = 10


class NVMLError_LibraryNotFound(NVMLError):
    value = 12


class NVMLError_GpuIsLost(NVMLError):
    value = 15


class NVMLError_Unknown(NVMLError):
    value = 999


@dataclass
class Memory:  # c_nvmlMemory_t
    total: int
    free: int
    used: int


@dataclass
class Utilization:  # c_nvmlUtilization_t
    gpu: int
    memory: int


@dataclass
class ProcessInfo:  # what nvmlDeviceGetComputeRunningProcesses lists
    pid: int
    usedGpuMemory: int | None  # None when NVML hides it


@dataclass(frozen=True)
class Handle:
    index: int


@dataclass
class FakeGpu:
    name: str | bytes = "NVIDIA H200"
    uuid: str = ""
    used_bytes: int = 0
    total_bytes: int = 141 * GIB
    capability: tuple[int, int] = (9, 0)  # an H200 is sm90
    utilization_pct: int = 0
    temperature_c: int = 35
    power_mw: int = 120_000
    compute: list[ProcessInfo] = field(default_factory=list)
    graphics: list[ProcessInfo] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)  # function names
    errors: dict[str, type[NVMLError]] = field(default_factory=dict)  # function -> raised
    lost: bool = False


class FakeNvml:
    """One fake NVML library with its GPUs; `init_error` makes nvmlInit raise it."""

    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_Timeout = NVMLError_Timeout
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVMLError_Unknown = NVMLError_Unknown
    NVML_TEMPERATURE_GPU = 0

    def __init__(
        self, gpus: list[FakeGpu] | None = None, init_error: type[Exception] | None = None
    ) -> None:
        self.gpus = gpus if gpus is not None else eight_gpus()
        self.init_error = init_error
        self.initialised = 0  # nvmlInit calls minus nvmlShutdown calls, as pynvml counts
        self.calls: Counter[tuple[str, int | None]] = Counter()

    # -- library ----------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls["nvmlInit", None] += 1
        if self.init_error is not None:
            raise self.init_error()
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown", None] += 1
        self._ready()
        self.initialised -= 1

    def nvmlDeviceGetCount(self) -> int:
        self.calls["nvmlDeviceGetCount", None] += 1
        self._ready()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        self._gpu("nvmlDeviceGetHandleByIndex", index)
        return Handle(index)

    # -- device -----------------------------------------------------------------------------
    def nvmlDeviceGetName(self, handle: Handle) -> str | bytes:
        return self._gpu("nvmlDeviceGetName", handle.index).name

    def nvmlDeviceGetCudaComputeCapability(self, handle: Handle) -> tuple[int, int]:
        return self._gpu("nvmlDeviceGetCudaComputeCapability", handle.index).capability

    def nvmlDeviceGetUUID(self, handle: Handle) -> str:
        gpu = self._gpu("nvmlDeviceGetUUID", handle.index)
        return gpu.uuid or f"GPU-fake-{handle.index}"

    def nvmlDeviceGetMemoryInfo(self, handle: Handle, version: int | None = None) -> Memory:
        gpu = self._gpu("nvmlDeviceGetMemoryInfo", handle.index)
        return Memory(gpu.total_bytes, gpu.total_bytes - gpu.used_bytes, gpu.used_bytes)

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Utilization:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle.index)
        return Utilization(gpu.utilization_pct, gpu.utilization_pct // 2)

    def nvmlDeviceGetTemperature(self, handle: Handle, sensor: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperature", handle.index)
        assert sensor == self.NVML_TEMPERATURE_GPU
        return gpu.temperature_c

    def nvmlDeviceGetPowerUsage(self, handle: Handle) -> int:
        return self._gpu("nvmlDeviceGetPowerUsage", handle.index).power_mw

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> list[ProcessInfo]:
        return list(self._gpu("nvmlDeviceGetComputeRunningProcesses", handle.index).compute)

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Handle) -> list[ProcessInfo]:
        return list(self._gpu("nvmlDeviceGetGraphicsRunningProcesses", handle.index).graphics)

    # -- behaviour --------------------------------------------------------------------------
    def count(self, function: str, index: int | None = None) -> int:
        return self.calls[function, index]

    def _ready(self) -> None:
        if self.initialised <= 0:
            raise NVMLError_Uninitialized()

    def _gpu(self, function: str, index: int) -> FakeGpu:
        self.calls[function, index] += 1
        self._ready()
        gpu = self.gpus[index]
        if gpu.lost:
            raise NVMLError_GpuIsLost()
        if function in gpu.unsupported:
            raise NVMLError_NotSupported()
        if function in gpu.errors:
            raise gpu.errors[function]()
        return gpu


def eight_gpus(used_gib: int = 70) -> list[FakeGpu]:
    """Eight H200s in the middle of serving: rank i holds `used_gib` + i GiB, one scheduler each."""
    return [
        FakeGpu(
            used_bytes=(used_gib + i) * GIB,
            utilization_pct=50 + i,
            temperature_c=40 + i,
            power_mw=300_000 + i * 1000,
            compute=[ProcessInfo(pid=1000 + i, usedGpuMemory=(used_gib + i) * GIB - GIB // 2)],
        )
        for i in range(8)
    ]
