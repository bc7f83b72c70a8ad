"""`eaglebug demo` without a terminal: the whole story, narrated, ending at ready."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import git

from eaglebug.demo.story import run_story
from eaglebug.server.state import load_state


def test_the_story_reaches_ready_with_real_commits(tmp_path: Path) -> None:
    lines: list[str] = []
    root = tmp_path / "demo"
    assert run_story(fast=True, root=root, say=lines.append) == 0
    text = "\n".join(lines)
    assert "preflight: 3 launch blockers" in text
    assert "log.missing_interface_method (8 ranks)" in text
    assert "log.context_length (8 ranks)" in text
    assert "accepted for the next launch: SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in text
    assert "reached 'ready'" in text
    repo = git.Repo(root / "sglang")
    head = repo.head.commit
    assert "Eaglebug-Fix:" in str(head.message)
    assert list(head.stats.files) == ["python/sglang/srt/models/kimi_k25.py"]
    launches = load_state(root / "work").launches
    assert [r.outcome for r in launches][-1] == "stopped"  # the story stops what it started
    assert [r.phase for r in launches] == ["crashed", "crashed", "ready"]
    assert launches[-1].ready_after_s is not None


def test_eaglebug_demo_without_a_terminal_tells_the_story(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from eaglebug.tui.entry import main; raise SystemExit(main(['demo', '--fast']))",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no terminal: the story, narrated" in proc.stdout
    assert "reached 'ready'" in proc.stdout
