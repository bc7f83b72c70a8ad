"""`config.memory` on the real releases: SGLang's own arithmetic, both sides of each threshold.

Targets and drafts are the published configs (`tests/memconfigs.py`) with sparse weight
files of their real sizes. GPUs: an 80 GB H100 (81559 MiB as `nvidia-smi` reports it, 78.58 GB
free before the load as SGLang logged it on the docs CI) and a 141 GB H200 (143771 MiB).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.args.resolved import resolved_fields
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import Choice, FlagFix
from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.devices import GpuMemory
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.memory import launch as memory_launch
from eaglebug.checks.memory.check import MemoryInputs
from eaglebug.checks.memory.envflags import flag_env
from eaglebug.checks.memory.fit import Gpu
from eaglebug.checks.orchestrator import PreflightResult, preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.configs import write_model
from tests.memanchors import ANCHORS, inferencex_2128
from tests.memconfigs import (
    DEEPSEEK_V3,
    DEEPSEEK_V3_BYTES,
    EAGLE3_LLAMA31_8B,
    EAGLE3_LLAMA31_8B_BYTES,
    KIMI_K25_BYTES,
    KIMI_K25_EAGLE3_BYTES,
    LLAMA31_8B,
    LLAMA31_8B_BYTES,
    kimi_k25_config,
    kimi_k25_eagle3_config,
    shape_on,
)

GIB = 1 << 30
MIB = 1 << 20
LAUNCH = ("python", "-m", "sglang.launch_server")
H100 = GpuMemory(81559 * MIB, "--gpu-mem-gib", int(78.58 * GIB), "--gpu-free-gib")
H200 = GpuMemory(143771 * MIB, "--gpu-mem-gib", int(139.5 * GIB), "--gpu-free-gib")


@pytest.fixture(params=["0.5.9", "0.5.23"])
def index(request: pytest.FixtureRequest) -> TreeIndex:
    name = "index_059" if request.param == "0.5.9" else "index_0523"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


def models(
    tmp_path: Path,
    target: dict[str, Any] = LLAMA31_8B,
    target_bytes: int = LLAMA31_8B_BYTES,
    draft: dict[str, Any] | None = EAGLE3_LLAMA31_8B,
    draft_bytes: int = EAGLE3_LLAMA31_8B_BYTES,
) -> tuple[str, ...]:
    t = write_model(tmp_path / "target", target, total_size=target_bytes)
    flags: tuple[str, ...] = ("--model-path", str(t))
    if draft is not None:
        d = write_model(tmp_path / "draft", draft, total_size=draft_bytes)
        algorithm = "NEXTN" if draft.get("num_nextn_predict_layers") else "EAGLE3"
        flags += ("--speculative-algorithm", algorithm, "--speculative-draft-model-path", str(d))
    return flags


def memory(index: TreeIndex, *flags: str, gpu: GpuMemory | None = H100) -> list[Finding]:
    result: PreflightResult = preflight(index, [*LAUNCH, *flags], {}, gpu)
    return [f for f in result.findings if f.id == "config.memory"]


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, [f.message for f in findings]
    return findings[0]


def details(finding: Finding) -> dict[str, Any]:
    return finding.to_json()["details"]  # type: ignore[no-any-return]


def flag_value(finding: Finding, flag: str) -> str | None:
    fix = finding.fix
    options = fix.options if isinstance(fix, Choice) else (fix,)
    return next((o.value for o in options if isinstance(o, FlagFix) and o.flag == flag), None)


# -- kept by what it reads --------------------------------------------------------------------
def test_the_memory_check_is_kept_by_all_it_reads(
    index_0523: TreeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preflight from another shell (a variable the check does not read) takes the kept
    answer; an SGLANG_ variable, a flag or another GPU is a new check."""
    runs: list[object] = []
    real = memory_launch.check_memory

    def counted(inputs: MemoryInputs) -> list[Finding]:
        runs.append(inputs.launch)
        return real(inputs)

    monkeypatch.setattr(memory_launch, "check_memory", counted)
    flags = models(tmp_path)

    def check(environ: dict[str, str], *more: str, gpu: GpuMemory = H100) -> str:
        result = preflight(index_0523, [*LAUNCH, *flags, *more], environ, gpu)
        return one([f for f in result.findings if f.id == "config.memory"]).message

    first = check({"EDITOR": "vim"})
    assert check({"EDITOR": "nano", "VIRTUAL_ENV": "/opt/venv"}) == first
    assert len(runs) == 1
    check({"SGLANG_ENABLE_TORCH_COMPILE": "1"})
    assert len(runs) == 2
    assert check({}, "--mem-fraction-static", "0.7") != first
    assert len(runs) == 3
    assert check({}, gpu=H200) != first
    assert len(runs) == 4


# -- the default fraction, read from each release ------------------------------------------
def test_the_default_fraction_is_the_trees_own(
    index_059: TreeIndex, index_0523: TreeIndex, tmp_path: Path
) -> None:
    flags = models(tmp_path)
    old = details(one(memory(index_059, *flags)))
    new = details(one(memory(index_0523, *flags)))
    # 0.5.9: 512 + 8192 x 1.5 + 256 x 2 + 1/8 x 1024 + 2048 (EAGLE draft) MB of 81559;
    # 0.5.23: no draft term, the graph reserve from reserve_for_graph_mb, for the decode
    # graphs capped at the 48 requests its EAGLE-family resolution resets the limit to.
    assert old["mem_fraction_static"] == round((81559 - 15488) / 81559, 3) == 0.81
    assert old["mem_fraction_static_from"].startswith("sglang/srt/server_args.py:")
    assert old["cuda_graph_max_bs"] == 256  # tp < 4 on 80 GB
    assert new["max_running_requests"] == old["max_running_requests"] == 48
    assert new["max_running_requests_from"].startswith("sglang/srt/arg_groups/speculative_hook")
    assert old["max_running_requests_from"].startswith("sglang/srt/server_args.py:")
    assert new["cuda_graph_max_bs"] == 48
    assert new["graph_reserve_gib"] == round(48 * 2 / 1024, 3)  # 48 x 2 MB
    assert new["mem_fraction_static"] == round((81559 - 13024) / 81559, 3) == 0.84
    assert new["mem_fraction_static_from"].startswith("sglang/srt/arg_groups/memory_hook.py:")
    # With the limit given, 0.5.23's decode graphs go to the GPU-size table's 256 (x 2 MB).
    given = details(one(memory(index_0523, *flags, "--max-running-requests", "2048")))
    assert given["cuda_graph_max_bs"] == 256 and given["graph_reserve_gib"] == 0.5
    assert given["mem_fraction_static"] == round((81559 - 13440) / 81559, 3) == 0.835
    assert "max_running_requests_from" not in given


@pytest.mark.parametrize(("total_mib", "chunk"), [(59 * 1024, 4096), (61 * 1024, 8192)])
def test_the_gpu_size_table_on_both_sides_of_60_gib(
    index: TreeIndex, tmp_path: Path, total_mib: int, chunk: int
) -> None:
    gpu = GpuMemory(total_mib * MIB, "--gpu-mem-gib", total_mib * MIB - GIB, "--gpu-free-gib")
    found = details(one(memory(index, *models(tmp_path), gpu=gpu)))
    assert found["chunked_prefill_size"] == chunk
    # Above 60 GiB the tree's floor keeps at least 10 GiB out of the static pool.
    assert (found["reserved_gib"] >= 10) is (total_mib > 60 * 1024)


def test_the_cuda_graph_reserve_follows_the_tp_rule(index_0523: TreeIndex, tmp_path: Path) -> None:
    t = write_model(tmp_path / "t", DEEPSEEK_V3, total_size=DEEPSEEK_V3_BYTES)
    small = details(memory(index_0523, "--model-path", str(t), "--tp", "2", gpu=H200)[0])
    large = details(memory(index_0523, "--model-path", str(t), "--tp", "8", gpu=H200)[0])
    assert (small["cuda_graph_max_bs"], large["cuda_graph_max_bs"]) == (256, 512)


# -- no KV budget ------------------------------------------------------------------------------
def test_the_weights_leave_no_kv_budget_on_both_sides(index: TreeIndex, tmp_path: Path) -> None:
    fits = one(memory(index, *models(tmp_path / "a")))
    assert fits.severity == "info"
    fraction = details(fits)["mem_fraction_static"]
    # The budget is free x fraction: weights just below it leave a pool, just above none.
    edge = int(78.58 * GIB * fraction) - EAGLE3_LLAMA31_8B_BYTES
    below = one(memory(index, *models(tmp_path / "b", target_bytes=edge - GIB)))
    assert below.severity != "error" and details(below)["max_total_num_tokens"] > 0
    above = one(memory(index, *models(tmp_path / "c", target_bytes=edge + 2 * GIB)))
    assert above.severity == "error"
    assert "no GPU memory for the KV cache" in above.message
    evidence = details(above)
    assert evidence["sglang_message"]  # the tree's own raise, evaluated
    assert evidence["read_from"].startswith("sglang/srt/")
    raised = flag_value(above, "--mem-fraction-static")
    assert raised is not None and float(raised) > fraction
    assert flag_value(above, "--tp") == "2"
    # That fraction would leave less than the tree's reserve for the graphs: --tp comes first.
    assert isinstance(above.fix, Choice) and above.fix.options[0].text() == "--tp 2"
    # The fraction the fix gives does leave a pool of one full request.
    fixed = memory(
        index, *models(tmp_path / "c"), "--mem-fraction-static", raised, "--context-length", "8192"
    )
    assert all("no GPU memory" not in f.message for f in fixed)


def test_0523_counts_the_draft_and_0_5_9_does_not(
    index_059: TreeIndex, index_0523: TreeIndex, tmp_path: Path
) -> None:
    """PR #23862: from 0.5.14 the draft's weights are charged to the target's KV budget."""
    heavy = 12 * GIB
    target = int(78.58 * GIB * 0.81) - heavy // 2
    flags = models(tmp_path, target_bytes=target, draft_bytes=heavy)
    new = one(memory(index_0523, *flags))
    assert new.severity == "error" and details(new)["draft_weights_counted"] is True
    old = [f for f in memory(index_059, *flags) if "KV cache" in f.message]
    assert old == [] and details(memory(index_059, *flags)[0])["draft_weights_counted"] is False


# -- the CUDA-graph slack ----------------------------------------------------------------------
def test_a_raised_fraction_leaves_too_little_for_the_graphs(
    index: TreeIndex, tmp_path: Path
) -> None:
    flags = models(tmp_path)
    default = details(one(memory(index, *flags)))["mem_fraction_static"]
    assert [f.severity for f in memory(index, *flags, "--mem-fraction-static", str(default))] == [
        "info"
    ]
    tighter = one(memory(index, *flags, "--mem-fraction-static", f"{default + 0.02:.3f}"))
    assert tighter.severity == "warning"
    assert "outside the static pool" in tighter.message
    lower = flag_value(tighter, "--mem-fraction-static")
    assert lower is not None and float(lower) <= default
    applied = memory(index, *flags, "--mem-fraction-static", lower)
    assert all("outside the static pool" not in f.message for f in applied)
    # 0.1 % of 80 GB outside the pool is less than the decode graphs alone take (0.5.9: 256 x
    # 2 MB; 0.5.23: 48 x 2 MB, capped at the request limit its resolution sets).
    error = [
        f
        for f in memory(index, *flags, "--mem-fraction-static", "0.999")
        if "outside the static pool" in f.message
    ]
    assert one(error).severity == "error"


def test_a_smaller_cuda_graph_batch_is_offered_where_it_fits(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """On 141 GB with --tp 8 the reserve (16 GiB here) is above the 10 GiB floor, so a smaller
    --cuda-graph-max-bs brings it under a slightly raised fraction's slack."""
    flags = models(tmp_path, DEEPSEEK_V3, DEEPSEEK_V3_BYTES, None)
    default = details(memory(index_0523, *flags, "--tp", "8", gpu=H200)[0])
    assert default["cuda_graph_max_bs"] == 512
    raised = f"{default['mem_fraction_static'] + 0.005:.3f}"
    found = [
        f
        for f in memory(index_0523, *flags, "--tp", "8", "--mem-fraction-static", raised, gpu=H200)
        if "outside the static pool" in f.message
    ]
    bs = flag_value(one(found), "--cuda-graph-max-bs-decode")
    assert bs is not None and int(bs) < 512
    again = memory(
        index_0523,
        *flags,
        "--tp",
        "8",
        "--mem-fraction-static",
        raised,
        "--cuda-graph-max-bs-decode",
        bs,
        gpu=H200,
    )
    assert all("outside the static pool" not in f.message for f in again)


# -- the pool against one request -----------------------------------------------------------
def test_a_pool_shorter_than_the_context_on_both_sides(index: TreeIndex, tmp_path: Path) -> None:
    flags = models(tmp_path)
    low = one(memory(index, *flags, "--mem-fraction-static", "0.3"))
    tokens = details(low)["max_total_num_tokens"]
    assert 0 < tokens < 131072 and low.severity == "warning"
    assert "fewer than one request" in low.message
    fraction = flag_value(low, "--mem-fraction-static")
    assert fraction is not None
    assert flag_value(low, "--context-length") == str(tokens)
    fixed = memory(index, *flags, "--mem-fraction-static", fraction)
    assert all("fewer than one request" not in f.message for f in fixed)
    assert details(fixed[0])["max_total_num_tokens"] >= 131072


# -- cell sizes: MHA and MLA, with the draft's layers where the tree adds them ------------
def test_mha_cell_with_the_eagle3_layer(
    index_059: TreeIndex, index_0523: TreeIndex, tmp_path: Path
) -> None:
    flags = models(tmp_path)
    mha = 8 * (128 + 128) * 32 * 2  # KV heads x (K + V head dims) x layers x bf16
    assert details(memory(index_059, *flags)[0])["kv_cell_bytes"] == mha
    assert details(memory(index_059, *flags)[0])["draft_kv_cell_bytes"] == 8 * 256 * 1 * 2
    assert details(memory(index_0523, *flags)[0])["kv_cell_bytes"] == mha + mha // 32
    fp8 = details(memory(index_0523, *flags, "--kv-cache-dtype", "fp8_e4m3")[0])
    assert fp8["kv_cell_bytes"] == (mha + mha // 32) // 2
    tp2 = details(memory(index_0523, *flags, "--tp", "2")[0])
    assert tp2["kv_cell_bytes"] == (mha + mha // 32) // 2  # 4 KV heads per rank


def test_mla_cells_deepseek_v3_nextn_and_kimi_k25_eagle3(
    index_059: TreeIndex, index_0523: TreeIndex, tmp_path: Path
) -> None:
    mla = (512 + 64) * 61 * 2  # (kv_lora_rank + rope dim) x layers x bf16, not split by TP
    v3 = models(tmp_path / "v3", DEEPSEEK_V3, DEEPSEEK_V3_BYTES, DEEPSEEK_V3, 0)
    new = details(one(memory(index_0523, *v3, "--tp", "8", gpu=H200)))
    assert new["kv_cell_bytes"] == mla + mla // 61  # the NextN layer, in the same pool
    assert new["max_total_num_tokens"] > 163840
    old = details(one(memory(index_059, *v3, "--tp", "8", gpu=H200)))
    assert old["kv_cell_bytes"] == mla and old["draft_kv_cell_bytes"] == 576 * 1 * 2
    kimi = models(
        tmp_path / "kimi",
        kimi_k25_config(),
        KIMI_K25_BYTES,
        kimi_k25_eagle3_config(),
        KIMI_K25_EAGLE3_BYTES,
    )
    found = one(memory(index_0523, *kimi, "--tp", "8", gpu=H200))
    assert details(found)["kv_cell_bytes"] == mla + mla // 61
    assert found.severity == "info" and "max_total_num_tokens=" in found.message


def test_053_sizes_the_pool_with_what_the_runner_hands_it(
    sglang_053: Path, index_053: TreeIndex, tmp_path: Path
) -> None:
    """0.5.3's runner calls `self.init_memory_pool(memory, server_args.max_running_requests,
    server_args.max_total_tokens)`, and the pool shared with the draft adds requests x steps x
    top-k: the request limit is the one the tree's EAGLE resolution resets (not the pool's
    own 2048 when handed None), and the step count and top-k are the tree's auto-chosen ones
    (unread, the pool's size was unknown)."""
    source = (sglang_053 / "sglang/srt/server_args.py").read_text().splitlines()
    reset = next(line for line in source if "self.max_running_requests = " in line)
    limit = int(reset.split("=")[1])
    index = index_053
    kimi = models(
        tmp_path, kimi_k25_config(), KIMI_K25_BYTES, kimi_k25_eagle3_config(), KIMI_K25_EAGLE3_BYTES
    )
    found = one(memory(index, *kimi, "--tp", "8", gpu=H200))
    assert found.severity == "info" and "max_total_num_tokens=" in found.message, found.message
    assert details(found)["max_running_requests"] == limit


def _auto_choice(server_args: Path, arch: str) -> tuple[int, ...]:
    """The (steps, top-k, draft tokens) that the tree's `auto_choose_speculative_params`
    returns for `arch`, read off its source."""
    tree = ast.parse(server_args.read_text())
    fn = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "auto_choose_speculative_params"
    )
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and arch in ast.unparse(node.test):
            returned = node.body[-1]
            assert isinstance(returned, ast.Return) and isinstance(returned.value, ast.Tuple)
            return tuple(ast.literal_eval(e) for e in returned.value.elts)
    raise AssertionError(f"{arch} is not named in auto_choose_speculative_params")


def test_053_picks_deepseek_mtps_steps_by_the_targets_architecture(
    sglang_053: Path, index_053: TreeIndex, tmp_path: Path
) -> None:
    """0.5.3 sets the draft path to the model path for DeepSeek MTP and then asks
    `get_hf_config()` for the architecture: that path's config is the target's, so the step
    count, top-k and draft tokens are the tree's choice for DeepseekV3ForCausalLM (read as
    undecided before, the draft-shared pool's size was unknown)."""
    index = index_053
    target = write_model(tmp_path / "v3", DEEPSEEK_V3, total_size=DEEPSEEK_V3_BYTES)
    words = [*LAUNCH, "--model-path", str(target), "--tp", "8", "--speculative-algorithm", "EAGLE"]
    launch = parse_launch(words, server_flags(index))
    got = resolved_fields(index, launch, DEEPSEEK_V3, {})
    expected = _auto_choice(sglang_053 / "sglang/srt/server_args.py", "DeepseekV3ForCausalLM")
    names = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    assert tuple(got[name].value for name in names) == expected
    found = one(memory(index, *words[3:], gpu=H200))
    assert "max_total_num_tokens=" in found.message, found.message


def seed_memory(index: TreeIndex, tmp_path: Path) -> Finding:
    """The seed launch's memory finding (Kimi-K2.5 + its EAGLE-3 draft, --tp 8, H200)."""
    kimi = models(
        tmp_path, kimi_k25_config(), KIMI_K25_BYTES, kimi_k25_eagle3_config(), KIMI_K25_EAGLE3_BYTES
    )
    return one(memory(index, *kimi, "--tp", "8", gpu=H200))


def test_0514_reads_the_lazy_registry_cache_as_init_leaves_it(
    sglang_0514: Path, tmp_path: Path
) -> None:
    """0.5.14's KV budget asks `_get_linear_attn_registry_result`, a cache the runner's
    `__init__` sets to a sentinel (`_UNSET = object()`): read as `__init__` leaves it, the
    seed launch's pool is predicted (it was "KV budget not read"), and the assumption is said,
    once, with the line of `__init__` it rests on."""
    source = (sglang_0514 / "sglang/srt/model_executor/model_runner.py").read_text()
    line = next(
        i
        for i, text in enumerate(source.splitlines(), 1)
        if "self._linear_attn_registry_cache" in text
        and "_UNSET" in text
        and "=" in text
        and " is " not in text
    )
    found = seed_memory(TreeIndex(locate(str(sglang_0514)), use_cache=False), tmp_path)
    assert "max_total_num_tokens=" in found.message, found.message
    said = [a for a in details(found)["assumed"] if "_linear_attn_registry_cache" in a]
    assert len(said) == 1 and f"model_runner.py:{line})" in said[0], said


def test_0512_takes_a_cache_its_method_fills_as_not_yet_set(
    sglang_0512: Path, tmp_path: Path
) -> None:
    """0.5.12's runner fills the same cache on first use (`if not hasattr(self, ...): self.
    _linear_attn_registry_cache = ...`; no `__init__` sets it): the method that fills it runs
    as on its first call, the seed launch's pool is predicted (it was "KV budget not read"),
    and the assumption is said once, at the `hasattr` line."""
    source = (sglang_0512 / "sglang/srt/model_executor/model_runner.py").read_text()
    line = next(
        i
        for i, text in enumerate(source.splitlines(), 1)
        if 'hasattr(self, "_linear_attn_registry_cache")' in text
    )
    found = seed_memory(TreeIndex(locate(str(sglang_0512)), use_cache=False), tmp_path)
    assert "max_total_num_tokens=" in found.message, found.message
    said = [a for a in details(found)["assumed"] if "_linear_attn_registry_cache" in a]
    assert said == [
        f"sglang/srt/model_executor/model_runner.py:{line}: self._linear_attn_registry_cache "
        "taken as not yet set (this method fills it on first use)"
    ]


def test_an_unread_figure_says_where_and_why_in_words(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """A config without `qk_rope_head_dim` leaves the MLA cell size unknown: the finding says
    at which line of the tree and why, not the evaluator's own value (`Top(...)`)."""
    config = kimi_k25_config()
    del config["text_config"]["qk_rope_head_dim"]
    kimi = models(tmp_path, config, KIMI_K25_BYTES, kimi_k25_eagle3_config(), KIMI_K25_EAGLE3_BYTES)
    found = one(memory(index_0523, *kimi, "--tp", "8", gpu=H200))
    assert re.search(r"cell size not read \(sglang/srt/\S+\.py:\d+: \w", found.message), found
    assert "Top(" not in found.message


def test_0522_reads_like_0523(index_0522: TreeIndex, tmp_path: Path) -> None:
    found = details(one(memory(index_0522, *models(tmp_path))))
    assert found["mem_fraction_static_from"].startswith("sglang/srt/arg_groups/memory_hook.py:")
    assert found["kv_cell_bytes"] == 8 * 256 * 32 * 2 * 33 // 32


# -- inputs ------------------------------------------------------------------------------------
def test_without_a_gpu_or_weights_the_check_says_what_is_missing(
    index_059: TreeIndex, tmp_path: Path
) -> None:
    flags = models(tmp_path)
    assert "--gpu-free-gib" in one(memory(index_059, *flags, gpu=None)).message
    bare = write_model(tmp_path / "bare", LLAMA31_8B)
    assert "weight size is unknown" in one(memory(index_059, "--model-path", str(bare))).message


def test_free_memory_unknown_is_said(index_0523: TreeIndex, tmp_path: Path) -> None:
    gpu = GpuMemory(81559 * MIB, "--gpu-mem-gib")
    found = details(one(memory(index_0523, *models(tmp_path), gpu=gpu)))
    assert "assumed" in found["free_before_load_from"]
    assert found["free_before_load_gib"] == round(81559 / 1024, 3)


def test_weight_files_without_an_index_are_summed(index_0523: TreeIndex, tmp_path: Path) -> None:
    shards = {
        "model-00001-of-00002.safetensors": 40 * GIB,
        "model-00002-of-00002.safetensors": 40 * GIB,
    }
    t = write_model(tmp_path / "t", LLAMA31_8B, weight_files=shards)
    found = one(memory(index_0523, "--model-path", str(t)))
    assert found.severity == "error" and details(found)["weights_gib_per_gpu"] == 80.0
    assert "sizes of 2 weight files" in details(found)["weights_from"]
    split = one(memory(index_0523, "--model-path", str(t), "--tp", "2"))
    assert details(split)["weights_gib_per_gpu"] == 40.0


def test_the_json_carries_the_numbers(index_0523: TreeIndex, tmp_path: Path) -> None:
    found = one(memory(index_0523, *models(tmp_path)))
    data = json.loads(json.dumps(found.to_json()))["details"]
    for key in (
        "max_total_num_tokens",
        "mem_fraction_static",
        "kv_cell_bytes",
        "weights_gib_per_gpu",
    ):
        assert data[key] is not None, key
    assert data["max_running_requests"] == 48  # the tree's reset for EAGLE-3 launches
    assert data["max_running_requests_from"].startswith("sglang/srt/arg_groups/speculative_hook")


# -- the command line ----------------------------------------------------------------------
def preflight_json(
    capsys: pytest.CaptureFixture[str], sglang: Path, *argv: str
) -> tuple[int, dict[str, Any]]:
    import eaglebug.cli.parser

    code = eaglebug.cli.parser.main(
        ["preflight", "--sglang", str(sglang), "--json", "--no-cache", *argv]
    )
    out, _ = capsys.readouterr()
    found = [f for f in json.loads(out)["findings"] if f["id"] == "config.memory"]
    return code, one_json(found)


def one_json(found: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(found) == 1, found
    return found[0]


def test_gpu_free_gib_and_nvml_free_memory_reach_the_finding(
    sglang_0523: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import eaglebug.gpu.nvml

    launch = ("--", *LAUNCH, *models(tmp_path))
    _, given = preflight_json(
        capsys, sglang_0523, "--gpu-mem-gib", "79.6", "--gpu-free-gib", "30", *launch
    )
    assert given["details"]["free_before_load_from"] == "--gpu-free-gib"
    assert given["details"]["free_before_load_gib"] == 30.0
    assert given["severity"] == "warning"  # 30 GiB free: a pool shorter than 131072 tokens
    monkeypatch.setattr(
        eaglebug.gpu.nvml,
        "smallest_gpu_memory",
        lambda: (81559 * MIB, "NVML (1 x NVIDIA H100 80GB HBM3)", 75 * GIB, "NVML", 1, ()),
    )
    _, nvml = preflight_json(capsys, sglang_0523, *launch)
    assert nvml["details"]["gpu_memory_from"] == "NVML (1 x NVIDIA H100 80GB HBM3)"
    assert (nvml["details"]["free_before_load_gib"], nvml["severity"]) == (75.0, "info")


# -- calibration from SGLang's own memory lines ---------------------------------------------
CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"


def test_the_memory_lines_of_real_logs() -> None:
    from eaglebug.checks.logs.parse import read_memory_file

    # Docs CI, EAGLE-3 with Llama-3.1-8B on one H100 (float16): target then draft.
    docs = read_memory_file(CORPUS / "ready_eagle3_llama31_8b_draft_context_warning.log")
    assert docs is not None
    assert (docs.free_before_load_gib, docs.target_weights_gib, docs.draft_weights_gib) == (
        78.58,
        15.11,
        1.77,
    )
    assert (docs.kv_tokens, docs.kv_gib, docs.max_total_num_tokens) == (20480, 2.5, 20480)
    assert docs.max_running_requests == 200
    # A busy CI GPU: the target's "mem usage" is negative, which measures nothing.
    busy = read_memory_file(CORPUS / "ready_eagle_frspec_busy_gpu_negative_mem.log")
    assert busy is not None and busy.target_weights_gib is None
    assert busy.draft_weights_gib is not None
    # An 8-rank DP attention fragment, markdown-quoted: the MLA pool's single KV size.
    dsv32 = read_memory_file(CORPUS / "flashmla_no_kernel_image_quoted_dsv32.log")
    assert dsv32 is not None and (dsv32.kv_tokens, dsv32.kv_gib) == (3627136, 162.38)


@pytest.mark.parametrize("release", ["0.5.9", "0.5.23"])
def test_the_log_forms_are_the_trees_own(release: str) -> None:
    """The wording the reader matches is what the release logs (not a guess)."""
    from tests.sglang_releases import release as tree_of

    root = tree_of(release) / "sglang" / "srt"
    texts = "".join(
        path.read_text(errors="replace")
        for folder in ("model_executor", "mem_cache", "managers")
        for path in (root / folder).rglob("*.py")
    )
    for wording in (
        "Load weight begin. avail mem=",
        "Load weight end. ",
        "is allocated",
        "#tokens: {num_tokens}, K size: {k_size_GB:.2f} GB, ",
        "Memory pool end. ",
        "max_total_num_tokens=",
        "mem usage=",
    ):
        assert wording in texts, wording


def test_the_next_preflight_of_the_same_launch_is_calibrated(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    from eaglebug.server.calibration import measured_for
    from eaglebug.server.state import LaunchRecord, State, save_state

    flags = models(tmp_path)
    words = [*LAUNCH, *flags]
    log = tmp_path / "launch-001.log"
    log.write_text(
        "[2026-01-30 10:36:06 TP0] Load weight begin. avail mem=70.00 GB\n"
        "[2026-01-30 10:37:10 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16,"
        " avail mem=55.00 GB, mem usage=15.00 GB.\n"
        "[2026-01-30 10:37:12 TP0] Load weight end. type=LlamaForCausalLMEagle3, dtype=torch."
        "bfloat16, avail mem=53.00 GB, mem usage=2.00 GB.\n"
        "[2026-01-30 10:37:20 TP0] KV Cache is allocated. #tokens: 250000, K size: 15.26 GB, "
        "V size: 15.26 GB\n"
        "[2026-01-30 10:38:00 TP0] Capture cuda graph end. Time elapsed: 20.00 s. mem usage=3.00 GB."
        " avail mem=4.00 GB.\n"
    )
    record = LaunchRecord(1, list(words), {}, str(log), 4242, 1.0, 1.0)
    save_state(tmp_path, State(launches=[record]))
    assert measured_for(tmp_path, ["python", "-m", "other"]) is None
    measured = measured_for(tmp_path, words)
    assert measured is not None and measured.free_before_load_gib == 70.0
    plain = details(one(memory(index_0523, *flags)))
    result = preflight(index_0523, words, {}, H100, measured=measured)
    calibrated = one([f for f in result.findings if f.id == "config.memory"])
    got = details(calibrated)
    assert got["calibrated"] is True and plain["calibrated"] is False
    assert got["free_before_load_gib"] == 70.0 and got["weights_gib_per_gpu"] == 17.0
    assert got["measured_kv_tokens"] == 250000 and got["measured_graph_gib"] == 3.0
    assert got["max_total_num_tokens"] < plain["max_total_num_tokens"]  # less was free
    assert "logged max_total_num_tokens=250000" in calibrated.message


def test_the_measured_figures_outlive_the_launchs_log(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """The watch keeps the memory lines in the launch's record as they come: a preflight after
    the log was deleted (or rotated away) is still calibrated by them."""
    from eaglebug.server.calibration import measured_for
    from eaglebug.server.state import LaunchRecord, State, load_state, save_state
    from eaglebug.session.session import Session, SessionConfig

    flags = models(tmp_path)
    words = [*LAUNCH, *flags]
    log = tmp_path / "launch-001.log"
    log.write_text("[2026-01-30 10:36:06 TP0] Load weight begin. avail mem=70.00 GB\n")
    save_state(
        tmp_path, State(launches=[LaunchRecord(1, list(words), {}, str(log), 4242, 1.0, 1.0)])
    )
    session = Session(SessionConfig(tmp_path))
    session.record_phase("loading weights", False)
    assert load_state(tmp_path).launches[0].memory == {"free_before_load_gib": 70.0}
    with log.open("a") as stream:  # the pool is sized: the record follows the log
        stream.write(
            "[2026-01-30 10:37:10 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch."
            "bfloat16, avail mem=55.00 GB, mem usage=15.00 GB.\n"
            "[2026-01-30 10:37:20 TP0] KV Cache is allocated. #tokens: 250000, K size: 15.26 GB,"
            " V size: 15.26 GB\n"
        )
    session.record_phase("kv cache", False)
    kept = load_state(tmp_path).launches[0].memory
    assert kept["target_weights_gib"] == 15.0 and kept["kv_tokens"] == 250000.0
    log.unlink()
    measured = measured_for(tmp_path, words)
    assert measured is not None and measured.kv_tokens == 250000
    assert measured.free_before_load_gib == 70.0 and measured.target_weights_gib == 15.0
    result = preflight(index_0523, words, {}, H100, measured=measured)
    got = details(one([f for f in result.findings if f.id == "config.memory"]))
    assert got["calibrated"] is True and got["free_before_load_gib"] == 70.0
    session.record_phase("crashed", False)  # no log: what was kept stays
    assert load_state(tmp_path).launches[0].memory == kept


def test_diagnose_shows_the_memory_the_launch_measured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import eaglebug.cli.parser

    log = CORPUS / "ready_eagle3_llama31_8b_draft_context_warning.log"
    eaglebug.cli.parser.main(["diagnose", "--log", str(log), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["memory"]["max_total_num_tokens"] == 20480
    assert data["memory"]["draft_weights_gib"] == 1.77
    eaglebug.cli.parser.main(["diagnose", "--log", str(log)])
    text = capsys.readouterr().out
    assert "memory (TP0): 78.58 GB free before the load, weights 15.11 + draft 1.77 GB" in text


def test_flag_fixes_replace_the_same_spelling_and_go_last() -> None:
    from eaglebug.checks.launch.words import SWITCH, with_flags

    words = [
        "A=1",
        "python",
        "-m",
        "sglang.launch_server",
        "--mem-fraction-static=0.9",
        "--tp",
        "2",
    ]
    out = with_flags(words, {"--mem-fraction-static": "0.81", "--disable-cuda-graph": SWITCH})
    assert out == [
        "A=1",
        "python",
        "-m",
        "sglang.launch_server",
        "--tp",
        "2",
        "--mem-fraction-static",
        "0.81",
        "--disable-cuda-graph",
    ]
    assert with_flags(out, {"--tp": "4"})[-2:] == ["--tp", "4"]
    assert with_flags(out, {"--tp": "4"}).count("2") == 0
    assert with_flags(["python -m sglang.launch_server --tp 2"], {}) == [
        "python",
        "-m",
        "sglang.launch_server",
        "--tp",
        "2",
    ]


# -- anchors: SGLang's own numbers from public logs (tests/memanchors.py) ---------------------


def test_anchor_the_minimum_fraction_sglang_printed_on_8_h200(index_0523: TreeIndex) -> None:
    """InferenceX #2128: DeepSeek-V4-Pro FP8, --tp 8 --mem-fraction-static 0.88 on H200; SGLang
    printed a minimum viable fraction of 0.9113 (0.9335 with the 3.07 GB MTP draft). The
    budget arithmetic is evaluated with the logged figures (free before the load = avail +
    usage); the cell (not reached before the raise) is DeepSeek-V3's MLA shape."""
    sglang = ANCHORS["dsv4_pro_h200_tp8_no_kv_budget"]["sglang"]
    for draft_gb, printed in (
        (0.0, sglang["minimum_mem_fraction_static"]),
        (sglang["draft_weights_gb"], sglang["minimum_mem_fraction_static_mtp"]),
    ):
        made, ours = inferencex_2128(index_0523, draft_gb)
        assert made.raised is not None and made.raised.message is not None
        assert "Loaded weights leave no GPU memory for the KV cache" in made.raised.message
        assert ours is not None and abs(ours - printed) <= 0.001, (ours, printed)


def test_anchor_the_kv_sizes_sglang_logged_for_llama_and_its_eagle3_draft(
    index_059: TreeIndex, tmp_path: Path
) -> None:
    """The docs-CI notebook (H100, float16): SGLang logged K + V = 2.50 GB for the target's
    20480 tokens and 0.08 GB for the draft's; the cells the tree's formula gives match."""
    anchor = ANCHORS["llama31_8b_eagle3_h100_docs_ci_cells"]
    tokens = anchor["sglang"]["tokens"]
    found = details(memory(index_059, *models(tmp_path))[0])
    assert round(tokens * found["kv_cell_bytes"] / GIB, 2) == anchor["sglang"]["target_kv_gb"]
    assert round(tokens * found["draft_kv_cell_bytes"] / GIB, 2) == anchor["sglang"]["draft_kv_gb"]


@pytest.mark.parametrize(
    ("version", "counted", "cell"),
    [
        ("0.5.9", False, 131072),
        ("0.5.10", False, 131072),
        ("0.5.14", True, 135168),
        ("0.5.22", True, 135168),
        ("0.5.23", True, 135168),
    ],
)
def test_every_release_in_the_cache_reads_completely(
    version: str, counted: bool, cell: int
) -> None:
    """Each release's own shape: whether the draft is charged to the target's budget and its
    layer added to the target's cells (0.5.14 on), with nothing left unread."""
    from eaglebug.checks.memory.fit import MemoryLaunch
    from eaglebug.checks.memory.plan import Weights, predict
    from eaglebug.checks.memory.rules import memory_sources
    from tests.sglang_releases import release

    index = TreeIndex(locate(str(release(version))), use_cache=False)
    sources = memory_sources(index)
    target, draft = shape_on(index, LLAMA31_8B), shape_on(index, EAGLE3_LLAMA31_8B)
    assert not isinstance(target, str) and not isinstance(draft, str)
    weights = Weights(LLAMA31_8B_BYTES, EAGLE3_LLAMA31_8B_BYTES)
    gpu = Gpu(81559 * MIB, int(78.58 * GIB))
    made = predict(
        index, sources, MemoryLaunch("m", algorithm="EAGLE3"), target, draft, gpu, weights
    )
    assert made.unknown == []
    assert (made.draft_counted, made.kv_cell_bytes) == (counted, cell)
    assert made.max_total_num_tokens and made.max_running_requests == 2048
    # 0.5.10 reserves for its piecewise CUDA graphs by default (read from ServerArgs' defaults).
    assert (
        (made.graph_reserve_mb or 0) > 512 if version == "0.5.10" else made.graph_reserve_mb == 512
    )


def test_a_measured_graph_capture_bigger_than_the_slack_is_an_error(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    from eaglebug.checks.logs.memory import MemoryLog

    words = [*LAUNCH, *models(tmp_path)]

    def graphs(gib: float) -> list[Finding]:
        log = MemoryLog("TP0", 78.58, 15.0, 1.7, None, None, gib, None, None)
        result = preflight(index_0523, words, {}, H100, measured=log)
        return [f for f in result.findings if "outside the static pool" in f.message]

    assert graphs(3.0) == []  # the default leaves 13.1 GiB outside the pool
    found = one(graphs(20.0))
    assert found.severity == "error" and "the CUDA graphs" in found.message
    lower = flag_value(found, "--mem-fraction-static")
    assert lower is not None and float(lower) < 0.835


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_max_running_requests_given_and_derived(version: str) -> None:
    """0.5.9 takes it from `self.max_running_requests = min(...)` in model_runner.py, 0.5.23
    from `resolve_max_num_reqs`: the flag's value when given, else the tree's estimate."""
    from eaglebug.checks.memory.fit import MemoryLaunch
    from eaglebug.checks.memory.plan import Weights, predict
    from eaglebug.checks.memory.rules import REQUEST_LIMIT, memory_sources
    from tests.sglang_releases import release

    index = TreeIndex(locate(str(release(version))), use_cache=False)
    sources = memory_sources(index)
    kept = [f for f in sources.functions if f.qualname == REQUEST_LIMIT]
    assert bool(kept) is (version == "0.5.9")
    target = shape_on(index, LLAMA31_8B)
    assert not isinstance(target, str)
    gpu = Gpu(81559 * MIB, int(78.58 * GIB))
    for given, expected in ((None, 2048), (48, 48), (10**6, None)):
        launch = MemoryLaunch("m", max_running_requests=given)
        made = predict(index, sources, launch, target, None, gpu, Weights(LLAMA31_8B_BYTES, 0))
        tokens = made.max_total_num_tokens or 0
        # More than the pool can hold: 0.5.23 caps it at half the tokens; 0.5.9 does not
        # (its request pool is sized to the flag).
        cap = given if version == "0.5.9" else min(given or 0, tokens // 2)
        assert made.max_running_requests == (expected or cap)


def test_flags_handed_to_the_environment_by_assignment(
    sglang_053: Path, index_053: TreeIndex
) -> None:
    """0.5.3 hands `--mamba-ssm-dtype` on as `os.environ["SGLANG_MAMBA_SSM_DTYPE"] =
    self.mamba_ssm_dtype` (later releases with `envs.X.set(...)`): read as the same fact."""
    lines = (sglang_053 / "sglang/srt/server_args.py").read_text().splitlines()
    line = next(i for i, t in enumerate(lines, 1) if 'os.environ["SGLANG_MAMBA_SSM_DTYPE"]' in t)
    found = flag_env(index_053)
    assert found["mamba_ssm_dtype"] == (
        "SGLANG_MAMBA_SSM_DTYPE",
        f"sglang/srt/server_args.py:{line}",
    )
