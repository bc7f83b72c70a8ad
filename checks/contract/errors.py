"""The one error type every front end turns into `error: ...` / `hint: ...` and exit code 2."""

from __future__ import annotations


class InputError(Exception):
    """Input eaglebug cannot work with: a wrong path, an unknown class, an unreadable file.

    Carries a one-line diagnosis and an optional hint so the CLI and the TUI can say what is
    wrong and what to do without a traceback.
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def one_line(text: str) -> str:
    """`text` with line breaks and other control characters escaped (a path may hold a
    newline; the `error:` line must stay one line)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
