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
