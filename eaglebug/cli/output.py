"""What the headless commands write: JSON that is JSON, and outside text that is safe.

`--json` output goes through `json_text` only: `allow_nan=False`, so a NaN or an infinity that
reached a result (every reader of outside numbers refuses them: `eaglebug/checks/contract/numbers.py`)
is a bug that says so, never `NaN` or `Infinity` on stdout, which no JSON reader takes. Text
from outside eaglebug (a Prometheus label, a server's settings, a path from the state file) is
written through `one_line`, the one terminal-safe rendering the TUI uses too.
"""

from __future__ import annotations

import json
import sys

from eaglebug.checks import one_line


def json_text(data: object) -> str:
    """`data` as indented JSON text, refusing NaN and infinities (`ValueError`)."""
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def write_json(data: object) -> None:
    sys.stdout.write(json_text(data))


def safe(text: object) -> str:
    """Outside text for the terminal: escape sequences and line breaks shown, not obeyed."""
    return one_line(str(text))
