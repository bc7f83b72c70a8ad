"""Every custom Message of the app, in one place (STYLE.md practice 4)."""

from __future__ import annotations

from textual.message import Message

from eaglebug.checks.findings import Finding
from eaglebug.gpu.snapshot import BoxSnapshot
from eaglebug.session import CheckResult


class GpuSampled(Message):
    """A new GPU snapshot from the sampler thread; a burst keeps only the newest."""

    def __init__(self, snapshot: BoxSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuSampled)


class LogRead(Message):
    """New log lines and what the analyzer now knows about the launch."""

    def __init__(
        self,
        lines: list[str],
        restarted: str | None,
        live_progress: str | None,
        phase: str,
        progress: tuple[int, int, int | None] | None,
        findings: list[Finding],
        path: str | None,
    ) -> None:
        super().__init__()
        self.lines = lines
        self.restarted = restarted
        self.live_progress = live_progress
        self.phase = phase
        self.progress = progress  # (done, total, percent)
        self.findings = findings
        self.path = path


class ChecksDone(Message):
    """The checks ran (in a worker); the panel and the header refresh from the result."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__()
        self.result = result
