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


def _finding(index: TreeIndex, cls: str, role: str) -> list[tuple[str, tuple[str, ...]]]:
    target, draft = (cls, None) if role == "target" else (None, cls)
    result = audit(index, target, "EAGLE3", draft)
    return [
        (f.severity, f.evidence.assumed if f.evidence is not None else ())  # type: ignore[attr-defined]
        for f in result.findings
        if f.attribute == "set_eagle3_layers_to_capture" and f.role == role
    ]


@pytest.mark.parametrize(
    ("release", "written"),
    [
        ("053", "eagle_worker.py:106"),
        ("057", "eagle_worker.py:111"),
        ("059", "eagle_worker.py:112"),
    ],
)
def test_the_drafts_runner_is_built_with_cuda_graphs_off(
    request: pytest.FixtureRequest, release: str, written: str
) -> None:
    """The EAGLE worker sets `server_args.disable_cuda_graph = True` before it builds the
    draft's runner; its `init_device_graphs` then returns early unless `self.device` is "cpu",
    the one undecided test: what `CudaGraphRunner.__init__` asks of the model is a warning for a
    draft, resting on that test, not an error. The runner's own calls are decided for the draft
    (0.5.7/0.5.9: `eagle_use_aux_hidden_state` is the target runner's, and the FlashInfer
    autotune path returns `not self.is_draft_worker`): they are not asked of it at all."""
    index = request.getfixturevalue(f"index_{release}")
    found = _finding(index, "sglang.srt.models.mimo_mtp.MiMoMTP", "draft")
    assert [severity for severity, _ in found] == ["warning"]
    assumed = " ".join(found[0][1])
    assert "self.server_args.disable_cuda_graph" in assumed
    assert f"{written} sets disable_cuda_graph = True" in assumed
    assert "model_runner.py" not in assumed  # only the graph runner's call rests on the device


@pytest.mark.parametrize("release", ["053", "059"])
def test_the_targets_runner_keeps_the_requirement(
    request: pytest.FixtureRequest, release: str
) -> None:
    """The target's runner is built with the launch's own values: the requirement stands."""
    index = request.getfixturevalue(f"index_{release}")
    found = _finding(index, "sglang.srt.models.mimo_mtp.MiMoMTP", "target")
    assert [severity for severity, _ in found] == ["error"]


def test_0_5_9_the_drafts_runner_reaches_the_graph_runner_only_on_a_cpu(
    index_059: TreeIndex,
) -> None:
    """0.5.9's EAGLE worker turns CUDA graphs off for the draft's runner too
    (`eagle_worker.py:112`): its build reaches `CudaGraphRunner.__init__` only past the early
    return on `disable_cuda_graph`, an undecided test that the draft's value enters."""
    from eaglebug.checks.interface.roles import role_reacher

    workers = frozenset({f"{_SPEC}.eagle_worker"})
    scope = "sglang.srt.model_executor.cuda_graph_runner.CudaGraphRunner.__init__"
    reacher = role_reacher(index_059, algorithm_facts(index_059))
    found = reacher.reach(scope, 0, "EAGLE3", workers, lambda _fn: True)
    assert found.reached is None
    assert any("self.server_args.disable_cuda_graph" in t for t in found.assumed)
    assert any("eagle_worker.py:112 sets disable_cuda_graph = True" in w for w in found.read_from)
