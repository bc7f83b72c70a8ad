"""The interface audit on releases before `SpeculativeAlgorithm.create_worker`, each mechanism on
the real release it was seen on (issue 22, "Interface audit"; the ground truth is
`tests/fixtures/audit_truth`, measured by `bench/audit_truth.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eaglebug.checks import TreeIndex, audit, locate
from eaglebug.checks.speculative.algorithms import algorithm_facts

_SPEC = "sglang.srt.speculative"


@pytest.fixture(scope="module")
def index_053(sglang_053: Path) -> TreeIndex:
    return TreeIndex(locate(str(sglang_053)), use_cache=False)


@pytest.fixture(scope="module")
def index_057(sglang_057: Path) -> TreeIndex:
    return TreeIndex(locate(str(sglang_057)), use_cache=False)


def _errors(
    index: TreeIndex, target: str | None, algorithm: str, draft: str | None = None
) -> set[str | None]:
    result = audit(index, target, algorithm, draft)
    return {f.attribute for f in result.findings if f.severity == "error"}


def test_0_5_3_the_schedulers_if_elif_chain_picks_the_worker(index_053: TreeIndex) -> None:
    """0.5.3 builds the draft worker in `Scheduler.__init__`: `if is_eagle(): EAGLEWorker ...
    elif is_standalone(): StandaloneWorker ... elif is_ngram(): NGRAMWorker`."""
    workers = algorithm_facts(index_053).workers
    assert workers[f"{_SPEC}.eagle_worker.EAGLEWorker"] == {"EAGLE", "EAGLE3"}
    assert workers[f"{_SPEC}.standalone_worker.StandaloneWorker"] == {"STANDALONE"}
    assert workers[f"{_SPEC}.ngram_worker.NGRAMWorker"] == {"NGRAM"}


@pytest.mark.parametrize("release", ["053", "057"])
def test_standalone_and_ngram_do_not_need_the_eagle_workers_calls(
    release: str, request: pytest.FixtureRequest
) -> None:
    """`Qwen2VLForConditionalGeneration` lacks `get_embed_and_head` (its `model` is a backbone):
    an error under EAGLE, whose worker calls it, and none under STANDALONE (whose worker
    replaces `EAGLEWorker.__init__`) or NGRAM (whose worker never touches the model)."""
    index = request.getfixturevalue(f"index_{release}")
    target = "Qwen2VLForConditionalGeneration"
    assert "get_embed_and_head" in _errors(index, target, "EAGLE")
    assert "get_embed_and_head" not in _errors(index, target, "STANDALONE")
    assert "get_embed_and_head" not in _errors(index, target, "NGRAM")


def test_0_5_7_the_registry_factories_pick_the_worker(index_057: TreeIndex) -> None:
    """0.5.7 registers a factory per algorithm (`register_speculative_algorithm("EAGLE",
    worker_cls=_create_eagle_worker, ...)`); the scheduler calls
    `spec_algorithm.create_draft_worker(**kwargs)`; `_create_eagle_worker` returns the V2 worker
    when `enable_overlap` (not known here), else `EAGLEWorker`. The multi-layer workers are
    built only under a flag the tree sets for MiMoV2Flash: they serve none of these launches."""
    workers = algorithm_facts(index_057).workers
    assert workers[f"{_SPEC}.eagle_worker.EAGLEWorker"] == {"EAGLE", "EAGLE3"}
    assert workers[f"{_SPEC}.eagle_worker_v2.EAGLEWorkerV2"] == {"EAGLE", "EAGLE3"}
    assert workers[f"{_SPEC}.standalone_worker.StandaloneWorker"] == {"STANDALONE"}
    assert workers[f"{_SPEC}.ngram_worker.NGRAMWorker"] == {"NGRAM"}
    assert workers[f"{_SPEC}.multi_layer_eagle_worker.MultiLayerEagleWorker"] == set()
