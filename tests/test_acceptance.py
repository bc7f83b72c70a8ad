"""Acceptance as SGLang reports it, read with the wording of the audited release, and the
`runtime.low_acceptance` finding that names the likely causes preflight can check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eaglebug.checks.contract.evidence import RuntimeEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.logs.acceptance import (
    DEFAULT_RULES,
    Report,
    acceptance_rules,
    from_cumulative,
    from_log_line,
    from_metrics,
    low_acceptance,
    reports_in,
)
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.clirun import cli

READY = "[2026-01-30 10:37:47] The server is fired up and ready to roll!\n"


def decode_line(length: float, rate: float, second: int = 1) -> str:
    """A decode line as 0.5.9 (scheduler_metrics_mixin.py:390) and 0.5.23 print it."""
    return (
        f"[2026-01-30 10:38:{second:02d} TP0] Decode batch, #running-req: 12, #token: 4096, "
        f"token usage: 0.03, accept len: {length:.2f}, accept rate: {rate:.2f}, cuda graph: True, "
        "gen throughput (token/s): 312.30, #queue-req: 0, \n"
    )


@pytest.mark.parametrize(
    ("release", "where"),
    [
        ("sglang_059", "sglang/srt/managers/scheduler_metrics_mixin.py:390"),
        ("sglang_0523", "sglang/srt/managers/scheduler_components/metrics_reporter.py:1005"),
    ],
)
def test_the_wording_and_names_are_read_from_the_release(
    release: str, where: str, request: pytest.FixtureRequest
) -> None:
    root: Path = request.getfixturevalue(release)
    rules = acceptance_rules(TreeIndex(locate(str(root / "sglang")), use_cache=False))
    assert rules.source == where
    assert (rules.metric_length, rules.metric_rate) == (
        "sglang:spec_accept_length",
        "sglang:spec_accept_rate",
    )
    assert set(rules.server_info_paths) == {"/server_info", "/get_server_info"}
    report = from_log_line(decode_line(2.41, 0.62), rules)
    assert report == Report(2.41, 0.62, "log")
    assert rules.log_needle == "accept len: "


def test_a_tree_without_the_wording_falls_back(tmp_path: Path) -> None:
    (tmp_path / "sglang" / "srt").mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("")
    rules = acceptance_rules(TreeIndex(locate(str(tmp_path / "sglang")), use_cache=False))
    assert rules.log_rx.pattern == DEFAULT_RULES.log_rx.pattern


def test_server_info_averages_since_start_are_differenced() -> None:
    # 100 steps at 2.0, then 100 more at 1.0: the average since start says 1.5, the last
    # 100 steps accepted 1.0 each.
    first = from_cumulative(None, (2.0, 100))
    assert first == Report(2.0, None, "server_info")
    later = from_cumulative((2.0, 100), (1.5, 200))
    assert later is not None and later.length == pytest.approx(1.0)
    assert from_cumulative((1.5, 200), (1.5, 200)) is None  # nothing new between polls
    assert from_cumulative(None, (0.0, 0)) is None


def test_low_acceptance_needs_several_reports_below_the_threshold() -> None:
    low = [Report(1.0, 0.0, "log")] * 3
    assert low_acceptance(low[:2]) is None  # not enough yet
    assert low_acceptance([*low[:2], Report(2.5, 0.5, "log")]) is None  # it recovered
    found = low_acceptance(low)
    assert found is not None and found.id == "runtime.low_acceptance"
    assert found.severity == "error"  # ~1.0: no draft token accepted at all
    meh = low_acceptance([Report(1.15, 0.1, "log")] * 3)
    assert meh is not None and meh.severity == "warning"
    assert low_acceptance([Report(1.15, 0.1, "log")] * 3, threshold=1.1) is None


def test_the_causes_say_what_preflight_flagged() -> None:
    aux = Finding("config.aux_layers", "error", "ids past the target's layers", role="draft")
    found = low_acceptance(
        [Report(1.0, 0.0, "log")] * 3, preflight=[aux], launch_flags=["--enable-dp-attention"]
    )
    assert found is not None and "config.aux_layers" in found.message
    assert isinstance(found.evidence, RuntimeEvidence)
    causes = {c.check: c.flagged for c in found.evidence.causes}
    assert causes["config.aux_layers"] is True
    assert causes["config.vocab"] is False  # checked, nothing found
    assert causes["config.draft_lm_head"] is None  # no such check ran
    assert causes["--enable-dp-attention"] is True
    unknown = low_acceptance([Report(1.0, 0.0, "log")] * 3)
    assert unknown is not None and isinstance(unknown.evidence, RuntimeEvidence)
    assert {c.flagged for c in unknown.evidence.causes} == {None}


@pytest.mark.parametrize(("length", "rate", "found"), [(1.0, 0.0, True), (3.1, 0.7, False)])
def test_diagnose_reads_acceptance_from_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], length: float, rate: float, found: bool
) -> None:
    log = tmp_path / "server.log"
    log.write_text(READY + "".join(decode_line(length, rate, i) for i in range(1, 6)))
    run = cli(capsys, "diagnose", "--log", str(log), "--json")
    result = json.loads(run.out)
    ids = [f["id"] for f in result["findings"]]
    assert ("runtime.low_acceptance" in ids) is found
    assert result["acceptance"] == {"reports": 5, "last": length}
    assert run.code == (1 if found else 0)
    assert result["phase"] == "ready"


def test_reports_in_a_log_keep_their_order() -> None:
    text = decode_line(2.0, 0.5, 1) + "noise\n" + decode_line(1.0, 0.0, 2)
    assert [r.length for r in reports_in(text)] == [2.0, 1.0]


def test_metrics_gauges_are_read_by_their_tree_names() -> None:
    text = (
        "# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.\n"
        "# TYPE sglang:spec_accept_length gauge\n"
        'sglang:spec_accept_length{model_name="Kimi-K2.5",engine_type="unified",tp_rank="0"} 1.0\n'
        'sglang:spec_accept_rate{model_name="Kimi-K2.5",engine_type="unified",tp_rank="0"} 0.0\n'
        'sglang:num_running_reqs{model_name="Kimi-K2.5"} 12.0\n'
    )
    assert from_metrics(text) == Report(1.0, 0.0, "metrics")
    assert from_metrics("sglang:spec_accept_length 0.0\n") is None  # not set yet
    assert from_metrics("") is None
