"""What one look at the box saw: frozen snapshots that cross from the sampler thread into the UI.

Sources build these on their own thread; nothing here holds a handle, a lock or a live object,
so a widget can keep any snapshot as long as it likes. A value NVML cannot give is None (shown
as n/a) and its (gpu index, field name) is listed in `BoxSnapshot.unsupported`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

GpuState = Literal["ok", "lost", "stale"]  # stale: its node stopped reporting (Prometheus)


@dataclass(frozen=True)
class GpuSnapshot:
    """One GPU at one moment. A lost GPU keeps the last memory it reported (0 if none)."""

    index: int
    name: str
    uuid: str | None
    used_bytes: int
    total_bytes: int
    utilization_pct: int | None = None  # 0..100, busy time of the last sample period
    temperature_c: int | None = None  # core temperature, degrees Celsius
    power_mw: int | None = None  # board power draw, milliwatts
    state: GpuState = "ok"
    host: str | None = None  # the node, when the source sees several (None: this host)
    stale_s: float | None = None  # seconds since its node last reported, when stale

    @property
    def key(self) -> tuple[str, int]:
        """Unique across nodes: GPU 0 of two hosts are two GPUs."""
        return (self.host or "", self.index)

    @property
    def used_fraction(self) -> float:
        """used/total in 0..1; 0 when the total is unknown."""
        return self.used_bytes / self.total_bytes if self.total_bytes > 0 else 0.0


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on one GPU (a process on two GPUs appears once per GPU).

    `hidden` is True when the process belongs to another user or container and its name and
    command line cannot be read; its pid and GPU memory are still real.
    """

    pid: int
    gpu_index: int
    used_bytes: int | None = None  # GPU memory of this process on this GPU; None if NVML hides it
    name: str | None = None
    cmdline: tuple[str, ...] | None = None
    role: str | None = None  # SGLang role: "scheduler_TP3", "detokenizer", "launcher", ...
    hidden: bool = False


@dataclass(frozen=True)
class Serving:
    """One SGLang server's own gauges, as Prometheus scraped them from its `/metrics` (each
    node of a multi-node launch serves its own with `--enable-metrics`)."""

    instance: str  # the scrape target, host:port
    accept_length: float | None = None
    accept_rate: float | None = None


@dataclass(frozen=True)
class BoxSnapshot:
    """Every GPU and GPU process of the box at one moment, or why there are none."""

    taken_at_s: float  # time.monotonic() seconds (for intervals and ordering)
    wall_time_s: float  # time.time() seconds since the epoch (for display)
    gpus: tuple[GpuSnapshot, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    unavailable: str | None = None  # e.g. "no NVIDIA driver on this host (...)"
    unsupported: frozenset[tuple[int, str]] = field(default_factory=frozenset)
    serving: tuple[Serving, ...] = ()  # SGLang's own gauges per server, where a source has them

    def gpu(self, index: int) -> GpuSnapshot | None:
        return next((gpu for gpu in self.gpus if gpu.index == index), None)

    def processes_on(self, gpu_index: int) -> tuple[GpuProcess, ...]:
        return tuple(proc for proc in self.processes if proc.gpu_index == gpu_index)

    def is_unsupported(self, gpu_index: int, field_name: str) -> bool:
        """True when `field_name` of that GPU is n/a for good (not a passing failure)."""
        return (gpu_index, field_name) in self.unsupported
