"""One focused test per audit rule, each on a small synthetic SGLang-shaped tree.

Every test writes its tree into `tmp_path` (see `tests/synthetic.py`), audits it through the
public API or the CLI, and checks both sides of the rule: the finding (id, severity, role,
attribute, call site) when the class lacks what the runtime uses, and no finding when it has it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import PatchFix
from tests.synthetic import (
    SPEC_INFO,
    audit_tree,
    findings_for,
    line_of,
    run_cli,
    run_cli_batch,
    site,
    write_tree,
)

MODEL = "sglang/srt/models/foo.py"
WORKER = "sglang/srt/speculative/eagle_worker.py"
NGRAM_WORKER = "sglang/srt/speculative/ngram_worker.py"
RUNNER = "sglang/srt/model_executor/model_runner.py"
FOO = "sglang.srt.models.foo.FooForCausalLM"


DOC = '        """Delegate to self.language_model (speculative decoding); added by eaglebug."""\n'


def planned(finding: Finding) -> str:
    """The method text a finding's patch fix plans (what `fix --apply` inserts)."""
    assert isinstance(finding.fix, PatchFix) and finding.fix.method is not None, finding.fix
    return finding.fix.method.text


def _block(body: str, spaces: int) -> str:
    return textwrap.indent(textwrap.dedent(body).strip("\n"), " " * spaces)


def model(name: str, body: str = "pass", bases: str = "nn.Module") -> str:
    """One model class (source text) in a file that imports torch's nn."""
    return f"from torch import nn\n\n\nclass {name}({bases}):\n{_block(body, 4)}\n"


def worker(body: str) -> str:
    """The EAGLE worker module with `body` as the body of one of its methods."""
    return (
        "class EAGLEWorker:\n"
        "    def __init__(self, server_args, target_worker, draft_model_runner):\n"
        "        self.target_worker = target_worker\n"
        "        self.draft_model_runner = draft_model_runner\n"
        "\n"
        "    def init_lm_head(self):\n"
        f"{_block(body, 8)}\n"
    )


def runner(body: str, imports: str = "") -> str:
    """A `ModelRunner` class with `body` as the body of one of its methods."""
    return (
        "from sglang.srt.speculative.spec_info import SpeculativeAlgorithm\n"
        f"{imports}\n\n"
        "class ModelRunner:\n"
        "    def __init__(self, server_args, is_draft_worker=False):\n"
        "        self.server_args = server_args\n"
        "        self.spec_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)\n"
        "        self.is_draft_worker = is_draft_worker\n"
        "\n"
        "    def load_model(self):\n"
        f"{_block(body, 8)}\n"
    )


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


# -- consumers --------------------------------------------------------------------------------


def test_alias_within_function(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                target = model
                embed, head = target.get_embed_and_head()
                """
            ),
            MODEL: model("FooForCausalLM"),
            "sglang/srt/models/bar.py": model(
                "BarForCausalLM", "def get_embed_and_head(self):\n    return self.embed, self.head"
            ),
        },
    )
    f = only(findings_for(audit_tree(root, "FooForCausalLM"), "get_embed_and_head"))
    assert (f.id, f.severity, f.role, f.class_) == ("interface.missing", "error", "target", FOO)
    assert f.call_sites == (site(root, WORKER, "target.get_embed_and_head()"),)
    assert audit_tree(root, "BarForCausalLM").findings == []


@pytest.mark.parametrize("attr", ["target_model", "model"])
def test_self_attribute_assigned_from_reference(tmp_path: Path, attr: str) -> None:
    source = f"""
    class EAGLEWorker:
        def __init__(self, server_args, target_worker):
            self.target_worker = target_worker
            self.{attr} = target_worker.model_runner.model

        def init_lm_head(self):
            return self.{attr}.get_embed_and_head()
    """
    root = write_tree(tmp_path, {WORKER: source, MODEL: model("FooForCausalLM")})
    f = only(findings_for(audit_tree(root, "FooForCausalLM"), "get_embed_and_head"))
    assert (f.id, f.severity, f.role) == ("interface.missing", "error", "target")
    assert f.call_sites == (site(root, WORKER, ".get_embed_and_head()"),)


def test_plain_read_is_required(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                "self.hot_token_id = self.target_worker.model_runner.model.hot_token_id"
            ),
            MODEL: model("FooForCausalLM"),
        },
    )
    f = only(findings_for(audit_tree(root, "FooForCausalLM"), "hot_token_id"))
    assert (f.id, f.severity) == ("interface.missing", "error")
    assert f.call_sites == (site(root, WORKER, ".model.hot_token_id"),)
    assert f.to_json()["details"]["sites"][0]["kind"] == "read"


def test_getattr_without_default_is_required_with_default_optional(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                embed, head = getattr(model, "get_embed_and_head")()
                hot = getattr(model, "hot_token_id", None)
                """
            ),
            MODEL: model("FooForCausalLM"),
            "sglang/srt/models/bar.py": model(
                "BarForCausalLM", "def get_embed_and_head(self):\n    return self.embed, self.head"
            ),
        },
    )
    result = audit_tree(root, "FooForCausalLM")
    f = only(findings_for(result, "get_embed_and_head"))
    assert (f.id, f.severity, f.role) == ("interface.missing", "error", "target")
    assert f.call_sites == (site(root, WORKER, 'getattr(model, "get_embed_and_head")'),)
    assert f.to_json()["details"]["sites"][0]["kind"] == "getattr"
    assert findings_for(result, "hot_token_id") == []
    assert audit_tree(root, "BarForCausalLM").findings == []


def test_hasattr_is_optional(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                if hasattr(model, "set_eagle3_layers_to_capture"):
                    model.set_eagle3_layers_to_capture([1, 2])
                can_capture = hasattr(model, "capture_aux_hidden_states")
                """
            ),
            MODEL: model("FooForCausalLM"),
        },
    )
    assert audit_tree(root, "FooForCausalLM").findings == []


def test_hasattr_then_raise_is_still_required(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                if not hasattr(model, "get_embed_and_head"):
                    raise ValueError("the target model must expose get_embed_and_head")
                """
            ),
            MODEL: model("FooForCausalLM"),
            "sglang/srt/models/bar.py": model(
                "BarForCausalLM", "def get_embed_and_head(self):\n    return self.embed, self.head"
            ),
        },
    )
    f = only(findings_for(audit_tree(root, "FooForCausalLM"), "get_embed_and_head"))
    assert (f.id, f.severity, f.role) == ("interface.missing", "error", "target")
    assert f.call_sites == (site(root, WORKER, "if not hasattr(model"),)
    assert f.to_json()["details"]["sites"][0]["kind"] == "hasattr-raise"
    assert audit_tree(root, "BarForCausalLM").findings == []


@pytest.mark.parametrize(
    ("test", "required"),
    [
        ("head is None", True),
        ("not head", True),
        ('head is None or not hasattr(head, "weight")', True),
        ("head is not None", False),  # raises when it is there: not a requirement
    ],
)
def test_getattr_with_none_then_raise_is_required(
    tmp_path: Path, test: str, required: bool
) -> None:
    """`x = getattr(model, "a", None)` is optional on its own; a later `if x is None: raise`
    makes it a requirement (sglang 0.5.14's DFLASH worker reads the target's `lm_head` so)."""
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                f"""
                model = self.target_worker.model_runner.model
                head = getattr(model, "lm_head", None)
                if {test}:
                    raise RuntimeError("the target model must expose lm_head")
                """
            ),
            MODEL: model("FooForCausalLM"),
        },
    )
    found = findings_for(audit_tree(root, "FooForCausalLM"), "lm_head")
    errors = [f for f in found if f.severity == "error"]
    if not required:
        assert errors == []
        return
    f = only(errors)
    assert f.call_sites == (site(root, WORKER, "head = getattr(model"),)
    assert f.to_json()["details"]["sites"][0]["kind"] == "getattr-raise"


# -- what a class provides --------------------------------------------------------------------

PROVIDERS = {
    "property": ("@property\ndef hot_token_id(self):\n    return self._hot", "property"),
    "class attribute": ("hot_token_id = None", "class attribute"),
    "annotated class attribute": ("hot_token_id: int = 0", "class attribute"),
    "__init__ assignment": (
        "def __init__(self, config):\n    super().__init__()\n    if config.hot:\n        self.hot_token_id = config.hot",
        "__init__ attribute",
    ),
}


@pytest.mark.parametrize("shape", sorted(PROVIDERS))
def test_attribute_provided_by(tmp_path: Path, shape: str) -> None:
    body, kind = PROVIDERS[shape]
    root = write_tree(
        tmp_path,
        {
            WORKER: worker("hot = self.target_worker.model_runner.model.hot_token_id"),
            MODEL: model("FooForCausalLM", body),
        },
    )
    result = audit_tree(root, "FooForCausalLM")
    assert result.findings == []
    provided = dict(result.reports[0].provided)
    assert provided["hot_token_id"].kind == kind
    assert provided["hot_token_id"].owner == FOO
    assert provided["hot_token_id"].file == MODEL


def test_inheritance_across_files_relative_and_absolute(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                embed, head = model.get_embed_and_head()
                model.set_eagle3_layers_to_capture([1, 2])
                """
            ),
            # depth 1: the provider, in another package
            "sglang/srt/layers/base_lm.py": model(
                "BaseLM", "def get_embed_and_head(self):\n    return self.embed, self.head"
            ),
            # depth 2: a relative import three levels up
            "sglang/srt/models/common/mid.py": (
                "from ...layers.base_lm import BaseLM\n\n\nclass MidForCausalLM(BaseLM):\n    pass\n"
            ),
            # re-exported by the package
            "sglang/srt/models/common/__init__.py": "from .mid import MidForCausalLM\n",
            # depth 3, three spellings: absolute, module-relative, through the package re-export
            "sglang/srt/models/leaf.py": (
                "from sglang.srt.models.common.mid import MidForCausalLM\n\n\n"
                "class LeafForCausalLM(MidForCausalLM):\n    pass\n"
            ),
            "sglang/srt/models/leaf2.py": (
                "from .common import mid\n\n\nclass Leaf2ForCausalLM(mid.MidForCausalLM):\n    pass\n"
            ),
            "sglang/srt/models/leaf3.py": (
                "from sglang.srt.models.common import MidForCausalLM as Mid\n\n\n"
                "class Leaf3ForCausalLM(Mid):\n    pass\n"
            ),
        },
    )
    for name, module in [
        ("LeafForCausalLM", "leaf"),
        ("Leaf2ForCausalLM", "leaf2"),
        ("Leaf3ForCausalLM", "leaf3"),
    ]:
        result = audit_tree(root, name)
        assert findings_for(result, "get_embed_and_head") == [], name
        provider = dict(result.reports[0].provided)["get_embed_and_head"]
        assert provider.owner == "sglang.srt.layers.base_lm.BaseLM"
        assert provider.chain == (
            f"sglang.srt.models.{module}.{name}",
            "sglang.srt.models.common.mid.MidForCausalLM",
            "sglang.srt.layers.base_lm.BaseLM",
        )
        assert result.reports[0].external_bases == []
        # what no class in the chain defines is still missing, and nothing was assumed
        f = only(findings_for(result, "set_eagle3_layers_to_capture"))
        assert (f.id, f.severity) == ("interface.missing", "error")
        assert "assumed" not in f.to_json()["details"]


def test_torch_module_attributes(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                params = dict(model.named_parameters())
                model.eval()
                """
            ),
            MODEL: model("FooForCausalLM"),
            "sglang/srt/models/qualified.py": (
                "import torch\n\n\nclass QualifiedForCausalLM(torch.nn.Module):\n    pass\n"
            ),
            "sglang/srt/models/plain.py": "class PlainForCausalLM:\n    pass\n",
        },
    )
    assert audit_tree(root, "FooForCausalLM").findings == []
    assert audit_tree(root, "QualifiedForCausalLM").findings == []
    plain = audit_tree(root, "PlainForCausalLM")
    assert {f.attribute for f in plain.findings} == {"named_parameters", "eval"}
    assert {(f.id, f.severity) for f in plain.findings} == {("interface.missing", "error")}


def test_external_base_is_assumed(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker("self.target_worker.model_runner.model.get_embed_and_head()"),
            MODEL: (
                "from transformers import PreTrainedModel\n\n\n"
                "class FooForCausalLM(PreTrainedModel):\n    pass\n"
            ),
        },
    )
    result = audit_tree(root, "FooForCausalLM")
    assert result.reports[0].external_bases == ["transformers.PreTrainedModel"]
    f = only(findings_for(result, "get_embed_and_head"))
    assert (f.id, f.severity) == ("interface.missing", "error")
    assert len(f.to_json()["details"]["assumed"]) == 1
    assert "transformers.PreTrainedModel" in f.to_json()["details"]["assumed"][0]
    assert f.to_json()["details"]["assumed"] == f.to_json()["details"]["assumed"]


# -- __getattr__ ------------------------------------------------------------------------------

INNER = "sglang/srt/models/inner.py"


def test_getattr_forwarding_is_resolved(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                embed, head = model.get_embed_and_head()
                model.set_eagle3_layers_to_capture([1, 2])
                """
            ),
            INNER: model(
                "InnerForCausalLM",
                "def get_embed_and_head(self):\n    return self.embed, self.head",
            ),
            MODEL: """
            from torch import nn

            from sglang.srt.models.inner import InnerForCausalLM


            class FooForCausalLM(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.inner = InnerForCausalLM(config)

                def __getattr__(self, name):
                    try:
                        return super().__getattr__(name)
                    except AttributeError:
                        return getattr(self.inner, name)
            """,
        },
    )
    result = audit_tree(root, "FooForCausalLM")
    assert findings_for(result, "get_embed_and_head") == []
    provider = dict(result.reports[0].provided)["get_embed_and_head"]
    assert (provider.kind, provider.via) == ("via __getattr__", "inner")
    assert provider.owner == "sglang.srt.models.inner.InnerForCausalLM"
    # forwarded, but the inner class lacks it too: proven missing, an error, no delegate
    f = only(findings_for(result, "set_eagle3_layers_to_capture"))
    assert (f.id, f.severity, f.delegate) == ("interface.missing", "error", None)
    assert f.call_sites == (site(root, WORKER, "model.set_eagle3_layers_to_capture"),)


def test_dynamic_getattr_is_a_warning(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                embed, head = model.get_embed_and_head()
                hot = model.hot_token_id
                """
            ),
            MODEL: model(
                "FooForCausalLM",
                """
                hot_token_id = None

                def __getattr__(self, name):
                    return self._registry[name]
                """,
            ),
            # inherited from a base in another file: still dynamic
            "sglang/srt/models/sub.py": (
                "from sglang.srt.models.foo import FooForCausalLM\n\n\n"
                "class SubForCausalLM(FooForCausalLM):\n    pass\n"
            ),
        },
    )
    for name, qualname in [
        ("FooForCausalLM", FOO),
        ("SubForCausalLM", "sglang.srt.models.sub.SubForCausalLM"),
    ]:
        result = audit_tree(root, name)
        f = only(findings_for(result, "get_embed_and_head"))
        assert (f.id, f.severity, f.class_) == ("interface.missing", "warning", qualname)
        assert f.to_json()["details"]["dynamic_getattr"] == FOO
        assert f.call_sites == (site(root, WORKER, "model.get_embed_and_head()"),)
        # what the class defines outright is not in doubt
        assert findings_for(result, "hot_token_id") == []


# -- stubs and guarded delegations ------------------------------------------------------------


def test_not_implemented_stub_is_an_error(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                embed, head = model.get_embed_and_head()
                model.set_eagle3_layers_to_capture([1, 2])
                width = model.get_hidden_dim()
                """
            ),
            "sglang/srt/models/base.py": model(
                "BaseForCausalLM",
                '''
                def get_embed_and_head(self):
                    """Subclasses override this."""
                    raise NotImplementedError()

                def set_eagle3_layers_to_capture(self, layer_ids=None):
                    raise NotImplementedError

                def get_hidden_dim(self):
                    if self.config.hidden_size is None:
                        raise NotImplementedError
                    return self.config.hidden_size
                ''',
            ),
            MODEL: (
                "from sglang.srt.models.base import BaseForCausalLM\n\n\n"
                "class FooForCausalLM(BaseForCausalLM):\n"
                "    def set_eagle3_layers_to_capture(self, layer_ids=None):\n"
                "        self.layers_to_capture = layer_ids\n"
            ),
        },
    )
    result = audit_tree(root, "FooForCausalLM")
    f = only(findings_for(result, "get_embed_and_head"))
    assert (f.id, f.severity, f.class_) == ("interface.stub", "error", FOO)
    assert f.to_json()["details"]["provided_by"] == "sglang.srt.models.base.BaseForCausalLM"
    assert f.call_sites == (site(root, WORKER, "model.get_embed_and_head()"),)
    # overridden by the subclass: not a stub; a conditional raise is not a stub either
    assert findings_for(result, "set_eagle3_layers_to_capture") == []
    assert findings_for(result, "get_hidden_dim") == []
    base = audit_tree(root, "BaseForCausalLM")
    assert {(f.attribute, f.id, f.severity) for f in base.findings} == {
        ("get_embed_and_head", "interface.stub", "error"),
        ("set_eagle3_layers_to_capture", "interface.stub", "error"),
    }


def test_hasattr_guarded_delegation_is_a_warning(tmp_path: Path) -> None:
    wrapper = """
    class {name}(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.language_model = {inner}(config)

        def set_eagle3_layers_to_capture(self, layer_ids=None):
            if hasattr(self.language_model, "set_eagle3_layers_to_capture"):
                self.language_model.set_eagle3_layers_to_capture(layer_ids)
    """
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                "self.target_worker.model_runner.model.set_eagle3_layers_to_capture([1, 2])"
            ),
            INNER: model("PlainLM")
            + model(
                "CapturingLM",
                "def set_eagle3_layers_to_capture(self, layer_ids=None):\n    self.ids = layer_ids",
            ),
            MODEL: "from torch import nn\n\nfrom sglang.srt.models.inner import CapturingLM, PlainLM\n"
            + textwrap.dedent(wrapper).format(name="FooForCausalLM", inner="PlainLM")
            + textwrap.dedent(wrapper).format(name="GoodForCausalLM", inner="CapturingLM"),
        },
    )
    f = only(audit_tree(root, "FooForCausalLM").findings)
    assert (f.id, f.severity, f.attribute) == (
        "interface.stub",
        "warning",
        "set_eagle3_layers_to_capture",
    )
    assert f.delegate == "language_model"
    assert f.to_json()["details"]["delegate_lacking"] == ["sglang.srt.models.inner.PlainLM"]
    assert f.call_sites == (site(root, WORKER, ".set_eagle3_layers_to_capture([1, 2])"),)
    assert audit_tree(root, "GoodForCausalLM").findings == []


# -- call signatures --------------------------------------------------------------------------

SIGNATURES = """
def get_embed_and_head(self):
    return self.embed, self.head

def set_eagle3_layers_to_capture(self, layer_ids=None):
    self.layers_to_capture = layer_ids

def set_embed_and_head(self, embed, head):
    self.embed, self.head = embed, head

def capture(self, *args):
    return args

def configure(self, **kwargs):
    return kwargs

def select(self, *, mode):
    return mode

@staticmethod
def describe(text):
    return text
"""


def test_signature_mismatch_is_an_error(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                embed, head = model.get_embed_and_head()
                embed, head = model.get_embed_and_head(0)
                """
            ),
            MODEL: model("FooForCausalLM", SIGNATURES),
        },
    )
    f = only(audit_tree(root, "FooForCausalLM").findings)
    assert (f.id, f.severity, f.attribute, f.role) == (
        "interface.signature",
        "error",
        "get_embed_and_head",
        "target",
    )
    assert f.call_sites == (site(root, WORKER, "model.get_embed_and_head(0)"),)
    assert f.to_json()["details"]["signature"] == "get_embed_and_head(self)"


@pytest.mark.parametrize(
    "call",
    [
        "set_embed_and_head(embed)",  # a required parameter is missing
        "set_eagle3_layers_to_capture(ids=[1])",  # unknown keyword
        "set_eagle3_layers_to_capture([1], layer_ids=[2])",  # bound twice
        "set_eagle3_layers_to_capture([1], [2])",  # too many
        "select('greedy')",  # keyword-only passed positionally
        "select()",  # keyword-only missing
        "describe()",  # staticmethod: no self to bind
    ],
)
def test_signature_rejected_shapes(tmp_path: Path, call: str) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(f"model = self.target_worker.model_runner.model\nmodel.{call}\n"),
            MODEL: model("FooForCausalLM", SIGNATURES),
        },
    )
    f = only(audit_tree(root, "FooForCausalLM").findings)
    assert (f.id, f.severity) == ("interface.signature", "error")
    assert f.call_sites == (site(root, WORKER, f"model.{call}"),)


def test_signature_accepted_shapes(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                model = self.target_worker.model_runner.model
                embed, head = model.get_embed_and_head()
                model.set_eagle3_layers_to_capture()
                model.set_eagle3_layers_to_capture([1, 2])
                model.set_eagle3_layers_to_capture(layer_ids=[1, 2])
                model.set_embed_and_head(embed, head)
                model.set_embed_and_head(embed, head=head)
                model.set_embed_and_head(*pair)
                model.set_embed_and_head(**parts)
                model.capture()
                model.capture(1, 2, 3)
                model.configure(a=1, b=2)
                model.select(mode="greedy")
                model.describe("text")
                """
            ),
            MODEL: model("FooForCausalLM", SIGNATURES),
        },
    )
    assert audit_tree(root, "FooForCausalLM").findings == []


# -- references passed to helpers ------------------------------------------------------------

UTILS = "sglang/srt/speculative/eagle_utils.py"


def test_model_passed_to_helper_in_another_module(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            RUNNER: runner(
                """
                self.model = get_model(self.server_args)
                if self.spec_algorithm.is_eagle3():
                    capture_layers(model=self.model, layer_ids=[1, 2])
                    share_lm_head(self.model)
                """,
                imports=(
                    "from sglang.srt.speculative.eagle_utils import capture_layers\n"
                    "from ..speculative.eagle_utils import share_lm_head\n"
                ),
            ),
            UTILS: """
            def capture_layers(model, layer_ids):
                model.set_eagle3_layers_to_capture(layer_ids)


            def share_lm_head(target, draft=None):
                embed, head = target.get_embed_and_head()
                return embed, head
            """,
            MODEL: model("FooForCausalLM"),
            "sglang/srt/models/bar.py": model(
                "BarForCausalLM",
                """
                def set_eagle3_layers_to_capture(self, layer_ids=None):
                    self.ids = layer_ids

                def get_embed_and_head(self):
                    return self.embed, self.head
                """,
            ),
        },
    )
    result = audit_tree(root, "FooForCausalLM")
    keyword = only(findings_for(result, "set_eagle3_layers_to_capture"))
    assert (keyword.id, keyword.severity) == ("interface.missing", "error")
    assert keyword.call_sites == (site(root, UTILS, "model.set_eagle3_layers_to_capture"),)
    assert keyword.to_json()["details"]["sites"][0]["via"] == [
        f"{RUNNER}:{line_of(root, RUNNER, 'capture_layers(model=self.model')}"
    ]
    positional = only(findings_for(result, "get_embed_and_head"))
    assert (positional.id, positional.severity) == ("interface.missing", "error")
    assert positional.call_sites == (site(root, UTILS, "target.get_embed_and_head()"),)
    assert positional.to_json()["details"]["sites"][0]["via"] == [
        f"{RUNNER}:{line_of(root, RUNNER, 'share_lm_head(self.model)')}"
    ]
    # the caller's guard travels with the reference
    assert audit_tree(root, "FooForCausalLM", "STANDALONE").findings == []
    assert audit_tree(root, "BarForCausalLM").findings == []


# -- roles ------------------------------------------------------------------------------------

ROLE_MODELS = """
from torch import nn


class TargetLM(nn.Module):
    def get_embed_and_head(self):
        return self.embed, self.head


class DraftLM(nn.Module):
    hot_token_id = None


class NeitherLM(nn.Module):
    pass
"""


def test_draft_model_runner_is_the_draft_role(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                embed, head = self.target_worker.model_runner.model.get_embed_and_head()
                self.hot_token_id = self.draft_model_runner.model.hot_token_id
                """
            ),
            MODEL: ROLE_MODELS,
        },
    )
    assert audit_tree(root, "TargetLM", draft_class="DraftLM").findings == []
    # the target role never needs hot_token_id, the draft role never needs get_embed_and_head
    for name in ("DraftLM", "NeitherLM"):
        as_target = audit_tree(root, name).findings
        assert {(f.role, f.attribute) for f in as_target} == {("target", "get_embed_and_head")}
    result = audit_tree(root, "TargetLM", draft_class="NeitherLM")
    f = only(result.findings)
    assert (f.id, f.severity, f.role, f.attribute) == (
        "interface.missing",
        "error",
        "draft",
        "hot_token_id",
    )
    assert f.class_ == "sglang.srt.models.foo.NeitherLM"
    assert f.call_sites == (site(root, WORKER, "self.draft_model_runner.model.hot_token_id"),)


def test_is_draft_worker_guards_pick_the_role(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            RUNNER: runner(
                """
                if self.spec_algorithm.is_eagle3() and not self.is_draft_worker:
                    self.model.set_eagle3_layers_to_capture()
                if self.spec_algorithm.is_eagle() and self.is_draft_worker:
                    self.model.load_lm_head_from_target()
                """
            ),
            MODEL: model("FooForCausalLM"),
        },
    )
    result = audit_tree(root, "FooForCausalLM", draft_class="FooForCausalLM")
    assert {(f.role, f.attribute, f.severity) for f in result.findings} == {
        ("target", "set_eagle3_layers_to_capture", "error"),
        ("draft", "load_lm_head_from_target", "error"),
    }
    target = only(findings_for(result, "set_eagle3_layers_to_capture"))
    assert target.call_sites == (site(root, RUNNER, "self.model.set_eagle3_layers_to_capture()"),)
    draft = only(findings_for(result, "load_lm_head_from_target"))
    assert draft.call_sites == (site(root, RUNNER, "self.model.load_lm_head_from_target()"),)


def test_worker_built_as_draft_worker_holds_the_draft_runner(tmp_path: Path) -> None:
    source = """
    from sglang.srt.managers.tp_worker import TpModelWorker


    class EAGLEWorker(TpModelWorker):
        def __init__(self, server_args, target_worker):
            super().__init__(server_args, is_draft_worker=True)
            self.target_worker = target_worker

        def init_lm_head(self):
            embed, head = self.target_worker.model_runner.model.get_embed_and_head()
            self.model_runner.model.set_embed_and_head(embed, head)
    """
    root = write_tree(
        tmp_path,
        {
            WORKER: source,
            "sglang/srt/managers/tp_worker.py": "class TpModelWorker:\n    pass\n",
            MODEL: model("FooForCausalLM"),
        },
    )
    result = audit_tree(root, "FooForCausalLM", draft_class="FooForCausalLM")
    errors = {(f.role, f.attribute) for f in result.findings if f.severity == "error"}
    assert errors == {("target", "get_embed_and_head"), ("draft", "set_embed_and_head")}
    draft = only([f for f in findings_for(result, "set_embed_and_head", "draft")])
    assert draft.call_sites == (site(root, WORKER, "self.model_runner.model.set_embed_and_head"),)


# -- algorithms -------------------------------------------------------------------------------


def test_algorithm_guards_from_the_trees_enum(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            RUNNER: runner(
                """
                if self.spec_algorithm.is_eagle3():
                    self.model.set_eagle3_layers_to_capture()
                if self.spec_algorithm.supports_spec_v2():
                    self.model.prepare_spec_v2()
                """
            ),
            MODEL: model("FooForCausalLM"),
        },
    )

    def attributes(algorithm: str) -> set[tuple[str, str]]:
        return {
            (f.attribute, f.severity)
            for f in audit_tree(root, "FooForCausalLM", algorithm).findings
        }

    assert attributes("EAGLE3") == {
        ("set_eagle3_layers_to_capture", "error"),
        ("prepare_spec_v2", "error"),
    }
    assert attributes("STANDALONE") == {("prepare_spec_v2", "error")}
    assert attributes("EAGLE") == {("prepare_spec_v2", "error")}
    assert attributes("NEXTN") == {("prepare_spec_v2", "error")}  # launched as EAGLE
    assert attributes("NGRAM") == set()
    f = only(findings_for(audit_tree(root, "FooForCausalLM"), "set_eagle3_layers_to_capture"))
    assert f.call_sites == (site(root, RUNNER, "self.model.set_eagle3_layers_to_capture()"),)
    assert f.to_json()["details"]["sites"][0]["guards"] == ["self.spec_algorithm.is_eagle3()"]


def test_predicates_are_read_from_the_trees_own_enum(tmp_path: Path) -> None:
    # a release where is_eagle() no longer covers EAGLE3 and a new member joined the family
    spec = SPEC_INFO.replace(
        "return self == SpeculativeAlgorithm.EAGLE or self == SpeculativeAlgorithm.EAGLE3",
        "return self in (SpeculativeAlgorithm.EAGLE, SpeculativeAlgorithm.MEDUSA)",
    ).replace("    NONE = auto()", "    MEDUSA = auto()\n    NONE = auto()")
    assert spec.count("MEDUSA") == 2
    root = write_tree(
        tmp_path,
        {
            "sglang/srt/speculative/spec_info.py": spec,
            RUNNER: runner(
                """
                if self.spec_algorithm.is_eagle():
                    self.model.prepare_eagle()
                """
            ),
            MODEL: model("FooForCausalLM"),
        },
    )

    def attributes(algorithm: str) -> set[str]:
        return {f.attribute for f in audit_tree(root, "FooForCausalLM", algorithm).findings}

    assert attributes("EAGLE3") == set()
    assert attributes("EAGLE") == {"prepare_eagle"}
    assert attributes("MEDUSA") == {"prepare_eagle"}


def test_worker_module_scoped_to_its_algorithms(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            NGRAM_WORKER: """
            class NGRAMWorker:
                def __init__(self, server_args, target_worker):
                    self.target_worker = target_worker

                def prepare(self):
                    self.target_worker.model_runner.model.build_ngram_cache()
            """,
            WORKER: worker("self.target_worker.model_runner.model.get_embed_and_head()"),
            MODEL: model("FooForCausalLM"),
        },
    )

    def attributes(algorithm: str) -> set[str]:
        return {f.attribute for f in audit_tree(root, "FooForCausalLM", algorithm).findings}

    assert attributes("EAGLE3") == {"get_embed_and_head"}
    # StandaloneWorker derives from EAGLEWorker, so the EAGLE worker module serves it too
    assert attributes("STANDALONE") == {"get_embed_and_head"}
    assert attributes("NGRAM") == {"build_ngram_cache"}
    f = only(audit_tree(root, "FooForCausalLM", "NGRAM").findings)
    assert (f.id, f.severity) == ("interface.missing", "error")
    assert f.call_sites == (site(root, NGRAM_WORKER, "build_ngram_cache()"),)


def test_use_outside_speculative_decoding_is_info(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            RUNNER: runner(
                """
                self.model.load_kv_cache_scales()
                if self.server_args.enable_eplb:
                    self.model.get_moe_weights()
                """
            ),
            MODEL: model("FooForCausalLM"),
        },
    )
    result = audit_tree(root, "FooForCausalLM")
    assert {(f.attribute, f.id, f.severity) for f in result.findings} == {
        ("load_kv_cache_scales", "interface.missing", "info"),
        ("get_moe_weights", "interface.missing", "info"),
    }
    eplb = only(findings_for(result, "get_moe_weights"))
    assert "self.server_args.enable_eplb" in eplb.message
    assert eplb.call_sites == (site(root, RUNNER, "self.model.get_moe_weights()"),)


# -- delegates --------------------------------------------------------------------------------

DELEGATE_MODELS = {
    "sglang/srt/models/deepseek_v2.py": model(
        "DeepseekV3ForCausalLM",
        """
        def get_embed_and_head(self):
            return self.embed, self.head

        def set_eagle3_layers_to_capture(self, layer_ids=None):
            self.layers_to_capture = layer_ids
        """,
    ),
    "sglang/srt/models/llama.py": model(
        "LlamaForCausalLM", "def get_embed_and_head(self):\n    return self.embed, self.head"
    )
    + model("LlamaModel"),
    "sglang/srt/models/vision.py": model("VisionTower"),
}
DELEGATE_CONSUMERS = {
    WORKER: worker("embed, head = self.target_worker.model_runner.model.get_embed_and_head()"),
    RUNNER: runner(
        """
        if self.spec_algorithm.is_eagle3():
            self.model.set_eagle3_layers_to_capture([1, 2])
        """
    ),
}
WRAPPER_IMPORTS = """
from torch import nn

from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM
from sglang.srt.models.llama import LlamaForCausalLM, LlamaModel
from sglang.srt.models.vision import VisionTower
"""
DEEPSEEK = "sglang.srt.models.deepseek_v2.DeepseekV3ForCausalLM"
LLAMA = "sglang.srt.models.llama.LlamaForCausalLM"


def test_missing_attribute_names_the_inner_delegate(tmp_path: Path) -> None:
    wrapper = """
    class KimiK25ForConditionalGeneration(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.vision_tower = VisionTower(config)
            self.language_model = DeepseekV3ForCausalLM(config)
    """
    files = {
        **DELEGATE_MODELS,
        **DELEGATE_CONSUMERS,
        "sglang/srt/models/kimi_k25.py": WRAPPER_IMPORTS + textwrap.dedent(wrapper),
    }
    root = write_tree(tmp_path, files)
    result = audit_tree(root, "KimiK25ForConditionalGeneration")
    assert {f.attribute for f in result.findings} == {
        "get_embed_and_head",
        "set_eagle3_layers_to_capture",
    }
    f = only(findings_for(result, "set_eagle3_layers_to_capture"))
    assert (f.id, f.severity, f.delegate) == ("interface.missing", "error", "language_model")
    assert f.to_json()["details"]["delegate_class"] == [DEEPSEEK]
    assert "self.language_model (DeepseekV3ForCausalLM) provides it" in f.message
    # The fix is the method exactly as `fix --apply` writes it into the class body.
    assert planned(f) == (
        "    def set_eagle3_layers_to_capture(self, layer_ids=None):\n"
        f"{DOC}"
        "        return self.language_model.set_eagle3_layers_to_capture(layer_ids)\n"
    )
    ast.parse(textwrap.dedent(planned(f)))
    g = only(findings_for(result, "get_embed_and_head"))
    assert g.delegate == "language_model"
    assert planned(g) == (
        "    def get_embed_and_head(self):\n"
        f"{DOC}"
        "        return self.language_model.get_embed_and_head()\n"
    )
    assert "delegate_lacking" not in g.to_json()["details"]


@pytest.mark.parametrize("form", ["if/else", "conditional expression"])
def test_delegate_chosen_by_config(tmp_path: Path, form: str) -> None:
    if form == "if/else":
        choice = """
            if config.use_mla:
                self.language_model = DeepseekV3ForCausalLM(config)
            else:
                self.language_model = LlamaForCausalLM(config)
        """
    else:
        choice = """
            self.language_model = (
                DeepseekV3ForCausalLM(config) if config.use_mla else LlamaForCausalLM(config)
            )
        """
    wrapper = (
        "\n\nclass ChosenForConditionalGeneration(nn.Module):\n"
        "    def __init__(self, config):\n"
        "        super().__init__()\n"
        f"{_block(choice, 8)}\n"
    )
    files = {
        **DELEGATE_MODELS,
        **DELEGATE_CONSUMERS,
        "sglang/srt/models/chosen.py": WRAPPER_IMPORTS + wrapper,
    }
    root = write_tree(tmp_path, files)
    result = audit_tree(root, "ChosenForConditionalGeneration")
    f = only(findings_for(result, "set_eagle3_layers_to_capture"))
    assert (f.id, f.severity, f.delegate) == ("interface.missing", "error", "language_model")
    assert f.to_json()["details"]["delegate_class"] == [DEEPSEEK]
    assert f.to_json()["details"]["delegate_lacking"] == [LLAMA]
    # The condition that picks the lacking class, with its polarity (the else-branch).
    assert f.to_json()["details"]["chosen_by"] == ["not (config.use_mla)"]
    assert "not LlamaForCausalLM, picked when not (config.use_mla)" in f.message
    # both choices provide get_embed_and_head: a plain delegation, nothing lacking
    g = only(findings_for(result, "get_embed_and_head"))
    assert g.delegate == "language_model"
    assert g.to_json()["details"]["delegate_class"] == [DEEPSEEK, LLAMA]
    assert "delegate_lacking" not in g.to_json()["details"]


def test_inner_model_that_lacks_it_is_not_a_delegate(tmp_path: Path) -> None:
    wrapper = """
    class BareForCausalLM(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.model = LlamaModel(config)
    """
    files = {
        **DELEGATE_MODELS,
        **DELEGATE_CONSUMERS,
        "sglang/srt/models/bare.py": WRAPPER_IMPORTS + textwrap.dedent(wrapper),
    }
    root = write_tree(tmp_path, files)
    result = audit_tree(root, "BareForCausalLM")
    assert {f.attribute for f in result.findings} == {
        "get_embed_and_head",
        "set_eagle3_layers_to_capture",
    }
    for f in result.findings:
        assert (f.id, f.severity, f.delegate, f.fix) == ("interface.missing", "error", None, None)
        assert "delegate_class" not in f.to_json()["details"]


# -- the get_/set_ family ---------------------------------------------------------------------


def test_get_set_family_warning(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: worker(
                """
                embed, head = self.target_worker.model_runner.model.get_embed_and_head()
                self.draft_model_runner.model.set_embed_and_head(embed, head)
                """
            ),
            **DELEGATE_MODELS,
            "sglang/srt/models/deepseek_v2.py": model(
                "DeepseekV3ForCausalLM",
                """
                def get_embed_and_head(self):
                    return self.embed, self.head

                def set_embed_and_head(self, embed, head):
                    self.embed, self.head = embed, head
                """,
            ),
            "sglang/srt/models/kimi_k25.py": WRAPPER_IMPORTS
            + """

class KimiK25ForConditionalGeneration(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.language_model = DeepseekV3ForCausalLM(config)


class HalfForCausalLM(nn.Module):
    def set_embed_and_head(self, embed, head):
        self.embed, self.head = embed, head
""",
        },
    )
    result = audit_tree(root, "KimiK25ForConditionalGeneration")
    missing = only(findings_for(result, "get_embed_and_head"))
    assert (missing.id, missing.severity, missing.role) == ("interface.missing", "error", "target")
    family = only(findings_for(result, "set_embed_and_head"))
    assert (family.id, family.severity, family.role) == ("interface.missing", "warning", "target")
    assert family.to_json()["details"]["family_of"] == "get_embed_and_head"
    assert family.call_sites == (
        site(root, WORKER, "self.draft_model_runner.model.set_embed_and_head"),
    )
    assert family.delegate == "language_model"
    assert planned(family) == (
        "    def set_embed_and_head(self, embed, head):\n"
        f"{DOC}"
        "        return self.language_model.set_embed_and_head(embed, head)\n"
    )
    # the sibling is there: only the missing getter is reported
    half = audit_tree(root, "HalfForCausalLM")
    assert {(f.attribute, f.severity) for f in half.findings} == {("get_embed_and_head", "error")}
    # the getter is there: no family to complete
    assert audit_tree(root, "DeepseekV3ForCausalLM").findings == []


# -- the audit never imports the audited code ------------------------------------------------


def test_audit_never_imports_the_tree(tmp_path: Path) -> None:
    marker = tmp_path / "imported.marker"
    root = write_tree(
        tmp_path / "src",
        {
            WORKER: worker(
                "embed, head = self.target_worker.model_runner.model.get_embed_and_head()"
            ),
            RUNNER: runner(
                """
                if self.spec_algorithm.is_eagle3():
                    self.model.set_eagle3_layers_to_capture()
                """
            ),
            MODEL: model("FooForCausalLM") + "\n\nEntryClass = FooForCausalLM\n",
        },
        marker=marker,
    )
    result = audit_tree(root, "FooForCausalLM")
    assert {f.attribute for f in result.findings} == {
        "get_embed_and_head",
        "set_eagle3_layers_to_capture",
    }
    assert not marker.exists()
    assert not [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"architectures": ["FooForCausalLM"]}')
    for which in (["--model-class", "FooForCausalLM"], ["--model-path", str(tmp_path / "model")]):
        proc = run_cli("audit", "--sglang", str(root), *which, "--json")
        assert proc.returncode == 1, proc.stderr
        assert not marker.exists()

    # the marker does work: importing any module of the tree writes it
    subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(root)!r}); import sglang.srt"],
        check=True,
        capture_output=True,
    )
    assert marker.read_text() in {"sglang", "sglang.srt"}


# -- the CLI: results and bad input ----------------------------------------------------------
#
# Every case runs `python -m eaglebug audit ...`; all but two share one child interpreter
# (`run_cli_batch`), so the file stays fast while each case keeps its own exit code and streams.

BAD_CONFIGS: dict[str, tuple[str | bytes | None, str]] = {
    "no folder": (None, "no such model folder"),
    "no config.json": ("", "no config.json"),
    "invalid JSON": ('{"architectures": [', "invalid JSON at line 1"),
    "invalid UTF-8": (b'{"architectures": ["\xff"]}', "invalid UTF-8"),
    "not an object": ('["FooForCausalLM"]', "expected a JSON object"),
    "no architectures": ('{"model_type": "foo"}', 'no "architectures" list'),
    "empty architectures": ('{"architectures": []}', 'no "architectures" list'),
    "unregistered architecture": (
        '{"architectures": ["FooForCausalLMV2"]}',
        "'FooForCausalLMV2' is not registered by any EntryClass",
    ),
}
# Files the audit must parse (they touch `model_runner.model`) but cannot.
UNREADABLE: dict[str, tuple[bytes, str]] = {
    "syntax error": (b"def broken(self:\n    self.model_runner.model.foo()\n", "syntax error"),
    "invalid UTF-8": (b"x = '\xff\xfe'\nself.model_runner.model.get_embed_and_head()\n", "skipped"),
    "unknown encoding": (
        b"# -*- coding: no-such-codec -*-\nself.model_runner.model.get_embed_and_head()\n",
        "skipped",
    ),
    "NUL byte": (b"x = 1\x00\nself.model_runner.model.get_embed_and_head()\n", "skipped"),
}
BROKEN = "sglang/srt/speculative/broken_worker.py"
CLI_TREE = {
    WORKER: worker("embed, head = self.target_worker.model_runner.model.get_embed_and_head()"),
    MODEL: model("FooForCausalLM")
    + model("BarForCausalLM", "def get_embed_and_head(self):\n    return self.embed, self.head")
    + "\n\nEntryClass = [FooForCausalLM, BarForCausalLM]\n",
}


@pytest.fixture(scope="module")
def cli_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("cli-tree"), CLI_TREE)


@pytest.fixture(scope="module")
def cli(
    tmp_path_factory: pytest.TempPathFactory, cli_tree: Path
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every CLI case of this file, run once."""
    base = tmp_path_factory.mktemp("cli")
    tree = str(cli_tree)
    not_sglang = base / "other" / "pkg"
    not_sglang.mkdir(parents=True)
    (not_sglang / "__init__.py").write_text("")
    a_file = base / "file.py"
    a_file.write_text("x = 1\n")
    cases: dict[str, list[str]] = {
        "json errors": ["audit", "--sglang", tree, "--model-class", "FooForCausalLM", "--json"],
        "json clean": ["audit", "--sglang", tree, "--model-class", "BarForCausalLM", "--json"],
        "text errors": ["audit", "--sglang", tree, "--model-class", "FooForCausalLM"],
        "sglang is a file": ["audit", "--sglang", str(a_file), "--model-class", "X"],
        "not sglang": ["audit", "--sglang", str(base / "other"), "--model-class", "X"],
        "unknown class": ["audit", "--sglang", tree, "--model-class", "FooForCausalLMM"],
        "unknown algorithm": [
            "audit",
            "--sglang",
            tree,
            "--model-class",
            "FooForCausalLM",
            "--algorithm",
            "MEDUSA",
        ],
        "no class": ["audit", "--sglang", tree],
    }
    for name, (content, _) in BAD_CONFIGS.items():
        folder = base / "configs" / name.replace(" ", "-")
        if content is not None:
            folder.mkdir(parents=True)
            if isinstance(content, bytes):
                (folder / "config.json").write_bytes(content)
            elif content:
                (folder / "config.json").write_text(content)
        cases[f"config: {name}"] = ["audit", "--sglang", tree, "--model-path", str(folder)]
    good = base / "configs" / "good"
    good.mkdir(parents=True)
    (good / "config.json").write_text('{"architectures": ["FooForCausalLM"]}')
    cases["config: good"] = ["audit", "--sglang", tree, "--model-path", str(good), "--json"]
    for name, (content, _) in UNREADABLE.items():
        root = write_tree(
            base / "unreadable" / name.replace(" ", "-"), {**CLI_TREE, BROKEN: content}
        )
        cases[f"unreadable: {name}"] = [
            "audit",
            "--sglang",
            str(root),
            "--model-class",
            "FooForCausalLM",
            "--json",
        ]
    return run_cli_batch(cases, env={"XDG_CACHE_HOME": str(base / "xdg-cache")})


def test_cli_json_and_exit_codes(
    cli: dict[str, subprocess.CompletedProcess[str]], cli_tree: Path
) -> None:
    errors, clean, text = cli["json errors"], cli["json clean"], cli["text errors"]
    assert (errors.returncode, clean.returncode, text.returncode) == (1, 0, 1), errors.stderr
    assert errors.stderr == clean.stderr == text.stderr == ""
    [finding] = json.loads(errors.stdout)["findings"]
    assert (finding["id"], finding["severity"], finding["class"], finding["attribute"]) == (
        "interface.missing",
        "error",
        FOO,
        "get_embed_and_head",
    )
    line = line_of(cli_tree, WORKER, "get_embed_and_head()")
    assert [(s["file"], s["line"]) for s in finding["call_sites"]] == [(WORKER, line)]
    assert json.loads(clean.stdout)["findings"] == []
    assert "get_embed_and_head" in text.stdout
    assert f"{WORKER}:{line}" in text.stdout


def assert_usage_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 2, one `error:` line and at most one `hint:` line, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert 1 <= len(lines) <= 2, proc.stderr
    assert lines[0].startswith("error: "), proc.stderr
    assert all(line.startswith("hint: ") for line in lines[1:]), proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr)


def test_cli_nonexistent_sglang_path(tmp_path: Path) -> None:
    # a real `python -m eaglebug` process, start to exit
    proc = run_cli("audit", "--sglang", str(tmp_path / "nowhere"), "--model-class", "X")
    assert_usage_error(proc, "no such file or directory", "hint: ")
    assert proc.stdout == ""


def test_cli_sglang_path_is_a_file(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert_usage_error(cli["sglang is a file"], "is a file", "hint: ")


def test_cli_folder_that_is_not_sglang(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert_usage_error(cli["not sglang"], "not an SGLang source tree", "hint: ")


def test_cli_unknown_class_suggests_the_closest(
    cli: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    assert_usage_error(
        cli["unknown class"], "'FooForCausalLMM' not found", "hint: did you mean FooForCausalLM"
    )


def test_cli_unknown_algorithm(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert_usage_error(cli["unknown algorithm"], "unknown speculative algorithm 'MEDUSA'", "EAGLE3")


def test_cli_missing_class_argument(cli: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert_usage_error(cli["no class"], "--model-class")


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_cli_bad_model_path(cli: dict[str, subprocess.CompletedProcess[str]], case: str) -> None:
    proc = cli[f"config: {case}"]
    assert_usage_error(proc, BAD_CONFIGS[case][1])
    assert proc.stdout == ""
    if case == "unregistered architecture":
        assert "hint: closest registered: FooForCausalLM" in proc.stderr


def test_cli_model_path_resolves_the_entry_class(
    cli: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    proc = cli["config: good"]
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert [c["class"] for c in data["classes"]] == [FOO]
    assert [f["attribute"] for f in data["findings"]] == ["get_embed_and_head"]


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_cli_unreadable_file_is_skipped_with_one_warning(
    cli: dict[str, subprocess.CompletedProcess[str]], cli_tree: Path, case: str
) -> None:
    proc = cli[f"unreadable: {case}"]
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"warning: {BROKEN}: ")
    assert UNREADABLE[case][1] in lines[0]
    data = json.loads(proc.stdout)
    assert [(f["id"], f["severity"], f["attribute"]) for f in data["findings"]] == [
        ("interface.missing", "error", "get_embed_and_head")
    ]
    line = line_of(cli_tree, WORKER, "get_embed_and_head()")
    assert [(s["file"], s["line"]) for s in data["findings"][0]["call_sites"]] == [(WORKER, line)]
    assert len(data["warnings"]) == 1


def test_latin1_file_with_coding_cookie_is_read(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: (
                b"# -*- coding: latin-1 -*-\n"
                b"NAME = '\xe9agle'\n\n\n"
                b"class EAGLEWorker:\n"
                b"    def __init__(self, server_args, target_worker):\n"
                b"        self.target_worker = target_worker\n\n"
                b"    def init_lm_head(self):\n"
                b"        return self.target_worker.model_runner.model.get_embed_and_head()\n"
            ),
            MODEL: model("FooForCausalLM"),
        },
    )
    result = audit_tree(root, "FooForCausalLM")
    assert result.warnings == []
    f = only(result.findings)
    assert (f.id, f.severity, f.attribute) == ("interface.missing", "error", "get_embed_and_head")
    assert [(s.file, s.line) for s in f.call_sites] == [(WORKER, 10)]


REGISTRY_SPEC_INFO = '''
from collections import defaultdict


class SpeculativeAlgorithm:
    """Registry-backed, as in sglang 0.5.6: members are registered at import time."""

    _flags = defaultdict(set)

    def __init__(self, name, value):
        self.name = name
        self.value = value

    @classmethod
    def register(cls, name):
        return cls(name, len(cls._flags))

    def _has_flag(self, flag):
        return self.value in type(self)._flags.get(flag.upper(), set())

    def is_none(self):
        return self is SpeculativeAlgorithm.NONE

    def is_eagle(self):
        return self._has_flag("EAGLE")

    def is_eagle3(self):
        return self._has_flag("EAGLE3")


def register_speculative_algorithm(name, worker_cls=None, flags=(), aliases=()):
    return SpeculativeAlgorithm.register(name)


SpeculativeAlgorithm.register("NONE")
register_speculative_algorithm("EAGLE", aliases=("NEXTN",), flags=("EAGLE",))
register_speculative_algorithm("EAGLE3", flags=("EAGLE", "EAGLE3"))
register_speculative_algorithm("NGRAM", flags=("NGRAM",))
'''


def test_registry_style_enum_is_read_like_a_declared_one(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "sglang/srt/speculative/spec_info.py": REGISTRY_SPEC_INFO,
            RUNNER: runner(
                """
                if self.spec_algorithm.is_eagle3():
                    self.model.set_eagle3_layers_to_capture()
                if self.spec_algorithm.is_eagle():
                    self.model.prepare_eagle()
                """
            ),
            MODEL: model("FooForCausalLM"),
        },
    )

    def errors(algorithm: str) -> set[str]:
        result = audit_tree(root, "FooForCausalLM", algorithm)
        return {f.attribute or "" for f in result.findings if f.severity == "error"}

    assert errors("EAGLE3") == {"set_eagle3_layers_to_capture", "prepare_eagle"}
    assert errors("EAGLE") == {"prepare_eagle"}
    assert errors("NEXTN") == {"prepare_eagle"}
    assert errors("NGRAM") == set()
    with pytest.raises(InputError, match="unknown speculative algorithm 'MEDUSA'") as refused:
        audit_tree(root, "FooForCausalLM", "MEDUSA")
    assert refused.value.hint == "choose one of: EAGLE, EAGLE3, NGRAM"
