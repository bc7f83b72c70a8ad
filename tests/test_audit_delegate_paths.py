"""Delegate paths the interface audit proposes beyond a plain `self.x = Class(...)`, on the real
release they were seen on (issue 22, "Two-level delegates"; measured by `bench/audit_truth.py`
against `tests/fixtures/audit_truth`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eaglebug.checks import TreeIndex, audit, locate
from eaglebug.checks.interface.made import made_by
from eaglebug.checks.source.index import find_class

_MODELS = "sglang.srt.models"


@pytest.fixture(scope="module")
def index_059(sglang_059: Path) -> TreeIndex:
    return TreeIndex(locate(str(sglang_059)), use_cache=False)


def _delegates(index: TreeIndex, target: str) -> dict[str, str | None]:
    result = audit(index, target, "EAGLE3")
    return {f.attribute or "": f.delegate for f in result.findings if f.severity == "error"}


def test_an_inner_object_made_by_the_instances_own_method(index_059: TreeIndex) -> None:
    """`self.llm = self.init_llm(...)` in MiniCPMBaseModel; each version's `init_llm` returns
    its own LM (4.5 builds it in a local and patches a method onto it first)."""
    made = made_by(index_059)
    for version, lm in [
        ("MiniCPMV2_6", "qwen2.Qwen2ForCausalLM"),
        ("MiniCPMV4_0", "llama.LlamaForCausalLM"),
        ("MiniCPMV4_5", "qwen3.Qwen3ForCausalLM"),
    ]:
        ref = find_class(index_059, f"{_MODELS}.minicpmv.{version}")
        assert [c.qualname for c in made.classes(ref, "init_llm")] == [f"{_MODELS}.{lm}"]


def test_minicpmo_delegates_to_the_llm_its_init_llm_makes(index_059: TreeIndex) -> None:
    assert _delegates(index_059, "MiniCPMO") == {
        "get_embed_and_head": "llm",
        "set_eagle3_layers_to_capture": "llm",
    }


def test_minicpmv_forwards_to_a_version_that_holds_the_llm(index_059: TreeIndex) -> None:
    """MiniCPMV (a plain class) forwards `__getattr__` to `self.minicpmv`, one of the versions
    of `_SUPPORT_VERSION`, which lacks the methods too and holds `llm`: `minicpmv.llm`."""
    assert _delegates(index_059, "MiniCPMV") == {
        "get_embed_and_head": "minicpmv.llm",
        "set_eagle3_layers_to_capture": "minicpmv.llm",
    }


@pytest.fixture(scope="module")
def index_0514(sglang_0514: Path) -> TreeIndex:
    return TreeIndex(locate(str(sglang_0514)), use_cache=False)


def test_0_5_14_dflash_requires_the_targets_lm_head(index_0514: TreeIndex) -> None:
    """0.5.14's DFLASH worker: `lm_head = getattr(target_model, "lm_head", None)`, then
    `if lm_head is None or not hasattr(lm_head, "weight"): raise RuntimeError(...)`. Llava keeps
    its head in `language_model`: an error with that delegate; a causal LM passes."""
    result = audit(index_0514, "LlavaForConditionalGeneration", "DFLASH")
    (f,) = [f for f in result.findings if f.attribute == "lm_head"]
    assert (f.severity, f.delegate) == ("error", "language_model")
    assert [(c.file, c.code.strip()) for c in f.call_sites] == [
        (
            "sglang/srt/speculative/dflash_worker_v2.py",
            'lm_head = getattr(target_model, "lm_head", None)',
        )
    ]
    plain = audit(index_0514, "LlamaForCausalLM", "DFLASH")
    assert [f for f in plain.findings if f.attribute == "lm_head"] == []
