"""The small state file in `.eaglebug/` of the working directory: launches and applied patches.

It is what lets a new eaglebug process (after closing the TUI or losing SSH) re-attach to the
server an earlier one launched. Written through a temporary file and an atomic rename. It is
read as a whole with the one number reader (`eaglebug/checks/contract/numbers.py`) and checked against
the record types (every field's type, pids in a C int's positive range, times finite): a file
that is not UTF-8, not JSON, or holds a pid of "abc", -1, 12.5, 2**40 or 5,000 digits is one
`InputError` naming the file and how to move it aside, never a crash and never a signal sent
to a pid nobody recorded.
"""

from __future__ import annotations

import json
import os
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from eaglebug.checks import InputError, NotJson, float_value, int_value, strict_json
from eaglebug.server import STATE_DIR, STATE_FILE

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
    tag: str = ""  # EAGLEBUG_LAUNCH in the environment of the launch's processes
    flag_additions: dict[str, str] = field(default_factory=dict)  # flag fixes it ran with
    # SGLang's memory lines as this launch logged them (free memory before the load, weights,
    # KV pool, graphs): the next preflight's calibration, kept when the log is gone.
    memory: dict[str, float] = field(default_factory=dict)


@dataclass
class PatchRecord:
    file: str
    class_name: str  # qualified
    methods: list[str]
    commit: str | None
    applied_at: float
    keys: list[str] = field(default_factory=list)  # FindingKey.text() of what it fixed


@dataclass
class State:
    launches: list[LaunchRecord] = field(default_factory=list)
    patches: list[PatchRecord] = field(default_factory=list)
    pending_env: dict[str, str] = field(
        default_factory=dict
    )  # accepted env fixes for the next launch
    pending_flags: dict[str, str] = field(default_factory=dict)  # accepted flag fixes, likewise

    @property
    def latest(self) -> LaunchRecord | None:
        return self.launches[-1] if self.launches else None

    def last_ready(self) -> LaunchRecord | None:
        ready = [r for r in self.launches if r.ready_after_s is not None]
        return ready[-1] if ready else None


# The range of each whole-number field: a pid of 0 or -1 would signal a process group or
# everything, and one past a C int overflows os.kill (`status`, `stop`).
_C_INT = 2**31 - 1
_RANGES = {"number": (1, _C_INT), "pid": (1, _C_INT), "exit_code": (-_C_INT - 1, _C_INT)}
_NON_NEGATIVE = {"create_time", "started_at", "ready_after_s", "applied_at"}
_Record = TypeVar("_Record", LaunchRecord, PatchRecord)


class _Invalid(ValueError):
    pass


def _check(value: Any, expected: Any, where: str) -> Any:
    """`value` if it has the annotated type (ints are not bools; floats may be ints)."""
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(expected)
        if value is None and type(None) in options:
            return None
        return _check(value, next(o for o in options if o is not type(None)), where)
    if origin is list:
        if not isinstance(value, list):
            raise _Invalid(f"{where}: expected a list, not {value!r:.40}")
        (item,) = typing.get_args(expected)
        return [_check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _Invalid(f"{where}: expected an object, not {value!r:.40}")
        key_type, value_type = typing.get_args(expected)
        return {
            _check(k, key_type, where): _check(v, value_type, f"{where}.{k}")
            for k, v in value.items()
        }
    if expected is float:  # the one number reader: finite, never a bool
        number = float_value(value)
        if number is None:
            raise _Invalid(f"{where}: expected a finite number, not {value!r:.40}")
        return number
    if expected is int:
        if not isinstance(value, int) or int_value(value) is None:
            raise _Invalid(f"{where}: expected an integer, not {value!r:.40}")
        return value
    if expected is str and not isinstance(value, str):
        raise _Invalid(f"{where}: expected a string, not {value!r:.40}")
    return value


def _record(cls: type[_Record], data: Any, where: str) -> _Record:
    if not isinstance(data, dict):
        raise _Invalid(f"{where}: expected an object")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise _Invalid(f"{where}: unknown field {unknown[0]!r}")
    values: dict[str, Any] = {}
    for name, spec in known.items():
        if name not in data:
            if spec.default is not MISSING or spec.default_factory is not MISSING:
                continue  # an older file without a newer field: its default
            raise _Invalid(f"{where}: missing field {name!r}")
        value = _check(data[name], hints[name], f"{where}.{name}")
        low, high = _RANGES.get(name, (None, None))
        if value is not None and low is not None and not low <= value <= high:
            raise _Invalid(f"{where}.{name}: must be from {low} to {high}, not {value}")
        if name in _NON_NEGATIVE and value is not None and value < 0:
            raise _Invalid(f"{where}.{name}: must not be negative, not {value}")
        values[name] = value
    return cls(**values)


def state_dir(workdir: Path) -> Path:
    return workdir / STATE_DIR


def _aside(path: Path) -> str:
    return f"move it aside (mv {path} {path}.bak); eaglebug starts a fresh one"


def load_state(workdir: Path) -> State:
    folder = state_dir(workdir)
    path = folder / STATE_FILE
    if folder.exists() and not folder.is_dir():
        raise InputError(
            f"{folder}: is a file, where eaglebug keeps its state folder", _aside(folder)
        )
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not eaglebug's state file", _aside(path))
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return State()
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read ({exc.strerror})", "check the file's permissions"
        ) from None
    try:
        data: Any = strict_json(raw)
        if not isinstance(data, dict):
            raise _Invalid("expected a JSON object")
        if data.get("schema") != SCHEMA:
            raise _Invalid(f"schema {data.get('schema')!r}")
        return State(
            launches=[
                _record(LaunchRecord, r, f"launches[{i}]")
                for i, r in enumerate(_list(data, "launches"))
            ],
            patches=[
                _record(PatchRecord, p, f"patches[{i}]")
                for i, p in enumerate(_list(data, "patches"))
            ],
            pending_env=_check(data.get("pending_env", {}), dict[str, str], "pending_env"),
            pending_flags=_check(data.get("pending_flags", {}), dict[str, str], "pending_flags"),
        )
    except (NotJson, _Invalid) as exc:
        raise InputError(
            f"{path}: not a state file eaglebug can read ({exc})", _aside(path)
        ) from None


def _list(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise _Invalid(f"{key}: expected a list")
    return value


def check_writable(workdir: Path) -> None:
    """Raise `InputError` now if the state file could not be written later."""
    fd, tmp = _temp_file(_state_folder(workdir), ".probe")
    os.close(fd)
    _unlink(tmp)


def _temp_file(folder: Path, suffix: str) -> tuple[int, str]:
    """A new file beside the state file (its descriptor and path); `InputError` if the folder
    takes none, said as the state file that cannot be written."""
    try:
        import tempfile  # for a write only: a preflight that reads the state never needs it

        return tempfile.mkstemp(prefix=".state.", suffix=suffix, dir=folder)
    except OSError as exc:
        raise _cannot_write(folder, exc) from None


def _state_folder(workdir: Path) -> Path:
    folder = state_dir(workdir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(
            f"{folder}: is a file, where eaglebug keeps its state folder", _aside(folder)
        ) from None
    except OSError as exc:
        raise InputError(
            f"{folder}: cannot create the state folder ({exc.strerror})",
            "run eaglebug from a folder you can write to",
        ) from None
    return folder


def save_state(workdir: Path, state: State) -> None:
    folder = _state_folder(workdir)
    payload = {
        "schema": SCHEMA,
        "launches": [asdict(r) for r in state.launches],
        "patches": [asdict(p) for p in state.patches],
        "pending_env": state.pending_env,
        "pending_flags": state.pending_flags,
    }
    fd, tmp = _temp_file(folder, ".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
        os.replace(tmp, folder / STATE_FILE)
    except OSError as exc:
        _unlink(tmp)
        raise _cannot_write(folder, exc) from None
    except BaseException:
        _unlink(tmp)
        raise


def _cannot_write(folder: Path, exc: OSError) -> InputError:
    return InputError(
        f"{folder / STATE_FILE}: cannot write ({exc.strerror})",
        "free some space or fix the folder's permissions, then rerun",
    )


def _unlink(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)
