"""`config.aux_layers` on the capture layers the target really uses, on 0.5.14, 0.5.22, 0.5.23.

The ids are read where the tree's runner reads them (`eagle_config[...]`), turned into capture
layers by the target class's own `set_eagle3_layers_to_capture` (evaluated from its source),
and judged against the layers its forward can capture. gpt-oss shows why each step is read
from the release: 0.5.14 adds 1 to every id and captures at layers 0..23 only, 0.5.22+ keeps ids
that already end at the last layer and also captures at `end_layer`. The draft config is
SpecForge's published gpt-oss-20b EAGLE-3 config (`tests/fixtures/drafts/gpt-oss-20b-eagle3`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.models.auxlayers import check_aux_layers, ids_source
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate

FIXTURE = Path(__file__).parent / "fixtures" / "drafts" / "gpt-oss-20b-eagle3" / "config.json"
GPT_OSS_20B = {"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 24, "hidden_size": 2880}
LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "hidden_size": 4096}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61}
KEY = "eagle_aux_hidden_state_layer_ids"


def release_index(request: pytest.FixtureRequest, version: str) -> TreeIndex:
    folder = request.getfixturevalue("sglang_0" + version.replace(".", "")[1:])
    return TreeIndex(locate(str(folder)), use_cache=False)


@pytest.fixture(scope="module", params=["0.5.14", "0.5.22", "0.5.23"])
def index(request: pytest.FixtureRequest) -> TreeIndex:
    return release_index(request, request.param)


def draft(ids: list[int] | None = None, top_level: list[int] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(FIXTURE.read_text())
    if ids is not None:
        config["eagle_config"][KEY] = ids
    if top_level is not None:
        del config["eagle_config"]
        config[KEY] = top_level
    return config


def tree_line(index: TreeIndex, read_from: Any) -> str:
    rel, line = str(read_from).rsplit(":", 1)
    return (index.tree.root / rel).read_text(encoding="utf-8").splitlines()[int(line) - 1]


def test_the_runner_reads_ids_from_eagle_config(index: TreeIndex) -> None:
    source = ids_source(index)
    assert source is not None and (source.container, source.key) == ("eagle_config", KEY)
    line = tree_line(index, source.read_from)
    assert KEY in line and "eagle_config[" in line


def test_published_gpt_oss_draft_is_fine_on_every_release(index: TreeIndex) -> None:
    assert check_aux_layers(index, "GptOssForCausalLM", GPT_OSS_20B, draft()) == []


@pytest.mark.parametrize(
    ("version", "ids", "captured", "lost"),
    [
        ("0.5.14", [1, 11, 23], [2, 12, 24], [24]),  # +1 always; forward captures 0..23
        ("0.5.22", [1, 11, 23], [2, 12, 24], []),  # 24 is end_layer, captured there
        ("0.5.14", [2, 12, 24], [3, 13, 25], [25]),
        ("0.5.23", [2, 12, 24], [2, 12, 24], []),  # ids ending at the last layer kept as given
    ],
)
def test_gpt_oss_convention_per_release(
    request: pytest.FixtureRequest,
    version: str,
    ids: list[int],
    captured: list[int],
    lost: list[int],
) -> None:
    index = release_index(request, version)
    found = check_aux_layers(index, "GptOssForCausalLM", GPT_OSS_20B, draft(ids))
    assert found is not None
    if not lost:
        assert found == []
        return
    (finding,) = found
    assert finding.severity == "error" and str(lost) in finding.message
    assert isinstance(finding.evidence, ConfigEvidence)
    assert finding.evidence.value("captured") == tuple(captured)
    assert "layers_to_capture" in tree_line(index, finding.evidence.read_from)


def test_deepseek_adds_one_only_to_ids_starting_at_one(index: TreeIndex) -> None:
    """The two conventions of sglang PR #25454 (https://github.com/sgl-project/sglang/pull/25454):
    "output of layer X" ids start at 1 and get +1; "input to layer X" ids (first id 2, as
    lightseekorg/kimi-k2.5-eagle3-mla ships) are kept."""
    (finding,) = (
        check_aux_layers(index, "DeepseekV3ForCausalLM", DEEPSEEK_V3, draft([1, 30, 60])) or []
    )
    assert isinstance(finding.evidence, ConfigEvidence)
    assert finding.evidence.value("captured") == (2, 31, 61)
    assert check_aux_layers(index, "DeepseekV3ForCausalLM", DEEPSEEK_V3, draft([2, 30, 60])) == []


def test_top_level_ids_are_ignored_and_defaults_captured(index: TreeIndex) -> None:
    found = check_aux_layers(index, "LlamaForCausalLM", LLAMA_8B, draft(top_level=[1, 16, 28]))
    assert found is not None
    (finding,) = found
    assert finding.severity == "warning" and "ignored" in finding.message
    assert isinstance(finding.evidence, ConfigEvidence)
    assert finding.evidence.value("captured") == (2, 16, 29)  # [2, L // 2, L - 3] for L = 32
    assert KEY in tree_line(index, finding.evidence.read_from)
    # The same ids where SGLang reads them: captured as given (+1), nothing to say.
    assert check_aux_layers(index, "LlamaForCausalLM", LLAMA_8B, draft([1, 16, 28])) == []
    # Top-level ids that happen to equal the defaults' effect change nothing: no finding.
    same = draft(top_level=[1, 15, 28])
    assert check_aux_layers(index, "LlamaForCausalLM", LLAMA_8B, same) == []


GPT_OSS_120B = {"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 36}
V3_IDS = (
    Path(__file__).parent / "fixtures" / "drafts" / "gpt-oss-120b-eagle3-v3" / "eagle_config.json"
)


@pytest.mark.parametrize(("version", "lost"), [("0.5.14", [37]), ("0.5.22", []), ("0.5.23", [])])
def test_gpt_oss_120b_eagle3_v3_boundary_ids(
    request: pytest.FixtureRequest, version: str, lost: list[int]
) -> None:
    """sglang PR #32334's draft: ids [24, 30, 36] on a 36-layer target. 0.5.14 adds 1 to each,
    [25, 31, 37], and its forward captures at layers 0..35 only; 0.5.22+ keep ids that end at
    the last layer as given and also capture at end_layer (36)."""
    index = release_index(request, version)
    config = dict(draft())
    config["eagle_config"] = json.loads(V3_IDS.read_text())
    found = check_aux_layers(index, "GptOssForCausalLM", GPT_OSS_120B, config)
    assert found is not None
    if not lost:
        assert found == []
        return
    (finding,) = found
    assert isinstance(finding.evidence, ConfigEvidence)
    assert finding.evidence.value("captured") == (25, 31, 37)
    assert str(lost) in finding.message and "0..35" in finding.message
