"""The stand-in server's simulated GPU memory, as a small JSON file next to its log.

The stand-in (`eaglebug.demo.standin_server`) has no GPU; it says how much memory each of its
simulated GPUs would hold by rewriting `<log>.mem.json` (the path of its log file plus
`.mem.json`) as it loads: after every shard, KV-cache and CUDA-graph step, and once more when it
exits. A simulated GPU source follows the server by reading it. Format (schema 1):

    {
      "schema": 1,
      "pid": 12345,                  # the stand-in's process id
      "updated_s": 1767225600.25,    # time.time() of this write
      "state": "loading",            # "loading" | "ready" | "exited"
      "phase": "loading",            # launching | loading | kv_cache | cuda_graph | ready | exited
      "total_bytes": 151397597184,   # each simulated GPU's memory
      "used_bytes": [74921000000, ...]   # one entry per GPU (index = TP rank): what the server
                                         # holds there, without the driver's own idle share
    }

Every write goes to a temporary file that is renamed over the old one, so a reader never sees a
half-written file. After the server exits (`"state": "exited"`) every entry is 0: its memory is
released, as a real GPU's is when the process dies. A reader that wants a curve of the form
`SimulatedSource` takes (gpu index, seconds) -> used bytes can use `memory_curve`; how busy the
GPUs are follows the phase the same way (`load_curve`): a real launch's GPUs are idle while
NCCL starts, moderately busy while weights are copied in, nearly saturated while CUDA graphs
are captured, and busy while serving.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = 1
SUFFIX = ".mem.json"
# What a GPU driver keeps on an idle GPU (not any process's); `memory_curve` adds it back.
DRIVER_IDLE_BYTES = 512 * 2**20


# How busy a GPU is in each phase of the stand-in (a fraction, low..high): NVML's utilisation is
# the share of time a kernel ran. Loading copies weights in with few kernels; the KV cache is
# allocated, not computed; capture runs the model at every batch size; serving decodes.
PHASE_LOAD: dict[str, tuple[float, float]] = {
    "launching": (0.0, 0.05),
    "loading": (0.12, 0.35),
    "kv_cache": (0.03, 0.12),
    "cuda_graph": (0.85, 1.0),
    "ready": (0.55, 0.95),
    "exited": (0.0, 0.0),
}


def memory_path(log_path: str | Path) -> Path:
    """Where the stand-in writing `log_path` reports its simulated GPU memory."""
    return Path(f"{log_path}{SUFFIX}")


@dataclass(frozen=True)
class MemoryReport:
    """One read of the memory file."""

    pid: int
    updated_s: float  # time.time() of the write
    state: str  # "loading" | "ready" | "exited"
    phase: str
    total_bytes: int
    used_bytes: tuple[int, ...]  # per GPU (index = TP rank)


def read_memory(path: str | Path) -> MemoryReport | None:
    """The latest report, or None when there is none yet (or it cannot be read as one)."""
    try:
        data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:
            return None
        return MemoryReport(
            pid=int(data["pid"]),
            updated_s=float(data["updated_s"]),
            state=str(data["state"]),
            phase=str(data["phase"]),
            total_bytes=int(data["total_bytes"]),
            used_bytes=tuple(int(v) for v in data["used_bytes"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


class ReportReader:
    """The newest report of the file `path()` names now, read again only when it changed (the
    sampler asks once per GPU per sample: one `stat` each, one read per write)."""

    def __init__(self, path: Callable[[], Path | None]) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[tuple[str, int, int], MemoryReport | None] | None = None

    def report(self) -> MemoryReport | None:
        current = self.path()
        if current is None:
            return None
        try:
            info = current.stat()
        except OSError:
            return None
        # Every write renames a new file over the old: a new inode, even within one mtime tick.
        key = (str(current), info.st_ino, info.st_mtime_ns)
        with self._lock:
            seen = self._seen
            if seen is None or seen[0] != key:
                seen = self._seen = (key, read_memory(current))
        return seen[1]


def memory_curve(
    path: Callable[[], Path | None], idle_bytes: int = DRIVER_IDLE_BYTES
) -> Callable[[int, float], int]:
    """A `(gpu index, seconds) -> used bytes` curve that follows the file `path()` names now.

    `path` is asked on every call, so the curve moves on to the next launch's file by itself;
    the seconds are ignored (the file is the clock). Before any report, and for a GPU the
    server does not use, the GPU shows only `idle_bytes`.
    """
    reader = ReportReader(path)

    def curve(gpu_index: int, _t_s: float) -> int:
        report = reader.report()
        if report is None or not 0 <= gpu_index < len(report.used_bytes):
            return idle_bytes
        return idle_bytes + report.used_bytes[gpu_index]

    return curve


def load_curve(path: Callable[[], Path | None]) -> Callable[[int, float], float]:
    """A `(gpu index, seconds) -> busy fraction` curve from the phase of the file `path()`
    names now (`PHASE_LOAD`), moving within the phase's range over the seconds, each GPU a
    little apart from the others: no file, a GPU the server does not use, or a server that
    exited is idle (0)."""
    reader = ReportReader(path)

    def curve(gpu_index: int, t_s: float) -> float:
        report = reader.report()
        if report is None or not 0 <= gpu_index < len(report.used_bytes):
            return 0.0
        low, high = PHASE_LOAD.get(report.phase, (0.0, 0.0))
        wave = 0.5 + 0.5 * math.sin(1.3 * t_s + 0.9 * gpu_index)
        return low + (high - low) * wave

    return curve


class MemoryBoard:
    """The stand-in's side: per-GPU used bytes, shared by its rank threads, written to `path`.

    Writes at most every `min_interval_s` unless forced; a board without a path only counts.
    """

    def __init__(
        self, path: Path | None, gpus: int, total_bytes: int, min_interval_s: float = 0.05
    ) -> None:
        self.path = path
        self.total_bytes = total_bytes
        self._used = [0] * gpus
        self._state = "loading"
        self._phase = "launching"
        self._min_interval_s = min_interval_s
        self._last_write_s: float | None = None  # never written: the first write is not held back
        self._warned = False
        self._lock = threading.RLock()  # reentrant: a signal handler may write mid-write

    def used(self, gpu: int) -> int:
        with self._lock:
            return self._used[gpu]

    def available(self, gpu: int) -> int:
        return self.total_bytes - self.used(gpu)

    def set(self, gpu: int, used_bytes: int, phase: str | None = None) -> None:
        """One GPU's memory, and the phase; a new phase is written at once (a reader's GPUs
        are as busy as it says), a new size at most every `min_interval_s`."""
        with self._lock:
            self._used[gpu] = max(0, min(used_bytes, self.total_bytes))
            moved_on = phase is not None and phase != self._phase
            if phase is not None:
                self._phase = phase
            self._write(force=moved_on)

    def add(self, gpu: int, delta_bytes: int, phase: str | None = None) -> None:
        with self._lock:
            self.set(gpu, self._used[gpu] + delta_bytes, phase)

    def finish(self, state: str, phase: str) -> None:
        """Mark the whole board ("ready", or "exited" with everything released) and write now."""
        with self._lock:
            self._state = state
            self._phase = phase
            if state == "exited":
                self._used = [0] * len(self._used)
            self._write(force=True)

    def flush(self) -> None:
        with self._lock:
            self._write(force=True)

    def _write(self, force: bool) -> None:
        if self.path is None:
            return
        now = time.monotonic()
        last = self._last_write_s
        if not force and last is not None and now - last < self._min_interval_s:
            return
        self._last_write_s = now
        payload = {
            "schema": SCHEMA,
            "pid": os.getpid(),
            "updated_s": time.time(),
            "state": self._state,
            "phase": self._phase,
            "total_bytes": self.total_bytes,
            "used_bytes": list(self._used),
        }
        try:
            fd, tmp = tempfile.mkstemp(prefix=".mem.", suffix=".tmp", dir=self.path.parent)
        except OSError as exc:
            self._failed(exc)
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(payload, handle)
            os.replace(tmp, self.path)
        except OSError as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        """Say once that the memory file cannot be written; the launch itself goes on."""
        if not self._warned:
            self._warned = True
            sys.stderr.write(f"warning: cannot write {self.path}: {exc.strerror or exc}\n")
