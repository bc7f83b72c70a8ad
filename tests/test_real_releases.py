"""Acceptance on real SGLang releases (unpacked wheels from `pip download`)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.interface.audit import AuditResult, audit
from eaglebug.checks.interface.targets import _RUNNER_CALL, runner_calls
from eaglebug.checks.reach.consumers import is_candidate
from eaglebug.checks.reach.resolve import consumers
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.clirun import FINDING_KEYS
from tests.live import run_eaglebug

KIMI = "KimiK25ForConditionalGeneration"


def run_audit(
    root: Path, cls: str, algorithm: str = "EAGLE3", draft: str | None = None
) -> AuditResult:
    return audit(TreeIndex(locate(str(root)), use_cache=False), cls, algorithm, draft)


def by_attr(findings: list[Finding], severity: str) -> dict[str, Finding]:
    return {f.attribute or "": f for f in findings if f.severity == severity}


def site_set(f: Finding) -> set[tuple[str, int]]:
    return {(s.file, s.line) for s in f.call_sites}


def test_kimi_on_059_reports_the_two_launch_blockers(sglang_059: Path) -> None:
    result = run_audit(sglang_059, KIMI)
    errors = by_attr(result.findings, "error")
    assert set(errors) == {"set_eagle3_layers_to_capture", "get_embed_and_head"}

    capture = errors["set_eagle3_layers_to_capture"]
    assert capture.id == "interface.missing"
    assert capture.role == "target"
    files = {s.file for s in capture.call_sites}
    assert "sglang/srt/model_executor/model_runner.py" in files
    assert "sglang/srt/model_executor/cuda_graph_runner.py" in files
    assert capture.delegate == "language_model"
    assert capture.to_json()["details"]["delegate_class"] == [
        "sglang.srt.models.deepseek_v2.DeepseekV3ForCausalLM"
    ]
    assert (
        capture.fix is not None
        and "self.language_model.set_eagle3_layers_to_capture(layer_ids)" in capture.fix.text()
    )

    head = errors["get_embed_and_head"]
    assert ("sglang/srt/speculative/eagle_worker.py", 157) in site_set(head)
    assert head.delegate == "language_model"
    for site in head.call_sites:
        assert "get_embed_and_head" in site.code

    warnings = by_attr(result.findings, "warning")
    assert "set_embed_and_head" in warnings
    family = warnings["set_embed_and_head"]
    assert family.delegate == "language_model"
    assert "draft" in family.message
    assert {s.file for s in family.call_sites} >= {"sglang/srt/speculative/eagle_worker.py"}


def test_kimi_on_0510_has_no_interface_errors(sglang_0510: Path) -> None:
    result = run_audit(sglang_0510, KIMI)
    assert [f for f in result.findings if f.severity == "error"] == []
    provided = dict(result.reports[0].provided)
    for name in ("set_eagle3_layers_to_capture", "get_embed_and_head"):
        assert provided[name].owner.endswith(KIMI)


def test_kimi_on_0523_has_no_interface_errors(sglang_0523: Path) -> None:
    result = run_audit(sglang_0523, KIMI)
    assert [f for f in result.findings if f.severity == "error"] == []


def test_0523_consumers_are_found_in_the_new_layout(sglang_0523: Path) -> None:
    uses = consumers(TreeIndex(locate(str(sglang_0523)), use_cache=False))
    where = {(u.use.attribute, u.file) for u in uses}
    assert (
        "set_eagle3_layers_to_capture",
        "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py",
    ) in where
    # get_embed_and_head arrives through a helper that receives the target model as a parameter.
    reached = [u for u in uses if u.use.attribute == "get_embed_and_head" and u.role == "target"]
    assert reached, "the target's get_embed_and_head consumer was not found"
    assert any(
        v.startswith("sglang/srt/speculative/eagle_worker_v2.py:") for u in reached for v in u.via
    )
    assert not (sglang_0523 / "sglang/srt/speculative/eagle_worker.py").exists()


@pytest.fixture
def overlay_0523(sglang_0523: Path, tmp_path: Path) -> Path:
    """The 0.5.23 tree hard-linked into tmp, with one new wrapper model file added."""
    root = tmp_path / "tree"
    shutil.copytree(sglang_0523 / "sglang", root / "sglang", copy_function=os.link)
    (root / "sglang/srt/models/bare_wrapper.py").write_text(
        "from torch import nn\n"
        "from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM\n\n\n"
        "class BareWrapperForConditionalGeneration(nn.Module):\n"
        "    def __init__(self, config, quant_config=None):\n"
        "        super().__init__()\n"
        "        self.language_model = DeepseekV3ForCausalLM(config.text_config, quant_config)\n\n"
        "    def forward(self, input_ids, positions, forward_batch):\n"
        "        return self.language_model(input_ids, positions, forward_batch)\n\n\n"
        "EntryClass = [BareWrapperForConditionalGeneration]\n"
    )
    return root


def test_wrapper_lacking_methods_on_0523_is_reported_at_the_new_call_sites(
    overlay_0523: Path,
) -> None:
    result = run_audit(overlay_0523, "BareWrapperForConditionalGeneration")
    errors = by_attr(result.findings, "error")
    assert {"set_eagle3_layers_to_capture", "get_embed_and_head"} <= set(errors)
    capture_files = {s.file for s in errors["set_eagle3_layers_to_capture"].call_sites}
    assert (
        "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py"
        in capture_files
    )
    head_files = {s.file for s in errors["get_embed_and_head"].call_sites}
    assert "sglang/srt/speculative/pp_draft_embedding.py" in head_files
    assert errors["get_embed_and_head"].delegate == "language_model"


def test_deepseek_v3_on_059_inherits_everything(sglang_059: Path) -> None:
    result = run_audit(sglang_059, "DeepseekV3ForCausalLM")
    assert [f for f in result.findings if f.severity in {"error", "warning"}] == []
    provided = dict(result.reports[0].provided)
    assert provided["get_embed_and_head"].owner.endswith("DeepseekV2ForCausalLM")
    assert provided["set_eagle3_layers_to_capture"].owner.endswith("DeepseekV2ForCausalLM")


def test_eagle3_draft_class_on_059_is_complete_in_the_draft_role(sglang_059: Path) -> None:
    result = run_audit(sglang_059, KIMI, draft="LlamaForCausalLMEagle3")
    draft = [f for f in result.findings if f.role == "draft" and f.severity == "error"]
    assert draft == []
    provided = dict(result.reports[1].provided)
    assert {"set_embed", "hot_token_id"} <= set(provided)


def test_cli_json_on_059_follows_the_findings_contract(sglang_059: Path) -> None:
    proc = run_eaglebug("audit", "--sglang", str(sglang_059), "--model-class", KIMI, "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["sglang"]["version"] == "0.5.9"
    for finding in data["findings"]:
        assert set(finding) >= FINDING_KEYS
        assert finding["severity"] in {"error", "warning", "info"}
        for site in finding["call_sites"]:
            assert set(site) == {"file", "line", "code"}
    errors = {f["attribute"] for f in data["findings"] if f["severity"] == "error"}
    assert errors == {"set_eagle3_layers_to_capture", "get_embed_and_head"}


def test_cli_on_0510_exits_zero(sglang_0510: Path) -> None:
    proc = run_eaglebug("audit", "--sglang", str(sglang_0510), "--model-class", KIMI)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "provides everything EAGLE3 needs" in proc.stdout


def test_model_path_resolves_through_the_entryclass_registry(
    sglang_059: Path, tmp_path: Path
) -> None:
    model = tmp_path / "kimi"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"architectures": [KIMI], "model_type": "kimi_k25"})
    )
    proc = run_eaglebug("audit", "--sglang", str(sglang_059), "--model-path", str(model), "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["classes"][0]["class"] == f"sglang.srt.models.kimi_k25.{KIMI}"


def test_warm_cache_gives_the_same_findings(sglang_059: Path) -> None:
    tree = locate(str(sglang_059))
    cold = audit(TreeIndex(tree), KIMI)
    warm_index = TreeIndex(tree)
    assert all(e.parsed for e in warm_index.entries.values() if is_candidate(e))
    warm = audit(warm_index, KIMI)
    assert [f.to_json() for f in cold.findings] == [f.to_json() for f in warm.findings]


def test_the_runner_calls_are_found_as_the_whole_pattern_finds_them(
    sglang_059: Path, sglang_0523: Path
) -> None:
    """`runner_calls` looks for its pattern from each `unner` after an `R`/`r`, for speed:
    over every runtime file of two releases it must find what the pattern with its leading
    `[Rr]` finds, in the same order (the two differ if a match could start elsewhere)."""
    whole = re.compile(b"[Rr]" + _RUNNER_CALL.pattern)
    found = 0
    for root in (sglang_059, sglang_0523):
        for path in sorted((root / "sglang" / "srt").rglob("*.py")):
            data = path.read_bytes()
            expected = [m.decode() for m in whole.findall(data)]
            assert runner_calls(data) == expected, path
            found += len(expected)
    assert found > 500  # the releases do call methods on runners
    assert runner_calls(b"Runner.x() runner[0].y( xrunner.z (") == ["x", "y", "z"]
