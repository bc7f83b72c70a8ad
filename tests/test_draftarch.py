"""The draft role is audited on the class SGLang really loads as the draft.

`ModelConfig._config_draft_model` renames architectures in draft mode (read from the tree): an
EAGLE launch whose draft is an ERNIE-4.5-MoE checkpoint loads `Ernie4_5_MoeForCausalLMMTP`,
which has what the draft worker calls, where the plain `Ernie4_5_MoeForCausalLM` lacks
`set_embed_and_head` (a false error before). Without a draft path, where the tree makes the
target checkpoint the draft (DeepSeek-V3 under EAGLE), that draft-mode class is audited too.
Real releases 0.5.14 and 0.5.23 (and 0.5.22 for the rename table)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.models.draft_arch import draft_renames
from eaglebug.checks.orchestrator import PreflightResult, preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate

LAUNCH = ("python", "-m", "sglang.launch_server")
# ERNIE-4.5-21B-A3B's published sizes (baidu/ERNIE-4.5-21B-A3B-PT config.json).
ERNIE = {
    "architectures": ["Ernie4_5_MoeForCausalLM"],
    "model_type": "ernie4_5_moe",
    "hidden_size": 2560,
    "num_hidden_layers": 28,
    "num_attention_heads": 20,
    "num_key_value_heads": 4,
    "vocab_size": 103424,
    "max_position_embeddings": 131072,
}
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
}


def release_index(request: pytest.FixtureRequest, version: str) -> TreeIndex:
    folder = request.getfixturevalue("sglang_0" + version.replace(".", "")[1:])
    return TreeIndex(locate(str(folder)), use_cache=False)


@pytest.fixture(params=["0.5.14", "0.5.23"])
def mtp_index(request: pytest.FixtureRequest) -> TreeIndex:
    """A release that drafts with a model's own MTP layers (0.5.14 and the newest)."""
    return release_index(request, request.param)


def model(tmp_path: Path, name: str, config: dict[str, Any]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def draft_reports(result: PreflightResult) -> list[str]:
    return [r.ref.qualname.rsplit(".", 1)[-1] for r in result.reports if r.role == "draft"]


@pytest.mark.parametrize("version", ["0.5.14", "0.5.22", "0.5.23"])
def test_rename_table_is_read_from_model_config(
    request: pytest.FixtureRequest, version: str
) -> None:
    index = release_index(request, version)
    renamed = draft_renames(index).of("DeepseekV3ForCausalLM")
    assert renamed is not None and renamed[0] == "DeepseekV3ForCausalLMNextN"
    rel, line = renamed[1].rsplit(":", 1)
    text = (index.tree.root / rel).read_text().splitlines()[int(line) - 1]
    assert "is_draft_model" in text
    assert draft_renames(index).of("LlamaForCausalLMEagle3") is None


def test_mtp_draft_is_audited_as_its_draft_mode_class(mtp_index: TreeIndex, tmp_path: Path) -> None:
    ernie = model(tmp_path, "ernie", ERNIE)
    flags = ["--model-path", str(ernie), "--speculative-algorithm", "EAGLE"]
    result = preflight(
        mtp_index, [*LAUNCH, *flags, "--speculative-draft-model-path", str(ernie)], {}
    )
    assert draft_reports(result) == ["Ernie4_5_MoeForCausalLMMTP"]
    draft_errors = [f for f in result.findings if f.role == "draft" and f.severity == "error"]
    assert [f.attribute for f in draft_errors if f.id.startswith("interface.")] == []


def test_target_as_draft_is_audited_in_the_draft_role(mtp_index: TreeIndex, tmp_path: Path) -> None:
    target = model(tmp_path, "dsv3", DEEPSEEK_V3)
    words = [*LAUNCH, "--model-path", str(target), "--speculative-algorithm", "EAGLE", "--tp", "8"]
    result = preflight(mtp_index, words, {})
    assert draft_reports(result) == ["DeepseekV3ForCausalLMNextN"]
    # A target the tree gives no default draft: nothing audited in the draft role.
    ernie = model(tmp_path, "ernie", ERNIE)
    alone = preflight(
        mtp_index, [*LAUNCH, "--model-path", str(ernie), "--speculative-algorithm", "EAGLE3"], {}
    )
    assert draft_reports(alone) == []
