"""A launch that stopped moving: `log.stalled` from the silence in one phase.

`diagnose` compares the log's last timestamp with the file's modification time: when they
agree (the same clock: a live log), the silence is the time since the file last changed; a
copied log (its mtime is the copy's) tells nothing, and nothing is reported. The tests pin
diagnose's wall clock (`NOW`): what they find does not depend on how loaded the machine is.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from eaglebug.checks.logs.parse import analyze_text
from eaglebug.cli import diagnose
from eaglebug.cli.diagnose import silence_s
from tests.clirun import cli

STAMP = "%Y-%m-%d %H:%M:%S"
NOW = 1_769_769_434.0  # 2026-01-30 10:37:14 UTC: diagnose's clock in these tests


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diagnose, "wall_clock", lambda: NOW)


def _graph_capture_log(path: Path, last: float) -> Path:
    """A launch whose last line, at `last`, began capturing CUDA graphs."""
    at = time.strftime(STAMP, time.localtime(last))
    path.write_text(
        f"[{at} TP0] Load weight begin. avail mem=139.12 GB\n"
        f"[{at} TP0] Load weight end. type=DeepseekV3ForCausalLM, avail mem=64.20 GB\n"
        f"[{at} TP0] KV Cache is allocated. #tokens: 1048576, K size: 30.00 GB\n"
        f"[{at} TP0] Capture cuda graph begin. This can take up to several minutes.\n"
    )
    os.utime(path, (last, last))
    return path


def test_twenty_minutes_in_cuda_graph_capture_is_stalled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _graph_capture_log(tmp_path / "server.log", NOW - 20 * 60)
    run = cli(capsys, "diagnose", "--log", str(log), "--json")
    assert run.code == 0, run.err  # a warning, not an error
    result = json.loads(run.out)
    [stalled] = [f for f in result["findings"] if f["id"] == "log.stalled"]
    assert stalled["severity"] == "warning"
    assert "cuda_graph" in stalled["message"] and "20 min" in stalled["message"]
    assert result["silent_s"] == 20 * 60
    text = cli(capsys, "diagnose", "--log", str(log))
    assert "log.stalled" in text.out


def test_the_limit_is_a_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _graph_capture_log(tmp_path / "server.log", NOW - 20 * 60)
    run = cli(capsys, "diagnose", "--log", str(log), "--json", "--stall-graph-min", "30")
    assert [f["id"] for f in json.loads(run.out)["findings"]] == []
    bad = cli(capsys, "diagnose", "--log", str(log), "--stall-graph-min", "-1")
    assert bad.code == 2 and bad.err.startswith("error: argument --stall-graph-min")


def test_a_recent_line_is_not_a_stall(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _graph_capture_log(tmp_path / "server.log", NOW - 60)
    run = cli(capsys, "diagnose", "--log", str(log), "--json")
    assert "log.stalled" not in run.out


def test_a_copied_log_tells_nothing(tmp_path: Path) -> None:
    """Its timestamps are a year old, its mtime is now: another clock, no silence to measure."""
    log = _graph_capture_log(tmp_path / "server.log", NOW - 365 * 86400)
    os.utime(log, None)
    analyzer = analyze_text(log.read_text())
    assert silence_s(log, analyzer) is None


def test_only_phases_in_progress_can_stall() -> None:
    ready = analyze_text("[2026-01-30 10:37:47] The server is fired up and ready to roll!\n")
    assert ready.stalled(3600.0) is None
    loading = analyze_text("[2026-01-30 10:37:47 TP0] Load weight begin. avail mem=139 GB\n")
    assert loading.stalled(9 * 60) is None
    found = loading.stalled(11 * 60)
    assert found is not None and found.id == "log.stalled" and "loading" in found.message
