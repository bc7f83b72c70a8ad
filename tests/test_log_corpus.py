"""`eaglebug diagnose` on a corpus of real SGLang logs, each as a user copied it into a public
issue or PR thread (tests/fixtures/logs/corpus/: the log, its source URL, what it must yield).

Every log is read twice, through the fast whole-file scan and by feeding every line, and both
must agree; then `eaglebug diagnose --json` must report its expected findings (errors unless the
fixture says warning), none of the findings a naive reader would wrongly report, the phase the
log ends in, and the phase the launch crashed in where the log shows it. The ready logs must
carry no error at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.logs.parse import analyze_file, analyze_text
from tests.clirun import cli
from tests.logjson import CORPUS_PHASE, comparable, strict_misses

CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"
EXPECTED = sorted(CORPUS.glob("*.json"))
PHASE = CORPUS_PHASE
CATEGORIES = (
    "missing_interface_method context_length unsupported_architecture oom nccl port_in_use "
    "config_mismatch weights_or_path cuda_error cuda_graph_capture tokenizer "
    "backend_unsupported warmup rank_desync hang other"
).split()
# Read strictly (exactly the expected findings, severities and phases), every case but these
# reads exactly: a bare TypeError of another crash pasted above the request-length failure
# (dsr1_input_exceeds_max_allowed_length_tp8: a log.other too), and a DP fragment whose ranks
# the paste cut mid-step (flashmla_no_kernel_image_quoted_dsv32: a log.rank_desync pointer too).
STRICT_MISSES_AT_MOST = 2


def _case(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_the_corpus_is_real_sourced_and_covers_every_category() -> None:
    assert len(EXPECTED) >= 80
    seen: set[str] = set()
    ready = 0
    for path in EXPECTED:
        case = _case(path)
        assert case["source"].startswith("https://github.com/"), path.name
        assert (CORPUS / f"{path.stem}.log").stat().st_size > 0
        seen |= {f.removeprefix("log.") for f in case["expect"]["findings"]}
        ready += case["expect"]["phase"] == "ready"
    assert set(CATEGORIES) <= seen, set(CATEGORIES) - seen
    assert ready >= 5


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda p: p.stem)
def test_diagnose_reads_the_real_log(expected: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = _case(expected)
    want = case["expect"]
    log = CORPUS / f"{expected.stem}.log"
    fast = analyze_file(log).to_json()
    assert comparable(fast) == comparable(analyze_text(log.read_text(errors="replace")).to_json())

    run = cli(capsys, "diagnose", "--log", str(log), "--json")
    assert run.code in {0, 1}, run.err
    result = json.loads(run.out)
    severity = {f["id"]: f["severity"] for f in result["findings"]}
    for finding in want["findings"]:
        assert finding in severity, (finding, severity, case["what"])
        assert severity[finding] == want.get("severity", {}).get(finding, "error") or (
            finding == "log.rank_desync"  # a pointer to the ranks behind: either severity
        ), (finding, severity)
    for wrong in want["not"]:
        assert wrong not in severity, (wrong, severity)
    if want["phase"]:
        assert result["phase"] == PHASE.get(want["phase"], want["phase"])
    if want["crashed_during"]:
        assert result["crashed_during"] == PHASE.get(want["crashed_during"], want["crashed_during"])
    if want["phase"] == "ready":
        assert "error" not in severity.values(), severity
        assert run.code == 0


def test_the_corpus_reads_strictly() -> None:
    """The pass count with strict severity (issue 22): exactly each case's findings."""
    missed = {}
    for expected in EXPECTED:
        case = _case(expected)
        got = analyze_file(CORPUS / f"{expected.stem}.log").to_json()
        wrong = strict_misses(case, got)
        if wrong:
            missed[expected.stem] = wrong
    assert len(missed) <= STRICT_MISSES_AT_MOST, missed
