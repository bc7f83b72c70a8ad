"""Every node's GPUs through a real Prometheus, scraping two DCGM-format exporters.

The exporters are two small HTTP endpoints on the loopback (two "nodes", two GPUs each) that
serve dcgm-exporter's exposition text with the values a test sets; Prometheus (the distribution's
package, which `.ci/run` installs) scrapes them every second with a generated config and a
temporary storage folder. Everything the tests start is stopped again.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eaglebug.gpu.prometheus import MIB, PrometheusSource
from tests.clirun import cli
from tests.live import wait_for

MODEL = "NVIDIA H100 80GB HBM3"
TOTAL_MIB = 81559


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    """A fake dcgm-exporter for one host: what it serves is `used_mib` per GPU."""

    host: str
    used_mib: list[int]
    util: list[int] = field(default_factory=lambda: [0, 0])
    server: ThreadingHTTPServer | None = None
    accept_length: float | None = None  # SGLang's own gauge, served beside the GPUs' here

    def exposition(self) -> str:
        lines = [
            "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).",
            "# TYPE DCGM_FI_DEV_FB_USED gauge",
        ]
        for name, values in (
            ("DCGM_FI_DEV_FB_USED", self.used_mib),
            ("DCGM_FI_DEV_FB_FREE", [TOTAL_MIB - u for u in self.used_mib]),
            ("DCGM_FI_DEV_GPU_UTIL", self.util),
            ("DCGM_FI_DEV_GPU_TEMP", [41, 43]),
            ("DCGM_FI_DEV_POWER_USAGE", [312.5, 298.25]),
        ):
            for gpu, value in enumerate(values):
                labels = (
                    f'gpu="{gpu}",UUID="GPU-{self.host}-{gpu}",device="nvidia{gpu}",'
                    f'modelName="{MODEL}",Hostname="{self.host}"'
                )
                lines.append(f"{name}{{{labels}}} {value}")
        if self.accept_length is not None:
            lines += [
                "# TYPE sglang:spec_accept_length gauge",
                f'sglang:spec_accept_length{{model_name="m",tp_rank="0"}} {self.accept_length}',
                "# TYPE sglang:spec_accept_rate gauge",
                f'sglang:spec_accept_rate{{model_name="m",tp_rank="0"}} '
                f"{(self.accept_length - 1) / 3}",
            ]
        return "\n".join(lines) + "\n"

    def start(self) -> int:
        node = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = node.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return int(self.server.server_address[1])

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@dataclass
class Fleet:
    nodes: list[Node]
    url: str
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def running_fleet(tmp_path: Path) -> Iterator[Fleet]:
    """Two nodes' exporters and a real Prometheus scraping them, once both are scraped."""
    binary = shutil.which("prometheus")
    assert binary, "Prometheus is needed: apt-get install prometheus (.ci/run installs it)"
    nodes = [Node("node-a", [70000, 70100], accept_length=3.1), Node("node-b", [512, 600])]
    ports = [node.start() for node in nodes]
    targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        f"scrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: [{targets}]\n"
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        source = PrometheusSource(url)

        def both_scraped() -> bool:
            with contextlib.suppress(Exception):
                return len(source.query("DCGM_FI_DEV_FB_USED")) == 4
            return False

        wait_for(both_scraped, "Prometheus to scrape both nodes")
        yield Fleet(nodes, url, process)
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
        for node in nodes:
            node.stop()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A fleet of the test's own, for a test that changes it (stops a node, Prometheus)."""
    with running_fleet(tmp_path) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def shared_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """One fleet for the tests that only read it: Prometheus takes seconds to start and
    scrape, time the machine spends waiting."""
    with running_fleet(tmp_path_factory.mktemp("fleet")) as fleet:
        yield fleet


def test_the_snapshot_is_what_the_nodes_serve(shared_fleet: Fleet) -> None:
    fleet = shared_fleet
    snapshot = PrometheusSource(fleet.url).sample()
    assert snapshot.unavailable is None
    got = {(g.host, g.index): g for g in snapshot.gpus}
    assert sorted(got) == [("node-a", 0), ("node-a", 1), ("node-b", 0), ("node-b", 1)]
    a0 = got[("node-a", 0)]
    assert (a0.used_bytes, a0.total_bytes) == (70000 * MIB, TOTAL_MIB * MIB)
    assert (a0.name, a0.uuid, a0.state) == (MODEL, "GPU-node-a-0", "ok")
    assert (a0.temperature_c, a0.power_mw) == (41, 312500)
    assert got[("node-b", 1)].used_bytes == 600 * MIB


def test_sglangs_own_gauges_come_per_server(shared_fleet: Fleet) -> None:
    """A node whose SGLang serves /metrics (--enable-metrics) shows its acceptance; one
    without is simply absent, not an error."""
    fleet = shared_fleet
    snapshot = PrometheusSource(fleet.url).sample()
    [serving] = snapshot.serving
    assert serving.accept_length == pytest.approx(3.1)
    assert serving.accept_rate == pytest.approx(0.7)
    assert serving.instance.startswith("127.0.0.1:")


def test_the_headless_command_lists_both_nodes(
    shared_fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = shared_fleet
    run = cli(capsys, "gpus", "--prometheus", fleet.url, "--json")
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["source"] == f"Prometheus {fleet.url}, DCGM exporter"
    assert [n["host"] for n in data["nodes"]] == ["node-a", "node-b"]
    b = data["nodes"][1]["gpus"]
    assert [(g["index"], g["memory_used_bytes"], g["state"]) for g in b] == [
        (0, 512 * MIB, "ok"),
        (1, 600 * MIB, "ok"),
    ]
    assert [s["accept_length"] for s in data["serving"]] == [pytest.approx(3.1)]
    text = cli(capsys, "gpus", "--prometheus", fleet.url)
    assert "node-a" in text.out and "node-b" in text.out
    assert "accept length 3.10" in text.out


def test_a_node_that_goes_away_is_stale_not_gone(fleet: Fleet) -> None:
    source = PrometheusSource(fleet.url)
    assert all(g.state == "ok" for g in source.sample().gpus)
    fleet.nodes[1].stop()

    def b_stale() -> bool:
        gpus = source.sample().gpus
        return [g.state for g in gpus if g.host == "node-b"] == ["stale", "stale"]

    wait_for(b_stale, "node-b to turn stale")
    snapshot = source.sample()
    b = [g for g in snapshot.gpus if g.host == "node-b"]
    assert all(g.stale_s is not None and g.stale_s >= 0 for g in b)
    assert [g.used_bytes for g in b] == [512 * MIB, 600 * MIB]  # as it last reported
    assert [g.state for g in snapshot.gpus if g.host == "node-a"] == ["ok", "ok"]


def test_a_value_change_reaches_the_snapshot(fleet: Fleet) -> None:
    source = PrometheusSource(fleet.url)
    fleet.nodes[0].used_mib = [80000, 70100]
    wait_for(
        lambda: any(g.used_bytes == 80000 * MIB for g in source.sample().gpus),
        "the new value to be scraped",
    )


def test_prometheus_going_away_is_one_line(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    source = PrometheusSource(fleet.url, timeout_s=1.0)
    assert len(source.sample().gpus) == 4
    fleet.process.terminate()
    fleet.process.wait(timeout=20)
    snapshot = source.sample()
    assert snapshot.unavailable is not None
    assert snapshot.unavailable.startswith(f"cannot reach Prometheus at {fleet.url}")
    assert [g.state for g in snapshot.gpus] == ["stale"] * 4  # the last look, kept
    run = cli(capsys, "gpus", "--prometheus", fleet.url)
    assert run.code == 2
    lines = run.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: cannot reach Prometheus")


def test_an_empty_prometheus_names_what_it_looked_for(tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    assert binary, "Prometheus is needed: apt-get install prometheus (.ci/run installs it)"
    port = free_port()
    config = tmp_path / "empty.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs: []\n")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        source = PrometheusSource(f"http://127.0.0.1:{port}")

        def answering() -> bool:
            # Refused while it binds, HTTP 503 while its storage starts: not an answer yet.
            said = source.sample().unavailable or "cannot reach"
            return "cannot reach" not in said and "HTTP 503" not in said

        wait_for(answering, "Prometheus to answer")
        assert "no GPU exporter's series" in (source.sample().unavailable or "")
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_only_http_urls() -> None:
    with pytest.raises(ValueError, match="not an http"):
        PrometheusSource("file:///etc/passwd")
