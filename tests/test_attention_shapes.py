"""The interpreter behind `config.attention_backend`, on synthetic trees: one code shape each.

A small SGLang-shaped `server_args.py` holds the shapes the real releases use: a helper imported
from another module (`is_no_spec_infer_or_topk_one`), a capability probe built with
`partial(_check_cuda_device_version, device_capability_majors=[...])`, an `if/elif/else` whose
middle test reads the environment (undecided), an early `return`, a page-size snap that a later
rule reads, a local tuple the rule's message renders, an `assert`, and backend factories with
an `assert` on the capability and a `raise` on MLA. Each test changes one input and checks the
one decision that depends on it, so every shape is seen decided, undecided and on both sides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.args import resolution as attnrules
from eaglebug.checks.args import world as attnworld
from eaglebug.checks.args.attention import check_attention, parse_gpu_arch
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import FlagFix
from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.values import OneOf
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.synthetic import line_of, write_tree
from tests.test_attention import evidence, refusals

SERVER_ARGS = """
from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from typing import Optional

from sglang.srt.utils.common import is_sm100_supported, topk_is_one

ATTENTION_BACKEND_CHOICES = [
    # Common
    "triton",
    # NVIDIA specific
    "fa3",
    "flashinfer",
    "flashmla",
    "trtllm_mla",
    "trtllm_mha",
    # AMD specific
    "aiter",
]


class Mode(Enum):
    FAST = "fast"
    SAFE = "safe"


def _mode_of(backend):
    return Mode.FAST if backend == "trtllm_mha" else Mode.SAFE


@dataclass
class ServerArgs:
    model_path: Optional[str] = None
    attention_backend: Optional[str] = None
    page_size: Optional[int] = None
    speculative_algorithm: Optional[str] = None
    speculative_draft_model_path: Optional[str] = None
    speculative_eagle_topk: Optional[int] = None
    speculative_draft_attention_backend: Optional[str] = None

    def __post_init__(self):
        self._handle_backend()
        self._handle_page_size()
        self._handle_speculative_decoding()
        self._handle_backend_modes()

    def _handle_backend(self):
        if self.attention_backend is None:
            if is_sm100_supported() and topk_is_one(self):
                self.attention_backend = "trtllm_mha"
            elif os.environ.get("PREFER_TRITON"):
                self.attention_backend = "triton"
            else:
                self.attention_backend = "flashinfer"

    def _handle_page_size(self):
        if self.page_size is None:
            self.page_size = 1
        if self.attention_backend == "flashmla":
            self.page_size = 64
        assert self.page_size <= 256, "page_size above 256 is not supported"

    def _handle_speculative_decoding(self):
        if self.speculative_algorithm is None:
            return
        if self.speculative_eagle_topk is None:
            self.speculative_eagle_topk = 4
        tree_backends = ("flashinfer", "fa3")
        if (
            self.speculative_eagle_topk > 1
            and self.page_size > 1
            and self.attention_backend not in tree_backends
        ):
            raise ValueError(  # the rule
                f"topk {self.speculative_eagle_topk} with page size {self.page_size} "
                f"needs {tree_backends}; got {self.attention_backend!r}"
            )

    def _handle_backend_modes(self):
        backend = self.attention_backend
        if backend == "torch_native":
            assert self.speculative_algorithm is None, "torch_native cannot serve speculative decoding"
        if _mode_of(backend) == Mode.FAST and self.page_size == 1:
            raise ValueError("the fast mode needs pages")

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--attention-backend", type=str)
        parser.add_argument("--page-size", type=int)
        parser.add_argument("--speculative-algorithm", type=str)
        parser.add_argument("--speculative-draft-model-path", type=str)
        parser.add_argument("--speculative-eagle-topk", type=int)
        parser.add_argument("--speculative-draft-attention-backend", type=str)
"""

UTILS = """
from functools import lru_cache, partial


def _check_cuda_device_version(device_capability_majors, cuda_version):
    return False


is_sm100_supported = lru_cache(maxsize=1)(
    partial(_check_cuda_device_version, device_capability_majors=[10], cuda_version=(12, 8))
)


def topk_is_one(server_args):
    return server_args.speculative_eagle_topk is None or server_args.speculative_eagle_topk == 1


def get_device_capability():
    return (0, 0)
"""

REGISTRY = """
from sglang.srt.utils.common import get_device_capability


def register_attention_backend(name):
    return lambda fn: fn


@register_attention_backend("flashinfer")
def create_flashinfer(runner):
    return None


@register_attention_backend("fa3")
def create_fa3(runner):
    major, minor = get_device_capability()
    assert major == 9, "fa3 needs SM90; use --attention-backend flashinfer"


@register_attention_backend("trtllm_mla")
def create_trtllm_mla(runner):
    if not runner.use_mla_backend:
        raise ValueError("trtllm_mla needs an MLA model")
"""

SERVER = "sglang/srt/server_args.py"
REG = "sglang/srt/layers/attention/attention_registry.py"
MHA: dict[str, Any] = {"architectures": ["LlamaForCausalLM"], "num_key_value_heads": 8}
MLA: dict[str, Any] = {"architectures": ["DeepseekV3ForCausalLM"], "kv_lora_rank": 512}
SPEC = ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(
        tmp_path_factory.mktemp("shapes"),
        {SERVER: SERVER_ARGS, "sglang/srt/utils/common.py": UTILS, REG: REGISTRY},
    )


@pytest.fixture(scope="module")
def index(tree: Path) -> TreeIndex:
    return TreeIndex(locate(str(tree)), use_cache=False)


def run(
    index: TreeIndex, *flags: str, arch: str = "sm90", target: dict[str, Any] = MHA
) -> list[Finding]:
    launch = parse_launch(["--model-path", "/m", *flags], server_flags(index))
    draft = MHA if "--speculative-algorithm" in flags else None
    return check_attention(index, launch, target, draft, parse_gpu_arch(arch))


def resolved(index: TreeIndex, *flags: str, arch: str = "sm90") -> attnrules.Resolution:
    launch = parse_launch(["--model-path", "/m", *flags], server_flags(index))
    values = attnrules.launch_values(index, launch)
    capability = parse_gpu_arch(arch).capability
    models = attnworld.Models(("LlamaForCausalLM",), ("LlamaForCausalLM",), False, False, MHA)
    result = attnrules.resolve(index, values, capability, models)
    assert result is not None
    return result


def test_probe_majors_are_read_from_the_partial(index: TreeIndex) -> None:
    [probe] = attnworld.probes(index)
    assert (probe.name, probe.majors) == ("is_sm100_supported", (10,))


def test_imported_helper_and_probe_decide_the_branch(index: TreeIndex, tree: Path) -> None:
    """sm100 with top-k unset: the helper (another module) and the probe are both true."""
    result = resolved(index, arch="sm100")
    assert result.values["attention_backend"] == "trtllm_mha"
    write = result.writes["attention_backend"]
    assert (write.rel, write.line) == (
        SERVER,
        line_of(tree, SERVER, 'self.attention_backend = "trtllm_mha"'),
    )
    assert (
        resolved(index, "--speculative-eagle-topk", "2", arch="sm100").values["attention_backend"]
        != "trtllm_mha"
    )


def test_undecided_test_merges_both_writes(index: TreeIndex) -> None:
    """The environment decides between triton and flashinfer: both are kept, as alternatives."""
    backend = resolved(index, arch="sm90").values["attention_backend"]
    assert isinstance(backend, OneOf) and set(backend.values) == {"triton", "flashinfer"}
    [info] = run(index, *SPEC)
    assert info.severity == "info" and "flashinfer or triton" in info.message


def test_rule_reads_the_snapped_page_size(index: TreeIndex, tree: Path) -> None:
    """flashmla snaps the page size to 64 before the rule reads it; the message renders the
    local tuple and the values as the tree's f-string would."""
    [finding] = run(index, *SPEC, "--attention-backend", "flashmla")
    assert finding.severity == "warning"
    assert evidence(finding).read_from == f"{SERVER}:{line_of(tree, SERVER, '# the rule')}"
    assert evidence(finding).sglang_message == (
        "topk 4 with page size 64 needs ('flashinfer', 'fa3'); got 'flashmla'"
    )
    assert finding.fix is not None  # the backends the message names, in its order, that pass
    assert finding.fix.text() == "--attention-backend flashinfer   (or --attention-backend fa3)"


def test_rule_other_sides(index: TreeIndex) -> None:
    triton = ("--attention-backend", "triton")
    assert refusals(run(index, *SPEC, *triton, "--page-size", "1")) == []
    assert [f.severity for f in run(index, *SPEC, *triton, "--page-size", "8")] == ["warning"]
    [accepted] = run(index, *SPEC, *triton, "--page-size", "1")
    assert accepted.message.startswith("the triton attention backend on sm90 (page size 1, ")
    assert (
        refusals(run(index, *SPEC, *triton, "--page-size", "8", "--speculative-eagle-topk", "1"))
        == []
    )


def test_undecided_backend_is_not_reported(index: TreeIndex) -> None:
    """Page size 8, top-k 4 and `auto` on sm90: triton would be refused, flashinfer not; the
    environment decides, so nothing is reported as refused."""
    found = run(index, *SPEC, "--page-size", "8")
    assert [f.severity for f in found] == ["info"]


def test_early_return_guards_the_rule(index: TreeIndex) -> None:
    """Without speculative decoding the handler returns first: no refusal, whatever else."""
    result = resolved(index, "--attention-backend", "flashmla", "--page-size", "8")
    assert [r for r in result.raised if r.definite] == []


def test_assert_is_a_refusal(index: TreeIndex, tree: Path) -> None:
    [finding] = [f for f in run(index, *SPEC, "--page-size", "512") if f.severity != "info"]
    assert evidence(finding).value("raises") == "AssertionError"
    assert evidence(finding).sglang_message == "page_size above 256 is not supported"
    assert (
        evidence(finding).read_from == f"{SERVER}:{line_of(tree, SERVER, 'assert self.page_size')}"
    )


def test_factory_assert_on_capability_is_an_error_after_the_load(
    index: TreeIndex, tree: Path
) -> None:
    found = [
        f for f in run(index, "--attention-backend", "fa3", arch="sm100") if f.severity != "info"
    ]
    assert [(f.severity, f.role) for f in found] == [("error", "target")]
    assert evidence(found[0]).read_from == f"{REG}:{line_of(tree, REG, 'assert major == 9')}"
    assert found[0].fix is not None and found[0].fix.text() == "--attention-backend flashinfer"
    assert [
        f for f in run(index, "--attention-backend", "fa3", arch="sm90") if f.severity != "info"
    ] == []


def test_factory_raise_on_mla_hits_the_draft_only(index: TreeIndex) -> None:
    found = run(
        index,
        *SPEC,
        "--attention-backend",
        "trtllm_mla",
        "--speculative-eagle-topk",
        "1",
        target=MLA,
    )
    errors = [f for f in found if f.severity == "error"]
    assert [(f.role, evidence(f).sglang_message) for f in errors] == [
        ("draft", "trtllm_mla needs an MLA model")
    ]
    assert isinstance(errors[0].fix, FlagFix)
    assert errors[0].fix.flag == "--speculative-draft-attention-backend"
    fixed = run(
        index,
        *SPEC,
        "--attention-backend",
        "trtllm_mla",
        "--speculative-eagle-topk",
        "1",
        "--speculative-draft-attention-backend",
        "flashinfer",
        target=MLA,
    )
    assert [f for f in fixed if f.severity == "error"] == []


def test_a_local_carries_the_fields_it_was_read_from(index: TreeIndex) -> None:
    """`backend = self.attention_backend; if backend == ...`: the test reads the backend."""
    [finding] = refusals(
        run(index, *SPEC, "--attention-backend", "torch_native", "--page-size", "1")
    )
    assert evidence(finding).sglang_message == "torch_native cannot serve speculative decoding"
    assert finding.attribute == "attention_backend"
    assert refusals(run(index, "--attention-backend", "torch_native")) == []


def test_enum_members_compare_by_identity(index: TreeIndex) -> None:
    """A helper returns an enum member; the caller compares it with another member."""
    found = refusals(
        run(index, "--attention-backend", "trtllm_mha", "--page-size", "1", arch="sm100")
    )
    assert [evidence(f).sglang_message for f in found] == ["the fast mode needs pages"]
    assert (
        refusals(run(index, "--attention-backend", "trtllm_mha", "--page-size", "16", arch="sm100"))
        == []
    )
    assert refusals(run(index, "--attention-backend", "triton", "--page-size", "1")) == []


def test_nvidia_backends_come_from_the_choice_sections(index: TreeIndex) -> None:
    assert attnrules.nvidia_backends(index) == (
        "fa3",
        "flashinfer",
        "flashmla",
        "trtllm_mla",
        "trtllm_mha",
        "triton",
    )


def test_too_deep_to_follow_is_incomplete_not_a_crash(
    index: TreeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    def too_deep(*args: object, **kwargs: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(Machine, "invoke", too_deep)
    found = run(index, *SPEC, "--page-size", "4")  # a launch no other case asks about
    assert [(f.severity, "incomplete" in f.message) for f in found] == [("info", True)]
    assert any("not read to its end" in w for w in index.warnings)
