"""The small state file in `.eaglebug/` of the working directory: launches and applied patches.

It is what lets a new eaglebug process (after closing the TUI or losing SSH) re-attach to the
server an earlier one launched. Written through a temporary file and an atomic rename; a
corrupt file is an input error with a hint, never silently replaced.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eaglebug.checks.errors import InputError

STATE_DIR = ".eaglebug"
STATE_FILE = "state.json"
SCHEMA = 1


@dataclass
class LaunchRecord:
    number: int
    argv: list[str]
    env_additions: dict[str, str]
    log: str  # path of this launch's own log file
    pid: int
    create_time: float  # psutil's process create time: a reused pid has another
    started_at: float  # wall-clock seconds
    phase: str = "launching"
    ready_after_s: float | None = None
    outcome: str = "running"  # running | ready | crashed | stopped | exited
    exit_code: int | None = None


@dataclass
class PatchRecord:
    file: str
    class_name: str
    methods: list[str]
    commit: str | None
    applied_at: float


@dataclass
class State:
    launches: list[LaunchRecord] = field(default_factory=list)
    patches: list[PatchRecord] = field(default_factory=list)
    pending_env: dict[str, str] = field(
        default_factory=dict
    )  # accepted env fixes for the next launch

    @property
    def latest(self) -> LaunchRecord | None:
        return self.launches[-1] if self.launches else None

    def last_ready(self) -> LaunchRecord | None:
        ready = [r for r in self.launches if r.ready_after_s is not None]
        return ready[-1] if ready else None


def state_dir(workdir: Path) -> Path:
    return workdir / STATE_DIR


def load_state(workdir: Path) -> State:
    path = state_dir(workdir) / STATE_FILE
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return State()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data: Any = json.loads(raw)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}")
        return State(
            launches=[LaunchRecord(**r) for r in data.get("launches", [])],
            patches=[PatchRecord(**p) for p in data.get("patches", [])],
            pending_env=dict(data.get("pending_env", {})),
        )
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError(
            f"{path}: not a state file eaglebug can read ({exc})",
            f"move it aside (mv {path} {path}.bak); eaglebug starts a fresh one",
        ) from None


def save_state(workdir: Path, state: State) -> None:
    folder = state_dir(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "schema": SCHEMA,
        "launches": [asdict(r) for r in state.launches],
        "patches": [asdict(p) for p in state.patches],
        "pending_env": state.pending_env,
    }
    fd, tmp = tempfile.mkstemp(prefix=".state.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
        os.replace(tmp, folder / STATE_FILE)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
