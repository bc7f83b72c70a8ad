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

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks import InputError
from eaglebug.server.state import LaunchRecord, load_state

if TYPE_CHECKING:  # the log reader loads only when a recorded launch is there to read
    from eaglebug.checks import MemoryLog


def measured_for(workdir: Path, words: Sequence[str]) -> MemoryLog | None:
    """What the newest recorded launch of these words measured about memory, if any."""
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
            found = measured_of(record)
            if found is not None and found.free_before_load_gib is not None:
                return found
    return None


def measured_of(record: LaunchRecord) -> MemoryLog | None:
    """A launch's memory figures: those kept in its record, else its log's."""
    from eaglebug.checks import MemoryLog, read_memory_file

    if record.memory:
        return MemoryLog.from_record(record.memory)
    return read_memory_file(Path(record.log))


def figures_to_keep(record: LaunchRecord) -> dict[str, float] | None:
    """The record's memory figures as its log now has them, when they differ from those kept
    (None: nothing new to write)."""
    from eaglebug.checks import read_memory_file

    found = read_memory_file(Path(record.log))
    if found is None:
        return None
    figures = found.to_record()
    return figures if figures and figures != record.memory else None
