"""`config.attention_backend`: SGLang's own attention rules for a speculative launch, per release.

Every case runs the real release trees (0.5.9, 0.5.14, 0.5.22, 0.5.23) through `check_attention`,
on both sides of each rule: top-k 1 vs 4, page size 1 vs 16, the backends each release lists,
sm90 vs sm100 (and sm120 for the public reports), an MLA target (DeepSeek-V3's published
config) vs an MHA one (Llama). What a finding cites is checked against the tree's file itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.args.attention import GpuArch, check_attention, parse_gpu_arch
from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import Choice, FlagFix
from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.flags import serve_front_end, server_flags
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.configs import eagle3, llama, write_model
from tests.memconfigs import GPT_OSS_120B

FIXTURES = Path(__file__).parent / "fixtures"
DEEPSEEK_V3: dict[str, Any] = json.loads(
    (FIXTURES / "configs" / "deepseek-v3.config.json").read_text()
)
SM90 = parse_gpu_arch("sm90")
SM100 = parse_gpu_arch("sm100")
EAGLE = ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/draft")
TOPK4 = ("--speculative-num-steps", "3", "--speculative-eagle-topk", "4")
TOPK4 += ("--speculative-num-draft-tokens", "8")
TOPK1 = ("--speculative-num-steps", "3", "--speculative-eagle-topk", "1")
TOPK1 += ("--speculative-num-draft-tokens", "4")


@pytest.fixture(scope="module")
def trees(
    sglang_059: Path, sglang_0514: Path, sglang_0522: Path, sglang_0523: Path
) -> dict[str, TreeIndex]:
    """One uncached index per release, shared by the module's cases."""
    folders = {"0.5.9": sglang_059, "0.5.14": sglang_0514, "0.5.22": sglang_0522}
    folders["0.5.23"] = sglang_0523
    return {v: TreeIndex(locate(str(f)), use_cache=False) for v, f in folders.items()}


Check = Callable[..., list[Finding]]


@pytest.fixture()
def check(trees: dict[str, TreeIndex]) -> Check:
    def run(
        version: str,
        *flags: str,
        gpu: GpuArch | None = SM90,
        target: Mapping[str, Any] | None = None,
        draft: Mapping[str, Any] | None = None,
        command: tuple[str, ...] = ("python", "-m", "sglang.launch_server"),
        environ: Mapping[str, str] | None = None,
    ) -> list[Finding]:
        index = trees[version]
        words = [*command, *flags]
        launch = parse_launch(words, server_flags(index), version, serve_front_end(index))
        target = llama() if target is None else target
        is_spec = "--speculative-algorithm" in flags
        draft = (draft or eagle3()) if is_spec else None
        return check_attention(index, launch, target, draft, gpu, launch.env(environ or {}))

    return run


def refusals(findings: list[Finding]) -> list[Finding]:
    """The refusals (an accepted launch has one info finding: what it will run)."""
    return [f for f in findings if f.severity != "info"]


def evidence(finding: Finding) -> ConfigEvidence:
    assert isinstance(finding.evidence, ConfigEvidence)
    return finding.evidence


def cited_source(index: TreeIndex, finding: Finding) -> str:
    """The cited line and the few after it (where a multi-line raise keeps its message)."""
    read_from = evidence(finding).read_from
    assert read_from is not None
    rel, _, line = read_from.rpartition(":")
    lines = (index.tree.root / rel).read_text().splitlines()
    return "\n".join(lines[int(line) - 1 : int(line) + 6])


def literal_start(message: str) -> str:
    """The part of a rendered message that is literal text in the source (before any {...})."""
    return message.split("'")[0].split("(")[0][:40]


ALL = ["0.5.9", "0.5.14", "0.5.22", "0.5.23"]
LLAMA_RUN = ("--model-path", "/m/llama", *EAGLE)


# -- top-k > 1 with page size > 1 ---------------------------------------------------------------
@pytest.mark.parametrize("version", ALL)
def test_topk_and_page_size_need_a_tree_backend(
    version: str, check: Check, trees: dict[str, TreeIndex]
) -> None:
    found = refusals(
        check(version, *LLAMA_RUN, *TOPK4, "--page-size", "16", "--attention-backend", "flashmla")
    )
    assert len(found) == 1
    finding = found[0]
    assert finding.severity == "warning"  # raised while checking the arguments: seconds, not a load
    assert finding.attribute == "attention_backend+page_size+speculative_eagle_topk"
    message = evidence(finding).sglang_message
    assert message is not None and "speculative_eagle_topk" in message
    source = cited_source(trees[version], finding)
    assert "raise ValueError(" in source and literal_start(message) in source
    assert isinstance(finding.fix, (FlagFix, Choice))
    assert "--attention-backend flashinfer" in finding.fix.text()


@pytest.mark.parametrize("version", ALL)
def test_topk_and_page_size_both_sides(version: str, check: Check) -> None:
    """torch_native keeps the page size it is given and is in no release's list of tree backends."""
    paged = refusals(
        check(
            version, *LLAMA_RUN, *TOPK4, "--page-size", "16", "--attention-backend", "torch_native"
        )
    )
    assert [f.attribute for f in paged] == ["attention_backend+page_size+speculative_eagle_topk"]
    assert (
        refusals(
            check(
                version,
                *LLAMA_RUN,
                *TOPK4,
                "--page-size",
                "1",
                "--attention-backend",
                "torch_native",
            )
        )
        == []
    )
    assert (
        refusals(
            check(
                version,
                *LLAMA_RUN,
                *TOPK4,
                "--page-size",
                "16",
                "--attention-backend",
                "flashinfer",
            )
        )
        == []
    )


@pytest.mark.parametrize("version", ALL)
def test_flashmla_snaps_the_page_size_first(version: str, check: Check) -> None:
    """`--page-size 1` does not help flashmla: the tree sets its page size to 64 before the rule."""
    found = refusals(
        check(version, *LLAMA_RUN, *TOPK4, "--page-size", "1", "--attention-backend", "flashmla")
    )
    assert len(found) == 1
    assert evidence(found[0]).value("page_size") == 64
    assert found[0].fix is not None and "--page-size" not in found[0].fix.text()


@pytest.mark.parametrize("version", ALL)
def test_topk_one_with_pages_is_accepted(version: str, check: Check) -> None:
    found = check(
        version, *LLAMA_RUN, *TOPK1, "--page-size", "64", "--attention-backend", "flashmla"
    )
    assert [f for f in refusals(found) if "speculative_eagle_topk" in (f.attribute or "")] == []


def test_the_tree_backends_differ_by_release(check: Check) -> None:
    """0.5.9 allows flashinfer and fa3 only (and says 'flashinfer'); 0.5.14+ add triton."""
    flags = (*LLAMA_RUN, *TOPK4, "--page-size", "16", "--attention-backend", "triton")
    old = refusals(check("0.5.9", *flags))
    assert len(old) == 1
    assert "only supported for the 'flashinfer' backend" in (evidence(old[0]).sglang_message or "")
    assert evidence(old[0]).read_from is not None
    assert evidence(old[0]).read_from.startswith("sglang/srt/server_args.py:")  # type: ignore[union-attr]
    assert refusals(check("0.5.23", *flags)) == []
    fa3 = (*LLAMA_RUN, *TOPK4, "--page-size", "16", "--attention-backend", "fa3")
    assert refusals(check("0.5.9", *fa3)) == []  # the condition lists fa3, the message does not


# -- trtllm_mha needs top-k 1 ---------------------------------------------------------------------
@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_trtllm_mha_needs_topk_one(version: str, check: Check, trees: dict[str, TreeIndex]) -> None:
    found = refusals(
        check(version, *LLAMA_RUN, *TOPK4, "--attention-backend", "trtllm_mha", gpu=SM100)
    )
    topk = [
        f
        for f in found
        if "trtllm_mha backend only supports topk = 1" in (evidence(f).sglang_message or "")
    ]
    assert len(topk) == 1
    assert evidence(topk[0]).read_from.startswith("sglang/srt/arg_groups/speculative_hook.py:")  # type: ignore[union-attr]
    assert "topk" in cited_source(trees[version], topk[0])
    assert (
        refusals(check(version, *LLAMA_RUN, *TOPK1, "--attention-backend", "trtllm_mha", gpu=SM100))
        == []
    )


# -- no GPU in sight (no NVML, no --gpu-arch) ----------------------------------------------------
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_refusals_that_do_not_read_the_gpu_hold_without_one(version: str, check: Check) -> None:
    """trtllm_mha with top-k 4 (0.5.23), and top-k 4 with page size 16 on a backend outside the
    tree's list: neither path reads the GPU's architecture, so each is as definite as on any."""
    paged = refusals(
        check(
            version,
            *LLAMA_RUN,
            *TOPK4,
            "--page-size",
            "16",
            "--attention-backend",
            "torch_native",
            gpu=None,
        )
    )
    assert [f.severity for f in paged] == ["warning"]
    assert paged[0].attribute == "attention_backend+page_size+speculative_eagle_topk"
    assert evidence(paged[0]).value("gpu_arch") == "an unknown GPU"
    if version == "0.5.23":
        trtllm = refusals(
            check(version, *LLAMA_RUN, *TOPK4, "--attention-backend", "trtllm_mha", gpu=None)
        )
        assert any(
            "trtllm_mha backend only supports topk = 1" in (evidence(f).sglang_message or "")
            for f in trtllm
        )


def test_a_rule_that_reads_the_gpu_is_named_not_raised(check: Check) -> None:
    """DeepSeek-V3 with top-k 4 under 0.5.9: auto's pick, and so the page-size rule, depend on
    the architecture. With none known no refusal is raised on a guess; the rule is named with
    the architectures the tree's own probes list on which it refuses (sm100's run, above)."""
    flags = ("--model-path", "/m/dsv3", "--tp", "8", *EAGLE, *TOPK4)
    found = check("0.5.9", *flags, gpu=None, target=DEEPSEEK_V3)
    assert refusals(found) == []
    named = [f for f in found if "depend on the GPU's architecture" in f.message]
    assert len(named) == 1
    on_sm100 = [f for f in refusals(check("0.5.9", *flags, gpu=SM100, target=DEEPSEEK_V3))]
    where = evidence(on_sm100[0]).read_from
    assert evidence(named[0]).value("needs_gpu_arch") == ((where, ("sm100",)),)
    assert "auto picks" not in " ".join(f.message for f in found)  # nothing said accepted


# -- rules that read the environment ------------------------------------------------------------
def test_spec_v2_needs_topk_one_on_059(check: Check) -> None:
    """0.5.9 refuses top-k > 1 only when SGLANG_ENABLE_SPEC_V2 is set (read with the tree's own
    EnvBool parser); `VAR=value` in front of the command counts like the environment."""
    flags = (*LLAMA_RUN, *TOPK4)
    [finding] = refusals(check("0.5.9", *flags, environ={"SGLANG_ENABLE_SPEC_V2": "true"}))
    assert evidence(finding).sglang_message == (
        "Spec v2 currently only supports topk = 1 for speculative decoding."
    )
    assert refusals(check("0.5.9", *flags, environ={"SGLANG_ENABLE_SPEC_V2": "0"})) == []
    assert refusals(check("0.5.9", *flags)) == []  # EnvBool(False): off unless set
    in_front = ("SGLANG_ENABLE_SPEC_V2=1", "python", "-m", "sglang.launch_server")
    assert len(refusals(check("0.5.9", *flags, command=in_front))) == 1


def test_a_message_over_several_lines_is_shown_on_one(check: Check, tmp_path: Path) -> None:
    """0.5.23 refuses gpt-oss without a backend it lists, in a message of several lines (one
    a backend): the report shows it on one, not with the escaped newlines of a terminal-safe
    line. (The tree reads the architecture from the checkpoint at --model-path.)"""
    from eaglebug.cli.view import evidence_lines

    model = write_model(tmp_path / "gpt-oss", GPT_OSS_120B)
    [finding] = refusals(check("0.5.23", "--model-path", str(model), target=GPT_OSS_120B))
    message = evidence(finding).sglang_message or ""
    assert "backends\n- Prefill: None\n- Decode: None" in message  # as the tree writes it
    [said] = [x.text for x in evidence_lines(finding) if x.text.startswith("SGLang says:")]
    assert said.endswith("but got the following backends - Prefill: None - Decode: None")


@pytest.mark.parametrize("version", ["0.5.14", "0.5.22", "0.5.23"])
def test_later_releases_lack_the_spec_v2_rule(version: str, check: Check) -> None:
    environ = {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert refusals(check(version, *LLAMA_RUN, *TOPK4, environ=environ)) == []


# -- what auto picks ------------------------------------------------------------------------------
def auto(findings: list[Finding]) -> Finding:
    infos = [f for f in findings if f.severity == "info"]
    assert len(infos) == 1, findings
    return infos[0]


@pytest.mark.parametrize("version", ALL)
def test_auto_on_hopper_for_llama_is_fa3(version: str, check: Check) -> None:
    """Top-k is chosen after the backend (Llama's auto top-k is 4), so fa3 stays."""
    finding = auto(check(version, *LLAMA_RUN))
    assert evidence(finding).value("attention_backend") == "fa3"
    assert evidence(finding).value("speculative_eagle_topk") == 4


def test_auto_on_blackwell_for_llama_follows_topk(check: Check) -> None:
    """0.5.9: trtllm_mha only when top-k is given as 1 (unset, it is not known yet)."""
    unset = auto(check("0.5.9", *LLAMA_RUN, gpu=SM100))
    assert evidence(unset).value("attention_backend") == "flashinfer"
    one = auto(check("0.5.9", *LLAMA_RUN, *TOPK1, gpu=SM100))
    assert evidence(one).value("attention_backend") == "trtllm_mha"
    assert evidence(one).read_from.startswith("sglang/srt/server_args.py:")  # type: ignore[union-attr]


def test_auto_on_blackwell_for_llama_0523(check: Check) -> None:
    """0.5.23 keeps the rule (trtllm_mha only for a top-k known to be 1: `_forces_eagle_topk_one`
    compares `str(algorithm).upper()` with `SpeculativeAlgorithm.DFLASH.name`); whether the
    model has attention sinks or asymmetric K/V heads is decided at load time, so alternatives."""
    unset = auto(check("0.5.23", *LLAMA_RUN, gpu=SM100))
    assert evidence(unset).value("attention_backend") == ("flashinfer", "triton")
    one = auto(check("0.5.23", *LLAMA_RUN, *TOPK1, gpu=SM100))
    assert evidence(one).value("attention_backend") == ("fa4", "trtllm_mha")


def test_auto_for_deepseek_on_blackwell(check: Check) -> None:
    """0.5.23 picks flashinfer for MLA on sm100; on Hopper fa3 (get_default_attn_backend)."""
    target = DEEPSEEK_V3
    flags = ("--model-path", "/m/dsv3", "--tp", "8", *EAGLE)
    blackwell = auto(check("0.5.23", *flags, gpu=SM100, target=target))
    assert evidence(blackwell).value("attention_backend") == "flashinfer"
    hopper = auto(check("0.5.23", *flags, gpu=SM90, target=target))
    assert evidence(hopper).value("attention_backend") == "fa3"


# -- an MLA target with an MHA draft ---------------------------------------------------------------
def test_mla_backend_fails_for_the_eagle3_draft_on_059(
    check: Check, trees: dict[str, TreeIndex]
) -> None:
    """0.5.9 gives DeepSeek-V3 trtllm_mla on sm100 by itself; the Llama-shaped EAGLE-3 draft
    inherits it and its factory refuses non-MLA models, after both are loaded."""
    flags = ("--model-path", "/m/dsv3", "--tp", "8", *EAGLE)
    found = refusals(check("0.5.9", *flags, gpu=SM100, target=DEEPSEEK_V3))
    assert len(found) == 1
    finding = found[0]
    assert (finding.severity, finding.role) == ("error", "draft")
    assert finding.attribute == "speculative_draft_attention_backend"
    assert evidence(finding).value("backend") == "trtllm_mla"
    assert "can only be used with MLA models" in (evidence(finding).sglang_message or "")
    assert "attention_registry.py" in (evidence(finding).read_from or "")
    assert "use_mla_backend" in cited_source(trees["0.5.9"], finding) or "MLA" in cited_source(
        trees["0.5.9"], finding
    )
    assert finding.fix == FlagFix(
        "--speculative-draft-attention-backend",
        "flashinfer",
        finding.fix.tradeoff,  # type: ignore[union-attr]
    )
    fixed = check(
        "0.5.9",
        *flags,
        "--speculative-draft-attention-backend",
        "flashinfer",
        gpu=SM100,
        target=DEEPSEEK_V3,
    )
    assert refusals(fixed) == []
    on_hopper = check("0.5.9", *flags, gpu=SM90, target=DEEPSEEK_V3)  # fa3 serves both
    assert refusals(on_hopper) == []


def test_auto_pick_refused_for_topk_4_on_059(check: Check) -> None:
    """DeepSeek-V3 with top-k 4 on sm100 under 0.5.9: auto's trtllm_mla snaps the page size to
    64, which its own top-k rule then refuses; 0.5.23's auto (flashinfer) takes it."""
    flags = ("--model-path", "/m/dsv3", "--tp", "8", *EAGLE, *TOPK4)
    found = [
        f
        for f in refusals(check("0.5.9", *flags, gpu=SM100, target=DEEPSEEK_V3))
        if f.severity == "warning"
    ]
    assert len(found) == 1
    assert "trtllm_mla is auto's own pick" in found[0].message
    assert evidence(found[0]).value("page_size") == 64
    assert found[0].fix is not None and found[0].fix.text() == "--attention-backend flashinfer"
    assert refusals(check("0.5.23", *flags, gpu=SM100, target=DEEPSEEK_V3)) == []


def test_later_releases_give_the_draft_a_draft_backend(check: Check) -> None:
    """0.5.23's draft-backend resolver falls back to a backend the draft supports."""
    flags = ("--model-path", "/m/dsv3", "--tp", "8", *EAGLE, "--attention-backend", "trtllm_mla")
    [accepted] = check("0.5.23", *flags, gpu=SM100, target=DEEPSEEK_V3)
    assert accepted.severity == "info"
    assert "the draft runs flashinfer (draft_worker_common.py:" in accepted.message
    assert evidence(accepted).value("draft_backend") == "flashinfer"


# -- backends gated by architecture ---------------------------------------------------------------
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_fa3_fails_after_the_load_on_blackwell(version: str, check: Check) -> None:
    found = refusals(check(version, *LLAMA_RUN, "--attention-backend", "fa3", gpu=SM100))
    assert [(f.severity, f.role) for f in found] == [("error", "target")]
    assert "FlashAttention v3 Backend requires" in (evidence(found[0]).sglang_message or "")
    assert found[0].fix == FlagFix("--attention-backend", "flashinfer", found[0].fix.tradeoff)  # type: ignore[union-attr]
    assert refusals(check(version, *LLAMA_RUN, "--attention-backend", "fa3", gpu=SM90)) == []


@pytest.mark.parametrize("version", ALL)
def test_trtllm_mla_needs_blackwell(version: str, check: Check) -> None:
    flags = ("--model-path", "/m/dsv3", "--tp", "8", *EAGLE, "--attention-backend", "trtllm_mla")
    hopper = refusals(check(version, *flags, gpu=SM90, target=DEEPSEEK_V3))
    gate = [
        f
        for f in hopper
        if "TRTLLM MLA backend is only supported on Blackwell" in (evidence(f).sglang_message or "")
    ]
    assert len(gate) == 1 and gate[0].severity == "warning"
    assert gate[0].fix is not None and "--attention-backend" in gate[0].fix.text()
    blackwell = check(version, *flags, gpu=SM100, target=DEEPSEEK_V3)
    assert not [
        f for f in blackwell if "only supported on Blackwell" in (evidence(f).sglang_message or "")
    ]


# -- public reports ------------------------------------------------------------------------------
PUBLIC = json.loads((FIXTURES / "attention" / "public_launches.json").read_text())


@pytest.mark.parametrize(
    ("case", "version"),
    [
        ("rtx5090_trtllm_mha", "0.5.9"),
        ("sm120_trtllm_mha_prefill", "0.5.14"),
        ("gb10_trtllm_mha_prefill", "0.5.14"),
    ],
)
def test_public_reports_reproduce(case: str, version: str, check: Check) -> None:
    """The release whose wording the thread quotes refuses it with that wording; 0.5.23,
    which runs trtllm_mha on SM120 too, does not."""
    report = PUBLIC[case]
    words = report["launch"].split()
    command = tuple(words[:3]) if words[0] == "python" else tuple(words[:2])
    gpu = parse_gpu_arch(report["gpu_arch"])
    found = refusals(check(version, *words[len(command) :], command=command, gpu=gpu))
    quoted = report["quoted_error"].removeprefix("ValueError: ")
    assert [f.severity for f in found] == ["warning"]
    assert (evidence(found[0]).sglang_message or "").startswith(quoted)
    assert refusals(check("0.5.23", *words[len(command) :], command=command, gpu=gpu)) == []


# -- the GPU's architecture ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "capability"),
    [
        ("sm90", (9, 0)),
        ("SM100", (10, 0)),
        ("sm_120", (12, 0)),
        ("sm121", (12, 1)),
        ("9.0", (9, 0)),
    ],
)
def test_gpu_arch_spellings(text: str, capability: tuple[int, int]) -> None:
    assert parse_gpu_arch(text).capability == capability


@pytest.mark.parametrize("text", ["h100", "sm9", "90", "sm90x1", ""])
def test_gpu_arch_refuses_other_words(text: str) -> None:
    with pytest.raises(InputError, match="not a GPU architecture"):
        parse_gpu_arch(text)


def test_unknown_gpu_says_how_to_tell(check: Check, trees: dict[str, TreeIndex]) -> None:
    index = trees["0.5.23"]
    launch = parse_launch(["--model-path", "/m", *EAGLE], server_flags(index), "0.5.23")
    [finding] = check_attention(index, launch, llama(), eagle3(), None)
    assert finding.severity == "info" and "--gpu-arch" in finding.message


# -- kept as a tree answer ------------------------------------------------------------------------
def test_a_warm_run_reads_the_answer(sglang_059: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same tree state, launch, configs, GPU and SGLang env vars: the findings come from the
    answers file, without running the tree again; an SGLANG_* variable that changes is a new key."""
    from eaglebug.checks.args import resolution as attnrules

    def findings(environ: dict[str, str]) -> list[Finding]:
        index = TreeIndex(locate(str(sglang_059)))
        launch = parse_launch([*LLAMA_RUN, *TOPK4], server_flags(index), "0.5.9")
        found = check_attention(index, launch, llama(), eagle3(), SM90, environ)
        index.save()
        return found

    cold = findings({"SGLANG_ENABLE_SPEC_V2": "1", "HOME": "/a"})
    assert len(refusals(cold)) == 1

    def no_run(*args: object) -> None:
        raise AssertionError("the tree was run again")

    monkeypatch.setattr(attnrules, "resolve", no_run)
    assert findings({"SGLANG_ENABLE_SPEC_V2": "1", "HOME": "/b"}) == cold  # HOME is not read
    with pytest.raises(AssertionError, match="run again"):
        findings({"SGLANG_ENABLE_SPEC_V2": "0"})
