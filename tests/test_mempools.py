"""The KV pools of launches that are not one plain MHA/MLA pool per TP rank, on real releases.

DP attention (`--enable-dp-attention --dp-size N`): the widths are the tree's own (0.5.9's
`compute_dp_attention_world_info`, 0.5.23's flag rewrite then `derive_attn_tp_size`), each
attention-DP rank holds its own pool, the request limit is divided per rank, and the reserve
grows. A synthetic copy of the real files with one formula changed changes the answer.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.launch.devices import GpuMemory
from eaglebug.checks.memory.fit import Gpu, MemoryLaunch
from eaglebug.checks.memory.plan import Prediction, Weights, predict
from eaglebug.checks.memory.rules import memory_sources
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests import test_memory
from tests.configs import write_model
from tests.memconfigs import (
    DEEPSEEK_V3,
    DEEPSEEK_V3_BYTES,
    DEEPSEEK_V32,
    EAGLE3_LLAMA31_8B,
    EAGLE3_LLAMA31_8B_BYTES,
    GPT_OSS_120B,
    GPT_OSS_120B_BYTES,
    LLAMA31_8B,
    LLAMA31_8B_BYTES,
    shape_on,
)
from tests.test_memory import H200, details, memory, one

# The real-release indexes, shared with test_memory (the same module-scoped fixtures).
index = test_memory.index

GIB = 1 << 30
MIB = 1 << 20
H200_GPU = Gpu(143771 * MIB, int(139.5 * GIB))
DP8 = ("--tp", "8", "--enable-dp-attention", "--dp-size", "8")


def v3(index: TreeIndex, tmp_path: Path, *flags: str) -> dict[str, Any]:
    """DeepSeek-V3 on 8 x H200: the finding's details."""
    t = write_model(tmp_path / "v3", DEEPSEEK_V3, total_size=DEEPSEEK_V3_BYTES)
    return details(one(memory(index, "--model-path", str(t), *flags, gpu=H200)))


# -- DP attention ---------------------------------------------------------------------------
def test_dp_attention_widths_are_the_trees_own(index: TreeIndex, tmp_path: Path) -> None:
    plain = v3(index, tmp_path / "a", "--tp", "8")
    dp = v3(index, tmp_path / "b", *DP8)
    assert (plain["attention_tp_size"], plain["attention_dp_size"]) == (8, 1)
    assert (dp["attention_tp_size"], dp["attention_dp_size"]) == (1, 8)
    assert dp["attention_layout_from"].startswith("sglang/srt/layers/dp_attention.py:")
    # MLA: one latent head, not split by TP, so the cell is the same either way.
    assert dp["kv_cell_bytes"] == plain["kv_cell_bytes"]


def test_0523_rewrites_the_deprecated_flags_and_0_5_9_keeps_them(
    index_059: TreeIndex, index_0523: TreeIndex, tmp_path: Path
) -> None:
    new = v3(index_0523, tmp_path / "new", *DP8)
    assert dict(new["dp_flags_resolved"]) == {
        "attn_dp_size": 8,
        "dp_size": 1,
        "enable_dp_attention": False,
    }
    assert new["dp_flags_resolved_from"].startswith("sglang/srt/arg_groups/parallel_hook.py:")
    old = v3(index_059, tmp_path / "old", *DP8)
    assert old["dp_flags_resolved"] is None  # 0.5.9 reads --dp-size and the switch as given


def test_a_flag_the_resolution_leaves_unknown_is_said_in_the_json(
    sglang_0523: Path, tmp_path: Path
) -> None:
    """A DP flag the tree's resolution sets to something the reading cannot know is shown as
    not known, with why, in the finding's JSON (an unknown there stopped `--json` with an
    internal error)."""
    tree = copy_tree(sglang_0523, tmp_path / "tree")
    hook = tree / "sglang" / "srt" / "arg_groups" / "parallel_hook.py"
    edit(hook, "            dp_size=1,\n", "            dp_size=replicas_from_the_cluster(),\n")
    found = v3(TreeIndex(locate(str(tree)), use_cache=False), tmp_path / "m", *DP8)
    resolved = dict(found["dp_flags_resolved"])
    assert resolved["attn_dp_size"] == 8
    assert str(resolved["dp_size"]).startswith("not known: ")
    assert "replicas_from_the_cluster" in resolved["dp_size"]
    json.dumps(found)


def test_dp_attention_divides_the_request_limit_per_rank(index: TreeIndex, tmp_path: Path) -> None:
    """`--max-running-requests 1024` over 8 attention-DP ranks: 128 per rank (0.5.9: the
    runner's `// self.dp_size`; 0.5.23: `// self.attn_dp_size`); without DP attention 1024."""
    limit = ("--max-running-requests", "1024")
    assert v3(index, tmp_path / "a", "--tp", "8", *limit)["max_running_requests"] == 1024
    assert v3(index, tmp_path / "b", *DP8, *limit)["max_running_requests"] == 128


def test_0519_reads_the_dp_width_through_its_parallel_state(
    index_0519: TreeIndex, tmp_path: Path
) -> None:
    """0.5.17-0.5.20's KV configurator divides the request limit by `self.ps.attn_dp_size`, a
    `ps: ParallelState` field no `__init__` sets: read as the launch's own widths (said in
    `assumed`), the limit is per rank as on the other releases, not a figure left unread."""
    limit = ("--max-running-requests", "1024")
    plain = v3(index_0519, tmp_path / "a", "--tp", "8", *limit)
    dp = v3(index_0519, tmp_path / "b", *DP8, *limit)
    assert (plain["max_running_requests"], dp["max_running_requests"]) == (1024, 128)
    assert "not_read" not in dp
    view = [note for note in dp["assumed"] if "self.ps (ParallelState)" in note]
    assert view and view[0].startswith("sglang/srt/mem_cache/kv_cache_configurator.py:")
    assert "attn_dp_size" in view[0]


def test_a_parallel_field_the_launch_lacks_stays_unread(sglang_0519: Path, tmp_path: Path) -> None:
    """The same configurator reading a width the launch's figures do not hold: the field is
    still the view, its width unknown, and the finding says the limit was not read and why
    instead of a `max_running_requests=None` that looks like SGLang's own."""
    index = edited_index(
        sglang_0519,
        tmp_path / "tree",
        "mem_cache/kv_cache_configurator.py",
        "requested_per_worker = max_num_reqs // self.ps.attn_dp_size",
        "requested_per_worker = max_num_reqs // self.ps.attn_dp_width",
    )
    model = write_model(tmp_path / "v3", DEEPSEEK_V3, total_size=DEEPSEEK_V3_BYTES)
    flags = ("--model-path", str(model), *DP8, "--max-running-requests", "1024")
    found = one(memory(index, *flags, gpu=H200))
    assert "max_running_requests not read" in found.message
    (why,) = details(found)["not_read"]
    assert why.startswith("max_running_requests not read (sglang/srt/mem_cache/kv_cache_")
    assert "attn_dp_width is not known" in why
    assert any("self.ps (ParallelState)" in note for note in details(found)["assumed"])


def test_dp_attention_reserves_more_for_the_graphs(index: TreeIndex, tmp_path: Path) -> None:
    """The tree's DP-attention padding: max_bs x dp x 3 MB, and x 1.5 more above 300."""
    plain = v3(index, tmp_path / "a", "--tp", "8")
    dp = v3(index, tmp_path / "b", *DP8)
    bs = dp["cuda_graph_max_bs"]
    assert bs == plain["cuda_graph_max_bs"] == 512
    extra_gib = (bs * 8 * 3 + bs * 8 * 1.5) / 1024
    assert dp["reserved_gib"] == pytest.approx(plain["reserved_gib"] + extra_gib, abs=0.001)
    assert dp["mem_fraction_static"] < plain["mem_fraction_static"]
    assert dp["max_total_num_tokens"] < plain["max_total_num_tokens"]


def test_mha_kv_heads_are_split_over_the_attention_tp_group(
    index: TreeIndex, tmp_path: Path
) -> None:
    """Llama-3.1-8B (8 KV heads) on --tp 2: 4 heads a rank; with DP attention over 2 ranks
    the attention-TP group is one GPU, which keeps all 8 (twice the cell)."""
    t = write_model(tmp_path / "t", LLAMA31_8B, total_size=LLAMA31_8B_BYTES)
    gpu = GpuMemory(81559 * MIB, "--gpu-mem-gib", int(78.58 * GIB), "--gpu-free-gib")
    tp2 = details(one(memory(index, "--model-path", str(t), "--tp", "2", gpu=gpu)))
    dp2 = memory(
        index,
        "--model-path",
        str(t),
        "--tp",
        "2",
        "--enable-dp-attention",
        "--dp-size",
        "2",
        gpu=gpu,
    )
    found = details(one(dp2))
    assert tp2["kv_cell_bytes"] == 4 * 256 * 32 * 2
    assert found["kv_cell_bytes"] == 8 * 256 * 32 * 2
    assert one(dp2).severity == "info" and "per attention-DP rank" in one(dp2).message


def test_anchor_the_mla_cell_each_dp_rank_logged(index: TreeIndex) -> None:
    """sglang #6017: every attention-DP rank of a DeepSeek-V3 launch logged 161488 tokens in
    10.57 GB: 70281 bytes a token, +-33 from the two decimals. The tree's MLA cell under DP
    attention (one latent head, not split) is (512 + 64) x 61 x 2 = 70272 on both releases."""
    anchor = test_memory.ANCHORS["dsv3_dp_attention_mla_cell_per_rank"]["sglang"]
    logged = anchor["kv_gb"] * GIB / anchor["tokens"]
    shape = shape_on(index, DEEPSEEK_V3)
    assert not isinstance(shape, str)
    launch = MemoryLaunch("m", tp=8, dp=8, enable_dp_attention=True)
    made = predict(
        index,
        memory_sources(index),
        launch,
        shape,
        None,
        H200_GPU,
        Weights(DEEPSEEK_V3_BYTES // 8, 0),
    )
    assert made.layout is not None and made.layout.attn_dp_size == 8
    half_step = 0.005 * GIB / anchor["tokens"]
    assert made.kv_cell_bytes is not None and abs(made.kv_cell_bytes - logged) <= half_step


# -- the formula is read, not typed ------------------------------------------------------------
def copy_tree(release: Path, dest: Path) -> Path:
    """A whole real release in a scratch folder (never committed): files hard-linked where the
    file system allows (the tree is read whole, as a launch imports it), copied otherwise.
    Change a file with `edit`, which replaces the link instead of writing through it."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(release / "sglang", dest / "sglang", copy_function=link)
    return dest


def edit(path: Path, old: str, new: str) -> None:
    """Replace `old` (which must be there) by `new` in a file of a `copy_tree` copy."""
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.unlink()  # a new file: the release's own (linked) copy stays as it was
    path.write_text(text.replace(old, new, 1))


def edited_index(release: Path, dest: Path, rel: str, old: str, new: str) -> TreeIndex:
    """The index of a `copy_tree` copy of `release` with one change (`edit`) to its file `rel`
    (under `sglang/srt/`)."""
    root = copy_tree(release, dest)
    edit(root / "sglang" / "srt" / rel, old, new)
    return TreeIndex(locate(str(root)), use_cache=False)


def predict_on(
    root: Path, launch: MemoryLaunch, config: dict[str, Any], weights: int
) -> Prediction:
    index = TreeIndex(locate(str(root)), use_cache=False)
    shape = shape_on(index, config)
    assert not isinstance(shape, str)
    return predict(index, memory_sources(index), launch, shape, None, H200_GPU, Weights(weights, 0))


def test_a_changed_attention_width_formula_changes_the_cell(
    sglang_0523: Path, tmp_path: Path
) -> None:
    real = copy_tree(sglang_0523, tmp_path / "real")
    changed = copy_tree(sglang_0523, tmp_path / "changed")
    formula = "return tp_size // attn_dp_size // attn_cp_size"
    edit(changed / "sglang" / "srt" / "runtime_context.py", formula, formula + " // 2")
    launch = MemoryLaunch("m", tp=4, dp=2, enable_dp_attention=True)
    ours = predict_on(real, launch, LLAMA31_8B, LLAMA31_8B_BYTES // 4)
    theirs = predict_on(changed, launch, LLAMA31_8B, LLAMA31_8B_BYTES // 4)
    assert ours.layout is not None and theirs.layout is not None
    assert (ours.layout.attn_tp_size, theirs.layout.attn_tp_size) == (2, 1)
    assert ours.kv_cell_bytes == 4 * 256 * 32 * 2
    assert theirs.kv_cell_bytes == 8 * 256 * 32 * 2


# -- DSA / NSA sparse attention: the indexer's K cache in the cell ----------------------------
def test_a_dsa_cell_adds_the_indexer_k_cache(index: TreeIndex, tmp_path: Path) -> None:
    """DeepSeek-V3.2 (`index_topk`, `index_head_dim` 128): the tree's own predicate
    (0.5.9 `is_deepseek_nsa`, 0.5.23 `is_deepseek_dsa`) adds (128 + 128 / 128 x 4) bytes of
    FP8 index K with its scale per layer; DeepSeek-V3 without them does not."""
    dsa = write_model(tmp_path / "v32", DEEPSEEK_V32, total_size=DEEPSEEK_V3_BYTES)
    found = one(memory(index, "--model-path", str(dsa), "--tp", "8", gpu=H200))
    sparse = details(found)
    plain = v3(index, tmp_path, "--tp", "8")
    indexer = (128 + 128 // 128 * 4) * 61 * 1  # uint8 index K + its fp32 scale, every layer
    assert sparse["kv_cell_bytes"] == plain["kv_cell_bytes"] + indexer
    assert sparse["pool_kind"] == "MLA + DSA indexer K cache" and plain["pool_kind"] == "MLA"
    assert sparse["pool_kind_from"].startswith("sglang/srt/configs/model_config.py:")
    assert "DSA indexer" in found.message
    assert not any("dsa" in a.lower() or "nsa" in a.lower() for a in sparse["assumed"])
    assert sparse["max_total_num_tokens"] < plain["max_total_num_tokens"]


def _dsv32_at_dp8(index: TreeIndex, kv_cache_dtype: str = "auto") -> Prediction:
    """DeepSeek-V3.2 on 8 x H200 with DP attention 8, as the tree sizes its KV pools (the
    launch of sglang #14700's log)."""
    shape = shape_on(index, DEEPSEEK_V32)
    assert not isinstance(shape, str)
    launch = MemoryLaunch("m", tp=8, dp=8, enable_dp_attention=True, kv_cache_dtype=kv_cache_dtype)
    weights = Weights(DEEPSEEK_V3_BYTES // 8, 0)
    return predict(index, memory_sources(index), launch, shape, None, H200_GPU, weights)


def _logged_dsv32_cell() -> float:
    """The bytes a token sglang #14700's log printed: 162.38 GB over 3627136 tokens."""
    anchor = test_memory.ANCHORS["dsv32_dp8_kv_cell_with_indexer"]["sglang"]
    return float(anchor["kv_gb"] * GIB / anchor["tokens"])


def test_anchor_the_dsa_fp8_cell_sglang_logged(index_0523: TreeIndex) -> None:
    """sglang #14700: DeepSeek-V3.2 with an FP8 KV cache logged 3627136 tokens in 162.38 GB
    per rank: 48069 bytes a token (+-1.5 from the two decimals). 0.5.23's arithmetic
    (calculate_mla_kv_cache_dim's FP8 layout: 512 + 512 / 128 x 4 + 64 x 2 bytes, plus the
    indexer's 132) gives exactly 656 x 61 + 132 x 61 = 48068; 0.5.9 sized the latent at 576
    bytes and says 43188, which the later release's log does not match."""
    made = _dsv32_at_dp8(index_0523, "fp8_e4m3")
    assert made.kv_cell_bytes == (656 + 132) * 61
    assert made.kv_cell_bytes is not None and abs(made.kv_cell_bytes - _logged_dsv32_cell()) <= 1.5


def test_the_fp8_dsa_pool_is_reported_as_the_tree_allocates_it(index_059: TreeIndex) -> None:
    """0.5.9 sizes the budget on a 576-byte latent (43188 bytes a token with the indexer) but
    allocates each layer's FP8 latent with its per-block scales and a BF16 rope
    (`calculate_mla_kv_cache_dim`: 656): the token count is the budget's, the KV GiB the
    allocation's, which is what sglang #14700's log printed a token (162.38 GB / 3627136)."""
    made = _dsv32_at_dp8(index_059, "fp8_e4m3")
    assert made.kv_cell_bytes == (576 + 132) * 61  # what the budget divides by
    allocated = made.kv_allocated_cell_bytes
    assert allocated is not None and abs(allocated - _logged_dsv32_cell()) <= 1.5
    where = made.kv_allocated_from
    assert where is not None and where.startswith("sglang/srt/model_executor/")
    tokens = made.max_total_num_tokens
    assert tokens is not None and made.kv_gib == pytest.approx(tokens * allocated / GIB)
    plain = _dsv32_at_dp8(index_059)
    assert plain.kv_allocated_cell_bytes is None  # BF16: the pool is the cell


# -- hybrid SWA: the full and sliding-window pools ----------------------------------------------
H100 = GpuMemory(81559 * MIB, "--gpu-mem-gib", int(78.58 * GIB), "--gpu-free-gib")


def gpt_oss(index: TreeIndex, tmp_path: Path, *flags: str) -> Any:
    t = write_model(tmp_path / "oss", GPT_OSS_120B, total_size=GPT_OSS_120B_BYTES)
    return one(memory(index, "--model-path", str(t), "--tp", "2", *flags, gpu=H100))


def test_gpt_oss_gets_a_full_and_a_sliding_window_pool(index: TreeIndex, tmp_path: Path) -> None:
    """gpt-oss-120b on 2 x H100: ModelConfig's own `is_hybrid_swa_model` and
    `get_hybrid_layer_ids` split its 36 layers 18 / 18 from `layer_types`; the SWA pool holds
    the tree's default 0.8 of the full pool's tokens (`swa_full_tokens_ratio`)."""
    found = gpt_oss(index, tmp_path)
    got = details(found)
    assert got["pool_kind"] == "hybrid SWA: 18 full + 18 sliding-window layers (window 128)"
    assert got["pool_kind_from"].startswith("sglang/srt/configs/model_config.py:")
    full, swa = got["full_max_total_num_tokens"], got["swa_max_total_num_tokens"]
    assert full == got["max_total_num_tokens"] and swa == int(full * 0.8)
    assert "sliding-window pool" in found.message
    assert not any("is_hybrid_swa" in a for a in got["assumed"])
    plain = details(one(memory(index, *models_plain(tmp_path), gpu=H100)))
    assert plain["full_max_total_num_tokens"] is None and plain["pool_kind"] == "MHA"


def models_plain(tmp_path: Path) -> tuple[str, ...]:
    t = write_model(tmp_path / "llama", LLAMA31_8B, total_size=LLAMA31_8B_BYTES)
    return ("--model-path", str(t))


def test_each_release_prices_the_swa_layers_its_own_way(
    index_059: TreeIndex, index_0523: TreeIndex, tmp_path: Path
) -> None:
    """4 KV heads a rank x (64 + 64) x bf16 = 1024 bytes a layer. 0.5.9 profiles with every
    layer (36 x 1024) and then splits (set_num_tokens_hybrid_swa); 0.5.23's
    HybridSWAPoolConfigurator prices a full token as 18 full layers + 0.8 x 18 SWA layers.
    Both end with the same full pool."""
    old, new = details(gpt_oss(index_059, tmp_path / "a")), details(gpt_oss(index_0523, tmp_path))
    assert old["kv_cell_bytes"] == 36 * 1024 and old["pool_configurator"] is None
    assert new["kv_cell_bytes"] == int(18 * 1024 + 0.8 * 18 * 1024)
    assert new["pool_configurator"] == "HybridSWAPoolConfigurator"
    assert new["pool_configurator_from"].startswith("sglang/srt/model_executor/pool_config")
    assert abs(old["full_max_total_num_tokens"] - new["full_max_total_num_tokens"]) <= 1


def test_gpt_oss_with_an_eagle3_draft_prices_the_drafts_layer(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """An EAGLE-3 draft of its own (a Llama layer) beside gpt-oss: 0.5.23's configurator asks
    `spec_aux_config.eagle_draft_swa_num_layers`, None for a draft the tree's ModelConfig does
    not derive hybrid SWA, and prices the draft's one layer in the full pool at the target's
    layer price (4 KV heads a rank x (64 + 64) x bf16 = 1024 bytes). It was "KV cell size not
    read"."""
    draft = write_model(tmp_path / "draft", EAGLE3_LLAMA31_8B, total_size=EAGLE3_LLAMA31_8B_BYTES)
    spec = ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft))
    alone = details(gpt_oss(index_0523, tmp_path / "a"))
    found = gpt_oss(index_0523, tmp_path / "b", *spec)
    with_draft = details(found)
    assert "not_read" not in with_draft and "sliding-window pool" in found.message
    assert with_draft["kv_cell_bytes"] == alone["kv_cell_bytes"] + 1024
    assert with_draft["max_total_num_tokens"] < alone["max_total_num_tokens"]


def test_the_swa_ratio_flag_moves_tokens_between_the_pools(
    index: TreeIndex, tmp_path: Path
) -> None:
    default = details(gpt_oss(index, tmp_path))
    half = details(gpt_oss(index, tmp_path / "b", "--swa-full-tokens-ratio", "0.5"))
    assert half["swa_max_total_num_tokens"] == int(half["full_max_total_num_tokens"] * 0.5)
    assert half["full_max_total_num_tokens"] > default["full_max_total_num_tokens"]


def test_a_tree_without_the_model_in_its_swa_table_sizes_one_pool(
    sglang_0523: Path, tmp_path: Path
) -> None:
    """The hybrid predicate is read: a copy of 0.5.23 whose SWA_SINK_ARCHS lacks
    GptOssForCausalLM sizes gpt-oss with one pool of every layer."""
    real = copy_tree(sglang_0523, tmp_path / "real")
    changed = copy_tree(sglang_0523, tmp_path / "changed")
    edit(changed / "sglang" / "srt" / "configs" / "model_config.py", '"GptOssForCausalLM",\n', "")
    launch = MemoryLaunch("m", tp=2)
    ours = predict_on(real, launch, GPT_OSS_120B, GPT_OSS_120B_BYTES // 2)
    theirs = predict_on(changed, launch, GPT_OSS_120B, GPT_OSS_120B_BYTES // 2)
    assert ours.swa_tokens is not None and theirs.swa_tokens is None
    assert ours.configurator == "HybridSWAPoolConfigurator"
    assert theirs.configurator == "DefaultPoolConfigurator"
    assert theirs.kv_cell_bytes == 36 * 1024


def test_anchor_the_swa_split_sglang_logged(index_0523: TreeIndex) -> None:
    """sgl-project/sglang PR #18039 (MiMo-V2-Flash, --page-size 64): "Use sliding window
    memory pool. full_layer_tokens=375360, swa_layer_tokens=300288". 0.5.23's
    `_solve_pool_sizes` with the tree's default ratio splits 375360 the same way."""
    from eaglebug.checks.memory.fit import Context

    anchor = test_memory.ANCHORS["mimo_v2_flash_swa_split"]["sglang"]
    sources = memory_sources(index_0523)
    shape = shape_on(index_0523, GPT_OSS_120B)
    assert not isinstance(shape, str)
    ctx = Context(index_0523, sources, MemoryLaunch("m", tp=4, page_size=64), shape, None, H200_GPU)
    values = ctx.values(shape, runner=True)
    values.update(
        {
            "_full_layers_num": 9,
            "_swa_full_tokens_ratio": sources.defaults["swa_full_tokens_ratio"],
            "_enable_unified_memory": False,
            "_sliding_window_size": 128,
            "_page_size": 64,
        }
    )
    made, _ = ctx.run(
        "HybridSWAPoolConfigurator._solve_pool_sizes",
        [anchor["full_layer_tokens"], 64],
        shape,
        values,
    )
    assert made.value is not None
    assert made.value.swa_max_total_num_tokens == anchor["swa_layer_tokens"]  # type: ignore[attr-defined]
    assert made.value.full_max_total_num_tokens == anchor["full_layer_tokens"]  # type: ignore[attr-defined]
