"""The stand-in answers over real HTTP on the loopback, as SGLang's routes do.

Once ready, `/generate`, `/server_info` and (with --enable-metrics) `/metrics` answer with
the acceptance that follows from how the launch runs its draft: an EAGLE-3 draft run as
EAGLE3 accepts about three tokens per step, the same draft run as plain EAGLE accepts none
beyond the verified one. The probe and the acceptance readers are the real ones.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from eaglebug.checks.logs.acceptance import from_metrics, reports_in
from eaglebug.cli.probe import probe, url_of_launch
from eaglebug.demo import DemoScenario
from eaglebug.server.launcher import Server
from eaglebug.server.state import LaunchRecord, load_state, save_state
from tests.live import hermetic_demo_env, wait_for
from tests.test_demo import ENV_VAR, READY, apply_fix, log_text


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_demo_env(monkeypatch)


def _ready(scenario: DemoScenario, server: Server, argv: list[str]) -> LaunchRecord:
    apply_fix(scenario)
    state = load_state(scenario.workdir)
    state.pending_env = {ENV_VAR: "1"}
    save_state(scenario.workdir, state)
    record = server.launch(argv, scenario.env)
    wait_for(lambda: READY in log_text(record), "the server to be ready")
    return record


@pytest.fixture
def server(scenario: DemoScenario) -> Iterator[Server]:
    srv = Server(scenario.workdir)
    yield srv
    for record in srv.state().launches:
        srv.stop(record, grace_s=5.0)


def test_each_demo_gets_its_own_free_port_kept_in_its_manifest(tmp_path: Path) -> None:
    one = DemoScenario.prepare(tmp_path / "one", fast=True)
    two = DemoScenario.prepare(tmp_path / "two", fast=True)
    assert one.port != two.port
    assert DemoScenario.open(one.root).port == one.port
    assert f"--port {one.port}" in " ".join(one.server_flags)


def test_a_working_draft_answers_the_probe_with_about_three_tokens(
    scenario: DemoScenario, server: Server
) -> None:
    record = _ready(scenario, server, scenario.launch_argv)
    url = url_of_launch(record.argv)
    assert url == f"http://127.0.0.1:{scenario.port}"
    result = probe(url, max_new_tokens=64, timeout_s=30.0)
    assert result.accept_length == pytest.approx(3.2, abs=0.1)
    assert result.settings["speculative_algorithm"] == "EAGLE3"
    assert result.server_info is not None
    assert result.server_info.length == pytest.approx(3.2, abs=0.1)
    # The decode lines the log got say the same as the routes.
    reports = reports_in(log_text(record))
    assert reports and all(r.length == pytest.approx(3.2, abs=0.1) for r in reports)


def test_an_eagle3_draft_run_as_eagle_accepts_nothing_and_metrics_say_so(
    scenario: DemoScenario, server: Server
) -> None:
    argv = ["EAGLE" if word == "EAGLE3" else word for word in scenario.launch_argv] + [
        "--enable-metrics"
    ]
    record = _ready(scenario, server, argv)
    url = url_of_launch(record.argv)
    result = probe(url, max_new_tokens=32, timeout_s=30.0)
    assert result.accept_length == pytest.approx(1.0)
    with urllib.request.urlopen(f"{url}/metrics", timeout=5.0) as response:
        metrics = response.read().decode()
    report = from_metrics(metrics)
    assert report is not None and report.length == pytest.approx(1.0)
    info = json.loads(urllib.request.urlopen(f"{url}/server_info", timeout=5.0).read())
    assert info["speculative_algorithm"] == "EAGLE"


def test_without_enable_metrics_there_is_no_metrics_route(
    scenario: DemoScenario, server: Server
) -> None:
    record = _ready(scenario, server, scenario.launch_argv)
    url = url_of_launch(record.argv)
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{url}/metrics", timeout=5.0)
    assert raised.value.code == 404


def test_a_taken_port_ends_the_launch_with_uvicorns_words(
    scenario: DemoScenario, server: Server
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", scenario.port))
        taken.listen()
        apply_fix(scenario)
        state = load_state(scenario.workdir)
        state.pending_env = {ENV_VAR: "1"}
        save_state(scenario.workdir, state)
        record = server.launch(scenario.launch_argv, scenario.env)
        wait_for(lambda: server.poll_exit(record) is not None, "the stand-in to exit")
    text = log_text(record)
    assert "error while attempting to bind on address" in text
    assert READY not in text
