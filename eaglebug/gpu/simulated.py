"""Simulated GPUs for the demo and the tests: same interface as NVML, scripted memory curves.

Memory follows a curve of time since the source started (or since `restart()`): either a list of
(seconds, used fraction) keyframes, interpolated linearly and held after the last one, or any
callable (gpu index, seconds) -> used bytes. Utilisation, temperature and power follow a load
curve when one is given ((gpu index, seconds) -> busy fraction: the demo's follows what its
stand-in server is doing), else how fast memory is moving (loading weights, allocating the KV
cache) — enough to look alive. With an injected clock, every sample is deterministic.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

from eaglebug.gpu.processes import sglang_role
from eaglebug.gpu.snapshot import BoxSnapshot, GpuProcess, GpuSnapshot

MemoryCurve: TypeAlias = Callable[[int, float], int]  # (gpu index, seconds) -> used bytes
LoadCurve: TypeAlias = Callable[[int, float], float]  # (gpu index, seconds) -> busy, 0..1
Keyframes: TypeAlias = Sequence[tuple[float, float]]  # (seconds, used fraction 0..1)

MIB = 2**20
GIB = 2**30
# An SGLang launch: idle, weights loading, KV cache allocated, CUDA graphs captured, serving.
LAUNCH_KEYFRAMES: Keyframes = (
    (0.0, 0.0035),  # about 500 MiB, the driver's own
    (3.0, 0.0035),
    (40.0, 0.62),
    (44.0, 0.62),
    (48.0, 0.90),
    (58.0, 0.93),
)
IDLE_BYTES = 512 * MIB  # what the driver keeps on a GPU with no process; not any process's
IDLE_POWER_MW = 75_000
MAX_POWER_MW = 700_000


def keyframe_curve(keyframes: Keyframes, total_bytes: int, stagger_s: float = 0.0) -> MemoryCurve:
    """A curve through (seconds, fraction) keyframes; GPU i runs `i * stagger_s` behind GPU 0."""
    points = sorted((float(t), min(max(float(f), 0.0), 1.0)) for t, f in keyframes)
    if not points:
        raise ValueError("a memory curve needs at least one (seconds, fraction) keyframe")

    def curve(gpu_index: int, t_s: float) -> int:
        return round(total_bytes * _interpolate(points, t_s - gpu_index * stagger_s))

    return curve


class SimulatedSource:
    """A `GpuSource` of `gpus` simulated GPUs; `describe()` says "simulated" for the screen."""

    def __init__(
        self,
        gpus: int = 8,
        name: str = "NVIDIA H200 (simulated)",
        total_bytes: int = 141 * GIB,
        curve: MemoryCurve | Keyframes | None = None,
        *,
        load: LoadCurve | None = None,  # how busy each GPU is; else from memory's movement
        processes: bool = True,  # one `sglang::scheduler_TP<i>` per GPU while memory is held
        pid_base: int = 4200,
        foreign: Iterable[GpuProcess] = (),  # extra processes shown as they are (e.g. hidden)
        unsupported: Iterable[tuple[int, str]] = (),  # (gpu, field) shown as n/a
        label: str = "demo",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if gpus < 0:
            raise ValueError(f"gpus must be 0 or more, not {gpus}")
        self.gpus = gpus
        self.name = name
        self.total_bytes = total_bytes
        if curve is None:
            curve = keyframe_curve(LAUNCH_KEYFRAMES, total_bytes, stagger_s=0.25)
        elif not callable(curve):
            curve = keyframe_curve(curve, total_bytes)
        self._curve: MemoryCurve = curve
        self._load = load
        self._processes = processes
        self._pid_base = pid_base
        self._foreign = tuple(foreign)
        self._unsupported = frozenset(unsupported)
        self._label = label
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._started_s = clock()
        self._lost: dict[int, int] = {}  # gpu index -> used bytes when it was lost

    # -- scripting --------------------------------------------------------------------------
    def restart(self) -> None:
        """Start the curve again from 0 s (a relaunch)."""
        with self._lock:
            self._started_s = self._clock()

    def elapsed_s(self) -> float:
        with self._lock:
            return self._clock() - self._started_s

    def lose(self, gpu_index: int) -> None:
        """From now on `gpu_index` reports state "lost" (as after an Xid 79), its memory frozen."""
        with self._lock:
            if gpu_index not in self._lost:
                self._lost[gpu_index] = self._used_bytes(gpu_index, self._clock() - self._started_s)

    def recover(self, gpu_index: int) -> None:
        with self._lock:
            self._lost.pop(gpu_index, None)

    # -- GpuSource --------------------------------------------------------------------------
    def describe(self) -> str:
        return f"simulated ({self._label})"

    def close(self) -> None:
        return None

    def sample(self) -> BoxSnapshot:
        with self._lock:
            taken_at_s = self._clock()
            t_s = taken_at_s - self._started_s
            gpus = tuple(self._gpu(index, t_s) for index in range(self.gpus))
            processes = [*self._schedulers(gpus)] if self._processes else []
            lost = {gpu.index for gpu in gpus if gpu.state == "lost"}
            processes += [proc for proc in self._foreign if proc.gpu_index not in lost]
            return BoxSnapshot(
                taken_at_s=taken_at_s,
                wall_time_s=self._wall_clock(),
                gpus=gpus,
                processes=tuple(processes),
                unsupported=self._unsupported,
            )

    # -- making numbers ---------------------------------------------------------------------
    def _used_bytes(self, index: int, t_s: float) -> int:
        return min(max(int(self._curve(index, t_s)), 0), self.total_bytes)

    def _gpu(self, index: int, t_s: float) -> GpuSnapshot:
        uuid = f"GPU-00000000-5151-0000-0000-{index:012d}"
        if index in self._lost:
            return GpuSnapshot(
                index, self.name, uuid, self._lost[index], self.total_bytes, state="lost"
            )
        used_bytes = self._used_bytes(index, t_s)
        if self._load is not None:
            load = min(max(float(self._load(index, t_s)), 0.0), 1.0)
        else:  # how fast memory moved over the last second (loading and allocating is busy)
            moved = abs(used_bytes - self._used_bytes(index, t_s - 1.0)) / max(self.total_bytes, 1)
            load = min(moved * 40.0, 1.0)
        holding = used_bytes > IDLE_BYTES + 64 * MIB
        values: dict[str, int] = {
            "utilization_pct": round(100 * load),
            "temperature_c": round(31 + 40 * load + (6 if holding else 0)),
            "power_mw": round(IDLE_POWER_MW * (1.3 if holding else 1.0))
            + round((MAX_POWER_MW - IDLE_POWER_MW) * load),
        }
        shown = {key: None if (index, key) in self._unsupported else v for key, v in values.items()}
        return GpuSnapshot(
            index=index,
            name=self.name,
            uuid=uuid,
            used_bytes=used_bytes,
            total_bytes=self.total_bytes,
            utilization_pct=shown["utilization_pct"],
            temperature_c=shown["temperature_c"],
            power_mw=shown["power_mw"],
        )

    def _schedulers(self, gpus: Sequence[GpuSnapshot]) -> Iterable[GpuProcess]:
        """One scheduler per GPU that holds more than the driver's idle share."""
        for gpu in gpus:
            held_bytes = gpu.used_bytes - IDLE_BYTES
            if gpu.state != "ok" or held_bytes <= 64 * MIB:
                continue
            title = "sglang::scheduler" + (f"_TP{gpu.index}" if self.gpus > 1 else "")
            yield GpuProcess(
                pid=self._pid_base + gpu.index,
                gpu_index=gpu.index,
                used_bytes=held_bytes,
                name=title[:15],  # the kernel's comm keeps 15 characters of a title
                cmdline=(title,),
                role=sglang_role(title[:15], (title,)),
            )


def _interpolate(points: Sequence[tuple[float, float]], t_s: float) -> float:
    if t_s <= points[0][0]:
        return points[0][1]
    for (t0, f0), (t1, f1) in itertools.pairwise(points):
        if t_s <= t1:
            return f0 if t1 == t0 else f0 + (f1 - f0) * (t_s - t0) / (t1 - t0)
    return points[-1][1]
