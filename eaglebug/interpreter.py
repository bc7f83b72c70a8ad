"""Ask the server's own Python where its `sglang` lives (it may be another environment)."""

from __future__ import annotations

import os
import subprocess

_PROBE = (
    "import importlib.util as u; s = u.find_spec('sglang'); "
    "print((s.submodule_search_locations or [''])[0] if s else '')"
)


def sglang_of(python: str) -> str | None:
    """The sglang package folder that `python` would import, found without importing it."""
    if not os.path.basename(python).startswith("python"):
        return None
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    folder = proc.stdout.strip()
    return folder or None
