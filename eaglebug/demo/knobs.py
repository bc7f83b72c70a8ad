"""The stand-in server's settings, read from its environment (its argv is SGLang's own flags)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from eaglebug.demo.footprint import GIB
from eaglebug.demo.memfile import memory_path

ENV_SGLANG = "EAGLEBUG_DEMO_SGLANG"  # the tree to import: its python/ folder (required)
ENV_SECONDS = "EAGLEBUG_DEMO_SECONDS"  # about how long a launch takes to reach ready
ENV_FAST = "EAGLEBUG_DEMO_FAST"  # "1": about FAST_SECONDS to ready, for tests
ENV_GPU_BYTES = "EAGLEBUG_DEMO_GPU_BYTES"  # each simulated GPU's memory
ENV_MEM_FILE = "EAGLEBUG_DEMO_MEM_FILE"  # where the memory file goes (default: <log>.mem.json)
ENV_PARENT = "EAGLEBUG_DEMO_PARENT"  # "pid:create_time" of the demo; the stand-in ends with it

DEFAULT_SECONDS = 30.0
FAST_SECONDS = 1.2
DEFAULT_GPU_BYTES = 141 * GIB  # an H200, as SimulatedSource's default

# Share of the launch's time per step (sums to 1).
SHARES = {
    "init": 0.05,
    "weights": 0.47,
    "kv_cache": 0.08,
    "graphs": 0.13,
    "draft_weights": 0.05,
    "draft_kv_cache": 0.03,
    "draft_graphs": 0.09,
    "serve": 0.10,
}


class UsageError(Exception):
    """Bad settings: reported as `error:` / `hint:` lines with exit status 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Settings:
    python_dir: Path  # the folder that holds `sglang/`
    total_s: float  # about how long a launch takes to reach ready
    gpu_bytes: int
    mem_file: Path | None
    parent: tuple[int, float] | None = None  # the demo process this stand-in belongs to

    def seconds(self, step: str) -> float:
        return SHARES[step] * self.total_s

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        given = environ.get(ENV_SGLANG, "").strip()
        if not given:
            raise UsageError(
                f"{ENV_SGLANG} is not set: the stand-in needs an SGLang-shaped tree to run",
                f"{ENV_SGLANG}=/path/to/sglang-mini/python python -m eaglebug.demo.standin_server ...",
            )
        python_dir = _python_dir(Path(given).expanduser())
        if environ.get(ENV_FAST, "").strip().lower() in {"1", "true", "yes"}:
            total_s = FAST_SECONDS
        else:
            total_s = _positive(environ, ENV_SECONDS, DEFAULT_SECONDS)
        gpu_bytes = int(_positive(environ, ENV_GPU_BYTES, DEFAULT_GPU_BYTES))
        mem = environ.get(ENV_MEM_FILE, "").strip()
        return cls(
            python_dir,
            total_s,
            gpu_bytes,
            Path(mem) if mem else _stdout_memory_file(),
            _parent(environ),
        )


def parent_value() -> str:
    """What the demo puts in ENV_PARENT: this process, by pid and create time."""
    import psutil

    return f"{os.getpid()}:{psutil.Process().create_time()!r}"


def _parent(environ: Mapping[str, str]) -> tuple[int, float] | None:
    raw = environ.get(ENV_PARENT, "").strip()
    if not raw:
        return None
    pid, _, created = raw.partition(":")
    try:
        value = (int(pid), float(created))
    except ValueError:
        raise UsageError(f"{ENV_PARENT}={raw!r}: expected PID:CREATE_TIME") from None
    if value[0] <= 0:
        raise UsageError(f"{ENV_PARENT}={raw!r}: the pid must be positive")
    return value


def _positive(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r}: not a number") from None
    if value <= 0:
        raise UsageError(f"{name}={raw!r}: must be positive")
    return value


def _python_dir(path: Path) -> Path:
    """The folder that holds `sglang/`, from it, the repository root or the package folder."""
    for candidate in (path, path / "python", path.parent):
        if (candidate / "sglang" / "__init__.py").is_file():
            return candidate.resolve()
    raise UsageError(
        f"{ENV_SGLANG}={path}: no sglang package there",
        "point it at the tree's python/ folder (the one that holds sglang/)",
    )


def _stdout_memory_file() -> Path | None:
    """`<log>.mem.json` when stdout goes to a regular file (as `eaglebug launch` arranges)."""
    try:
        if not os.path.isfile(f"/proc/self/fd/{sys.stdout.fileno()}"):
            return None
        return memory_path(os.readlink(f"/proc/self/fd/{sys.stdout.fileno()}"))
    except (OSError, ValueError):
        return None
