"""`eaglebug probe` against a real HTTP server on the loopback that answers as SGLang does.

The server speaks SGLang's JSON (`/generate` with `meta_info.spec_accept_length`,
`spec_verify_ct`, `completion_tokens`; `/server_info` with the speculative settings and
`internal_states[0].avg_spec_accept_length`). A server that is not up, and one that goes away
between requests, are one clear line each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from eaglebug.cli.probe import probe, url_of_launch
from eaglebug.server.state import LaunchRecord, State, save_state
from tests.clirun import cli, refused
from tests.fake_sglang import FakeSglang


@pytest.fixture
def working() -> Iterator[FakeSglang]:
    server = FakeSglang(accept=3.2)
    yield server
    server.close()


def test_probe_reports_acceptance_speed_and_settings(working: FakeSglang) -> None:
    result = probe(working.url, max_new_tokens=64)
    assert len(working.requests) == 3
    assert all(r["sampling_params"]["temperature"] == 0 for r in working.requests)
    assert result.accept_length == pytest.approx(64 * 3 / (20 * 3))
    assert result.tokens_per_s > 0
    assert result.settings["speculative_algorithm"] == "EAGLE3"
    assert result.settings["speculative_num_draft_tokens"] == 4


def test_the_cli_is_one_line_of_verdict(
    working: FakeSglang, capsys: pytest.CaptureFixture[str]
) -> None:
    run = cli(capsys, "probe", "--url", working.url, "--json", "--requests", "2")
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert len(data["requests"]) == 2 and data["low"] is False
    assert data["accept_length"] == pytest.approx(3.2, abs=0.01)


def test_a_silent_draft_is_low_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    server = FakeSglang(accept=1.0)
    try:
        run = cli(capsys, "probe", "--url", server.url)
        assert run.code == 1
        assert "accept length 1.00" in run.out and "low:" in run.out
    finally:
        server.close()


def test_no_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    refused(cli(capsys, "probe", "--url", "http://127.0.0.1:9"), "no server answers")


def test_a_server_that_goes_away_mid_probe_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    server = FakeSglang(accept=3.0, stop_after=1)
    try:
        refused(cli(capsys, "probe", "--url", server.url), "no server answers")
    finally:
        server.close()


def test_the_recorded_launch_gives_the_port(
    working: FakeSglang,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = working.url.rsplit(":", 1)[1]
    argv = ["python", "-m", "sglang.launch_server", "--host", "0.0.0.0", "--port", port]
    assert url_of_launch(argv) == working.url  # the loopback, whatever host it listens on
    assert url_of_launch(["python", "-m", "sglang.launch_server"]) == "http://127.0.0.1:30000"
    record = LaunchRecord(1, argv, {}, "l.log", 4_194_304, 1.0, 1.0)
    save_state(tmp_path, State(launches=[record]))
    monkeypatch.chdir(tmp_path)
    assert cli(capsys, "probe", "--requests", "1").code == 0
    assert len(working.requests) == 1
