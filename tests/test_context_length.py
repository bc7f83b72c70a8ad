"""The context length SGLang derives from a config.json, read by running the tree's own code.

`ModelConfig` compares the `context_length` it is given with a local it derives
(`derived_context_len = get_context_length(self.hf_text_config)`: in `__init__` up to 0.5.2, in
`_derive_context_length` since); that assignment is found in the tree and evaluated on the
config, so the keys tried and the rope scaling multiplied by are the release's. A tree that
derives it otherwise (the demo's smaller tree reads `max_position_embeddings` straight; a
changed rule in a copy) is read as it is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.models.context import context_rules, derived_context_length
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.test_pyeval import machine

REPO = Path(__file__).resolve().parents[1]

# (config.json, the length SGLang's get_context_length gives: the first key it knows, times
# the rope factor unless the scaling names its original length or is Llama-3's)
CASES: list[tuple[dict[str, Any], int]] = [
    ({"max_position_embeddings": 8192}, 8192),
    ({"max_position_embeddings": 8192, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}, 32768),
    ({"max_position_embeddings": 8192, "rope_scaling": {"type": "yarn", "factor": 4.0}}, 32768),
    (
        {
            "max_position_embeddings": 8192,
            "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
        },
        8192,
    ),
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, 131072),
    ({"max_position_embeddings": 4096, "rope_scaling": None}, 4096),
    ({"seq_length": 32768, "max_position_embeddings": 4096}, 32768),  # the first key wins
    (
        {
            "architectures": ["Gemma3ForConditionalGeneration"],
            "text_config": {
                "max_position_embeddings": 131072,
                "rope_scaling": {"rope_type": "linear", "factor": 8.0},
            },
        },
        1048576,
    ),
]  # fmt: skip


@pytest.mark.parametrize("release", ["index_041", "index_059", "index_0523"])
def test_each_release_derives_the_length_by_its_own_code(
    release: str, request: pytest.FixtureRequest
) -> None:
    index: TreeIndex = request.getfixturevalue(release)
    rules = context_rules(index)
    derivation = rules.derivation
    assert derivation is not None
    assert derivation.file == "sglang/srt/configs/model_config.py"
    assert derivation.name == "derived_context_len"
    line = (index.tree.root / derivation.file).read_text().splitlines()[derivation.line - 1]
    assert "derived_context_len = get_context_length(self.hf_text_config)" in line
    # up to 0.5.2 in __init__, then its own method
    assert derivation.qualname.endswith("__init__" if release == "index_041" else "_length")
    for config, length in CASES:
        assert derived_context_length(index, config, rules) == length, config


def test_a_config_naming_no_length_is_unknown_not_the_trees_fallback(index_0523: TreeIndex) -> None:
    """The tree's `get_context_length` falls back to 2048; a config.json that names none of
    its keys left a class default out (Gemma-3's), which the real config object has."""
    rules = context_rules(index_0523)
    why = derived_context_length(index_0523, {"hidden_size": 8}, rules)
    assert isinstance(why, str) and "names no context length" in why


def _tree(root: Path, files: dict[str, str]) -> TreeIndex:
    """A small tree of these files under `sglang/srt/` (the evaluator tests' way)."""
    return machine(root, files).source.index


_MODEL_CONFIG = """
    from sglang.srt.utils.common import get_context_length

    class ModelConfig:
        def __init__(self, hf_config, context_length=None):
            self.hf_config = hf_config
            self.hf_text_config = hf_config
            self._derive_context_length(context_length)

        def _derive_context_length(self, context_length):
            longest = get_context_length(self.hf_text_config)
            if context_length is not None and longest < context_length:
                raise ValueError("too long")
            self.context_len = context_length or longest
"""


def test_a_changed_rule_in_the_tree_changes_the_length(tmp_path: Path) -> None:
    """A tree whose rule differs from every release's (the factor always counts, a key of its
    own first, the local named otherwise, the comparison written the other way round)."""
    index = _tree(
        tmp_path,
        {
            "configs/model_config.py": _MODEL_CONFIG,
            "utils/common.py": """
            CONTEXT_LENGTH_KEYS = ["window", "max_position_embeddings"]

            def get_context_length(config):
                scaling = getattr(config, "rope_scaling", None) or {}
                for key in CONTEXT_LENGTH_KEYS:
                    value = getattr(config, key, None)
                    if value is not None:
                        return int(value * scaling.get("factor", 1))
                return 2048
            """,
        },
    )
    rules = context_rules(index)
    assert rules.keys == ("window", "max_position_embeddings")
    assert rules.derivation is not None and rules.derivation.name == "longest"
    yarn = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    assert (
        derived_context_length(
            index, {"max_position_embeddings": 8192, "rope_scaling": yarn}, rules
        )
        == 32768
    )  # every release says 8192
    assert (
        derived_context_length(index, {"window": 100, "max_position_embeddings": 8192}, rules)
        == 100
    )


def test_a_derivation_that_reads_an_unknown_says_so(tmp_path: Path) -> None:
    index = _tree(
        tmp_path,
        {
            "configs/model_config.py": _MODEL_CONFIG,
            "utils/common.py": """
            import os

            def get_context_length(config):
                return int(os.environ.get("LIMIT", config.max_position_embeddings))
            """,
        },
    )
    why = derived_context_length(index, {"max_position_embeddings": 8192}, context_rules(index))
    assert isinstance(why, str) and why.startswith("sglang/srt/configs/model_config.py:")


def test_the_demo_tree_reads_max_position_embeddings_straight() -> None:
    index = TreeIndex(locate(str(REPO / "examples" / "sglang-mini" / "python")), use_cache=False)
    rules = context_rules(index)
    assert rules.derivation is not None and rules.derivation.name == "derived"
    linear = {"rope_type": "linear", "factor": 8.0}
    assert (
        derived_context_length(
            index, {"max_position_embeddings": 4096, "rope_scaling": linear}, rules
        )
        == 4096
    )


def test_sglangs_refusal_is_quoted_with_the_trees_own_placeholder_filled() -> None:
    """The demo's tree prints its derived length as `{derived}`, the releases as
    `{derived_context_len}`: the name of the local the derivation assigns fills either."""
    from eaglebug.checks.models.context import check_context_length

    index = TreeIndex(locate(str(REPO / "examples" / "sglang-mini" / "python")), use_cache=False)
    target, draft = {"max_position_embeddings": 262144}, {"max_position_embeddings": 131072}
    (finding,) = check_context_length(index, target, draft, None, {}, context_rules(index))
    said = finding.to_json()["details"]["sglang_message"]
    assert "context_length (262144) is greater than the derived context_length (131072)" in said
    assert "{" not in said
