"""The one runner for work done in the background: what went wrong, as a value to show.

Every thread of the TUI (the controller's worker, the launch watch, the log view's searches)
runs its work through `guarded`, so nothing that goes wrong ends the app:

- an `InputError` (a git refusal, an unreadable log, a corrupt state file) becomes a `Problem`
  with its one-line diagnosis and hint, as the CLI prints them;
- any other exception becomes a `Problem` saying `internal error: ...`, and its traceback is
  appended to `.eaglebug/eaglebug-errors.log` in the working folder, whose path the problem
  names (writing that file never raises: when it cannot be written the problem says so).

A front end turns a `Problem` into a notification; it never re-raises it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from eaglebug.checks import InputError, one_line
from eaglebug.server.state import state_dir

ERRORS_LOG = "eaglebug-errors.log"
_write_lock = threading.Lock()  # one traceback at a time, whole, whatever thread reports it

T = TypeVar("T")


@dataclass(frozen=True)
class Problem:
    """Something that went wrong in the background, ready to be shown."""

    title: str  # what was being done: "not applied", "undo", "log", ...
    message: str  # one line
    hint: str | None = None
    internal: bool = False  # not an InputError: a bug, with its traceback in `log`
    log: Path | None = None  # where the traceback went (internal errors only)

    @property
    def severity(self) -> Literal["error", "warning"]:
        return "error"

    def text(self) -> str:
        """The message and, on their own lines, the hint or the traceback's file."""
        lines = [self.message]
        if self.hint:
            lines.append(self.hint)
        if self.internal:
            lines.append(f"traceback in {self.log}" if self.log else "(no traceback file)")
        return "\n".join(lines)


def errors_log(workdir: Path) -> Path:
    """Where internal errors' tracebacks go: `.eaglebug/eaglebug-errors.log`."""
    return state_dir(workdir) / ERRORS_LOG


def record_traceback(workdir: Path, title: str, exc: BaseException) -> Path | None:
    """Append `exc`'s traceback to the errors log; its path, or None if it cannot be written."""
    import traceback  # only when there is one to write

    path = errors_log(workdir)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    entry = f"==== {stamp} pid {os.getpid()} {title}\n{text}\n"
    try:
        with _write_lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8", errors="backslashreplace") as out:
                out.write(entry)
    except OSError:
        return None
    return path


def problem_of(exc: BaseException, title: str, workdir: Path) -> Problem:
    """The problem an exception is: a diagnosis for an InputError, an internal error else."""
    if isinstance(exc, InputError):
        return Problem(title, one_line(exc.message), exc.hint)
    where = record_traceback(workdir, title, exc)
    detail = one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    return Problem(title, f"internal error: {detail}", None, internal=True, log=where)


def guarded(
    work: Callable[[], T], title: str, workdir: Path, report: Callable[[Problem], None]
) -> T | None:
    """`work()`'s result; on any exception, report it as a problem and return None."""
    try:
        return work()
    except Exception as exc:  # the runner of every background job: reported, never raised
        report(problem_of(exc, title, workdir))
        return None
