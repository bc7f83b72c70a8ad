"""A flag a variable sets when the launch runs (`bash -c '... --attention-backend $B'`, a pod's
`valueFrom`) is not known here: no verdict rests on a guess of it.

The engine reads it as unknown (`resolution.launch_values`), so a rule of the tree that reads
it stays undecided and is named, not raised; the memory arithmetic, which reads it as not
given, says so in `assumed`, and an error of it stays one only where it is an error for every
value the tree lists for the flag. Before, `--attention-backend $B` was
read as not given: 0.5.9's auto pick for DeepSeek-V3 on sm100 (trtllm_mha) was an error for a
launch whose backend the user sets in `$B`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.args.attention import check_attention, parse_gpu_arch
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.devices import GpuMemory
from eaglebug.checks.launch.flags import serve_front_end, server_flags
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.index import TreeIndex
from tests.clirun import cli
from tests.configs import eagle3, llama, write_model

FIXTURES = Path(__file__).parent / "fixtures"
DEEPSEEK_V3: dict[str, Any] = json.loads(
    (FIXTURES / "configs" / "deepseek-v3.config.json").read_text()
)
SERVER = "python -m sglang.launch_server"
EAGLE = "--speculative-algorithm EAGLE3 --speculative-draft-model-path /m/draft"
GIB = 1 << 30


def attention(index: TreeIndex, script: str, target: Mapping[str, Any]) -> list[Finding]:
    """The attention findings of `bash -c SCRIPT` on sm100, where `$B` and `$D` are set only
    when the launch runs (as a pod's `valueFrom` is)."""
    launch = parse_launch(
        ["bash", "-c", script],
        server_flags(index),
        index.tree.version or "",
        serve_front_end(index),
        None,
        {},
        frozenset({"B", "D"}),
    )
    return check_attention(index, launch, target, eagle3(), parse_gpu_arch("sm100"), {})


def assumed(finding: Finding | dict[str, Any]) -> tuple[str, ...]:
    if isinstance(finding, dict):
        return tuple(finding["details"].get("assumed", ()))
    assert isinstance(finding.evidence, ConfigEvidence)
    return finding.evidence.assumed


def test_a_backend_set_when_the_launch_runs_is_not_refused_on_a_guess(index_059: TreeIndex) -> None:
    launch = f"{SERVER} --model-path /m/dsv3 --tp 8 {EAGLE}"
    # Not given at all: auto's pick fails the draft after its load on sm100, an error.
    [auto] = [f for f in attention(index_059, launch, DEEPSEEK_V3) if f.severity == "error"]
    assert auto.role == "draft" and "fails after the draft is loaded" in auto.message
    # Given by `$B`: nothing is refused; the finding says what was not decided, and why.
    [said] = attention(index_059, f"{launch} --attention-backend $B", DEEPSEEK_V3)
    assert said.severity == "info"
    assert "not decided for --attention-backend, set when the launch runs" in said.message
    assert assumed(said) == ("--attention-backend $B: set when the launch runs, not known here",)
    # Each backend the tree lists, in place of `$B`: what the same rules make of it.
    evidence = said.evidence
    assert isinstance(evidence, ConfigEvidence)
    accepted, refused = evidence.value("accepted"), dict(evidence.value("refused") or ())  # type: ignore[arg-type]
    assert isinstance(accepted, tuple) and "flashinfer" in accepted
    assert refused["trtllm_mla"].startswith("the draft's factory, attention_registry.py:")
    assert "trtllm_mla" not in accepted and "refused: " in said.message
    assert said.fix is not None and "flashinfer" in said.fix.text()
    # Written in the launch, the same rules decide it.
    given = attention(index_059, f"{launch} --attention-backend flashinfer", DEEPSEEK_V3)
    assert [f.severity for f in given] == ["info"] and not assumed(given[0])


def test_a_backend_chosen_by_a_run_time_flag_names_the_flag(index_059: TreeIndex) -> None:
    """`--device $D`: 0.5.9 picks ascend on NPUs, trtllm_mla on CUDA (which fails the EAGLE-3
    draft on sm100), ... The pick is one of a few as the device goes: said so, with the flag
    in `assumed`, not "auto picks ... (model facts read at load time); the rules accept the
    launch", as before."""
    [said] = attention(
        index_059, f"{SERVER} --model-path /m/dsv3 --tp 8 {EAGLE} --device $D", DEEPSEEK_V3
    )
    assert said.severity == "info"
    assert "not decided for --device, set when the launch runs" in said.message
    assert "its backend is one of ascend, flashinfer," in said.message
    assert said.message.endswith("as --device goes") and "accept the launch" not in said.message
    assert assumed(said) == ("--device $D: set when the launch runs, not known here",)
    # The alternatives as JSON holds them: page sizes as numbers, in order (not "128" < "64").
    details = said.to_json()["details"]
    assert details["page_size"] == [1, 64, 128]
    assert details["decode_attention_backend"] == [None, "ascend"]


def test_a_rule_that_reads_a_run_time_value_is_named_undecided(index_0523: TreeIndex) -> None:
    """0.5.23: the KV dtype picks the decode backend (NVFP4 -> trtllm_mha), which refuses a
    top-k over 1 (`speculative_hook.py`). With the dtype in `$D` nothing is refused on a guess."""
    launch = f"{SERVER} --model-path /m/llama {EAGLE} --speculative-eagle-topk 4"
    launch += " --speculative-num-steps 3 --speculative-num-draft-tokens 8"
    found = attention(index_0523, f"{launch} --kv-cache-dtype $D", llama())
    assert [f.severity for f in found] == ["info"], [f.message for f in found]
    assert "not decided for --kv-cache-dtype" in found[0].message
    undecided = found[0].evidence.value("undecided")  # type: ignore[union-attr]
    assert isinstance(undecided, tuple) and any(
        w.startswith("speculative_hook.py:") for w in undecided
    )
    # Each dtype the tree lists, in place of `$D`: NVFP4 alone is refused, and where.
    tried = dict(dict(found[0].evidence.value("tried"))["--kv-cache-dtype"])  # type: ignore[arg-type, union-attr]
    assert "auto" in tried["accepted"] and "fp8_e4m3" in tried["accepted"]
    assert dict(tried["refused"]) == {"nvfp4": "before the load, speculative_hook.py:1178"}
    assert "--kv-cache-dtype: accepted on sm100: auto," in found[0].message
    assert "refused: nvfp4 (before the load, speculative_hook.py:1178)" in found[0].message
    # The dtype that asks for trtllm_mha: the same rule, decided, refuses the launch.
    nvfp4 = attention(index_0523, f"{launch} --kv-cache-dtype nvfp4", llama())
    assert any(
        f.severity == "warning"
        and "trtllm_mha backend only supports topk = 1" in (f.evidence.sglang_message or "")  # type: ignore[union-attr]
        for f in nvfp4
    ), [f.message for f in nvfp4]


def test_a_launch_refused_for_every_value_of_a_run_time_flag_is_not_a_guess(
    index_059: TreeIndex,
) -> None:
    """0.5.9 takes only fa3, aiter, triton, trtllm_mha or intel_xpu for Llama 4
    (`server_args.py:1462`), and only flashinfer for a top-k over 1 with pages over 1: with
    `--page-size 64` no backend passes, whatever `$B` holds. Some load the weights first (fa3
    fails in its factory): an error, though the backend is not known here."""
    llama4 = llama(architectures=["Llama4ForConditionalGeneration"])
    launch = f"{SERVER} --model-path /m/llama4 {EAGLE} --speculative-eagle-topk 4"
    launch += " --speculative-num-steps 3 --speculative-num-draft-tokens 8 --attention-backend $B"
    [refused] = attention(index_059, f"{launch} --page-size 64", llama4)
    assert refused.severity == "error"
    assert "refuses this launch on sm100 whatever --attention-backend $B holds" in refused.message
    assert "fa3 (the target's factory, attention_registry.py:" in refused.message
    assert "flashinfer (before the load, server_args.py:1462)" in refused.message
    said = assumed(refused)
    assert said[0] == "--attention-backend $B: set when the launch runs, not known here"
    assert said[1].startswith("--attention-backend: refused for each of its values (")
    # With pages of 1, triton passes: which, said; nothing refused on a guess.
    [open_] = attention(index_059, launch, llama4)
    assert open_.severity == "info" and "accepted on sm100: triton;" in open_.message
    assert open_.fix is not None and open_.fix.text().endswith("accepts here: triton")


def test_a_refusal_decided_without_the_variable_is_said_once(index_059: TreeIndex) -> None:
    """0.5.9 on sm100 runs DeepSeek-V3's EAGLE-3 draft on trtllm_mla, which its factory
    refuses after the load whatever `--speculative-attention-mode` holds: that error is the
    check's own; each mode tried meets it too, and is not said again as a second error."""
    launch = f"{SERVER} --model-path /m/dsv3 --tp 8 {EAGLE} --speculative-eagle-topk 1"
    launch += " --speculative-num-steps 3 --speculative-num-draft-tokens 4"
    found = attention(index_059, f"{launch} --speculative-attention-mode $B", DEEPSEEK_V3)
    assert sorted(f.severity for f in found) == ["error", "info"], [f.message for f in found]
    [error] = [f for f in found if f.severity == "error"]
    assert "fails after the draft is loaded" in error.message and "whatever" not in error.message


def test_a_prefill_backend_is_tried_among_the_nvidia_backends(index_0523: TreeIndex) -> None:
    """`--prefill-attention-backend $B`: its `choices=` lists AMD's and Intel's backends too,
    which no factory here refuses; only those the tree lists for NVIDIA GPUs are tried."""
    launch = f"{SERVER} --model-path /m/llama {EAGLE} --prefill-attention-backend $B"
    [said] = attention(index_0523, launch, llama())
    tried = dict(dict(said.evidence.value("tried"))["--prefill-attention-backend"])  # type: ignore[arg-type, union-attr]
    values = {*tried["accepted"], *dict(tried["refused"]), *tried["open"]}
    assert "flashinfer" in values and "triton" in values
    assert not values & {"aiter", "wave", "intel_amx", "ascend", "intel_xpu"}


@pytest.fixture
def small_gpu_launch(tmp_path: Path) -> list[str]:
    """Llama-3.1-8B's weights and an EAGLE-3 draft on an 18.5 GiB GPU: no room for the KV cache."""
    target = write_model(tmp_path / "llama", llama(), total_size=16_060_522_496)
    draft = write_model(tmp_path / "draft", eagle3())
    return [f"{SERVER} --model-path {target} --speculative-algorithm EAGLE3 "
            f"--speculative-draft-model-path {draft}"]  # fmt: skip


def memory(index: TreeIndex, script: str) -> Finding:
    result = preflight(index, ["bash", "-c", script], {}, GpuMemory(int(18.5 * GIB), "test"))
    [found] = [f for f in result.findings if f.id == "config.memory"]
    return found


def test_an_error_for_every_value_of_a_run_time_flag_stays_an_error(
    index_0523: TreeIndex, small_gpu_launch: list[str]
) -> None:
    """Weights that leave no room for the KV cache leave none whatever its dtype: each value
    the tree lists for `--kv-cache-dtype` is run through the same reading, and the error holds."""
    [launch] = small_gpu_launch
    written = memory(index_0523, f"{launch} --kv-cache-dtype fp8_e4m3")
    assert written.severity == "error" and assumed(written) == ()
    at_run_time = memory(index_0523, f"{launch} --kv-cache-dtype $D")
    assert at_run_time.severity == "error"
    said = assumed(at_run_time)
    assert said[0] == "--kv-cache-dtype $D: set when the launch runs, not known here"
    assert said[1].startswith("--kv-cache-dtype: an error for each of its values (auto, ")
    assert "nvfp4" in said[1]  # 0.5.23's own list (`choices.py`), read by the evaluator
    # A flag the memory check does not read leaves its verdict as it was.
    other = memory(index_0523, f"{launch} --attention-backend $B")
    assert other.severity == "error" and assumed(other) == ()


@pytest.fixture
def draft_tips_it(tmp_path: Path) -> str:
    """Llama-3.1-8B (15 GiB) fits a 28 GiB GPU alone; with a 10 GiB draft it leaves no KV cache."""
    target = write_model(tmp_path / "llama", llama(), total_size=16_060_522_496)
    draft = write_model(tmp_path / "big-draft", eagle3(), total_size=10 * GIB)
    return f"{SERVER} --model-path {target} --speculative-draft-model-path {draft}"


def test_a_memory_error_that_rests_on_a_run_time_flag_is_not_one(
    index_0523: TreeIndex, draft_tips_it: str
) -> None:
    def at(script: str) -> Finding:
        found = preflight(index_0523, ["bash", "-c", script], {}, GpuMemory(28 * GIB, "test"))
        return next(f for f in found.findings if f.id == "config.memory")

    assert at(f"{draft_tips_it} --speculative-algorithm EAGLE3").severity == "error"
    unknown = at(f"{draft_tips_it} --speculative-algorithm $A")
    assert unknown.severity == "warning"
    assert unknown.message.endswith(
        "; not decided: read with --speculative-algorithm $A at its default (see assumed)"
    )
    assert assumed(unknown) == (
        "--speculative-algorithm $A: set when the launch runs, not known here",
    )


def test_the_report_and_the_json_say_what_was_assumed(
    sglang_0523: Path, draft_tips_it: str, capsys: pytest.CaptureFixture[str]
) -> None:
    options = ["preflight", "--sglang", str(sglang_0523), "--gpu-mem-gib", "28"]
    script = f"{draft_tips_it} --speculative-algorithm $A"
    # `$A` is in the session's environment, not the launch's: bash would read the session's,
    # which eaglebug does not (a verdict never depends on the shell it runs in).
    text = cli(capsys, *options, "--", "bash", "-c", script)
    assert text.code == 0, text.err  # warnings only: nothing is an error on a guess
    assert (
        "assumed: --speculative-algorithm $A: set when the launch runs, not known here" in text.out
    )
    as_json = cli(capsys, *options, "--json", "--", "bash", "-c", script)
    findings = json.loads(as_json.out)["findings"]
    [mem] = [f for f in findings if f["id"] == "config.memory"]
    assert mem["severity"] == "warning"
    assert "--speculative-algorithm $A: set when the launch runs, not known here" in assumed(mem)


def test_an_algorithm_set_when_the_launch_runs_is_said_not_guessed(
    index_0523: TreeIndex, small_gpu_launch: list[str], tmp_path: Path
) -> None:
    """`--speculative-algorithm $ALGO`: the checks of a speculative launch did not run, and
    what was read with the draft (its shorter context) is not an error on a guess."""
    [launch] = small_gpu_launch
    short = write_model(tmp_path / "short", {**eagle3(), "max_position_embeddings": 2048})
    script = launch.replace("EAGLE3", "$ALGO").replace(str(tmp_path / "draft"), str(short))
    result = preflight(index_0523, ["bash", "-c", script], {}, GpuMemory(80 * GIB, "test"))
    by_id = {f.id: f for f in result.findings}
    said = by_id["config.speculative_algorithm"]
    assert said.severity == "warning" and "were not run" in said.message
    assert assumed(said) == (
        "--speculative-algorithm $ALGO: set when the launch runs, not known here",
    )
    context = by_id["config.context_length"]
    assert context.severity == "warning" and context.role == "draft"
    assert context.message.endswith(
        "; not decided: read with --speculative-algorithm $ALGO as a speculative one (see assumed)"
    )
    assert (
        "read with --speculative-algorithm $ALGO at its default" in by_id["config.memory"].message
    )
    # Written in the launch: the draft's context is an error, and nothing is assumed.
    written = preflight(
        index_0523,
        ["bash", "-c", launch.replace(str(tmp_path / "draft"), str(short))],
        {},
        GpuMemory(80 * GIB, "test"),
    )
    [error] = [f for f in written.findings if f.id == "config.context_length"]
    assert error.severity == "error" and assumed(error) == ()
    assert not [f for f in written.findings if f.id == "config.speculative_algorithm"]
