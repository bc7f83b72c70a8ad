"""Hybrid linear-attention (Mamba / Gated DeltaNet) pools, on real releases: Qwen3-Next.

The tree's own config class for `model_type: qwen3_next` (read from its `_CONFIG_REGISTRY`)
is made from the config.json, and its hybrid predicates, state shapes and the budget split
between the mamba state cache and the KV pool are evaluated from the tree: only the
full-attention layers are in the KV cell, the state cache holds `max_mamba_cache_size`
requests of `mamba_cache_per_req` bytes, and `--max-mamba-cache-size` /
`--mamba-full-memory-ratio` move it. A synthetic copy of the real files with the state
formula changed changes the answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eaglebug.checks.memory.classes import model_objects
from eaglebug.checks.memory.fit import MemoryLaunch
from eaglebug.checks.memory.plan import Prediction, Weights, predict
from eaglebug.checks.memory.rules import memory_sources
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests import test_memory, test_mempools
from tests.configs import write_model
from tests.memconfigs import QWEN3_NEXT_80B, QWEN3_NEXT_80B_BYTES, shape_on
from tests.test_memory import ANCHORS, H200, details, memory, one
from tests.test_mempools import H200_GPU

index = test_memory.index
GIB = 1 << 30
# The config classes' files a synthetic copy needs beside the memory files.

# One request's state at --tp 4, by hand from the config: per linear-attention layer a conv
# state of (4096 + 2 * 16 * 128) / 4 x (4 - 1) bfloat16 and an SSM state of 32 / 4 x 128 x
# 128 float32; 36 such layers (every 4th of the 48 is full attention).
STATE_TP4 = ((8192 // 4) * 3 * 2 + (32 // 4) * 128 * 128 * 4) * 36


def qwen3_next(index: TreeIndex, tmp_path: Path, *flags: str, config: Any = None) -> Any:
    t = write_model(tmp_path / "qn", config or QWEN3_NEXT_80B, total_size=QWEN3_NEXT_80B_BYTES)
    return details(one(memory(index, "--model-path", str(t), "--tp", "4", *flags, gpu=H200)))


def test_qwen3_next_cell_counts_only_its_full_attention_layers(
    index: TreeIndex, tmp_path: Path
) -> None:
    hybrid = qwen3_next(index, tmp_path / "a")
    # The same shape under a model_type the tree registers no class for: every layer is
    # full attention, as transformers' plain configs are.
    plain = qwen3_next(index, tmp_path / "b", config={**QWEN3_NEXT_80B, "model_type": "x"})
    assert hybrid["pool_kind"] == "KV for 12 full-attention layers + mamba state cache"
    assert hybrid["kv_cell_bytes"] == 1 * (256 + 256) * 12 * 2  # one KV head per rank
    assert plain["kv_cell_bytes"] == 4 * hybrid["kv_cell_bytes"]
    assert plain["mamba_cache_requests"] is None
    assert hybrid["mamba_state_bytes_per_request"] == STATE_TP4
    assert isinstance(hybrid["mamba_cache_requests"], int) and hybrid["mamba_cache_requests"] > 0
    assert not any(
        note.startswith(f"stand-in: {name}(")
        for note in hybrid["assumed"]
        for name in ("mambaish_config", "hybrid_gdn_config", "hybrid_kda_config")
    )


def test_0519_reads_a_field_of_a_namespace_its_annotation_names(
    index_0519: TreeIndex, index_0523: TreeIndex, tmp_path: Path
) -> None:
    """0.5.19's configurator reads `get_exec().mamba.enable_linear_replayssm_spec`, a field that
    says its namespace in its own annotation (`A[bool, "...", NS("exec.mamba")] = False`), not
    in its class (0.5.23's `_NS_PATH`): read at its default, Qwen3-Next's pools are 0.5.23's
    (it was "KV budget not read")."""
    old = qwen3_next(index_0519, tmp_path / "old")
    new = qwen3_next(index_0523, tmp_path / "new")
    assert "not_read" not in old
    for figure in ("max_total_num_tokens", "max_running_requests", "mamba_state_bytes_per_request"):
        assert old[figure] == new[figure], figure
    assert old["mamba_state_bytes_per_request"] == STATE_TP4


def test_the_mamba_cache_follows_the_trees_flags(index: TreeIndex, tmp_path: Path) -> None:
    auto = qwen3_next(index, tmp_path / "a")
    fixed = qwen3_next(index, tmp_path / "b", "--max-mamba-cache-size", "600")
    less = qwen3_next(index, tmp_path / "c", "--mamba-full-memory-ratio", "0.3")
    assert fixed["mamba_cache_requests"] == 600
    # The state cache bounds the requests (0.5.23: // the mamba ratio; 0.5.9: the pool).
    assert fixed["max_running_requests"] < auto["max_running_requests"]
    assert fixed["max_total_num_tokens"] > auto["max_total_num_tokens"]
    assert less["mamba_cache_requests"] < auto["mamba_cache_requests"]
    assert less["max_total_num_tokens"] > auto["max_total_num_tokens"]


def test_both_releases_read_the_same_state_their_own_way(
    index_059: TreeIndex, index_0523: TreeIndex, tmp_path: Path
) -> None:
    old = qwen3_next(index_059, tmp_path / "old")
    new = qwen3_next(index_0523, tmp_path / "new")
    assert old["mamba_from"].startswith("sglang/srt/model_executor/model_runner_kv_cache_mixin")
    assert new["mamba_from"].startswith("sglang/srt/mem_cache/kv_cache_configurator.py:")
    assert old["pool_kind_from"].startswith("sglang/srt/model_executor/model_runner.py:")
    assert new["pool_kind_from"].startswith("sglang/srt/configs/hybrid_arch.py:")
    assert old["mamba_state_bytes_per_request"] == new["mamba_state_bytes_per_request"]


copy_tree, edit = test_mempools.copy_tree, test_mempools.edit


def predict_on(root: Path, launch: MemoryLaunch) -> Prediction:
    tree = TreeIndex(locate(str(root)), use_cache=False)
    shape = shape_on(tree, QWEN3_NEXT_80B)
    weights = Weights(QWEN3_NEXT_80B_BYTES // launch.tp, 0)
    config = model_objects(tree, QWEN3_NEXT_80B).qualname
    return predict(tree, memory_sources(tree), launch, shape, None, H200_GPU, weights, None, config)


def test_a_changed_state_formula_changes_the_answer(sglang_0523: Path, tmp_path: Path) -> None:
    real = copy_tree(sglang_0523, tmp_path / "real")
    changed = copy_tree(sglang_0523, tmp_path / "changed")
    formula = "ssm_numel = int(np.prod(self.shape.temporal))"
    utils = changed / "sglang" / "srt" / "configs" / "mamba_utils.py"
    edit(utils, formula, "ssm_numel = 2 * int(np.prod(self.shape.temporal))")
    launch = MemoryLaunch("m", tp=4)
    ours, theirs = predict_on(real, launch), predict_on(changed, launch)
    ssm = (32 // 4) * 128 * 128 * 4 * 36
    assert ours.mamba_state_bytes_per_request == STATE_TP4
    assert theirs.mamba_state_bytes_per_request == STATE_TP4 + ssm
    assert theirs.mamba_cache_requests is not None and ours.mamba_cache_requests is not None
    assert theirs.mamba_cache_requests < ours.mamba_cache_requests


def on_release(index: TreeIndex, launch: MemoryLaunch) -> Prediction:
    shape = shape_on(index, QWEN3_NEXT_80B)
    weights = Weights(QWEN3_NEXT_80B_BYTES // launch.tp, 0)
    config = model_objects(index, QWEN3_NEXT_80B).qualname
    return predict(
        index, memory_sources(index), launch, shape, None, H200_GPU, weights, None, config
    )


def test_speculative_decoding_reserves_the_draft_steps_state(index: TreeIndex) -> None:
    """Each draft token keeps an intermediate state per request: fewer cached requests
    either way. 0.5.9 takes per_req x max_running_requests x D off the rest before the
    split, so the KV pool shrinks too; 0.5.23 solves the mamba share jointly
    (`per_req * (1 + D / ratio)` a slot) and charges only the running requests' scratch
    outside it, so the fewer slots leave the KV pool more."""
    plain = on_release(index, MemoryLaunch("m", tp=4, max_running_requests=64))
    spec = on_release(
        index,
        MemoryLaunch(
            "m", tp=4, max_running_requests=64, algorithm="EAGLE", speculative_num_draft_tokens=4
        ),
    )
    assert plain.mamba_cache_requests is not None and spec.mamba_cache_requests is not None
    assert spec.mamba_cache_requests < plain.mamba_cache_requests
    assert plain.max_total_num_tokens is not None and spec.max_total_num_tokens is not None
    assert plain.mamba_from is not None
    if "model_runner_kv_cache_mixin.py" in plain.mamba_from:  # 0.5.9
        assert spec.max_total_num_tokens < plain.max_total_num_tokens
    else:
        assert spec.max_total_num_tokens > plain.max_total_num_tokens


def test_anchor_the_full_attention_cell_sglang_logged(index: TreeIndex) -> None:
    """sglang PR #10622: Qwen3-Next-80B-A3B-FP8 with DP attention over 4 ranks logged
    2786325 tokens with K and V of 31.89 GB each: 24576 bytes a token, +-3.9 from the two
    decimals. The tree's cell counts the 12 full-attention layers only, with both KV heads
    on each attention-DP rank: 2 x (256 + 256) x 12 x 2 = 24576 (all 48 layers: 98304)."""
    logged = ANCHORS["qwen3_next_fp8_dp_attention_full_layers_cell"]["sglang"]
    per_token = (logged["k_gb"] + logged["v_gb"]) * GIB / logged["tokens"]
    half_step = 2 * 0.005 * GIB / logged["tokens"]
    made = on_release(index, MemoryLaunch("m", tp=4, dp=4, enable_dp_attention=True))
    assert made.layout is not None and made.layout.attn_dp_size == 4
    assert made.kv_cell_bytes is not None and abs(made.kv_cell_bytes - per_token) <= half_step
    assert made.mamba_cache_requests is not None and made.mamba_cache_requests > 0


def test_the_ssm_dtype_flag_reaches_the_state_through_the_trees_env(
    index: TreeIndex, tmp_path: Path
) -> None:
    """`--mamba-ssm-dtype bfloat16`: the tree copies it into SGLANG_MAMBA_SSM_DTYPE (0.5.9
    server_args.py, 0.5.23 serving_hook.py), which `mamba2_state_dtype` reads over the
    config: the SSM half of the state is halved, the conv state is not."""
    full = qwen3_next(index, tmp_path / "a")
    half = qwen3_next(index, tmp_path / "b", "--mamba-ssm-dtype", "bfloat16")
    ssm = (32 // 4) * 128 * 128 * 36
    assert full["mamba_state_bytes_per_request"] == STATE_TP4
    assert half["mamba_state_bytes_per_request"] == STATE_TP4 - ssm * 2
    assert half["mamba_cache_requests"] > full["mamba_cache_requests"]


def test_a_speculative_launch_without_a_request_limit_takes_the_trees_own(
    index: TreeIndex, tmp_path: Path
) -> None:
    """Neither release leaves `--max-running-requests` unset under EAGLE: its argument
    resolution resets it to 48 (0.5.9 `_handle_speculative_decoding`, 0.5.23
    `_handle_eagle_family`), and the draft-token count is derived there too. The mamba state
    reserved per request and draft token needs both; without them 0.5.9's reserve could not
    be evaluated and the check said only that it was incomplete."""
    t = write_model(tmp_path / "qn", QWEN3_NEXT_80B, total_size=QWEN3_NEXT_80B_BYTES)
    launch = ("--model-path", str(t), "--tp", "4", "--speculative-algorithm", "NEXTN")
    found = one(memory(index, *launch, gpu=H200))
    got = details(found)
    assert "incomplete" not in found.message and got["mamba_cache_requests"] is not None
    assert got["max_running_requests"] == 48
    where = got["max_running_requests_from"]
    assert where.rpartition(":")[2].isdigit()
    assert where.startswith(("sglang/srt/server_args.py", "sglang/srt/arg_groups/speculative_hook"))
    given = details(one(memory(index, *launch, "--max-running-requests", "16", gpu=H200)))
    assert given["max_running_requests"] == 16 and "max_running_requests_from" not in given
    # Less state reserved for fewer requests' draft tokens: more KV tokens in both releases.
    assert given["max_total_num_tokens"] > got["max_total_num_tokens"]
