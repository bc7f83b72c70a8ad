"""Inner objects whose class is one of several: picked from a module-level table by version
(`MiniCPMV`'s `self.minicpmv`, reached through `__getattr__`), or by the model registry from a
sub-config (`LlavaForConditionalGeneration`'s `self.language_model`). Synthetic trees for each
shape, then the real releases."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from eaglebug.checks.interface.audit import AuditResult, audit
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.synthetic import audit_tree, findings_for, run_cli, write_tree
from tests.test_audit_rules import (
    DELEGATE_CONSUMERS,
    RUNNER,
    WORKER,
    only,
    planned,
    runner,
    worker,
)

VERSIONED = "sglang/srt/models/versioned.py"

# `self.inner` is one of the table's classes; `__getattr__` forwards to it (MiniCPMV's shape:
# the outer class is no nn.Module, every candidate is one).
VERSIONED_SOURCE = """
from torch import nn


class BaseModel(nn.Module):
    def get_input_embeddings(self):
        return self.embed


class V26(BaseModel):
    def get_embed_and_head(self):
        return self.embed, self.head


class V40(BaseModel):
    pass


_SUPPORT_VERSION = {
    (2, 6): V26,
    (4, 0): V40,
}


class Versioned:
    def __init__(self, config):
        super().__init__()
        instance_class = _SUPPORT_VERSION.get(config.version)
        try:
            inner = instance_class(config=config)
            self.inner = inner
        except Exception as e:
            raise e

    def __getattr__(self, name):
        if name == "inner":
            return None
        return getattr(self.inner, name)
"""

VERSIONED_CONSUMERS = {
    WORKER: worker("embed, head = self.target_worker.model_runner.model.get_embed_and_head()"),
    RUNNER: runner(
        """
        if self.spec_algorithm.is_eagle3():
            for name, module in self.model.named_modules():
                pass
            self.model.get_input_embeddings()
        """
    ),
}


def test_getattr_through_a_table_chosen_class_provides_what_all_provide(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {VERSIONED: VERSIONED_SOURCE, **VERSIONED_CONSUMERS})
    result = audit_tree(root, "Versioned")
    provided = dict(result.reports[0].provided)
    # every candidate is an nn.Module: named_modules is there, forwarded by __getattr__
    assert (provided["named_modules"].kind, provided["named_modules"].via) == (
        "via __getattr__",
        "inner",
    )
    assert provided["get_input_embeddings"].owner == "sglang.srt.models.versioned.BaseModel"
    assert findings_for(result, "named_modules") == []
    # only V26 has get_embed_and_head: not provided for every version, and the finding says
    # which candidate provides it and which table entry picks the one that does not
    f = only(findings_for(result, "get_embed_and_head"))
    assert (f.id, f.severity, f.delegate) == ("interface.missing", "error", "inner")
    details = f.to_json()["details"]
    assert details["delegate_class"] == ["sglang.srt.models.versioned.V26"]
    assert details["delegate_lacking"] == ["sglang.srt.models.versioned.V40"]
    assert details["chosen_by"] == ["_SUPPORT_VERSION[(4, 0)] is picked"]
    assert "self.inner (V26) provides it, but not V40, picked when _SUPPORT_VERSION[(4, 0)]" in (
        f.message
    )


def test_getattr_through_a_table_chosen_class_when_all_provide(tmp_path: Path) -> None:
    source = VERSIONED_SOURCE.replace(
        "class V40(BaseModel):\n    pass",
        "class V40(BaseModel):\n    def get_embed_and_head(self):\n        return 1, 2",
    )
    root = write_tree(tmp_path, {VERSIONED: source, **VERSIONED_CONSUMERS})
    result = audit_tree(root, "Versioned")
    assert [f for f in result.findings if f.severity != "info"] == []
    provider = dict(result.reports[0].provided)["get_embed_and_head"]
    assert (provider.kind, provider.via) == ("via __getattr__", "inner")


PICKED = "sglang/srt/models/picked.py"
REGISTRY_MODELS = {
    "sglang/srt/models/registry.py": """
    class _ModelRegistry:
        def resolve_model_cls(self, architectures):
            return self.models[architectures[0]], architectures[0]


    ModelRegistry = _ModelRegistry()
    """,
    "sglang/srt/models/alpha.py": """
    from torch import nn


    class AlphaForCausalLM(nn.Module):
        def get_embed_and_head(self):
            return self.embed, self.head

        def set_eagle3_layers_to_capture(self, layer_ids=None):
            self.capture = layer_ids


    EntryClass = AlphaForCausalLM
    """,
    "sglang/srt/models/beta.py": """
    from torch import nn


    class BetaForCausalLM(nn.Module):
        def get_embed_and_head(self):
            return self.embed, self.head


    EntryClass = [BetaForCausalLM]
    """,
    "sglang/srt/models/vision.py": """
    from torch import nn


    class VisionModel(nn.Module):
        pass


    EntryClass = VisionModel
    """,
    PICKED: """
    from torch import nn
    from transformers import AutoModel, AutoModelForCausalLM

    import sglang.srt.models as sgl_models


    class PickedForConditionalGeneration(nn.Module):
        def _get_sgl_model_cls(self, config, auto_model_type=AutoModel):
            arch = config.architectures[0]
            return sgl_models.registry.ModelRegistry.resolve_model_cls(arch)[0]

        def __init__(self, config):
            super().__init__()
            self.text_config = config.text_config
            language_model_cls = self._get_sgl_model_cls(self.text_config, AutoModelForCausalLM)
            vision_model_cls = self._get_sgl_model_cls(config.vision_config, AutoModel)
            self.language_model = language_model_cls(self.text_config)
            self.vision_tower = vision_model_cls(config.vision_config)

        def get_embed_and_head(self):
            return self.language_model.get_embed_and_head()


    EntryClass = PickedForConditionalGeneration
    """,
}
ALPHA = "sglang.srt.models.alpha.AlphaForCausalLM"
BETA = "sglang.srt.models.beta.BetaForCausalLM"


def test_registry_picked_class_without_a_config_names_the_candidates(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {**REGISTRY_MODELS, **DELEGATE_CONSUMERS})
    result = audit_tree(root, "PickedForConditionalGeneration")
    f = only(findings_for(result, "set_eagle3_layers_to_capture"))
    assert (f.id, f.severity, f.delegate) == ("interface.missing", "error", "language_model")
    details = f.to_json()["details"]
    # the registry's causal LMs are the candidates; the vision model is not one
    assert details["delegate_class"] == [ALPHA]
    assert details["delegate_lacking"] == [BETA]
    line = next(
        i
        for i, text in enumerate((root / PICKED).read_text().splitlines(), 1)
        if "resolve_model_cls" in text
    )
    assert details["picked_by"] == f"the registry, from self.text_config ({PICKED}:{line})"
    assert "1 of its 2 candidates provide it (AlphaForCausalLM), not BetaForCausalLM" in f.message
    assert "--model-path resolves the choice" in f.message
    # the fix delegates to language_model, as upstream's own fix does
    assert "return self.language_model.set_eagle3_layers_to_capture(layer_ids)" in planned(f)


def _model_dir(tmp_path: Path, text_arch: str | None) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    text_config: dict[str, object] = {"model_type": "alpha", "hidden_size": 64}
    if text_arch:
        text_config["architectures"] = [text_arch]
    config = {"architectures": ["PickedForConditionalGeneration"], "text_config": text_config}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("text_arch", ["AlphaForCausalLM", "BetaForCausalLM"])
def test_registry_picked_class_is_resolved_from_the_config(tmp_path: Path, text_arch: str) -> None:
    root = write_tree(tmp_path / "tree", {**REGISTRY_MODELS, **DELEGATE_CONSUMERS})
    folder = _model_dir(tmp_path, text_arch)
    index = TreeIndex(locate(str(root)), use_cache=False)
    index.use_model_config(json.loads((folder / "config.json").read_text()))
    result = audit(index, "PickedForConditionalGeneration")
    findings = findings_for(result, "set_eagle3_layers_to_capture")
    f = only(findings)
    if text_arch == "AlphaForCausalLM":
        assert (f.severity, f.delegate) == ("error", "language_model")
        assert f.to_json()["details"]["delegate_class"] == [ALPHA]
        assert "self.language_model (AlphaForCausalLM) provides it, picked by the registry" in (
            f.message
        )
        assert "(AlphaForCausalLM, from the model's config.json)" in f.message
    else:  # the config picks a class that lacks it: no delegate can fix it
        assert (f.severity, f.delegate, f.fix) == ("error", None, None)
    # the CLI reads the same config from --model-path, and keys its reply on it
    proc = run_cli("audit", "--sglang", str(root), "--model-path", str(folder), "--json")
    assert proc.returncode == 1, proc.stderr
    (cli,) = [g for g in json.loads(proc.stdout)["findings"] if g["attribute"] == f.attribute]
    assert cli["delegate"] == f.delegate


def test_registry_picked_class_with_a_config_that_names_none(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "tree", {**REGISTRY_MODELS, **DELEGATE_CONSUMERS})
    folder = _model_dir(tmp_path, None)
    index = TreeIndex(locate(str(root)), use_cache=False)
    index.use_model_config(json.loads((folder / "config.json").read_text()))
    f = only(
        findings_for(audit(index, "PickedForConditionalGeneration"), "set_eagle3_layers_to_capture")
    )
    assert "the model's config.json names no architectures in text_config" in f.message


# -- the real releases ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def indexes() -> Iterator[dict[Path, TreeIndex]]:
    """One index per release for this module, no model config given: a release is parsed
    once for both wrappers (a test that gives a config makes its own), and let go after."""
    kept: dict[Path, TreeIndex] = {}
    yield kept
    kept.clear()


def _real(indexes: dict[Path, TreeIndex], root: Path, cls: str) -> AuditResult:
    if root not in indexes:
        indexes[root] = TreeIndex(locate(str(root)), use_cache=False)
    return audit(indexes[root], cls)


@pytest.fixture(params=["sglang_0514", "sglang_0522", "sglang_0523"])
def release_root(request: pytest.FixtureRequest) -> Path:
    """The tree of a release whose wrappers pick their inner model in each of these ways."""
    root: Path = request.getfixturevalue(request.param)
    return root


def test_minicpmv_forwards_to_its_versioned_model(
    indexes: dict[Path, TreeIndex], release_root: Path
) -> None:
    result = _real(indexes, release_root, "MiniCPMV")
    attributes = {f.attribute for f in result.findings}
    # nn.Module's methods reach MiniCPMV through __getattr__ on every version's class
    assert not {"named_modules", "forward", "parameters"} & attributes
    provided = dict(result.reports[0].provided)
    assert provided["named_modules"].via == "minicpmv"
    # no version's class has get_embed_and_head: still an error; each version holds the LM its
    # own `init_llm` makes (`self.llm`), so the delegate is the path one level further in
    f = only(findings_for(result, "get_embed_and_head"))
    assert (f.severity, f.delegate) == ("error", "minicpmv.llm")
    text = (release_root / "sglang/srt/models/minicpmv.py").read_text()
    assert "self.minicpmv = minicpmv" in text and "_SUPPORT_VERSION = {" in text


def test_llava_delegates_to_the_registry_picked_language_model(
    indexes: dict[Path, TreeIndex], release_root: Path
) -> None:
    result = _real(indexes, release_root, "LlavaForConditionalGeneration")
    f = only(findings_for(result, "set_eagle3_layers_to_capture"))
    assert (f.severity, f.delegate) == ("error", "language_model")
    details = f.to_json()["details"]
    assert details["picked_by"].startswith(
        "the registry, from self.text_config (sglang/srt/models/llava.py:"
    )
    # the language models llava.py itself imports lead the list (and give the fix's signature)
    source = (release_root / "sglang/srt/models/llava.py").read_text()
    imported = sorted(
        f"{module}.{name}"
        for module, name in re.findall(
            r"^from (sglang\.srt\.models\.\w+) import (\w+)$", source, re.M
        )
        if f"{module}.{name}" in details["delegate_class"]
    )
    assert "sglang.srt.models.llama.LlamaForCausalLM" in imported
    assert details["delegate_class"][: len(imported)] == imported
    assert "provide it (LlamaForCausalLM, " in f.message
    assert "return self.language_model.set_eagle3_layers_to_capture(" in planned(f)
    # with the text config naming Llama, the choice is resolved: one class, nothing lacking
    index = TreeIndex(locate(str(release_root)), use_cache=False)
    index.use_model_config({"text_config": {"architectures": ["LlamaForCausalLM"]}})
    g = only(findings_for(audit(index, "LlavaForConditionalGeneration"), f.attribute or ""))
    assert g.to_json()["details"]["delegate_class"] == ["sglang.srt.models.llama.LlamaForCausalLM"]
    assert "delegate_lacking" not in g.to_json()["details"]
    assert g.delegate == "language_model"
