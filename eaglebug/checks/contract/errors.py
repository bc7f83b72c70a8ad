"""The one error type every front end turns into `error: ...` / `hint: ...` and exit code 2."""

from __future__ import annotations

from collections.abc import Iterable


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
    newline; the `error:` line must stay one line).

    The one rendering of text from outside eaglebug for a terminal, in the CLI and the TUI:
    a Prometheus label, a server's answer, a config's string or a log's line may hold an
    escape sequence (`\x1b[2J` clears the screen, `\x1b]0;...` retitles it), and it is shown
    as those characters, never obeyed. A tab is harmless and stays."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == "\t" else ascii(ch)[1:-1] for ch in text)


def closest_hint(
    word: str, names: Iterable[str], found: str, otherwise: str, cutoff: float = 0.6
) -> str:
    """The hint for an unknown name: `found` with the (up to three) `names` closest to `word`
    put in its `{}` ("did you mean {}?"), or `otherwise` when none is close (difflib's ratio
    below `cutoff`)."""
    import difflib  # only for a refusal: not on every run's import path

    close = difflib.get_close_matches(word, sorted(names), n=3, cutoff=cutoff)
    return found.format(", ".join(close)) if close else otherwise
