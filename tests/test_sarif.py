"""`--format sarif` on `audit`, `preflight` and `matrix`, on sglang 0.5.9's real tree: valid
against the official SARIF 2.1.0 schema (tests/fixtures/sarif/SOURCE.md) by `jsonschema`,
accepted by Microsoft's `sarif-tools`, and its fix is the patch `eaglebug fix` writes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.clirun import Run, cli

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "tests/fixtures/sarif/sarif-schema-2.1.0.json").read_text())
KIMI = "KimiK25ForConditionalGeneration"
MINI = REPO / "examples" / "sglang-mini"


def _valid(text: str) -> dict[str, Any]:
    log: dict[str, Any] = json.loads(text)
    errors = [e.message for e in jsonschema.Draft4Validator(SCHEMA).iter_errors(log)]
    assert errors == []
    assert log["version"] == "2.1.0"
    return log


def _consumed(log: dict[str, Any], tmp_path: Path) -> str:
    """What `sarif summary` and `sarif ls` (sarif-tools) say of the file; both must accept it."""
    path = tmp_path / "eaglebug.sarif"
    path.write_text(json.dumps(log))
    tool = shutil.which("sarif")
    assert tool is not None, "sarif-tools is in the test extra"
    listed = subprocess.run([tool, "ls", str(path)], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "eaglebug.sarif" in listed.stdout
    summary = subprocess.run([tool, "summary", str(path)], capture_output=True, text=True)
    assert summary.returncode == 0, summary.stderr
    return summary.stdout


def _accepted(run: Run, code: int, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """The run exited `code` with valid SARIF on stdout that sarif-tools takes: the log, and
    what `sarif summary` says of it."""
    assert run.code == code, run.err
    log = _valid(run.out)
    return log, _consumed(log, tmp_path)


def _apply(text: str, replacements: list[dict[str, Any]]) -> str:
    """A SARIF fix applied the way a consumer applies it: regions by character offset,
    from the last to the first."""
    for r in sorted(replacements, key=lambda r: -r["deletedRegion"]["charOffset"]):
        start = r["deletedRegion"]["charOffset"]
        end = start + r["deletedRegion"]["charLength"]
        text = text[:start] + r["insertedContent"]["text"] + text[end:]
    return text


def test_audit_sarif_is_valid_located_and_carries_the_fix(
    capsys: pytest.CaptureFixture[str], sglang_059: Path, tmp_path: Path
) -> None:
    run = cli(
        capsys, "audit", "--sglang", str(sglang_059), "--model-class", KIMI, "--format", "sarif"
    )
    log, summary = _accepted(run, 1, tmp_path)
    assert "error: 2" in summary and "warning: 1" in summary
    (sarif_run,) = log["runs"]
    rules = [r["id"] for r in sarif_run["tool"]["driver"]["rules"]]
    assert rules == ["interface.missing"]
    results = {r["properties"]["attribute"]: r for r in sarif_run["results"]}
    capture = results["set_eagle3_layers_to_capture"]
    assert capture["level"] == "error" and capture["ruleId"] == "interface.missing"
    assert rules[capture["ruleIndex"]] == capture["ruleId"]
    source = (sglang_059 / "sglang/srt/models/kimi_k25.py").read_text()
    class_line = 1 + source.splitlines().index(
        next(line for line in source.splitlines() if line.startswith(f"class {KIMI}("))
    )
    (location,) = capture["locations"]
    assert location["physicalLocation"]["artifactLocation"] == {
        "uri": "sglang/srt/models/kimi_k25.py",
        "uriBaseId": "SRCROOT",
    }
    assert location["physicalLocation"]["region"]["startLine"] == class_line
    base = sarif_run["originalUriBaseIds"]["SRCROOT"]["uri"]
    assert base == sglang_059.resolve().as_uri() + "/"
    sites = {
        (
            site["physicalLocation"]["artifactLocation"]["uri"],
            site["physicalLocation"]["region"]["startLine"],
        )
        for site in capture["relatedLocations"]
    }
    assert ("sglang/srt/model_executor/cuda_graph_runner.py", 365) in sites
    # The fix: what `eaglebug fix` plans for the class, applied by offsets, gives its patch.
    (fix,) = capture["fixes"]
    (change,) = fix["artifactChanges"]
    patched = _apply(source, change["replacements"])
    plan = cli(capsys, "fix", "--sglang", str(sglang_059), "--model-class", KIMI, "--json")
    (patch,) = json.loads(plan.out)["patches"]
    expected = "".join(
        line[1:] for line in patch["diff"].splitlines(keepends=True)[2:] if line[:1] in " +"
    )
    assert "def set_eagle3_layers_to_capture(self" in patched
    assert "return self.language_model.get_embed_and_head()" in patched
    assert all(line in patched for line in expected.splitlines())
    compile(patched, "kimi_k25.py", "exec")  # the file still parses


def test_preflight_sarif_places_config_findings_at_the_rule(
    capsys: pytest.CaptureFixture[str], sglang_059: Path, tmp_path: Path
) -> None:
    run = cli(
        capsys,
        "preflight",
        "--sglang",
        str(sglang_059),
        "--format",
        "sarif",
        "--gpu-mem-gib",
        "80",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(MINI / "model"),
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        str(MINI / "draft"),
        "--tp",
        "8",
    )
    log, _summary = _accepted(run, 1, tmp_path)
    results = log["runs"][0]["results"]
    rules = {r["ruleId"] for r in results}
    assert "interface.missing" in rules and "config.context_length" in rules
    context = next(r for r in results if r["ruleId"] == "config.context_length")
    (location,) = context["locations"]
    assert location["physicalLocation"]["artifactLocation"]["uri"].startswith("sglang/srt/")


def test_matrix_sarif_and_compare_sarif(
    capsys: pytest.CaptureFixture[str],
    sglang_058post1: Path,
    sglang_059: Path,
    tmp_path: Path,
) -> None:
    run = cli(
        capsys,
        "matrix",
        "--sglang",
        str(sglang_058post1),
        "--compare",
        str(sglang_059),
        "--format",
        "sarif",
    )
    log, _summary = _accepted(run, 0, tmp_path)
    results = log["runs"][0]["results"]
    kimi = [r for r in results if r["properties"]["class"].endswith(KIMI)]
    assert {r["properties"]["algorithm"] for r in kimi} == {"EAGLE", "EAGLE3"}
    assert all(
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        == "sglang/srt/models/kimi_k25.py"
        for r in kimi
    )
    assert any("fixes" in r for r in kimi if r["level"] == "error")


def test_sarif_paths_are_relative_to_the_repository_holding_the_tree(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """In a checkout (`python/sglang/...` under the repository root), code scanning matches
    paths from the repository root."""
    repo = tmp_path / "sglang-checkout"
    shutil.copytree(MINI / "python", repo / "python")
    (repo / ".git").mkdir()  # a repository's root, as far as the paths go
    run = cli(capsys, "audit", "--sglang", str(repo), "--model-class", KIMI, "--format", "sarif")
    log = _valid(run.out)
    base = log["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"]
    assert base == repo.resolve().as_uri() + "/"
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
    }
    assert uris == {"python/sglang/srt/models/kimi_k25.py"}
