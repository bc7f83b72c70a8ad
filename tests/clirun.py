"""Running the headless CLI in-process for a test: exit code, stdout and stderr together.

`refused(run, ...)` is what every bad-input and refusal test checks: exit 2, one `error:` line
and one `hint:` line, no traceback (plain or disguised as `internal error`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from eaglebug.cli.parser import main

# The keys every finding of `--json` carries, whichever command wrote it (the findings contract).
FINDING_KEYS = frozenset(
    {
        "id",
        "severity",
        "message",
        "role",
        "class",
        "attribute",
        "call_sites",
        "delegate",
        "fix",
    }
)


@dataclasses.dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def refused(run: Run, *needles: str) -> list[str]:
    """Exit 2, one `error:` line and one `hint:` line on stderr (each needle in them)."""
    assert run.code == 2, (run.code, run.out, run.err)
    lines = run.err.splitlines()
    assert len(lines) == 2, run.err
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), run.err
    assert "internal error" not in run.err and "Traceback" not in run.err, run.err
    for needle in needles:
        assert needle in run.err, (needle, run.err)
    return lines


def state_file_in(folder: Path, monkeypatch: pytest.MonkeyPatch, data: str | bytes) -> Path:
    """`folder/.eaglebug/state.json` holding `data`, with `folder` the working folder (where a
    user runs `status`, `stop`, `launch`): the state file the commands are about to read."""
    monkeypatch.chdir(folder)
    state = folder / ".eaglebug" / "state.json"
    state.parent.mkdir()
    if isinstance(data, str):
        state.write_text(data)
    else:
        state.write_bytes(data)
    return state
