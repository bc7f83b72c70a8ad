"""The real GPUs, through NVML (`pynvml`, the module of nvidia-ml-py).

Every NVML call of eaglebug goes through one function, `NvmlSource._call`: it starts NVML on
first use, and turns every `NVMLError` into an `NvmlFailure` value:
- "unavailable": no library or driver (or no pynvml); the snapshot says why, nothing raises;
- "unsupported": this GPU cannot give this field (NotSupported, NoPermission, a function the
  driver lacks); kept in `unsupported`, logged once, and never asked again;
- "lost": the GPU fell off the bus or stopped answering (GpuIsLost, Unknown, NotFound,
  ResetRequired); that GPU is shown as lost while the others go on, and it is retried on the
  next sample;
- "error": anything else, for this sample only (logged once per kind).
A GPU whose handle NVML refuses (NoPermission: not this container's) is left out of the
snapshot, with (index, "handle") in `unsupported`.
Names and UUIDs are read once per device handle, the device count at most every
`static_ttl_s`; memory, utilisation, temperature, power and processes on every sample.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from eaglebug.gpu.processes import ProcessInfo, inspect_process
from eaglebug.gpu.snapshot import BoxSnapshot, GpuProcess, GpuSnapshot

log = logging.getLogger(__name__)

FailureKind = Literal["unavailable", "unsupported", "lost", "error"]

_NO_DRIVER = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
_UNSUPPORTED = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound", "NVMLError_NoPermission")
_LOST = (
    "NVMLError_GpuIsLost",
    "NVMLError_Unknown",
    "NVMLError_NotFound",
    "NVMLError_GpuNotFound",
    "NVMLError_ResetRequired",
)
# The process lists: (NVML function, field name used in `unsupported`).
_PROCESS_LISTS = (
    ("nvmlDeviceGetComputeRunningProcesses", "compute_processes"),
    ("nvmlDeviceGetGraphicsRunningProcesses", "graphics_processes"),
)


@dataclass(frozen=True)
class NvmlFailure:
    """Why an NVML call gave no value."""

    kind: FailureKind
    reason: str


@dataclass(frozen=True)
class _Identity:
    name: str
    uuid: str | None


class NvmlSource:
    """A `GpuSource` over NVML. `nvml_module` replaces `pynvml` (tests pass a stand-in)."""

    def __init__(
        self,
        nvml_module: Any = None,
        *,
        with_processes: bool = True,
        static_ttl_s: float = 30.0,  # how long the device count is trusted
        process_ttl_s: float = 5.0,  # how long a pid's name and role are trusted
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._module: Any = nvml_module
        self._with_processes = with_processes
        self._static_ttl_s = static_ttl_s
        self._process_ttl_s = process_ttl_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._started = False
        self._unavailable: str | None = None
        self._count: tuple[float, int] | None = None  # (read at, device count)
        self._handles: dict[int, Any] = {}
        self._identities: dict[int, _Identity] = {}
        self._last_memory: dict[int, tuple[int, int]] = {}  # index -> (used, total) bytes
        self._unsupported: set[tuple[int, str]] = set()
        self._reported: set[tuple[int | None, str, str]] = set()
        self._process_info: dict[int, tuple[float, ProcessInfo | None]] = {}
        self._listed_pids: set[int] = set()  # pids NVML listed in the sample being taken

    # -- GpuSource --------------------------------------------------------------------------
    def describe(self) -> str:
        return "NVML"

    def sample(self) -> BoxSnapshot:
        with self._lock:
            taken_at_s, wall_time_s = self._clock(), self._wall_clock()
            count = self._device_count()
            if isinstance(count, NvmlFailure):
                return BoxSnapshot(taken_at_s, wall_time_s, unavailable=count.reason)
            gpus: list[GpuSnapshot] = []
            processes: list[GpuProcess] = []
            self._listed_pids.clear()
            for index in range(count):
                gpu, on_gpu = self._sample_gpu(index)
                if gpu is not None:
                    gpus.append(gpu)
                processes.extend(on_gpu)
            for pid in [pid for pid in self._process_info if pid not in self._listed_pids]:
                del self._process_info[pid]
            return BoxSnapshot(
                taken_at_s,
                wall_time_s,
                gpus=tuple(gpus),
                processes=tuple(processes),
                unsupported=frozenset(self._unsupported),
            )

    def close(self) -> None:
        """Shut NVML down (pynvml counts inits, so other users in this process are unaffected)."""
        with self._lock:
            if self._started and self._unavailable is None:
                self._call("nvmlShutdown")
            self._started = False
            self._unavailable = None
            self._count = None
            self._handles.clear()
            self._identities.clear()

    # -- the choke point --------------------------------------------------------------------
    def _start(self) -> str | None:
        """Start NVML once; the reason it is unavailable, or None."""
        if self._started:
            return self._unavailable
        self._started = True
        if self._module is None:
            try:
                self._module = importlib.import_module("pynvml")
            except ImportError as exc:
                self._unavailable = f"nvidia-ml-py is not installed ({exc})"
                return self._unavailable
        module = self._module
        try:
            module.nvmlInit()
        except module.NVMLError as exc:
            if isinstance(exc, _types(module, _NO_DRIVER)):
                self._unavailable = f"no NVIDIA driver on this host ({exc})"
            else:
                self._unavailable = f"NVML could not start ({type(exc).__name__}: {exc})"
        except OSError as exc:  # a broken libnvidia-ml.so can fail in ctypes itself
            self._unavailable = f"no NVIDIA driver on this host ({exc})"
        if self._unavailable is not None:
            log.info("GPU sampling unavailable: %s", self._unavailable)
        return self._unavailable

    def capabilities(self) -> list[tuple[tuple[int, int], str]]:
        """Each answering GPU's CUDA compute capability and name (for the attention rules)."""
        count = self._device_count()
        if isinstance(count, NvmlFailure):
            return []
        found: list[tuple[tuple[int, int], str]] = []
        for index in range(count):
            handle = self._call("nvmlDeviceGetHandleByIndex", index, gpu=index, field="handle")
            if isinstance(handle, NvmlFailure):
                continue
            cap = self._call(
                "nvmlDeviceGetCudaComputeCapability", handle, gpu=index, field="capability"
            )
            name = self._call("nvmlDeviceGetName", handle, gpu=index, field="name")
            if isinstance(cap, tuple) and len(cap) == 2 and all(isinstance(v, int) for v in cap):
                found.append(
                    ((cap[0], cap[1]), _text(name) if not isinstance(name, NvmlFailure) else "GPU")
                )
        return found

    def _call(self, function: str, *args: Any, gpu: int | None = None, field: str = "") -> Any:
        """`pynvml.<function>(*args)`, or an `NvmlFailure`. The only place NVML is called.

        `gpu` and `field` name what is being read: a field found unsupported on a GPU is
        remembered and not called again.
        """
        unavailable = self._start()
        if unavailable is not None:
            return NvmlFailure("unavailable", unavailable)
        if gpu is not None and (gpu, field) in self._unsupported:
            return NvmlFailure("unsupported", f"{field} not supported on GPU {gpu}")
        module = self._module
        fn = getattr(module, function, None)
        if fn is None:  # an older pynvml without this function
            return self._failed(gpu, field, "unsupported", f"pynvml has no {function}")
        try:
            return fn(*args)
        except module.NVMLError as exc:
            reason = f"{function}: {exc}"
            if isinstance(exc, _types(module, _UNSUPPORTED)):
                return self._failed(gpu, field, "unsupported", reason)
            if gpu is not None and isinstance(exc, _types(module, _LOST)):
                return self._failed(gpu, field, "lost", reason)
            return self._failed(gpu, field, "error", f"{function}: {type(exc).__name__}: {exc}")

    def _failed(self, gpu: int | None, field: str, kind: FailureKind, reason: str) -> NvmlFailure:
        if kind == "unsupported" and gpu is not None:
            self._unsupported.add((gpu, field))
        if (gpu, field, kind) not in self._reported:
            self._reported.add((gpu, field, kind))
            where = "NVML" if gpu is None else f"GPU {gpu}"
            log.info("%s: %s %s (%s)", where, field or "call", kind, reason)
        return NvmlFailure(kind, reason)

    # -- reading ----------------------------------------------------------------------------
    def _device_count(self) -> int | NvmlFailure:
        now_s = self._clock()
        if self._count is not None and now_s - self._count[0] < self._static_ttl_s:
            return self._count[1]
        count = self._call("nvmlDeviceGetCount", field="device_count")
        if isinstance(count, NvmlFailure):
            return count
        count = int(count)
        if self._count is not None and self._count[1] != count:
            self._handles.clear()
            self._identities.clear()
        self._count = (now_s, count)
        return count

    def _sample_gpu(self, index: int) -> tuple[GpuSnapshot | None, list[GpuProcess]]:
        """One GPU and its processes; None for a GPU this host may not open (no permission)."""
        handle = self._handles.get(index)
        if handle is None:
            handle = self._call("nvmlDeviceGetHandleByIndex", index, gpu=index, field="handle")
            if isinstance(handle, NvmlFailure) and handle.kind == "unsupported":
                return None, []
            if isinstance(handle, NvmlFailure):
                return self._lost(index), []
            self._handles[index] = handle
            self._identities.pop(index, None)
        identity = self._identity(index, handle)
        if identity is None:
            return self._lost(index), []

        memory = self._call("nvmlDeviceGetMemoryInfo", handle, gpu=index, field="used_bytes")
        if _lost(memory):
            return self._lost(index), []
        if isinstance(memory, NvmlFailure):
            if memory.kind == "unsupported":
                self._unsupported.add((index, "total_bytes"))
            used_bytes, total_bytes = self._last_memory.get(index, (0, 0))
        else:
            used_bytes, total_bytes = int(memory.used), int(memory.total)
            self._last_memory[index] = (used_bytes, total_bytes)

        rates = self._call(
            "nvmlDeviceGetUtilizationRates", handle, gpu=index, field="utilization_pct"
        )
        sensor = getattr(self._module, "NVML_TEMPERATURE_GPU", 0)
        temperature = self._call(
            "nvmlDeviceGetTemperature", handle, sensor, gpu=index, field="temperature_c"
        )
        power = self._call("nvmlDeviceGetPowerUsage", handle, gpu=index, field="power_mw")
        if any(_lost(value) for value in (rates, temperature, power)):
            return self._lost(index), []
        processes = self._processes(index, handle) if self._with_processes else []
        if processes is None:
            return self._lost(index), []
        gpu = GpuSnapshot(
            index=index,
            name=identity.name,
            uuid=identity.uuid,
            used_bytes=used_bytes,
            total_bytes=total_bytes,
            utilization_pct=None if isinstance(rates, NvmlFailure) else int(rates.gpu),
            temperature_c=None if isinstance(temperature, NvmlFailure) else int(temperature),
            power_mw=None if isinstance(power, NvmlFailure) else int(power),
        )
        return gpu, processes

    def _identity(self, index: int, handle: Any) -> _Identity | None:
        """Name and UUID, read once per handle; None when the GPU is lost."""
        known = self._identities.get(index)
        if known is not None:
            return known
        name = self._call("nvmlDeviceGetName", handle, gpu=index, field="name")
        uuid = self._call("nvmlDeviceGetUUID", handle, gpu=index, field="uuid")
        if _lost(name) or _lost(uuid):
            return None
        identity = _Identity(
            name=f"GPU {index}" if isinstance(name, NvmlFailure) else _text(name),
            uuid=None if isinstance(uuid, NvmlFailure) else _text(uuid),
        )
        if not any(isinstance(v, NvmlFailure) and v.kind == "error" for v in (name, uuid)):
            self._identities[index] = identity  # kept unless a passing error hid a part of it
        return identity

    def _lost(self, index: int) -> GpuSnapshot:
        self._handles.pop(index, None)
        identity = self._identities.get(index)
        used_bytes, total_bytes = self._last_memory.get(index, (0, 0))
        return GpuSnapshot(
            index=index,
            name=identity.name if identity else f"GPU {index}",
            uuid=identity.uuid if identity else None,
            used_bytes=used_bytes,
            total_bytes=total_bytes,
            state="lost",
        )

    def _processes(self, index: int, handle: Any) -> list[GpuProcess] | None:
        """Compute and graphics processes of one GPU, once per pid; None when it is lost."""
        used_by_pid: dict[int, int | None] = {}
        for function, field in _PROCESS_LISTS:
            listed = self._call(function, handle, gpu=index, field=field)
            if _lost(listed):
                return None
            if isinstance(listed, NvmlFailure):
                continue
            for entry in listed:
                pid = int(entry.pid)
                self._listed_pids.add(pid)
                used = getattr(entry, "usedGpuMemory", None)
                used = None if used is None else int(used)
                before = used_by_pid.get(pid)
                used_by_pid[pid] = used if before is None else max(before, used or 0)
        processes = []
        for pid, used_bytes in sorted(used_by_pid.items()):
            info = self._inspect(pid)
            if info is None:
                continue  # exited between NVML's list and psutil's look
            processes.append(
                GpuProcess(
                    pid=pid,
                    gpu_index=index,
                    used_bytes=used_bytes,
                    name=info.name,
                    cmdline=info.cmdline,
                    role=info.role,
                    hidden=info.hidden,
                )
            )
        return processes

    def _inspect(self, pid: int) -> ProcessInfo | None:
        now_s = self._clock()
        cached = self._process_info.get(pid)
        if cached is not None and now_s - cached[0] < self._process_ttl_s:
            return cached[1]
        info = inspect_process(pid)
        self._process_info[pid] = (now_s, info)
        return info


def _types(module: Any, names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    """The exception classes of `module` with these names (an older pynvml may lack some)."""
    found = (getattr(module, name, None) for name in names)
    return tuple(
        kind for kind in found if isinstance(kind, type) and issubclass(kind, BaseException)
    )


def _lost(value: Any) -> bool:
    return isinstance(value, NvmlFailure) and value.kind == "lost"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
