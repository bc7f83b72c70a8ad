"""Prometheus answering what its API never does, and labels that try to drive the terminal.

The Prometheus here is a real HTTP server on 127.0.0.1 (`tests/hostile_http.py`) answering
`/api/v1/query` with JSON a test writes: `"data": [1, 2, 3]`, `"data": null`, result items that
are not objects, labels that are lists or objects, sample values `NaN`, `+Inf`, `1e400` and
5,000 digits, SGLang acceptance gauges at NaN or -3, and a `Hostname` label holding `\\x1b[2J`
(clear the screen). Each is a state of the snapshot or a left-out sample; `gpus` prints JSON
without NaN and text without a raw escape; the TUI's GPU panel shows the label's characters.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)
from textual.widgets import Static  # noqa: TID251 (a UI test drives Textual)

from eaglebug.gpu.prometheus import PrometheusSource
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import build_app
from eaglebug.tui.widgets.gpu_panel import GpuPanel
from tests.clirun import cli, refused
from tests.hostile_http import HostileServer
from tests.test_tui import FAST, run, until

CLEAR = "\x1b[2J"
RETITLE = "\x1b]0;pwned\x07"


def _sample(labels: dict[str, Any], value: str) -> dict[str, Any]:
    return {"metric": labels, "value": [1769769434.5, value]}


def _gpu(host: Any, gpu: Any, model: Any = "NVIDIA H100 80GB HBM3") -> dict[str, Any]:
    return {"Hostname": host, "gpu": gpu, "UUID": f"GPU-{gpu}", "modelName": model}


def prometheus(answer: Callable[[str], Any]) -> HostileServer:
    """A Prometheus whose `data` for each query is `answer(query)` (a `bytes` answer is sent
    as the whole body)."""

    def body(path: str) -> bytes:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query).get("query", [""])[0]
        data = answer(query)
        if isinstance(data, bytes):
            return data
        return json.dumps({"status": "success", "data": data}).encode()

    return HostileServer("json", body)


def vector(*items: Any) -> dict[str, Any]:
    return {"resultType": "vector", "result": list(items)}


def dcgm(
    used: Callable[[], list[Any]], serving: Callable[[], list[Any]] = list
) -> Callable[[str], Any]:
    """DCGM exporter series: `used()` is the FB_USED vector, the rest are plain."""

    def answer(query: str) -> Any:
        if query.startswith("count(DCGM_FI_DEV_FB_USED"):
            return vector(_sample({}, "2"))
        if query == "DCGM_FI_DEV_FB_USED":
            return vector(*used())
        if query.startswith("avg by (instance)"):
            return vector(*serving()) if "length" in query else vector()
        if query.startswith("time() - timestamp"):
            return vector(_sample(_gpu("node-a", "0"), "1.5"))
        if query == "DCGM_FI_DEV_FB_FREE":
            return vector(_sample(_gpu("node-a", "0"), "11559"))
        return vector()

    return answer


@pytest.mark.parametrize(
    "data",
    [[1, 2, 3], None, {"resultType": "vector", "result": None}, "vector", {"result": {}}],
    ids=["a list", "null", "result null", "a string", "result an object"],
)
def test_data_that_is_no_query_result_is_one_line(
    capsys: pytest.CaptureFixture[str], data: Any
) -> None:
    with prometheus(lambda query: data) as server:
        snapshot = PrometheusSource(server.url).sample()
        run = cli(capsys, "gpus", "--prometheus", server.url)
    assert snapshot.gpus == ()
    assert snapshot.unavailable is not None
    assert "did not answer like Prometheus' API" in snapshot.unavailable
    refused(run, "did not answer like Prometheus' API")


def test_items_that_are_not_objects_and_labels_that_are_not_text_are_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    used = [
        1,
        "x",
        None,
        [1, 2],
        _sample(_gpu(["node-a"], {"n": 0}), "100"),  # labels a list and an object
        {"metric": [], "value": [1.0, "200"]},  # metric itself a list
        {"metric": {}, "value": "300"},  # value not a pair
        _sample(_gpu("node-a", "0"), "70000"),  # the one real GPU
    ]
    with prometheus(dcgm(lambda: used)) as server:
        snapshot = PrometheusSource(server.url).sample()
        run = cli(capsys, "gpus", "--prometheus", server.url, "--json")
    assert run.code == 0, run.err
    real = [g for g in snapshot.gpus if g.host == "node-a"]
    assert [(g.index, g.used_bytes) for g in real] == [(0, 70000 * 2**20)]
    # labels that were not text are no label: the GPU of unknown node and index, not a crash
    others = [g for g in snapshot.gpus if g.host != "node-a"]
    assert {g.host for g in others} <= {"?"} and {g.index for g in others} <= {-1}
    assert json.loads(run.out)["nodes"][0]["gpus"]


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "1e400", "9" * 5000, "-5", "abc"])
def test_a_sample_that_is_no_reading_is_left_out(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    used = [_sample(_gpu("node-a", "0"), value), _sample(_gpu("node-a", "1"), "512")]
    with prometheus(dcgm(lambda: used)) as server:
        snapshot = PrometheusSource(server.url).sample()
        run = cli(capsys, "gpus", "--prometheus", server.url, "--json")
    assert [g.index for g in snapshot.gpus] == [1]
    assert run.code == 0, run.err
    assert "NaN" not in run.out and "Infinity" not in run.out
    json.loads(run.out)


@pytest.mark.parametrize("gauge", ["NaN", "+Inf", "-3", "1e400", "5000"])
def test_acceptance_gauges_that_are_no_reading_are_not_shown(
    capsys: pytest.CaptureFixture[str], gauge: str
) -> None:
    used = [_sample(_gpu("node-a", "0"), "512")]
    serving = [_sample({"instance": "10.0.0.1:30000"}, gauge)]
    with prometheus(dcgm(lambda: used, lambda: serving)) as server:
        snapshot = PrometheusSource(server.url).sample()
        text = cli(capsys, "gpus", "--prometheus", server.url)
        data = cli(capsys, "gpus", "--prometheus", server.url, "--json")
    assert snapshot.serving == ()
    assert "accept length" not in text.out
    assert json.loads(data.out)["serving"] == []


def test_a_real_gauge_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    used = [_sample(_gpu("node-a", "0"), "512")]
    serving = [_sample({"instance": "10.0.0.1:30000"}, "3.25")]
    with prometheus(dcgm(lambda: used, lambda: serving)) as server:
        text = cli(capsys, "gpus", "--prometheus", server.url)
    assert "SGLang 10.0.0.1:30000: accept length 3.25" in text.out


HOSTILE = [_sample(_gpu(f"node{CLEAR}", "0", model=f"H100{RETITLE}"), "512")]
HOSTILE_SERVING = [_sample({"instance": f"{CLEAR}evil:30000"}, "3.0")]


def test_labels_with_escape_sequences_are_shown_not_obeyed_by_the_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with prometheus(dcgm(lambda: HOSTILE, lambda: HOSTILE_SERVING)) as server:
        text = cli(capsys, "gpus", "--prometheus", server.url)
        data = cli(capsys, "gpus", "--prometheus", server.url, "--json")
    assert text.code == 0, text.err
    assert "\x1b" not in text.out and "\x07" not in text.out
    assert "node\\x1b[2J" in text.out and "H100\\x1b]0;pwned\\x07" in text.out
    assert "SGLang \\x1b[2Jevil:30000" in text.out
    # JSON keeps the label as it is (JSON escapes it: \u001b), for a program to read
    assert json.loads(data.out)["nodes"][0]["host"] == f"node{CLEAR}"
    assert "\x1b" not in data.out


def test_labels_with_escape_sequences_are_shown_not_obeyed_by_the_tui(tmp_path: Path) -> None:
    server = prometheus(dcgm(lambda: HOSTILE, lambda: HOSTILE_SERVING))
    log = tmp_path / "server.log"
    log.write_text("[2026-01-30 10:36:00] server_args=ServerArgs(tp_size=1)\n")
    session = Session(SessionConfig(tmp_path / "work", log_path=log, readonly=True))
    source = PrometheusSource(server.url)
    app = build_app(session, source, run_checks=False, **{**FAST, "sample_interval_s": 3600})

    def drawn(panel: GpuPanel) -> str:
        return "\n".join(str(s.render()) for s in panel.query(Static).results(Static))

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        panel = app.main.query_one(GpuPanel)
        await until(pilot, lambda: "evil" in drawn(panel), "the serving line")
        shown = drawn(panel)
        assert "\x1b" not in shown and "\\x1b[2Jevil:30000" in shown

    try:
        run(app, script)
    finally:
        server.close()
