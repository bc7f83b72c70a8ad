"""Guard shapes of the runtime, each on a small synthetic tree: what a use depends on.

Each test writes the shape once and audits a class that passes the guard and one that does
not, so both sides of the rule are checked: the guard cuts the requirement where the code
only runs for a model that has the names, and keeps it where the code runs regardless.
"""

from __future__ import annotations

from pathlib import Path

from tests.synthetic import audit_tree, findings_for, write_tree

RUNNER = "sglang/srt/model_executor/model_runner.py"
HELPERS = "sglang/srt/model_executor/helpers.py"
WORKER = "sglang/srt/speculative/eagle_worker.py"
MODELS = "sglang/srt/models/foo.py"

MODEL_CLASSES = """
from torch import nn


class PlainLM(nn.Module):
    pass


class WidthLM(nn.Module):
    def get_aux_width(self):
        return 4

    def set_projector(self, projector):
        return True

    def should_project(self):
        return True
"""


def _runner(body: str, imports: str = "") -> str:
    return (
        "from typing import Protocol, runtime_checkable\n"
        "from sglang.srt.speculative.spec_info import SpeculativeAlgorithm\n"
        f"{imports}\n\n"
        "class ModelRunner:\n"
        "    def __init__(self, server_args):\n"
        "        self.spec_algorithm = SpeculativeAlgorithm.from_string(server_args.algo)\n"
        "\n"
        "    def load_model(self):\n"
        + "".join(f"        {line}\n" for line in body.strip("\n").splitlines())
    )


def _missing(root: Path, cls: str, attribute: str, algorithm: str = "EAGLE3") -> list[str]:
    result = audit_tree(root, cls, algorithm)
    return [f.severity for f in findings_for(result, attribute) if f.id == "interface.missing"]


def test_runtime_checkable_protocol_is_a_presence_check(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            HELPERS: """
            from typing import Protocol, runtime_checkable


            @runtime_checkable
            class SupportsWidth(Protocol):
                def get_aux_width(self) -> int: ...


            class NotAProtocol:
                def get_aux_width(self) -> int: ...


            def width(model):
                if isinstance(model, SupportsWidth):
                    return model.get_aux_width()
                return 0


            def width_unguarded(model):
                if isinstance(model, NotAProtocol):
                    return model.get_aux_width()
                return 0
            """,
            RUNNER: _runner(
                "if self.spec_algorithm.is_eagle3():\n    width(self.model)",
                "from sglang.srt.model_executor.helpers import width",
            ),
            MODELS: MODEL_CLASSES,
        },
    )
    # The Protocol's member is checked before the call: a class without it never calls it.
    assert _missing(root, "PlainLM", "get_aux_width") == []
    assert _missing(root, "WidthLM", "get_aux_width") == []
    # isinstance of an ordinary class is not a presence check: the call stays required.
    runner = (root / RUNNER).read_text().replace("import width", "import width_unguarded")
    (root / RUNNER).write_text(runner.replace("width(self.model)", "width_unguarded(self.model)"))
    assert _missing(root, "PlainLM", "get_aux_width") == ["error"]


def test_flag_assigned_from_a_presence_check_guards(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            WORKER: """
            from typing import Protocol, runtime_checkable


            @runtime_checkable
            class SupportsProjection(Protocol):
                def set_projector(self, projector) -> bool: ...

                def should_project(self) -> bool: ...


            def _configure(*, target_model, enabled: bool) -> bool:
                if not enabled:
                    return False
                if not isinstance(target_model, SupportsProjection):
                    return False
                return bool(target_model.set_projector(None))


            class EAGLEWorker:
                def __init__(self, server_args, target_worker):
                    self.target_worker = target_worker
                    self.projection_enabled = _configure(
                        target_model=self.target_worker.model_runner.model, enabled=True
                    )
                    self.has_width = hasattr(self.target_worker.model_runner.model, "get_aux_width")
                    self.always = _configure_plain(self.target_worker.model_runner.model)

                def forward(self):
                    if self.projection_enabled:
                        self.target_worker.model_runner.model.should_project()
                    if self.has_width:
                        self.target_worker.model_runner.model.get_aux_width()
                    if self.always:
                        self.target_worker.model_runner.model.should_project_always()


            def _configure_plain(model):
                return True
            """,
            MODELS: MODEL_CLASSES,
        },
    )
    for attribute in ("should_project", "get_aux_width", "set_projector"):
        assert _missing(root, "PlainLM", attribute) == [], attribute
    # A flag the helper sets truthy whatever the model is still guards nothing.
    assert _missing(root, "PlainLM", "should_project_always") == ["error"]
    assert _missing(root, "WidthLM", "should_project_always") == ["error"]


SHARE = """
def share(target, *, draft=None):
    if draft is not None and hasattr(target, "get_embed_and_head_for_draft"):
        return target.get_embed_and_head_for_draft(draft)
    return target.get_embed_and_head()


def capture(model, *, use_aux, ids):
    if use_aux:
        model.set_eagle3_layers_to_capture(ids)
"""

FOR_DRAFT = """
from torch import nn


class ForDraftLM(nn.Module):
    def get_embed_and_head_for_draft(self, draft_embedding):
        return draft_embedding, None
"""


def test_guard_on_an_argument_every_caller_passes(tmp_path: Path) -> None:
    caller = "share(self.target_worker.model_runner.model, draft=self.draft_model_runner.model)"
    root = write_tree(
        tmp_path,
        {
            HELPERS: SHARE,
            WORKER: (
                "from sglang.srt.model_executor.helpers import share\n\n\n"
                "class EAGLEWorker:\n"
                "    def __init__(self, server_args, target_worker, draft_model_runner):\n"
                "        self.target_worker = target_worker\n"
                "        self.draft_model_runner = draft_model_runner\n\n"
                "    def init_lm_head(self):\n"
                f"        {caller}\n"
            ),
            RUNNER: _runner(
                "capture(self.model, use_aux=self.spec_algorithm.is_eagle3(), ids=[1])",
                "from sglang.srt.model_executor.helpers import capture",
            ),
            MODELS: FOR_DRAFT,
        },
    )
    # Every caller passes a draft model: the branch that returns first is the one taken.
    assert _missing(root, "ForDraftLM", "get_embed_and_head") == []
    # The flag argument is the algorithm's predicate: EAGLE3 needs the capture, EAGLE not.
    assert _missing(root, "ForDraftLM", "set_eagle3_layers_to_capture", "EAGLE3") == ["error"]
    assert _missing(root, "ForDraftLM", "set_eagle3_layers_to_capture", "EAGLE") == []
    # A caller that passes no draft model reaches the plain getter.
    worker = (root / WORKER).read_text()
    (root / WORKER).write_text(worker.replace("draft=self.draft_model_runner.model", "draft=None"))
    assert _missing(root, "ForDraftLM", "get_embed_and_head") == ["error"]


CHAIN = """
def configure(*, model, use_aux: bool, ids, is_special: bool) -> None:
    if use_aux:
        if is_special and hasattr(model, "set_special_layers"):
            model.set_special_layers(ids)
        elif hasattr(model, "set_plain_layers"):
            model.set_plain_layers(ids)
        else:
            raise ValueError(
                f"Model {model.__class__.__name__} implements neither "
                "set_special_layers nor set_plain_layers."
            )
"""

CHAIN_MODELS = """
from torch import nn


class NeitherLM(nn.Module):
    pass


class SpecialLM(nn.Module):
    def set_special_layers(self, ids):
        self.ids = ids


class PlainLayersLM(nn.Module):
    def set_plain_layers(self, ids):
        self.ids = ids
"""


def test_if_elif_else_raise_chain_requires_one_of_the_names(tmp_path: Path) -> None:
    call = (
        "configure(model=self.model, use_aux=self.spec_algorithm.is_eagle(),"
        " ids=[1], is_special=self.spec_algorithm.is_eagle3())"
    )
    root = write_tree(
        tmp_path,
        {
            HELPERS: CHAIN,
            RUNNER: _runner(call, "from sglang.srt.model_executor.helpers import configure"),
            MODELS: CHAIN_MODELS,
        },
    )
    both = "set_special_layers or set_plain_layers"
    result = audit_tree(root, "NeitherLM", "EAGLE3")
    (finding,) = [f for f in result.findings if f.severity == "error"]
    assert (finding.id, finding.attribute) == ("interface.missing", both)
    details = finding.to_json()["details"]
    assert details["one_of"] == ["set_special_layers", "set_plain_layers"]
    assert details["sglang_message"] == (
        "Model {model.__class__.__name__} implements neither set_special_layers nor "
        "set_plain_layers."
    )
    raise_line = next(
        i for i, line in enumerate((root / HELPERS).read_text().splitlines(), 1) if "raise" in line
    )
    assert details["read_from"] == f"{HELPERS}:{raise_line}"
    # Either name takes a branch under EAGLE3; neither call is required on its own.
    for cls in ("SpecialLM", "PlainLayersLM"):
        assert [f for f in audit_tree(root, cls, "EAGLE3").findings if f.severity == "error"] == []
    # Under EAGLE the special branch cannot be taken: only the plain name will do.
    (eagle,) = [f for f in audit_tree(root, "SpecialLM", "EAGLE").findings if f.severity == "error"]
    assert eagle.attribute == "set_plain_layers"
    assert "cannot be taken for EAGLE" in eagle.message
    # Not reached at all where the outer flag is false.
    assert audit_tree(root, "NeitherLM", "STANDALONE").findings == []


EAGLE_DRAFT = """
from sglang.srt.model_executor.helpers import share


class EagleDraftWorker:
    def __init__(self, target_worker, draft_runner):
        self.target_worker = target_worker
        self.draft_runner = draft_runner
        self.init_lm_head()

    def init_lm_head(self):
        embed, head = self._resolve_shared()
        self.draft_runner.model.set_embed_and_head(embed, head)

    def _resolve_shared(self):
        return share(self.target_worker.model_runner.model)


class EAGLEWorker:
    def __init__(self, server_args, target_worker):
        self.draft_worker = EagleDraftWorker(target_worker, None)
"""

STANDALONE_DRAFT = """
from sglang.srt.speculative.eagle_worker import EAGLEWorker, EagleDraftWorker


class StandaloneDraftWorker(EagleDraftWorker):
    def init_lm_head(self):
        pass


class StandaloneWorker(EAGLEWorker):
    def __init__(self, server_args, target_worker):
        self.draft_worker = StandaloneDraftWorker(target_worker, None)
"""


def test_a_subclass_override_that_does_nothing_cuts_the_path(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            HELPERS: SHARE,
            WORKER: EAGLE_DRAFT,
            "sglang/srt/speculative/standalone_worker.py": STANDALONE_DRAFT,
            MODELS: MODEL_CLASSES,
        },
    )
    # EAGLE's draft worker reaches the helper through init_lm_head -> _resolve_shared.
    assert _missing(root, "PlainLM", "get_embed_and_head", "EAGLE") == ["error"]
    # STANDALONE's draft worker overrides init_lm_head with `pass`: the helper never runs.
    assert _missing(root, "PlainLM", "get_embed_and_head", "STANDALONE") == []
    # Without the override, the inherited path runs for STANDALONE too.
    standalone = root / "sglang/srt/speculative/standalone_worker.py"
    standalone.write_text(
        STANDALONE_DRAFT.replace("    def init_lm_head(self):\n        pass\n", "    pass\n")
    )
    assert _missing(root, "PlainLM", "get_embed_and_head", "STANDALONE") == ["error"]


def test_an_algorithm_without_a_worker_has_no_speculative_requirement(tmp_path: Path) -> None:
    body = (
        "if self.spec_algorithm.is_none() and server_args.return_aux:\n"
        "    self.model.set_eagle3_layers_to_capture([1])"
    )
    root = write_tree(tmp_path, {RUNNER: _runner(body), MODELS: MODEL_CLASSES})
    # NONE's launch runs no speculative worker: what it needs is another feature's, an info.
    result = audit_tree(root, "PlainLM", "NONE")
    assert [(f.severity, f.attribute) for f in result.findings] == [
        ("info", "set_eagle3_layers_to_capture")
    ]
    assert audit_tree(root, "PlainLM", "EAGLE3").findings == []


HOOK = """
from typing import Optional


def _resolve_alias(speculative_algorithm: Optional[str], speculative_draft_model_path):
    is_assistant_draft = False
    if speculative_draft_model_path:
        draft_archs = read_archs(speculative_draft_model_path)
        is_assistant_draft = any(arch in ("AssistantLM",) for arch in draft_archs)
    if speculative_algorithm == "EAGLE3" and is_assistant_draft:
        raise ValueError("AssistantLM draft requires EAGLE.")
    if speculative_algorithm == "NEXTN" or speculative_algorithm == "EAGLE":
        if is_assistant_draft:
            return "STANDALONE"
        return "EAGLE"
    return speculative_algorithm
"""

ASSISTANT = """
from torch import nn


class AssistantLM(nn.Module):
    pass


class OtherDraftLM(nn.Module):
    pass
"""


def test_the_tree_promotes_the_algorithm_for_a_draft_architecture(tmp_path: Path) -> None:
    hook = "sglang/srt/arg_groups/speculative_hook.py"
    root = write_tree(
        tmp_path,
        {hook: HOOK, MODELS: MODEL_CLASSES, "sglang/srt/models/assistant.py": ASSISTANT},
    )
    line = next(i for i, t in enumerate(HOOK.splitlines(), 0) if 'return "STANDALONE"' in t)
    result = audit_tree(root, "PlainLM", "NEXTN", "AssistantLM")
    assert (result.algorithm, result.promoted_from) == ("STANDALONE", "NEXTN")
    assert any(f"{hook}:{line}" in w and "audited as STANDALONE" in w for w in result.warnings)
    assert audit_tree(root, "PlainLM", "EAGLE", "AssistantLM").algorithm == "STANDALONE"
    # Another draft, or no draft: the launch's algorithm stands.
    assert audit_tree(root, "PlainLM", "NEXTN", "OtherDraftLM").algorithm == "EAGLE"
    assert audit_tree(root, "PlainLM", "NEXTN").promoted_from is None
    refused = audit_tree(root, "PlainLM", "EAGLE3", "AssistantLM")
    assert refused.algorithm == "EAGLE3"
    assert any("AssistantLM draft requires EAGLE." in w for w in refused.warnings)


def test_a_flag_set_as_a_constructor_keyword_is_decided_by_its_value(tmp_path: Path) -> None:
    body = (
        "self.aux = AuxConfig(is_special=self.spec_algorithm.is_eagle3())\n"
        "configure(model=self.model, use_aux=self.spec_algorithm.is_eagle(), ids=[1],"
        " is_special=self.aux.is_special)"
    )
    root = write_tree(
        tmp_path,
        {
            HELPERS: CHAIN + "\n\nclass AuxConfig:\n    is_special: bool = False\n",
            RUNNER: _runner(
                body, "from sglang.srt.model_executor.helpers import AuxConfig, configure"
            ),
            MODELS: CHAIN_MODELS,
        },
    )
    # EAGLE: the keyword is the predicate, false: the special branch cannot be taken.
    (eagle,) = [f for f in audit_tree(root, "SpecialLM", "EAGLE").findings if f.severity == "error"]
    assert eagle.attribute == "set_plain_layers"
    # EAGLE3: it may be taken, but a flag is never proven true: a warning, not an error.
    eagle3 = audit_tree(root, "SpecialLM", "EAGLE3").findings
    assert [f.severity for f in eagle3 if f.id == "interface.missing"] == ["warning"]
