"""The context length the memory check reads: SGLang's own `get_context_length`, or none.

The request estimate (`max_running_requests`) divides the pool by the model's context length
and the pool is compared with one full-length request, so the length is read as the tree
reads it (its keys, scaled by plain rope scaling), never guessed: Gemma-3's published config
names no length at all (transformers' config class supplies it: read where transformers is
beside the tree, `test_classdefaults.py`), and the check said "max_running_requests not read
(...: division by zero)" from a length of 0 it made up.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from eaglebug.checks.source.index import TreeIndex
from tests.memconfigs import GEMMA3_27B, GEMMA3_27B_BYTES
from tests.test_memory import H200, details, memory, models, one


def _gemma(tmp_path: Path, context: int | None) -> tuple[str, ...]:
    config = copy.deepcopy(GEMMA3_27B)
    if context is not None:
        config["text_config"]["max_position_embeddings"] = context
    return (*models(tmp_path, config, GEMMA3_27B_BYTES, None), "--tp", "2")


@pytest.mark.parametrize("release", ["index_059", "index_0523"])
def test_a_config_without_a_context_length_leaves_the_estimate_unread(
    release: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """0.5.23 estimates the requests in the pool configurator, 0.5.9 in the runner's own
    sizing: each says why the estimate is missing."""
    index: TreeIndex = request.getfixturevalue(release)
    finding = one(memory(index, *_gemma(tmp_path, None), gpu=H200))
    said = details(finding)
    assert said["max_total_num_tokens"] > 0  # the pool itself does not need the length
    assert said["max_running_requests"] is None
    (why,) = said["not_read"]
    assert "config.json names no context length" in why
    assert "division" not in why
    assert finding.severity == "info"


def test_the_length_is_scaled_as_the_trees_get_context_length_scales_it(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """131072 positions with Gemma-3's linear rope factor 8: SGLang derives 1048576, a request
    longer than the pool; a --context-length the pool holds leaves nothing to warn of."""
    finding = one(memory(index_0523, *_gemma(tmp_path, 131072), gpu=H200))
    assert finding.severity == "warning"
    assert "one request of the 1048576-token context length" in finding.message
    assert details(finding)["max_running_requests"] == 2048  # the tree's floor
    within = one(memory(index_0523, *_gemma(tmp_path, 131072), "--context-length", "32768"))
    assert within.severity == "info"
    assert "not_read" not in details(within)
    assert details(within)["max_running_requests"] > 0
