"""The log reader on hostile input, built for real: a 300 MB log that is one line, a FIFO where a
recorded launch's log was, a `server_args=` line nested thousands deep, numbers of 5,000 digits
and `1e400` in the memory lines. None may hold the input whole, block, or end in a traceback;
where the point is memory, the peak RSS of a child process is measured (`os.wait4`), never time.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from eaglebug.checks.logs.parse import analyze_file, read_memory_file
from tests.clirun import cli
from tests.peak_rss import run_measured

RSS_LIMIT_MB = 150
ONE_LINE_BYTES = 300 * 1024 * 1024
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def one_line_log(tmp_path: Path) -> Path:
    """A launch's log that is a real 300 MB file of one line (no newline at all), written a
    block at a time."""
    path = tmp_path / "launch-001.log"
    block = b"[2026-01-30 10:36:00 TP0] Load weight begin. avail mem=70.00 GB " + b"x" * (
        1024 * 1024
    )
    with path.open("wb") as out:
        written = 0
        while written < ONE_LINE_BYTES:
            out.write(block)
            written += len(block)
    return path


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_a_300_mb_single_line_log_is_not_held_whole(tmp_path: Path, one_line_log: Path) -> None:
    code = (
        "import sys\n"
        "from eaglebug.cli.parser import main\n"
        f"sys.exit(main(['diagnose', '--log', {str(one_line_log)!r}, '--json']))\n"
    )
    run = run_measured([sys.executable, "-c", code], cwd=tmp_path, env=_env(), timeout=120)
    assert run.code in {0, 1}, run.err
    data = json.loads(run.out)
    assert data["lines_cut"]["count"] == 1 and data["lines_cut"]["first_offset"] == 0
    warning = [line for line in run.err.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and "1 line longer than 64 KiB" in warning[0], run.err
    assert "Traceback" not in run.err
    alone = "from eaglebug.checks.logs.parse import analyze_file\n"
    alone += f"analyze_file({str(one_line_log)!r})\n"
    run = run_measured([sys.executable, "-c", alone], cwd=tmp_path, env=_env(), timeout=120)
    assert run.code == 0, run.err
    assert run.rss_mb < RSS_LIMIT_MB, f"{run.rss_mb:.0f} MB for a 300 MB line"


def test_a_recorded_launch_whose_log_is_a_fifo_does_not_block(tmp_path: Path) -> None:
    from eaglebug.server.state import LaunchRecord, State, save_state

    fifo = tmp_path / "launch-001.log"
    os.mkfifo(fifo)
    words = ["python", "-m", "sglang.launch_server", "--model-path", "/m"]
    save_state(tmp_path, State(launches=[LaunchRecord(1, words, {}, str(fifo), 1, 1.0, 1.0)]))
    code = (
        "from pathlib import Path\n"
        "from eaglebug.server.calibration import measured_for\n"
        f"print(measured_for(Path({str(tmp_path)!r}), {words!r}))\n"
    )
    run = run_measured([sys.executable, "-c", code], cwd=tmp_path, env=_env(), timeout=300)
    assert (run.code, run.out.strip()) == (0, "None"), run.err
    assert read_memory_file(fifo) is None  # in-process too: refused on the open descriptor


def test_a_recorded_launch_whose_log_is_one_huge_line_stays_small(
    tmp_path: Path, one_line_log: Path
) -> None:
    code = (
        "from pathlib import Path\n"
        "from eaglebug.checks import read_memory_file\n"
        f"memory = read_memory_file(Path({str(one_line_log)!r}))\n"
        "print(memory.free_before_load_gib if memory else None)\n"
    )
    run = run_measured([sys.executable, "-c", code], cwd=tmp_path, env=_env(), timeout=120)
    assert run.code == 0, run.err
    assert run.out.split() == ["70.0"]  # the line's start is read: its memory figure is there
    assert run.rss_mb < RSS_LIMIT_MB


def test_numbers_no_machine_prints_in_the_memory_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = "9" * 5000
    log = tmp_path / "hostile.log"
    log.write_text(
        f"[2026-01-30 10:36:06 TP0] Load weight begin. avail mem={huge} GB\n"
        "[2026-01-30 10:37:10 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16,"
        f" avail mem=55.00 GB, mem usage={huge}.5 GB.\n"
        f"[2026-01-30 10:37:20 TP0] KV Cache is allocated. #tokens: {huge}, K size: 15.26 GB, "
        "V size: 1e400 GB\n"
        f"[2026-01-30 10:37:21 TP0] max_total_num_tokens={huge}, max_running_requests=48\n"
        "[2026-01-30 10:38:00 TP0] Decode batch, #running-req: 1, accept len: "
        f"{huge}.0, accept rate: 0.50\n"
    )
    run = cli(capsys, "diagnose", "--log", str(log), "--json")
    assert run.code == 0, run.err
    data = json.loads(run.out)
    memory = data["memory"]
    assert memory["free_before_load_gib"] is None and memory["target_weights_gib"] is None
    assert memory["kv_tokens"] is None and memory["max_total_num_tokens"] is None
    assert memory["max_running_requests"] == 48
    assert data["acceptance"] is None  # a 5,000-digit acceptance length is no report
    assert analyze_file(log).memory == read_memory_file(log)


def test_a_server_args_line_nested_thousands_deep_is_no_launch(tmp_path: Path) -> None:
    from eaglebug.cli.predict import server_args_of

    deep = tmp_path / "deep.log"
    nested = "[" * 20000 + "]" * 20000
    deep.write_text(f"[2026-01-30 10:36:00] server_args=ServerArgs(model_path='/m', x={nested})\n")
    assert server_args_of(deep) is None
    numbers = tmp_path / "numbers.log"
    numbers.write_text(
        "[2026-01-30 10:36:00] server_args=ServerArgs(model_path='/m', tp_size=8, "
        f"context_length={'7' * 5000}, mem_fraction_static=1e400, page_size=1)\n"
    )
    args = server_args_of(numbers)
    assert args is not None
    assert args["model_path"] == "/m" and args["tp_size"] == 8 and args["page_size"] == 1
    assert args["context_length"] is None and args["mem_fraction_static"] is None
