"""`eaglebug preflight`: one launch command, every launch blocker, before the first launch.

The seed scenario (Kimi-K2.5 + its EAGLE-3 draft on SGLang 0.5.9) runs on the real release
trees; each config check is tested on both sides of its threshold with small configs
(`tests/configs.py`) against one shared, uncached index of the real 0.5.9 tree; launch parsing
uses the real flag tables of 0.5.9 (`add_argument` calls) and 0.5.23 (annotated fields).
"""

from __future__ import annotations

import ast
import gc
import json
import os
import pwd
import subprocess
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import eaglebug.cli.parser
import eaglebug.gpu.nvml
from eaglebug.checks.args import resolution
from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.launch.command import LaunchSpec, parse_launch, words_environment
from eaglebug.checks.launch.devices import GpuMemory
from eaglebug.checks.launch.flags import FlagSpec, server_flags
from eaglebug.checks.launch.gpuarch import GpuArch
from eaglebug.checks.orchestrator import PreflightResult, preflight
from eaglebug.checks.source.index import TreeIndex
from tests.configs import (
    GIB,
    KIMI,
    eagle3,
    kimi_k25,
    kimi_k25_eagle3,
    llama,
    write_hub_model,
    write_model,
)
from tests.synthetic import run_cli

ENV_VAR = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
LAUNCH = ("python", "-m", "sglang.launch_server")
GPU_80 = GpuMemory(80 * GIB, "--gpu-mem-gib")
SM90 = GpuArch((9, 0), "--gpu-arch sm90")
SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER_SHA = "fedcba9876543210fedcba9876543210fedcba98"


# -- shared trees and helpers -----------------------------------------------------------------
@pytest.fixture(scope="module")
def flags_059(index_059: TreeIndex) -> list[FlagSpec]:
    return server_flags(index_059)


@pytest.fixture(scope="module")
def flags_0523(index_0523: TreeIndex) -> list[FlagSpec]:
    return server_flags(index_0523)


@pytest.fixture(params=["0.5.9", "0.5.23"])
def release_flags(request: pytest.FixtureRequest) -> tuple[str, list[FlagSpec]]:
    """(version, flag table) of each release whose flags are declared differently."""
    name = "flags_059" if request.param == "0.5.9" else "flags_0523"
    return request.param, request.getfixturevalue(name)


def run(
    index: TreeIndex,
    *flags: str,
    environ: Mapping[str, str] | None = None,
    gpu: GpuMemory | None = None,
    before: Sequence[str] = (),
) -> PreflightResult:
    """Preflight `[before...] python -m sglang.launch_server FLAGS...` through the API."""
    return preflight(index, [*before, *LAUNCH, *flags], environ or {}, gpu)


def spec_pair(target: Path, draft: Path, *more: str) -> tuple[str, ...]:
    """The flags of an EAGLE-3 launch of `target` with `draft`."""
    return (
        "--model-path",
        str(target),
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        str(draft),
        *more,
    )


def errors(result: PreflightResult) -> list[Finding]:
    return [f for f in result.findings if f.severity == "error"]


def with_id(result: PreflightResult, finding_id: str) -> list[Finding]:
    return [f for f in result.findings if f.id == finding_id]


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, [f.message for f in findings]
    return findings[0]


def expected(result: PreflightResult, finding_id: str, found: bool) -> Finding | None:
    """The one finding with this id where the case should raise it; None (after checking
    there is none) where it should not."""
    if not found:
        assert with_id(result, finding_id) == []
        return None
    return only(with_id(result, finding_id))


def pair(tmp_path: Path, target: dict[str, Any], draft: dict[str, Any]) -> tuple[Path, Path]:
    return write_model(tmp_path / "target", target), write_model(tmp_path / "draft", draft)


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Callable[..., tuple[int, str, str]]]:
    """`eaglebug.cli.parser.main(argv)` in this process: (exit code, stdout, stderr).

    NVML reports no GPU (as on a host without a driver) unless a test patches it otherwise;
    main()'s gc tuning for short-lived processes is undone afterwards.
    """
    monkeypatch.setattr(eaglebug.gpu.nvml, "smallest_gpu_memory", lambda: None)
    monkeypatch.setattr(eaglebug.gpu.nvml, "compute_capability", lambda: None)
    monkeypatch.delenv(ENV_VAR, raising=False)
    thresholds = gc.get_threshold()

    def call(*argv: str) -> tuple[int, str, str]:
        try:
            code = eaglebug.cli.parser.main(list(argv))
        except SystemExit as exc:  # argparse's own usage errors
            assert isinstance(exc.code, int), exc.code
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    yield call
    gc.unfreeze()
    gc.set_threshold(*thresholds)


# -- 1. the seed scenario on the real 0.5.9 tree ----------------------------------------------
SEED_ERRORS = {
    ("interface.missing", "set_eagle3_layers_to_capture"),
    ("config.context_length", "max_position_embeddings"),
    ("interface.missing", "get_embed_and_head"),
}


@pytest.fixture
def kimi(tmp_path: Path) -> tuple[Path, Path]:
    return pair(tmp_path, kimi_k25(), kimi_k25_eagle3())


def seed_flags(kimi: tuple[Path, Path]) -> tuple[str, ...]:
    return (*spec_pair(*kimi), "--tp", "8", "--trust-remote-code")


def assert_delegation_fix(finding: Mapping[str, Any], method: str) -> None:
    """An interface finding whose fix is a generated method delegating to language_model."""
    assert finding["role"] == "target"
    assert finding["class"].endswith(KIMI)
    assert finding["delegate"] == "language_model"
    assert finding["call_sites"], finding
    fix = finding["fix"]
    assert finding["fix_detail"]["kind"] == "patch" and finding["fix_detail"]["method"] == fix
    tree = ast.parse(textwrap.dedent(fix))  # the method as the patch writes it, valid Python
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef) and function.name == method
    assert function.args.args[0].arg == "self"
    assert f"self.language_model.{method}(" in fix


def assert_context_fix(finding: Mapping[str, Any]) -> None:
    assert finding["role"] == "draft"
    assert ENV_VAR in finding["fix"]
    assert "--context-length 131072" in finding["fix"]
    details = finding["details"]
    assert details["target_context_length"] == 262144
    assert details["draft_max_position_embeddings"] == 131072
    options = details["options"]
    assert set(options) == {f"{ENV_VAR}=1", "--context-length 131072"}
    # Each option says what it costs.
    assert "acceptance" in options[f"{ENV_VAR}=1"]
    assert "131072" in options["--context-length 131072"]
    assert "reject" in options["--context-length 131072"]
    said = details["sglang_message"]
    assert "is greater than the derived context_length" in said
    assert "262144" in said and "131072" in said


def test_seed_scenario_on_059_through_the_api(
    index_059: TreeIndex, kimi: tuple[Path, Path]
) -> None:
    result = run(index_059, *seed_flags(kimi))
    assert result.version == "0.5.9"
    assert result.algorithm == "EAGLE3"
    assert result.target.how == "local folder" and result.draft is not None
    found = [(f.id, f.attribute) for f in errors(result)]
    assert len(found) == 3 and set(found) == SEED_ERRORS, found

    by_attr = {f.attribute: f.to_json() for f in errors(result)}
    assert_delegation_fix(by_attr["set_eagle3_layers_to_capture"], "set_eagle3_layers_to_capture")
    assert_delegation_fix(by_attr["get_embed_and_head"], "get_embed_and_head")
    capture_files = {s["file"] for s in by_attr["set_eagle3_layers_to_capture"]["call_sites"]}
    assert "sglang/srt/model_executor/model_runner.py" in capture_files
    assert_context_fix(by_attr["max_position_embeddings"])
    # Nothing else in the configs is wrong: the MLA KV heads, the vocab, the aux layer ids.
    config_problems = [
        (f.id, f.attribute)
        for f in result.findings
        if f.id.startswith("config.") and f.severity != "info"
    ]
    assert config_problems == [("config.context_length", "max_position_embeddings")]


def test_seed_scenario_on_059_through_the_cli_json(
    sglang_059: Path, kimi: tuple[Path, Path], cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = cli(
        "preflight", "--sglang", str(sglang_059), "--json", "--", *LAUNCH, *seed_flags(kimi)
    )
    assert code == 1, err
    assert "Traceback" not in err
    data = json.loads(out)
    assert data["sglang"]["version"] == "0.5.9"
    assert data["launch"]["program"] == list(LAUNCH)
    assert data["launch"]["server_args"]["tensor_parallel_size"] == "8"
    assert data["target"]["how"] == "local folder"
    found = [(f["id"], f["attribute"]) for f in data["findings"] if f["severity"] == "error"]
    assert len(found) == 3 and set(found) == SEED_ERRORS, found
    by_attr = {f["attribute"]: f for f in data["findings"] if f["severity"] == "error"}
    assert_delegation_fix(by_attr["set_eagle3_layers_to_capture"], "set_eagle3_layers_to_capture")
    assert_delegation_fix(by_attr["get_embed_and_head"], "get_embed_and_head")
    assert_context_fix(by_attr["max_position_embeddings"])


# -- 2. the same launch on 0.5.10, with the env var set ---------------------------------------
def assert_allowed_context(result: PreflightResult) -> None:
    assert errors(result) == [], [f.message for f in errors(result)]
    context = only(with_id(result, "config.context_length"))
    assert context.severity == "info"
    assert ENV_VAR in context.message


def test_0510_with_the_env_var_as_a_word_has_no_errors(
    index_0510: TreeIndex, kimi: tuple[Path, Path]
) -> None:
    result = run(index_0510, *seed_flags(kimi), before=[f"{ENV_VAR}=1"])
    assert result.launch.env_additions == {ENV_VAR: "1"}
    assert_allowed_context(result)


def test_0510_with_the_env_var_in_the_environment_has_no_errors(
    index_0510: TreeIndex, kimi: tuple[Path, Path]
) -> None:
    result = run(index_0510, *seed_flags(kimi), environ={ENV_VAR: "1"})
    assert result.launch.env_additions == {}
    assert_allowed_context(result)


def test_0510_without_the_env_var_still_refuses_the_context_length(
    index_0510: TreeIndex, kimi: tuple[Path, Path]
) -> None:
    result = run(index_0510, *seed_flags(kimi))
    assert [(f.id, f.severity) for f in errors(result)] == [("config.context_length", "error")]


def test_059_with_the_env_var_keeps_only_the_interface_errors(
    index_059: TreeIndex, kimi: tuple[Path, Path]
) -> None:
    result = run(index_059, *seed_flags(kimi), before=[f"{ENV_VAR}=1"])
    assert {f.attribute for f in errors(result)} == {
        "set_eagle3_layers_to_capture",
        "get_embed_and_head",
    }


def test_0510_cli_exits_zero_with_the_env_var_as_a_word(
    sglang_0510: Path, kimi: tuple[Path, Path], cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = cli(
        "preflight", "--sglang", str(sglang_0510), "--", f"{ENV_VAR}=1", *LAUNCH, *seed_flags(kimi)
    )
    assert code == 0, out + err
    assert "Traceback" not in err
    assert f"{ENV_VAR}=1" in out  # the text report shows the env the server will see


def test_0510_cli_exits_zero_with_the_env_var_in_the_environment(
    sglang_0510: Path,
    kimi: tuple[Path, Path],
    cli: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_VAR, "1")
    code, out, err = cli(
        "preflight", "--sglang", str(sglang_0510), "--json", "--", *LAUNCH, *seed_flags(kimi)
    )
    assert code == 0, err
    data = json.loads(out)
    assert [f for f in data["findings"] if f["severity"] == "error"] == []


# -- 3. each config check on both sides of its threshold ---------------------------------------
def test_a_consistent_pair_has_no_findings_above_info(index_059: TreeIndex, tmp_path: Path) -> None:
    target = write_model(tmp_path / "t", llama(), total_size=16 * GIB)
    draft = write_model(tmp_path / "d", eagle3(), total_size=1 * GIB)
    result = run(index_059, *spec_pair(target, draft, "--tp", "8"), gpu=GPU_80)
    assert [f.message for f in result.findings if f.severity != "info"] == []


# context length
@pytest.mark.parametrize(
    ("draft_len", "context", "blocked"),
    [
        (4096, None, True),  # draft shorter than the target's 8192
        (8192, None, False),  # equal
        (32768, None, False),  # longer
        (4096, "4096", False),  # --context-length at the draft's limit
        (4096, "4097", True),  # one past it
    ],
)
def test_context_length_draft_against_target(
    index_059: TreeIndex,
    tmp_path: Path,
    draft_len: int,
    context: str | None,
    blocked: bool,
) -> None:
    target, draft = pair(tmp_path, llama(), eagle3(max_position_embeddings=draft_len))
    more = ("--context-length", context) if context else ()
    result = run(index_059, *spec_pair(target, draft, *more))
    finding = expected(result, "config.context_length", blocked)
    if finding is None:
        return
    assert finding.severity == "error" and finding.role == "draft"
    assert finding.to_json()["details"]["draft_max_position_embeddings"] == draft_len
    assert finding.to_json()["details"]["target_context_length"] == int(context or 8192)
    assert ENV_VAR in (
        finding.fix.text() if finding.fix else ""
    ) and f"--context-length {draft_len}" in (finding.fix.text() if finding.fix else "")


@pytest.mark.parametrize(("context", "blocked"), [("8192", False), ("16384", True)])
def test_context_length_longer_than_the_targets_own_is_an_error(
    index_059: TreeIndex, tmp_path: Path, context: str, blocked: bool
) -> None:
    target, draft = pair(tmp_path, llama(), eagle3(max_position_embeddings=32768))
    result = run(index_059, *spec_pair(target, draft, "--context-length", context))
    finding = expected(result, "config.context_length", blocked)
    if finding is None:
        return
    assert finding.severity == "error" and finding.role == "target"
    assert isinstance(finding.evidence, ConfigEvidence)
    assert finding.evidence.to_json() == {"target_context_length": 8192, "requested": 16384}
    assert "--context-length 8192" in (finding.fix.text() if finding.fix else "")
    allowed = run(
        index_059, *spec_pair(target, draft, "--context-length", context), environ={ENV_VAR: "1"}
    )
    assert only(with_id(allowed, "config.context_length")).severity == "info"


def test_a_target_config_without_a_context_length_is_a_warning(
    index_059: TreeIndex, tmp_path: Path
) -> None:
    """Gemma-3's published config names no context length (transformers' config class supplies
    it, unread here): the draft's shorter one is said as a warning resting on that unknown,
    with the two ways around it; --context-length within the draft's, or the variable, leave
    nothing to say."""
    config = llama()
    del config["max_position_embeddings"]
    target, draft = pair(tmp_path, config, eagle3(max_position_embeddings=2048))
    finding = only(with_id(run(index_059, *spec_pair(target, draft)), "config.context_length"))
    assert finding.severity == "warning" and finding.role == "draft"
    assert "names no context length" in finding.message and "(2048)" in finding.message
    fix = finding.fix.text() if finding.fix else ""
    assert "--context-length 2048" in fix and ENV_VAR in fix
    within = run(index_059, *spec_pair(target, draft, "--context-length", "2048"))
    assert with_id(within, "config.context_length") == []
    allowed = run(index_059, *spec_pair(target, draft), environ={ENV_VAR: "1"})
    assert with_id(allowed, "config.context_length") == []


@pytest.mark.parametrize(
    ("rope_scaling", "target_len"),
    [
        ({"rope_type": "linear", "factor": 4.0}, 32768),  # no original length: multiplies
        ({"type": "yarn", "factor": 4.0}, 32768),
        ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}, 8192),
        ({"rope_type": "llama3", "factor": 8.0}, 8192),
    ],
)
def test_context_length_follows_sglangs_rope_scaling_rule(
    index_059: TreeIndex, tmp_path: Path, rope_scaling: dict[str, Any], target_len: int
) -> None:
    target, draft = pair(tmp_path, llama(rope_scaling=rope_scaling), eagle3())
    result = run(index_059, *spec_pair(target, draft))
    found = with_id(result, "config.context_length")
    if target_len == 8192:
        assert found == []
    else:
        assert only(found).to_json()["details"]["target_context_length"] == target_len


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        *[("1", True), ("true", True), ("YES", True), ("y", True)],
        *[("0", False), ("false", False), ("", False), ("on", False), ("2", False)],
    ],
)
def test_context_length_env_var_values_as_sglang_parses_them(
    index_059: TreeIndex, tmp_path: Path, value: str, allowed: bool
) -> None:
    # SGLang's EnvBool (0.5.9 .. 0.5.23): true is "true", "1", "yes", "y" (any case); any other
    # value is invalid, warned about, and the default (False) applies.
    target, draft = pair(tmp_path, llama(), eagle3(max_position_embeddings=4096))
    result = run(index_059, *spec_pair(target, draft), before=[f"{ENV_VAR}={value}"])
    assert only(with_id(result, "config.context_length")).severity == (
        "info" if allowed else "error"
    )


# vocab
@pytest.mark.parametrize(
    ("draft_overrides", "weight_map", "attribute"),
    [
        ({}, None, None),
        ({"vocab_size": 32000}, None, "vocab_size"),
        ({"draft_vocab_size": 128256}, None, None),
        ({"draft_vocab_size": 200000}, None, "draft_vocab_size"),
        (
            {"draft_vocab_size": 32000},
            {"midlayer.mlp.up_proj.weight": "model.safetensors"},
            "draft_vocab_size",
        ),
        (
            {"draft_vocab_size": 32000},
            {
                "midlayer.mlp.up_proj.weight": "model.safetensors",
                "d2t": "model.safetensors",
                "t2d": "model.safetensors",
            },
            None,
        ),
    ],
)
def test_vocab(
    index_059: TreeIndex,
    tmp_path: Path,
    draft_overrides: dict[str, Any],
    weight_map: dict[str, str] | None,
    attribute: str | None,
) -> None:
    target = write_model(tmp_path / "t", llama())
    draft = write_model(tmp_path / "d", eagle3(**draft_overrides), weight_map=weight_map)
    result = run(index_059, *spec_pair(target, draft))
    finding = expected(result, "config.vocab", attribute is not None)
    if finding is None:
        return
    assert (finding.severity, finding.role, finding.attribute) == ("error", "draft", attribute)


# hidden size
@pytest.mark.parametrize(
    ("draft_overrides", "attribute"),
    [
        ({"target_hidden_size": 5120}, "target_hidden_size"),
        ({"hidden_size": 2048, "target_hidden_size": 4096}, None),
        (
            {
                "hidden_size": 2048,
                "eagle_config": {
                    "eagle_aux_hidden_state_layer_ids": [1, 15, 28],
                    "target_hidden_size": 4096,
                },
            },
            None,
        ),
        ({"hidden_size": 5120}, "hidden_size"),  # nothing declared: the draft's own size counts
        ({}, None),
    ],
)
def test_hidden_size(
    index_059: TreeIndex,
    tmp_path: Path,
    draft_overrides: dict[str, Any],
    attribute: str | None,
) -> None:
    target, draft = pair(tmp_path, llama(), eagle3(**draft_overrides))
    result = run(index_059, *spec_pair(target, draft))
    finding = expected(result, "config.hidden_size", attribute is not None)
    if finding is None:
        return
    assert (finding.severity, finding.attribute) == ("error", attribute)
    assert finding.to_json()["details"]["target"] == 4096


# aux layers: judged after LlamaForCausalLM's own `[val + 1 for val in layer_ids]` (0.5.9), so
# id 31 of 32 layers becomes capture layer 32, which the forward's `range(32)` never reaches, and
# -1 becomes layer 0 (the embeddings), which it does (tests/test_auxlayers.py has the rest).
@pytest.mark.parametrize(
    ("ids", "outside"),
    [([0, 15, 30], []), ([0, 15, 31], [32]), ([1, 15, 32], [33]), ([-1, 3, 5], [])],
)
def test_aux_layer_ids_inside_the_targets_layers(
    index_059: TreeIndex, tmp_path: Path, ids: list[int], outside: list[int]
) -> None:
    target, draft = pair(
        tmp_path, llama(), eagle3(eagle_config={"eagle_aux_hidden_state_layer_ids": ids})
    )
    result = run(index_059, *spec_pair(target, draft))
    finding = expected(result, "config.aux_layers", bool(outside))
    if finding is None:
        return
    assert finding.severity == "error"
    details = finding.to_json()["details"]
    assert (details["ids"], details["target_layers"]) == (ids, 32)
    assert details["captured"] == [i + 1 for i in ids]
    assert details["read_from"].startswith("sglang/srt/models/llama.py:")
    assert str(outside) in finding.message


# tensor parallel divisibility (target only: no draft, no audit)
@pytest.mark.parametrize(
    ("heads", "kv_heads", "mla", "tp", "attribute"),
    [
        (64, 8, False, 8, None),
        (64, 2, False, 6, "num_attention_heads"),
        (64, 8, False, 16, None),  # 8 KV heads replicate evenly over 16 ranks
        (24, 6, False, 4, "num_key_value_heads"),
        (24, 3, False, 8, "num_key_value_heads"),  # 3 neither splits nor replicates over 8
        (24, 6, True, 4, None),  # MLA: no per-head KV to split
    ],
)
def test_tp_divisibility(
    index_059: TreeIndex,
    tmp_path: Path,
    heads: int,
    kv_heads: int,
    mla: bool,
    tp: int,
    attribute: str | None,
) -> None:
    config = llama(num_attention_heads=heads, num_key_value_heads=kv_heads)
    if mla:
        config["kv_lora_rank"] = 512
    target = write_model(tmp_path / "t", config)
    result = run(index_059, "--model-path", str(target), "--tp", str(tp))
    finding = expected(result, "config.tp_divisibility", attribute is not None)
    if finding is None:
        return
    assert (finding.severity, finding.role, finding.attribute) == ("error", "target", attribute)
    assert finding.to_json()["details"]["tp"] == tp


def test_tp_divisibility_checks_the_draft_too(index_059: TreeIndex, tmp_path: Path) -> None:
    target, draft = pair(tmp_path, llama(), eagle3(num_key_value_heads=6))
    result = run(index_059, *spec_pair(target, draft, "--tp-size", "4"))
    finding = only(with_id(result, "config.tp_divisibility"))
    assert (finding.role, finding.attribute) == ("draft", "num_key_value_heads")


# unregistered architecture
def test_unregistered_target_architecture_names_the_closest(
    index_059: TreeIndex, tmp_path: Path
) -> None:
    target = write_model(tmp_path / "t", llama(architectures=["LlamaForCasualLM"]))
    result = run(index_059, "--model-path", str(target))
    finding = only(with_id(result, "config.unregistered_architecture"))
    assert (finding.severity, finding.role, finding.class_) == (
        "error",
        "target",
        "LlamaForCasualLM",
    )
    assert "LlamaForCausalLM" in finding.to_json()["details"]["closest"]
    assert "LlamaForCausalLM" in (finding.fix.text() if finding.fix else "")


def test_unregistered_draft_architecture_is_an_error_and_registered_is_not(
    index_059: TreeIndex, tmp_path: Path
) -> None:
    target, draft = pair(tmp_path, llama(), eagle3(architectures=["LlamaForCausalLMEagle33"]))
    result = run(index_059, *spec_pair(target, draft))
    finding = only(with_id(result, "config.unregistered_architecture"))
    assert (finding.role, finding.class_) == ("draft", "LlamaForCausalLMEagle33")
    assert "LlamaForCausalLMEagle3" in finding.to_json()["details"]["closest"]
    good_target, good_draft = pair(tmp_path / "good", llama(), eagle3())
    assert (
        with_id(
            run(index_059, *spec_pair(good_target, good_draft)), "config.unregistered_architecture"
        )
        == []
    )


def only_json(out: str, finding_id: str) -> dict[str, Any] | None:
    found = [f for f in json.loads(out)["findings"] if f["id"] == finding_id]
    assert len(found) <= 1, found
    return found[0] if found else None


# -- 4. launch parsing on the real flag tables -------------------------------------------------
def value(launch: LaunchSpec, flags: list[FlagSpec], option: str) -> object:
    """The launch's value for a flag, whatever dest this release gives it."""
    dest = next(spec.dest for spec in flags if option in spec.options)
    return launch.get(dest)


@pytest.mark.parametrize(
    ("words", "program"),
    [
        (["python", "-m", "sglang.launch_server"], ("python", "-m", "sglang.launch_server")),
        (["python3", "-m", "sglang.launch_server"], ("python3", "-m", "sglang.launch_server")),
        (
            ["/opt/venv/bin/python3.11", "-m", "sglang.launch_server"],
            ("/opt/venv/bin/python3.11", "-m", "sglang.launch_server"),
        ),
        (
            ["python3", "/src/sglang/python/sglang/launch_server.py"],
            ("python3", "/src/sglang/python/sglang/launch_server.py"),
        ),
        (["sglang", "serve"], ("sglang", "serve")),
        (["/opt/venv/bin/sglang", "serve"], ("/opt/venv/bin/sglang", "serve")),
        ([], ()),
    ],
)
def test_program_forms(
    release_flags: tuple[str, list[FlagSpec]], words: list[str], program: tuple[str, ...]
) -> None:
    version, flags = release_flags
    launch = parse_launch([*words, "--model-path", "org/model", "--tp-size", "8"], flags, version)
    assert launch.program == program
    assert launch.argv[: len(program)] == program
    assert value(launch, flags, "--model-path") == "org/model"
    assert value(launch, flags, "--tp-size") == "8"


@pytest.mark.parametrize(
    "words",
    [
        ["taskset", "-c", "0-7", "uv", "run", "python", "-m", "sglang.launch_server"],
        ["numactl", "--interleave", "all", "-N0", "--localalloc", *LAUNCH],
        ["nohup", "sglang", "serve"],
        ["uv", "run", "--with", "vllm", "--no-sync", "python", "-m", "sglang.launch_server"],
        ["conda", "run", "-n", "sglang", "--no-capture-output", *LAUNCH],
        ["timeout", "-k", "30", "--signal=INT", "2h", *LAUNCH],
        ["timeout", "-k5", "-v", "600", "stdbuf", "-oL", "-e", "L", *LAUNCH],
        ["nohup", "env", "-u", "PYTHONPATH", "CUDA_VISIBLE_DEVICES=0,1", *LAUNCH],
        ["env", "-i", "-C", "/srv", "HOME=/root", "sglang", "serve"],
        # Slurm: `-N 1`, `-n1`, `--gres gpu:8` take values; `-l`, `--exclusive`
        # (its value only ever attached) and `-K1` do not take the next word.
        ["srun", "-N", "1", "-n1", "-l", "--exclusive", "--gres", "gpu:8", "-K1", *LAUNCH],
        ["srun", "--nodes=2", "--ntasks-per-node=1", "--", "numactl", "-N0", *LAUNCH],
        # sudo 1.9: `-u` takes a value, `-E` and `-n` do not, `NAME=VALUE` words may follow
        ["sudo", "-nEu", "svc", "--preserve-env=HF_HOME", "CUDA_VISIBLE_DEVICES=0", *LAUNCH],
        ["sudo", "docker", "run", "--gpus", "all", "--ipc=host", "img", *LAUNCH],
    ],
)
def test_program_forms_run_through_wrappers(
    release_flags: tuple[str, list[FlagSpec]], words: list[str]
) -> None:
    """As launch scripts in the wild write it: each wrapper's own options and operands (a
    value that is not an option: `0-7`, `all`, `vllm`, `sglang`) are part of the program,
    the server's flags follow, and the launch runs with the wrapper."""
    test_program_forms(release_flags, words, tuple(words))


def test_a_command_not_sglangs_nor_a_known_wrapper_is_refused(
    release_flags: tuple[str, list[FlagSpec]],
) -> None:
    """A usage error (exit 2) with a hint that names the wrappers read; a wrapper with
    nothing of SGLang's to run after its options is no launch."""
    version, flags = release_flags
    refused = (
        ["mpirun", "-np", "1", *LAUNCH],
        ["uv", "run", "--with", "vllm"],  # `--model-path` read as uv's switch, `m` the program
        ["env", "-S", "python -m sglang.launch_server", "--tp", "2"],  # `-S`'s own syntax
        ["srun", "-N"],  # `-N` takes `--model-path` as getopt would, `m` the program
        ["sudo", "-e", *LAUNCH],  # sudoedit: no command runs
        ["sudo", "-R", "/jail", *LAUNCH],  # a chroot every path would be read in
    )
    for words in refused:
        with pytest.raises(InputError) as raised:
            parse_launch([*words, "--model-path", "m"], flags, version)
        assert "`uv run`, `conda run`" in str(raised.value.hint)
    with pytest.raises(InputError, match=r"^`timeout 600` runs no SGLang server command$"):
        parse_launch(["timeout", "600", "--model-path", "m"], flags, version)


def test_env_words_before_the_command(release_flags: tuple[str, list[FlagSpec]]) -> None:
    version, flags = release_flags
    launch = parse_launch(
        [f"{ENV_VAR}=1", "CUDA_VISIBLE_DEVICES=0,1", "OPTS=a=b", *LAUNCH, "--model-path", "m"],
        flags,
        version,
    )
    assert launch.env_additions == {ENV_VAR: "1", "CUDA_VISIBLE_DEVICES": "0,1", "OPTS": "a=b"}
    assert launch.program == LAUNCH
    assert launch.argv == (*LAUNCH, "--model-path", "m")
    # The words win over the environment they are run in, and add to it.
    assert launch.env({ENV_VAR: "0", "HOME": "/h"}) == {
        ENV_VAR: "1",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "OPTS": "a=b",
        "HOME": "/h",
    }


def test_env_command_form(release_flags: tuple[str, list[FlagSpec]]) -> None:
    version, flags = release_flags
    launch = parse_launch(["env", f"{ENV_VAR}=1", *LAUNCH, "--model-path", "m"], flags, version)
    assert launch.env_additions == {ENV_VAR: "1"}
    assert launch.program == LAUNCH


def test_an_env_among_the_wrappers_changes_what_the_server_sees(
    release_flags: tuple[str, list[FlagSpec]],
) -> None:
    """`env` after another wrapper (or with options) runs the server: its words stay in the
    program, and the environment the checks read is the one it leaves, in order: set by the
    words before the command, then each `env`'s `-i`, `-u NAME` and `NAME=VALUE`."""
    version, flags = release_flags
    words = [
        f"{ENV_VAR}=1", "A=outer", "nohup", "env", "-u", ENV_VAR, "--unset=HOME", "B=2",
        "taskset", "-c", "0-3", "env", "A=inner", *LAUNCH, "--model-path", "m",
    ]  # fmt: skip
    launch = parse_launch(words, flags, version)
    assert launch.env_additions == {ENV_VAR: "1", "A": "outer"}
    assert launch.program == (*words[2:13], *LAUNCH)
    assert launch.env({"HOME": "/h", "PATH": "/bin"}) == {"A": "inner", "B": "2", "PATH": "/bin"}
    srun = ["srun", "--export=NONE", "env", "A=1", *LAUNCH]  # Slurm passes its own only
    assert parse_launch(srun, flags, version).env({"B": "2", "SLURM_JOB_ID": "7"}) == {
        "SLURM_JOB_ID": "7",
        "A": "1",
    }
    named = ["srun", "--export", "B,C=3", *LAUNCH]
    assert parse_launch(named, flags, version).env({"B": "2", "D": "4"}) == {"B": "2", "C": "3"}
    everything = ["srun", "--export=ALL,C=3", *LAUNCH]
    assert parse_launch(everything, flags, version).env({"D": "4"}) == {"D": "4", "C": "3"}
    by_variable = parse_launch(["srun", *LAUNCH], flags, version)  # srun's input variable
    assert by_variable.env({"SLURM_EXPORT_ENV": "B", "B": "2", "D": "4"}) == {
        "SLURM_EXPORT_ENV": "B",  # Slurm's own pass
        "B": "2",
    }
    # sudo with sudoers' env_reset: only what -E / --preserve-env keep, the target's HOME
    root_home = pwd.getpwuid(0).pw_dir
    shell = {"SGLANG_X": "1", "HF_HOME": "/hf", "HOME": "/home/me", "PATH": "/bin"}
    reset = parse_launch(["sudo", "-n", "A=1", *LAUNCH], flags, version).env(shell)
    assert reset == {"USER": "root", "LOGNAME": "root", "HOME": root_home, "A": "1"}
    kept = parse_launch(["sudo", "--preserve-env=HF_HOME,NONE", *LAUNCH], flags, version)
    assert kept.env(shell) == {
        "HF_HOME": "/hf",
        "USER": "root",
        "LOGNAME": "root",
        "HOME": root_home,
    }
    assert parse_launch(["sudo", "-E", *LAUNCH], flags, version).env(shell) == shell
    nobody = parse_launch(["sudo", "-u", "no-such-user-here", *LAUNCH], flags, version)
    assert "HOME" not in nobody.env(shell)  # not known: not this shell's either
    cleared = parse_launch(["env", "-", "C=3", *LAUNCH], flags, version)
    assert cleared.program == ("env", "-", "C=3", *LAUNCH)
    assert cleared.env({"HOME": "/h"}) == {"C": "3"}
    assert parse_launch(["env", "-i", *LAUNCH], flags, version).env({"HOME": "/h"}) == {}


def test_what_a_launcher_must_pass_survives_each_env_that_would_drop_it() -> None:
    from eaglebug.checks import carrying

    tag = {"T": "1", "U": "2"}
    assert carrying([*LAUNCH, "--tp", "2"], tag) == [*LAUNCH, "--tp", "2"]
    assert carrying(["nohup", "env", "A=1", *LAUNCH], tag) == ["nohup", "env", "A=1", *LAUNCH]
    assert carrying(["sudo", "-n", "A=1", *LAUNCH], tag) == [
        "sudo", "-n", "A=1", "T=1", "U=2", *LAUNCH,
    ]  # fmt: skip
    assert carrying(["env", "-u", "T", "A=1", "env", "-", *LAUNCH], tag) == [
        "env", "-u", "T", "A=1", "T=1", "env", "-", "T=1", "U=2", *LAUNCH,
    ]  # fmt: skip
    # srun passes an export list's names (and sets its NAME=VALUE): the tag joins the list
    assert carrying(["srun", "--export=NONE", *LAUNCH], tag) == [
        "srun", "--export=T=1,U=2", *LAUNCH,
    ]  # fmt: skip
    assert carrying(["srun", "-N", "1", "--export", "B", *LAUNCH], tag) == [
        "srun", "-N", "1", "--export", "B,T=1,U=2", *LAUNCH,
    ]  # fmt: skip
    assert carrying(["srun", "--export=ALL", *LAUNCH], tag) == ["srun", "--export=ALL", *LAUNCH]
    quiet = {"SLURM_EXPORT_ENV": "NONE"}  # srun's input variable for --export
    assert carrying(["srun", *LAUNCH], tag, quiet) == ["srun", "--export=T=1,U=2", *LAUNCH]
    assert carrying(["srun", *LAUNCH], tag) == ["srun", *LAUNCH]
    shapes = (
        ["env", "-i", "srun", "--export=NONE", *LAUNCH],
        ["sudo", "srun", "--export", "NONE", "env", "-u", "T", *LAUNCH],
        ["srun", "--export=HOME", "sudo", "-n", *LAUNCH],
    )
    for shape in shapes:  # whatever drops it, the command sees the tag
        for env in ({"HOME": "/h", **tag}, {"SLURM_EXPORT_ENV": "NONE", **tag}):
            seen = words_environment(carrying(shape, tag, env), env)[0]
            assert {k: seen.get(k) for k in tag} == tag, shape


def test_a_script_line_with_redirections_is_the_command_they_wrap(
    release_flags: tuple[str, list[FlagSpec]],
) -> None:
    """A launch line copied from a script keeps its output redirections and `&`: they do not
    change the command (the launcher writes the log itself); a pipe or a list is a script."""
    version, flags = release_flags
    pasted = (
        "CUDA_VISIBLE_DEVICES=0,1 nohup python -m sglang.launch_server --model-path m --tp 2 "
        "> server.log 2>&1 &"
    )
    launch = parse_launch([pasted], flags, version)
    assert launch.argv == ("nohup", *LAUNCH, "--model-path", "m", "--tp", "2")
    execed = parse_launch([f"A=1 exec {' '.join(LAUNCH)} --tp 2"], flags, version)
    assert execed.argv == (*LAUNCH, "--tp", "2") and execed.env_additions == {"A": "1"}
    glued = parse_launch(
        [f"{' '.join(LAUNCH)} --tp 2 >>/tmp/x.log 2> err.log </dev/null"], flags, version
    )
    assert glued.argv == (*LAUNCH, "--tp", "2")
    for script in (f"{' '.join(LAUNCH)} --tp 2 | tee log", f"cd /x && {' '.join(LAUNCH)}"):
        with pytest.raises(InputError, match="a shell pipeline or list"):
            parse_launch([script], flags, version)


def test_a_quoted_operator_is_a_value_and_a_glued_one_an_operator(
    release_flags: tuple[str, list[FlagSpec]],
) -> None:
    """The shell reads `|`, `;`, `>` as operators only where they are not quoted or escaped:
    `--served-model-name '|'` is a value, `'>kimi'` is not a redirection, and `m;echo` is a
    list as surely as `m ; echo` (`x>log` a redirection after the word `x`)."""
    version, flags = release_flags
    launch = " ".join(LAUNCH)
    for quoted, name in (("'|'", "|"), ('">kimi"', ">kimi"), ("a\\;b", "a;b"), ("'2>&1'", "2>&1")):
        pasted = parse_launch(
            [f"{launch} --served-model-name {quoted} --tp 2 >log"], flags, version
        )
        assert value(pasted, flags, "--served-model-name") == name
        assert value(pasted, flags, "--tp-size") == "2"
    glued = parse_launch([f"{launch} --model-path m>server.log --tp 2&"], flags, version)
    assert value(glued, flags, "--model-path") == "m" and value(glued, flags, "--tp-size") == "2"
    for script, operator in (
        (f"{launch} --model-path m;echo done", ";"),
        (f"{launch}&&true", "&&"),
    ):
        with pytest.raises(InputError, match=rf"pipeline or list \('{operator}' in it\)"):
            parse_launch([script], flags, version)


def test_one_pasted_shell_string_with_backslash_newlines(
    release_flags: tuple[str, list[FlagSpec]],
) -> None:
    version, flags = release_flags
    pasted = (
        f"{ENV_VAR}=1 python -m sglang.launch_server \\\n"
        "    --model-path '/models/Kimi K2.5' \\\n"
        "    --speculative-algorithm EAGLE3 \\\n"
        "    --json-model-override-args '{\"a\": 1}' \\\n"
        "    --tp 8 \\\n"
        "    --trust-remote-code\n"
    )
    launch = parse_launch([pasted], flags, version)
    assert launch.env_additions == {ENV_VAR: "1"}
    assert launch.program == LAUNCH
    assert value(launch, flags, "--model-path") == "/models/Kimi K2.5"
    assert value(launch, flags, "--speculative-algorithm") == "EAGLE3"
    assert value(launch, flags, "--json-model-override-args") == '{"a": 1}'
    assert value(launch, flags, "--tp-size") == "8"
    assert value(launch, flags, "--trust-remote-code") is True


@pytest.mark.parametrize(
    "tail",
    [
        "--model-path /m/ll\\\nama --tp 8",  # inside a word: bash joins it, one word
        "--tp 8 \\\n  --model-path /m/llama",
        '--model-path "/m/ll\\\nama" --tp 8',  # inside double quotes: joined too
        "--model-path '/m/ll\\\nama' --tp 8",  # inside single quotes: kept as written
        '--model-path "/m/q\\"\\\nr" --tp 8',
    ],
)
def test_backslash_newline_as_bash_reads_it(
    release_flags: tuple[str, list[FlagSpec]], tail: str
) -> None:
    """A `\\` line continuation is removed where bash removes it, not made a space: the
    model path of a pasted line and of a `bash -c` string is the one bash would pass."""
    version, flags = release_flags
    said = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {tail}"], capture_output=True, text=True, check=True
    ).stdout.split("\0")[:-1]
    want = said[said.index("--model-path") + 1]
    line = " ".join(LAUNCH)
    for argv in ([f"{line} {tail}"], ["bash", "-c", f"exec {line} {tail}"]):
        launch = parse_launch(argv, flags, version)
        assert value(launch, flags, "--model-path") == want, argv
        assert value(launch, flags, "--tp-size") == "8"


def test_flag_equals_value(release_flags: tuple[str, list[FlagSpec]]) -> None:
    version, flags = release_flags
    launch = parse_launch(
        ["--model-path=/m", "--tp=4", '--json-model-override-args={"x":"a=b"}'], flags, version
    )
    assert value(launch, flags, "--model-path") == "/m"
    assert value(launch, flags, "--tp-size") == "4"
    assert value(launch, flags, "--json-model-override-args") == '{"x":"a=b"}'


@pytest.mark.parametrize(
    ("model_flag", "tp_flag"),
    [
        ("--model", "--tp-size"),
        ("--model-path", "--tensor-parallel-size"),
        ("--model", "--tp"),  # unique prefix of --tp-size
        ("--model-path", "--tensor-par"),  # unique prefix of the long alias
    ],
)
def test_aliases_and_unique_prefixes(
    release_flags: tuple[str, list[FlagSpec]], model_flag: str, tp_flag: str
) -> None:
    version, flags = release_flags
    launch = parse_launch([model_flag, "/m", tp_flag, "2"], flags, version)
    assert value(launch, flags, "--model-path") == "/m"
    assert value(launch, flags, "--tp-size") == "2"
    tp_dest = next(spec.dest for spec in flags if "--tp-size" in spec.options)
    assert launch.spelled[tp_dest] == tp_flag


def test_tp_size_comes_from_add_argument_in_059_and_an_annotated_field_in_0523(
    flags_059: list[FlagSpec], flags_0523: list[FlagSpec]
) -> None:
    old = next(spec for spec in flags_059 if "--tp-size" in spec.options)
    assert old.file == "sglang/srt/server_args.py"
    assert set(old.options) == {"--tp-size", "--tensor-parallel-size"}
    assert (old.dest, old.nargs) == ("tensor_parallel_size", "1")
    new = next(spec for spec in flags_0523 if "--tp-size" in spec.options)
    assert new.file.startswith("sglang/srt/arg_groups/fields/")
    assert set(new.options) == {"--tp-size", "--tensor-parallel-size"}
    assert (new.dest, new.nargs) == ("tp_size", "1")
    assert parse_launch(["--tp", "8"], flags_0523, "0.5.23").values == {"tp_size": "8"}


def test_list_values_and_optional_values(flags_059: list[FlagSpec]) -> None:
    launch = parse_launch(
        ["--cuda-graph-bs", "1", "2", "4", "--model-checksum", "--model-path", "m"],
        flags_059,
        "0.5.9",
    )
    assert launch.values["cuda_graph_bs"] == ["1", "2", "4"]
    assert launch.values["model_checksum"] is True
    assert launch.values["model_path"] == "m"


def test_negative_numbers_are_values(release_flags: tuple[str, list[FlagSpec]]) -> None:
    version, flags = release_flags
    launch = parse_launch(
        ["--speculative-eagle-topk", "-1", "--random-seed", "-42", "--model-path", "m"],
        flags,
        version,
    )
    assert value(launch, flags, "--speculative-eagle-topk") == "-1"
    assert value(launch, flags, "--random-seed") == "-42"
    assert value(launch, flags, "--model-path") == "m"


def parse_error(words: list[str], flags: list[FlagSpec], version: str) -> InputError:
    with pytest.raises(InputError) as caught:
        parse_launch(words, flags, version)
    return caught.value


def test_ambiguous_prefix_lists_the_candidates(release_flags: tuple[str, list[FlagSpec]]) -> None:
    version, flags = release_flags
    error = parse_error(["--model-path", "m", "--speculative-draft", "d"], flags, version)
    assert "ambiguous" in error.message and version in error.message
    for candidate in ("--speculative-draft-model-path", "--speculative-draft-model-revision"):
        assert candidate in error.message
    assert error.hint


def test_a_flag_renamed_between_releases(
    flags_059: list[FlagSpec], flags_0523: list[FlagSpec]
) -> None:
    words = ["--model-path", "m", "--cuda-graph-bs", "8"]
    assert parse_launch(words, flags_059, "0.5.9").values["cuda_graph_bs"] == ["8"]
    error = parse_error(words, flags_0523, "0.5.23")
    assert "--cuda-graph-bs-decode" in error.message
    assert "--cuda-graph-bs-prefill" in error.message


def test_unknown_flag_suggests_the_closest(release_flags: tuple[str, list[FlagSpec]]) -> None:
    version, flags = release_flags
    error = parse_error(["--model-path", "m", "--tp-szie", "2"], flags, version)
    assert error.message == f"unknown flag --tp-szie for SGLang {version}"
    assert error.hint is not None and "--tp-size" in error.hint
    nothing_close = parse_error(["--zzzz-qqqq"], flags, version)
    assert "unknown flag --zzzz-qqqq" in nothing_close.message


@pytest.mark.parametrize(
    ("words", "needle"),
    [
        (["--model-path", "m", "--trust-remote-code=yes"], "takes no value"),
        (["--model-path", "m", "--trust-remote-code", "yes"], "'yes'"),
        (["--model-path"], "--model-path needs a value"),
        (["--model-path", "m", "--tp", "--trust-remote-code"], "--tp needs a value"),
        (["--model-path", "m", "stray"], "'stray'"),
    ],
)
def test_values_that_do_not_fit_their_flag(
    release_flags: tuple[str, list[FlagSpec]], words: list[str], needle: str
) -> None:
    version, flags = release_flags
    assert needle in parse_error(words, flags, version).message


@pytest.mark.parametrize(
    "words",
    [
        ["python", "train.py", "--model-path", "m"],
        ["python", "-m", "sglang.bench_serving", "--model-path", "m"],
        ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
        ["vllm", "serve", "m"],
        ["sglang", "bench", "--model-path", "m"],
        ["torchrun", "--nproc-per-node", "8", "serve.py"],
        [],
        ["CUDA_VISIBLE_DEVICES=0"],
    ],
)
def test_a_program_that_is_not_sglangs_server(flags_059: list[FlagSpec], words: list[str]) -> None:
    error = parse_error(words, flags_059, "0.5.9")
    assert error.hint is not None and "sglang" in error.hint


def test_memory_and_attention_share_one_run_of_the_resolution(
    index_0523: TreeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory stage reads the fields the tree resolves for the launch, the attention check
    the backends: the same run of the tree's resolution (target, draft, GPU), made once."""
    runs: list[tuple[int, int] | None] = []
    real = resolution._resolve

    def counted(*args: Any) -> Any:
        runs.append(args[2])
        return real(*args)

    monkeypatch.setattr(resolution, "_resolve", counted)
    target = write_model(tmp_path / "llama", llama(), total_size=16_060_522_496)
    draft = write_model(tmp_path / "draft", eagle3())
    words = [*LAUNCH, *spec_pair(target, draft)]
    # (the module's index: another launch's run is kept under other inputs, its paths among them)
    result = preflight(index_0523, words, {}, GpuMemory(141 * GIB, "--gpu-mem-gib"), SM90)
    memory = only(with_id(result, "config.memory"))
    assert "predicted max_total_num_tokens=" in memory.message
    # The request limit is the one the tree's resolution set for an EAGLE-3 launch, not its
    # field default: the memory stage read it from the run the attention check made.
    assert "max_running_requests=48" in memory.message
    assert "sm90" in only(with_id(result, "config.attention_backend")).message
    assert runs == [(9, 0)]


# `sglang serve` takes more than the server's flags on newer trees (sglang/cli/serve.py).
def test_sglang_serve_positional_model_path_on_0523(index_0523: TreeIndex, tmp_path: Path) -> None:
    # 0.5.23's `_normalize_positional_model_path`: `sglang serve MODEL ...` is `--model-path MODEL`.
    target = write_model(tmp_path / "t", llama())
    result = preflight(index_0523, ["sglang", "serve", str(target), "--tp", "8"], {}, None)
    assert result.target.path == target
    assert errors(result) == []


def test_sglang_serve_positional_model_path_is_refused_by_0510(
    index_0510: TreeIndex, tmp_path: Path
) -> None:
    target = write_model(tmp_path / "t", llama())
    with pytest.raises(InputError):
        preflight(index_0510, ["sglang", "serve", str(target), "--tp", "8"], {}, None)


def test_sglang_serve_model_type_override_on_0510(index_0510: TreeIndex, tmp_path: Path) -> None:
    # 0.5.10's `_extract_model_type_override` removes `--model-type {auto,llm,diffusion}` before
    # the server's own parser sees the rest.
    target = write_model(tmp_path / "t", llama())
    words = ["sglang", "serve", "--model-path", str(target), "--model-type", "llm", "--tp", "8"]
    result = preflight(index_0510, words, {}, None)
    assert result.target.path == target
    assert errors(result) == []


def test_sglang_serve_model_type_is_unknown_to_059(index_059: TreeIndex, tmp_path: Path) -> None:
    target = write_model(tmp_path / "t", llama())
    words = ["sglang", "serve", "--model-path", str(target), "--model-type", "llm"]
    with pytest.raises(InputError, match="unknown flag --model-type"):
        preflight(index_059, words, {}, None)


@pytest.mark.parametrize("tp", ["0", "-8"])
def test_a_tp_size_below_one_is_not_accepted_silently(
    index_059: TreeIndex, tmp_path: Path, tp: str
) -> None:
    target = write_model(tmp_path / "t", llama())
    try:
        result = run(index_059, "--model-path", str(target), "--tp", tp)
    except InputError as exc:
        assert "--tp" in exc.message
        return
    assert errors(result), f"--tp {tp} passed preflight: {[f.message for f in result.findings]}"


# -- 5. models in the Hugging Face cache ----------------------------------------------------------
REPO = "eaglebug-test/tiny-llama"
DRAFT_REPO = "eaglebug-test/tiny-llama-eagle3"


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from tmp_path, so `org/name` can never be a local folder by accident."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_hub_id_resolves_through_hf_hub_cache(index_059: TreeIndex, in_tmp: Path) -> None:
    hub = in_tmp / "hub"
    snapshot = write_hub_model(hub, REPO, llama(), sha=SHA)
    result = run(index_059, "--model-path", REPO, environ={"HF_HUB_CACHE": str(hub)})
    assert result.target.path == snapshot
    assert result.target.how == f"Hugging Face cache ({SHA[:12]})"
    assert result.target.config == llama()
    assert with_id(result, "config.model_unavailable") == []


def test_hub_id_resolves_through_hf_home(index_059: TreeIndex, in_tmp: Path) -> None:
    home = in_tmp / "hf-home"
    snapshot = write_hub_model(home / "hub", REPO, llama(), sha=SHA)
    result = run(index_059, "--model-path", REPO, environ={"HF_HOME": str(home)})
    assert result.target.path == snapshot


def test_hub_cache_given_as_a_word_of_the_launch(index_059: TreeIndex, in_tmp: Path) -> None:
    hub = in_tmp / "hub"
    snapshot = write_hub_model(hub, REPO, llama(), sha=SHA)
    result = run(index_059, "--model-path", REPO, before=[f"HF_HUB_CACHE={hub}"])
    assert result.target.path == snapshot


def test_hub_revisions(index_059: TreeIndex, in_tmp: Path) -> None:
    hub = in_tmp / "hub"
    main = write_hub_model(hub, REPO, llama(), sha=SHA)
    # A newer snapshot that refs/main does not point at (e.g. fetched with --revision).
    newer = write_hub_model(hub, REPO, llama(max_position_embeddings=4096), sha=OTHER_SHA, ref=None)
    os.utime(main, (1_000_000, 1_000_000))
    os.utime(newer, (2_000_000, 2_000_000))
    environ = {"HF_HUB_CACHE": str(hub)}

    assert run(index_059, "--model-path", REPO, environ=environ).target.path == main
    pinned = run(index_059, "--model-path", REPO, "--revision", OTHER_SHA, environ=environ)
    assert pinned.target.path == newer

    missing = run(index_059, "--model-path", REPO, "--revision", "v9.9", environ=environ)
    assert not missing.target.found
    warning = only(with_id(missing, "config.model_unavailable"))
    assert (warning.severity, warning.role) == ("warning", "target")
    assert "revision v9.9 is not in the cache" in warning.message
    # The fix fetches that revision's JSON files: all the checks read, before the weights.
    fix = warning.fix.text() if warning.fix else ""
    assert f"hf download {REPO} --revision v9.9 --include '*.json'" in fix


def test_missing_target_is_a_warning_that_names_what_was_skipped(
    index_059: TreeIndex, in_tmp: Path
) -> None:
    hub = in_tmp / "hub"
    hub.mkdir()
    result = run(index_059, "--model-path", REPO, "--tp", "6", environ={"HF_HUB_CACHE": str(hub)})
    warning = only(with_id(result, "config.model_unavailable"))
    assert (warning.severity, warning.role) == ("warning", "target")
    assert "not downloaded" in warning.message
    assert "skipped: the target's interface audit and every config check" in warning.message
    fix = warning.fix.text() if warning.fix else ""
    assert f"hf download {REPO} --include '*.json'" in fix  # the configs, not the weights
    assert "huggingface-cli" not in fix  # gone from huggingface_hub 1.x
    assert errors(result) == []


def test_missing_local_folder_is_not_told_to_download(index_059: TreeIndex, in_tmp: Path) -> None:
    """A path that names no folder (a typo, an unmounted disk) is not a hub id: the fix is
    the path, not a download of it."""
    result = run(index_059, "--model-path", "./models/llama-8b")
    warning = only(with_id(result, "config.model_unavailable"))
    assert warning.message.startswith("target model ./models/llama-8b: no such local folder;")
    fix = warning.fix.text() if warning.fix else ""
    assert fix == "pass the folder that holds the target model's config.json"


def test_missing_draft_skips_only_the_draft_checks(index_059: TreeIndex, in_tmp: Path) -> None:
    hub = in_tmp / "hub"
    # The draft is not downloaded; the target's 32 heads still do not split over --tp 6.
    write_hub_model(hub, REPO, llama(num_key_value_heads=2), sha=SHA)
    result = run(
        index_059,
        "--model-path",
        REPO,
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        DRAFT_REPO,
        "--tp",
        "6",
        environ={"HF_HUB_CACHE": str(hub)},
    )
    assert result.target.found and result.draft is not None and not result.draft.found
    warning = only(with_id(result, "config.model_unavailable"))
    assert (warning.severity, warning.role) == ("warning", "draft")
    assert DRAFT_REPO in warning.message
    assert "skipped: the draft's interface audit and the target-vs-draft checks" in warning.message
    tp = only(with_id(result, "config.tp_divisibility"))
    assert (tp.severity, tp.role, tp.attribute) == ("error", "target", "num_attention_heads")
    for skipped in ("config.vocab", "config.hidden_size", "config.aux_layers"):
        assert with_id(result, skipped) == []


# -- 6. bad input through the CLI -------------------------------------------------------------
def assert_usage_error(code: int, out: str, err: str, needle: str) -> None:
    assert code == 2, (out, err)
    assert "Traceback" not in err
    assert "internal error" not in err, err
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 2, lines
    assert lines[0].startswith("error: ") and needle in lines[0], lines
    assert all(line.startswith("hint: ") for line in lines[1:]), lines
    assert out == ""


def bad_models(root: Path) -> dict[str, Path]:
    (root / "empty").mkdir(parents=True)
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"],')
    nameless = llama()
    del nameless["architectures"]
    write_model(root / "nameless", nameless)
    write_model(root / "ok", llama())
    return {p.name: p for p in root.iterdir()}


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("no launch command", "no launch command"),
        ("only --", "no launch command"),
        ("unbalanced quote", "does not parse"),
        ("folder without config.json", "no config.json"),
        ("invalid JSON", "invalid JSON"),
        ("draft with invalid JSON", "invalid JSON"),
        ("no architectures", "architectures"),
        ("unknown flag", "unknown flag --speculative-algo-rithm"),
        ("non-numeric --tp", "--tp eight: expected an integer"),
        ("non-integer --tp", "expected an integer"),
        ("no --model-path", "--model-path"),
        ("--gpu-mem-gib 0", "--gpu-mem-gib"),
        ("--gpu-mem-gib -8", "--gpu-mem-gib"),
        ("--gpu-mem-gib eighty", "--gpu-mem-gib"),
    ],
)
def test_bad_input_exits_2_with_one_error_line(
    sglang_059: Path,
    tmp_path: Path,
    cli: Callable[..., tuple[int, str, str]],
    case: str,
    needle: str,
) -> None:
    models = bad_models(tmp_path)
    ok = str(models["ok"])

    def launch(*flags: str) -> tuple[str, ...]:
        return ("--", *LAUNCH, *flags)

    tails: dict[str, tuple[str, ...]] = {
        "no launch command": (),
        "only --": ("--",),
        "unbalanced quote": ("--", f"python -m sglang.launch_server --model-path '{ok}"),
        "folder without config.json": launch("--model-path", str(models["empty"])),
        "invalid JSON": launch("--model-path", str(models["broken"])),
        "draft with invalid JSON": launch(*spec_pair(models["ok"], models["broken"])),
        "no architectures": launch("--model-path", str(models["nameless"])),
        "unknown flag": launch("--model-path", ok, "--speculative-algo-rithm", "EAGLE3"),
        "non-numeric --tp": launch("--model-path", ok, "--tp", "eight"),
        "non-integer --tp": launch("--model-path", ok, "--tp", "8.5"),  # SGLang: type=int
        "no --model-path": launch("--tp", "8"),
        "--gpu-mem-gib 0": ("--gpu-mem-gib", "0", *launch("--model-path", ok)),
        "--gpu-mem-gib -8": ("--gpu-mem-gib", "-8", *launch("--model-path", ok)),
        "--gpu-mem-gib eighty": ("--gpu-mem-gib", "eighty", *launch("--model-path", ok)),
    }
    code, out, err = cli("preflight", "--sglang", str(sglang_059), "--json", *tails[case])
    assert_usage_error(code, out, err, needle)


def test_bad_input_in_a_real_child_process(sglang_059: Path, tmp_path: Path) -> None:
    broken = bad_models(tmp_path)["broken"]
    proc = run_cli(
        "preflight",
        "--sglang",
        str(sglang_059),
        "--",
        *LAUNCH,
        "--model-path",
        str(broken),
        "--tp",
        "8",
    )
    assert_usage_error(proc.returncode, proc.stdout, proc.stderr, "invalid JSON")
    assert str(broken / "config.json") in proc.stderr
