"""The crash line of the newest failure, pinned at the top of the log panel.

Why: a crashed launch keeps printing (every other rank's traceback, the shutdown), so the one
line that says what went wrong (`AttributeError: 'KimiK25ForConditionalGeneration' object has
no attribute 'set_eagle3_layers_to_capture'`) scrolls away before anyone reads it. The pin
shows it above the log from the moment the watch reports the failure until the user has had
it on screen by their own doing (scrolled to it, `e`, Enter): then it goes, for that failure;
a newer failure pins its own line.

Which line: the exception line of the newest error finding read from the log (its
`LogEvidence.offset` is where its traceback starts in the file the watch reads; the exception
line is found from there), kept by its index key so rows removed above it do not move it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from eaglebug.checks import Finding, one_line
from eaglebug.logs.index import LogIndex

SCAN_ROWS = 512  # how far below a traceback's start its exception line is looked for


@dataclass
class Crash:
    """A failure's crash line: what the pin says and where the line is."""

    key: tuple[str, int, str | None]  # (finding id, offset, exception): a new failure, a new pin
    text: Text
    where: tuple[int, int] | None  # the index key of the line; None when not in the index
    seen: bool = False


def newest_failure(findings: Iterable[Finding]) -> tuple[Finding, int] | None:
    """The error finding furthest into the log (the newest failure) and its offset."""
    best: tuple[Finding, int] | None = None
    for finding in findings:
        log = finding.log
        if finding.severity != "error" or log is None or log.offset is None:
            continue
        if best is None or log.offset >= best[1]:
            best = (finding, log.offset)
    return best


def crash_of(finding: Finding, offset: int, index: LogIndex) -> Crash:
    """Find the crash line of a failure in the index, and the pin's text for it."""
    exception = finding.log.exception if finding.log is not None else None
    start = index.row_at_offset(offset)
    row = None
    if start is not None:
        row = index.find(start, exception, SCAN_ROWS) if exception else start
        row = start if row is None else row
    said = exception or (index[row].strip() if row is not None else finding.message)
    text = Text.assemble(("✗ ", "bold red"), (one_line(said), "bold red"))  # the log's words
    if len(finding.ranks) > 1:
        from eaglebug.checks import rank_summary, sort_ranks

        text.append(f"  ({rank_summary(sort_ranks(set(finding.ranks)))})", style="red")
    text.append("  e: go to it", style="dim")
    where = index.key(row) if row is not None else None
    return Crash((finding.id, offset, exception), text, where)


class CrashPin(Static):
    """Shows `crash.text` while the crash line is not on screen and has not been seen."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.crash: Crash | None = None
        self.display = False

    def track(self, findings: Iterable[Finding], index: LogIndex) -> bool:
        """Follow the newest failure among `findings`; True when it is another one."""
        newest = newest_failure(findings)
        if newest is None:
            changed = self.crash is not None
            self.crash = None
            return changed
        finding, offset = newest
        exception = finding.log.exception if finding.log is not None else None
        if self.crash is not None and self.crash.key == (finding.id, offset, exception):
            return False
        self.crash = crash_of(finding, offset, index)
        self.update(self.crash.text)
        return True

    def row(self, index: LogIndex) -> int | None:
        """The crash line's row now, if it is still in the index."""
        where = self.crash.where if self.crash is not None else None
        return index.row_of(where) if where is not None else None

    def show_if(self, hidden_line: bool) -> None:
        """Pinned when there is an unseen crash whose line is not on screen."""
        shown = self.crash is not None and not self.crash.seen and hidden_line
        if self.display != shown:
            self.display = shown
