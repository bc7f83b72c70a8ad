"""The last launch of a command, as its own log measured it: preflight's calibration.

eaglebug records each launch it starts (argv, log file) in `.eaglebug/state.json`; the newest
launch with the same argv is "the same launch". While it runs, the watch keeps SGLang's memory
lines from its log (free memory before the load, weights, KV pool, CUDA graphs) in that record,
so they outlive the log; they replace the estimates on the next preflight of that command. A
record from before the figures were kept is read from its log, if the log is still there. A
state file that cannot be read gives no calibration (the command that owns it reports it);
preflight is never refused for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks import InputError
from eaglebug.server import STATE_DIR

if TYPE_CHECKING:  # the log reader loads only when a recorded launch is there to read, and
    # the state's records only when there is a state folder (a warm preflight has none to read)
    from eaglebug.checks import MemoryLog
    from eaglebug.server.state import LaunchRecord


# What one GPU's memory figures can be: no GPU made has more than this (a B300 has 288 GB).
MAX_GIB = 4096.0
_GIB = ("free_before_load_gib", "target_weights_gib", "draft_weights_gib", "kv_gib", "graph_gib")
_COUNTS = ("kv_tokens", "max_total_num_tokens", "max_running_requests")
_MAX_COUNT = 10**12  # tokens of a KV pool, requests


def measured_for(
    workdir: Path, words: Sequence[str], warnings: list[str] | None = None
) -> MemoryLog | None:
    """What the newest recorded launch of these words measured about memory, if any; a
    launch whose figures cannot be a GPU's is passed over, and `warnings` say so."""
    if not (workdir / STATE_DIR).is_dir():
        return None  # no launch recorded here (a file in its place: the state's owner says so)
    from eaglebug.server.state import load_state

    try:
        state = load_state(workdir)
    except InputError:
        return None
    if not state.launches:
        return None
    from eaglebug.checks import env_and_argv, with_flags

    argv = env_and_argv(words)[1]
    for record in reversed(state.launches):
        # The same command, whatever flag fixes that launch ran with.
        if record.argv == with_flags(argv, record.flag_additions):
            found = measured_of(record, warnings)
            if found is not None and found.free_before_load_gib is not None:
                return found
    return None


def measured_of(record: LaunchRecord, warnings: list[str] | None = None) -> MemoryLog | None:
    """A launch's memory figures: those kept in its record, else its log's; None when they
    cannot be what a GPU measured (free memory -80 GiB, weights -5 GiB or more than was free:
    a hand-edited or damaged state file), with the reason in `warnings`."""
    from eaglebug.checks import MemoryLog, read_memory_file

    found = None if record.memory else read_memory_file(Path(record.log))
    if not record.memory and found is None:
        return None
    wrong = implausible(record.memory if found is None else found.to_record())
    if wrong is not None:
        if warnings is not None:
            warnings.append(
                f"launch {record.number}'s memory figures are not a GPU's ({wrong}); "
                "preflight estimates instead of calibrating from them"
            )
        return None
    return found if found is not None else MemoryLog.from_record(record.memory)


def implausible(figures: Mapping[str, float]) -> str | None:
    """Which figure cannot be a GPU's (read with the one number reader), or None."""
    from eaglebug.checks import float_value, int_value

    for key in _GIB:
        if key in figures and float_value(figures[key], lo=0.0, hi=MAX_GIB) is None:
            return f"{key} {figures[key]:g}"
    for key in _COUNTS:
        if key in figures and int_value(figures[key], lo=0, hi=_MAX_COUNT) is None:
            return f"{key} {figures[key]:g}"
    free = figures.get("free_before_load_gib")
    weights = figures.get("target_weights_gib", 0.0) + figures.get("draft_weights_gib", 0.0)
    if free is not None and weights > free:
        return f"{weights:g} GiB of weights loaded into {free:g} GiB free"
    return None


def figures_to_keep(record: LaunchRecord) -> dict[str, float] | None:
    """The record's memory figures as its log now has them, when they differ from those kept
    (None: nothing new to write)."""
    from eaglebug.checks import read_memory_file

    found = read_memory_file(Path(record.log))
    if found is None:
        return None
    figures = found.to_record()
    return figures if figures and figures != record.memory else None
