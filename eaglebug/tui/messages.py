"""Every custom Message of the app, in one place (STYLE.md practice 4).

The feeds (`Sampler`, `LaunchWatch`, `AcceptanceWatch`, `Controller`) call back on their own threads; the app
wraps what they hand over in one of these and posts it, so widgets only ever see frozen
snapshots, on the UI thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.message import Message

from eaglebug.checks import Finding
from eaglebug.gpu.snapshot import BoxSnapshot
from eaglebug.session.acceptwatch import AcceptanceSnapshot
from eaglebug.session.controller import ChecksProgressed, Event
from eaglebug.session.problems import Problem
from eaglebug.session.watch import WatchSnapshot


@dataclass(eq=False)
class GpuSampled(Message):
    """A new GPU snapshot from the sampler thread; a burst keeps only the newest (by when it
    was taken: a sample asked for now can be posted before the thread's older one)."""

    snapshot: BoxSnapshot

    def can_replace(self, message: Message) -> bool:
        return (
            isinstance(message, GpuSampled)
            and message.snapshot.taken_at_s <= self.snapshot.taken_at_s
        )


@dataclass(eq=False)
class AcceptanceSampled(Message):
    """The acceptance watch polled the server (or the probe reported); the newest wins."""

    snapshot: AcceptanceSnapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AcceptanceSampled)


@dataclass(eq=False)
class ProbeFinished(Message):
    """The probe the user ran came back: its text, and its report if it measured one."""

    text: str
    severity: Literal["information", "warning", "error"]


@dataclass(eq=False)
class WatchUpdated(Message):
    """The launch watch read more of the log: new lines by offset, phase, findings.

    Never replaced by a newer one (it carries the lines that are new since the last): the
    watch bounds a burst instead, reading at most about a MiB of log per snapshot."""

    snapshot: WatchSnapshot


@dataclass(eq=False)
class ControllerReported(Message):
    """The controller queued, ran or finished something (a note, checks, an action's end)."""

    event: Event


@dataclass(eq=False)
class CheckProgressed(Message):
    """A run of the checks got further (its stage, files done of total); a burst keeps only
    the newest: a cold walk reports a hundred times in a second or two."""

    event: ChecksProgressed

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CheckProgressed)


@dataclass(eq=False)
class ProblemReported(Message):
    """Background work went wrong: shown as an error notification, the app carries on."""

    problem: Problem


@dataclass(eq=False)
class FindingOpened(Message):
    """The user opened a finding in the checks list (Enter)."""

    finding: Finding


@dataclass(eq=False)
class LogSearched(Message):
    """Rows a log search found (one batch) for the search of `generation`."""

    kind: Literal["filter", "first_error"]
    generation: int  # the panel's count of searches of this kind: older ones are stale
    index_generation: int  # the index's generation the rows are numbered in
    rows: list[int]
    done: bool
