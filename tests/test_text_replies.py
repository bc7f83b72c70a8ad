"""The text report is kept as a reply, for the terminal it was rendered on.

What a person types is `eaglebug preflight -- ...` without `--json`: a warm one used to run the
memory stage and the draft checks again (1.4 s of the seed launch's 0.14 s warm JSON reply).
Rich renders the report for its terminal (colours when stdout is one, its width), so a reply
rendered for a terminal must never be printed into a pipe, nor one for 100 columns on 60.
Each run here is a separate `python -m eaglebug`, on a pseudo-terminal or a pipe.
"""

from __future__ import annotations

import fcntl
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
KIMI = "KimiK25ForConditionalGeneration"
ARGV = ("audit", "--model-class", KIMI)
# What the run loaded, on stderr's last line: a kept reply loads neither the engine nor Rich.
PROBE = (
    "import sys\nfrom eaglebug.tui.entry import main\ncode = main(sys.argv[1:])\n"
    "loaded = [m for m in ('eaglebug.checks.source.index', 'rich') if m in sys.modules]\n"
    "print('loaded:', ' '.join(loaded) or '-', file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)
# Rich's own switches, unset: it decides from the terminal alone.
_RICH_VARIABLES = (
    "FORCE_COLOR",
    "NO_COLOR",
    "COLUMNS",
    "LINES",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    target = tmp_path / "mini"
    shutil.copytree(REPO / "examples" / "sglang-mini" / "python", target / "python")
    return target


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _RICH_VARIABLES}
    return {**env, "TERM": "xterm-256color"}


def _on_terminal(tree: Path, columns: int, tmp_path: Path) -> tuple[str, str, int]:
    """(stdout, what was loaded, exit code) of one run whose stdout is a terminal of
    `columns` columns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    err = tmp_path / "stderr"
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, ARGV[0], "--sglang", str(tree), *ARGV[1:]],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=stderr,
            env=_env(),
        )
    os.close(slave)
    chunks = []
    while True:  # until the child's end closes the terminal (EIO)
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    code = proc.wait(timeout=120)
    return b"".join(chunks).decode(), err.read_text().splitlines()[-1], code


def _on_pipe(tree: Path) -> tuple[str, str, int]:
    run = subprocess.run(
        [sys.executable, "-c", PROBE, ARGV[0], "--sglang", str(tree), *ARGV[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=_env(),
    )
    return run.stdout, run.stderr.splitlines()[-1], run.returncode


def test_a_text_report_is_kept_for_the_terminal_it_was_rendered_on(
    tree: Path, tmp_path: Path
) -> None:
    cold = _on_terminal(tree, 100, tmp_path)
    assert "\x1b[" in cold[0], "on a terminal, the report is in colour"
    assert cold[1:] == ("loaded: eaglebug.checks.source.index rich", 1)

    warm = _on_terminal(tree, 100, tmp_path)
    assert warm == (cold[0], "loaded: -", 1), "the same bytes, printed without engine or Rich"

    piped = _on_pipe(tree)
    assert "\x1b[" not in piped[0], "a reply rendered for a terminal is not printed into a pipe"
    assert piped[1] == "loaded: eaglebug.checks.source.index rich"
    assert piped[0].replace("\n", "") and _on_pipe(tree) == (piped[0], "loaded: -", 1)

    narrower = _on_terminal(tree, 60, tmp_path)
    assert narrower[1] == "loaded: eaglebug.checks.source.index rich", "another width"
    assert _on_terminal(tree, 60, tmp_path)[1] == "loaded: -"
