"""Samples a `GpuSource` on a daemon thread at a steady cadence and keeps a short history.

The UI never calls NVML: it reads `latest()` / `history()` or receives each snapshot through
`on_snapshot`, which runs on the sampler thread (a Textual app posts it on as a Message). A
source that raises does not stop the thread: the exception is logged and becomes a snapshot
with `unavailable` set to the reason, and sampling goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection

from eaglebug.gpu.snapshot import BoxSnapshot
from eaglebug.gpu.source import GpuSource

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 0.25  # faster than this, NVML's own counters do not move; lower is clamped
# Less than this either way is not "memory moved": NVML's used bytes jitter by a few MiB
# (allocator caches, the driver's own) on a GPU whose server is stuck.
MOVED_BYTES = 64 * 1024**2


class Sampler:
    """`source.sample()` every `interval_s` on a daemon thread; `history` samples kept per GPU."""

    def __init__(
        self,
        source: GpuSource,
        interval_s: float = 1.0,
        history: int = 120,  # samples of used bytes kept per GPU, for sparklines
        on_snapshot: Callable[[BoxSnapshot], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self._interval_s = MIN_INTERVAL_S
        self.interval_s = interval_s
        self._history_len = max(int(history), 1)
        self._on_snapshot = on_snapshot
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._latest: BoxSnapshot | None = None
        self._history: dict[tuple[str, int], deque[int]] = {}  # by GpuSnapshot.key
        self._settled: dict[tuple[str, int], int] = {}  # per GPU: used bytes when it last moved
        self._moved_at: float | None = None  # `clock` time of that, on any GPU
        self._moved: dict[tuple[str, int], float] = {}  # and on each
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval_s(self) -> float:
        """Seconds between samples; values under `MIN_INTERVAL_S` are raised to it."""
        return self._interval_s

    @interval_s.setter
    def interval_s(self, value: float) -> None:
        self._interval_s = max(float(value), MIN_INTERVAL_S)

    # -- reading ----------------------------------------------------------------------------
    def latest(self) -> BoxSnapshot | None:
        """The newest snapshot, or None before the first sample."""
        with self._lock:
            return self._latest

    def history(self, gpu: int | tuple[str, int]) -> tuple[int, ...]:
        """Used bytes of one GPU, oldest first, at most `history` samples (lost GPUs add none).
        `gpu` is its `GpuSnapshot.key` (host, index), or the index of a GPU of this host."""
        key = gpu if isinstance(gpu, tuple) else ("", gpu)
        with self._lock:
            return tuple(self._history.get(key, ()))

    def memory_moved_at(self, gpus: Collection[int] | None = None) -> float | None:
        """When (on `clock`) some GPU's used memory last moved by more than `MOVED_BYTES`;
        None until it has. A launch that loads weights or captures CUDA graphs moves it, one
        that hangs does not: the launch watch reads this to tell a stall from a quiet log.
        `gpus`: only these GPUs of this host (the launch's own: a neighbour's job on another
        GPU moving its memory says nothing of the launch); None: any GPU."""
        with self._lock:
            if gpus is None:
                return self._moved_at
            return max((self._moved[("", i)] for i in gpus if ("", i) in self._moved), default=None)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- sampling ---------------------------------------------------------------------------
    def step(self) -> BoxSnapshot:
        """Take one sample now (what the thread does each period), record it and report it."""
        try:
            snapshot = self.source.sample()
        except Exception as exc:  # a broken source must not end sampling: it becomes a state
            log.exception("GPU source %s failed", self.source.describe())
            snapshot = BoxSnapshot(
                taken_at_s=self._clock(),
                wall_time_s=self._wall_clock(),
                unavailable=f"GPU source failed: {type(exc).__name__}: {exc}",
            )
        now_s = self._clock()
        with self._lock:
            self._latest = snapshot
            for gpu in snapshot.gpus:
                if gpu.state == "ok":
                    series = self._history.get(gpu.key)
                    if series is None:
                        series = self._history[gpu.key] = deque(maxlen=self._history_len)
                    series.append(gpu.used_bytes)
                    settled = self._settled.setdefault(gpu.key, gpu.used_bytes)
                    if abs(gpu.used_bytes - settled) > MOVED_BYTES:
                        self._settled[gpu.key] = gpu.used_bytes
                        self._moved_at = self._moved[gpu.key] = now_s
        if self._on_snapshot is not None:
            try:
                self._on_snapshot(snapshot)
            except Exception:
                log.exception("on_snapshot callback failed")
        return snapshot

    def start(self) -> None:
        """Start the daemon thread (no-op when it is already running)."""
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="eaglebug-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float | None = 5.0) -> bool:
        """Stop and join the thread; False if a sample still hung after `timeout_s`."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            return True
        if thread is not threading.current_thread():
            thread.join(timeout_s)
        if thread.is_alive():
            return False
        self._thread = None
        return True

    def _run(self) -> None:
        next_s = self._clock()
        while not self._stop.is_set():
            self.step()
            next_s += self.interval_s
            now_s = self._clock()
            if next_s <= now_s:  # a slow sample: skip the missed beats instead of bursting
                next_s = now_s + self.interval_s
            if self._stop.wait(next_s - now_s):
                break
