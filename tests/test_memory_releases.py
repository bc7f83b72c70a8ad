"""config.memory on releases before 0.5.9, each read by its own arithmetic (issue 22).

The launch is real: Llama-3.1-8B-Instruct on one H100 in SGLang's docs CI (0.4.1.post7 era),
whose log printed the free memory, the weights and the pool SGLang sized
(tests/fixtures/memory/launches22/launches.json, with its source). The prediction is made the
way `diagnose --sglang` makes it: the launch's flags, the measured free memory and weights.
The other launches (Qwen3-Next, Llama-3.1-8B with an EAGLE-3 draft, on releases whose runner,
config registry and speculative enum read unlike the newer ones') use the tests' published
configs (`tests/memconfigs.py`).
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.logs.memory import Overheads
from eaglebug.checks.memory import startup
from eaglebug.checks.memory.classes import model_objects
from eaglebug.checks.memory.fit import GIB, MIB, Context, Gpu, MemoryLaunch, model_shape
from eaglebug.checks.memory.plan import Prediction, Weights, predict
from eaglebug.checks.memory.rules import CONFIG_REWRITE, memory_sources
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.configs import write_model
from tests.memconfigs import (
    EAGLE3_LLAMA31_8B,
    EAGLE3_LLAMA31_8B_BYTES,
    LLAMA31_8B,
    LLAMA31_8B_BYTES,
    QWEN3_NEXT_80B,
    QWEN3_NEXT_80B_BYTES,
    shape_on,
)
from tests.test_mambapools import STATE_TP4
from tests.test_memory import H200, details, memory, one
from tests.test_mempools import copy_tree, edited_index

FIXTURES = Path(__file__).parent / "fixtures/memory/launches22"
H100_MIB = 81559  # an H100 80GB HBM3 as NVML reports it


def _record(name: str) -> dict[str, Any]:
    records = json.loads((FIXTURES / "launches.json").read_text())["launches"]
    return next(r for r in records if r["name"] == name)


def _llama_on_h100(index: TreeIndex) -> tuple[Prediction, dict[str, Any]]:
    record = _record("llama31_8b_h100_docs_send_request_2025_01_23")
    figures = record["figures"]
    config = json.loads((FIXTURES / "Llama-3.1-8B-Instruct.config.json").read_text())
    shape = shape_on(index, config)
    assert not isinstance(shape, str)
    free, weights = figures["avail_before_load_gb"], figures["weights_gb"]
    made = predict(
        index,
        memory_sources(index),
        MemoryLaunch("meta-llama/Meta-Llama-3.1-8B-Instruct"),
        shape,
        None,
        Gpu(H100_MIB * MIB, int(free * GIB)),
        Weights(int(weights * GIB), 0),
        Overheads(free, weights),
    )
    return made, figures


def test_a_041_launch_is_read_by_its_own_release(index_041: TreeIndex) -> None:
    """0.4.1.post7 sets the default fraction inline in `ServerArgs.__post_init__` (0.88 on a
    GPU this size) and sizes the pool in `ModelRunner.profile_max_num_token`: both run here,
    and the pool lands on the logged one."""
    made, figures = _llama_on_h100(index_041)
    assert made.unknown == []
    assert made.fraction == figures["mem_fraction_static"]
    assert made.fraction_from.startswith("sglang/srt/server_args.py:")
    sources = memory_sources(index_041)
    assert sources.entries["fraction"] == "ServerArgs.__post_init__"
    assert sources.entries["budget"] == "profile_max_num_token"
    logged = figures["max_total_num_tokens"]
    assert made.max_total_num_tokens is not None
    assert abs(made.max_total_num_tokens - logged) / logged < 0.001
    assert made.kv_gib is not None and abs(made.kv_gib - figures["kv_gb"]) < 0.05


def test_a_tree_without_the_fraction_anchor_says_so(index_041: TreeIndex) -> None:
    """A release whose `__post_init__` sets no fraction has no anchor: the prediction says
    which function it lacked, and makes up no fraction."""
    sources = memory_sources(index_041)
    entries = {**sources.entries, "fraction": ""}
    bare = type(sources)(**{**sources.__dict__, "entries": entries})
    config = json.loads((FIXTURES / "Llama-3.1-8B-Instruct.config.json").read_text())
    shape = shape_on(index_041, config)
    assert not isinstance(shape, str)
    gpu = Gpu(H100_MIB * MIB, 78 * GIB)
    made = predict(index_041, bare, MemoryLaunch("m"), shape, None, gpu, Weights(15 * GIB, 0))
    assert made.fraction is None and made.max_total_num_tokens is None
    said = [u for u in made.unknown if "sets no default fraction" in u]
    assert said and "ServerArgs.__post_init__" in said[0]


def test_057_reads_the_layer_lists_the_runner_writes_back(index_057: TreeIndex) -> None:
    """0.5.7's `load_model` rewrites `model_config.full_attention_layer_ids` (the config's list
    cut to the runner's layers; empty where the config has none) before the pool reads it: the
    tree's own expression is kept and run, so a dense model is read completely."""
    kept = [f for f in memory_sources(index_057).functions if f.qualname.startswith(CONFIG_REWRITE)]
    assert {f.qualname for f in kept} >= {"=model_config.full_attention_layer_ids"}
    made, _ = _llama_on_h100(index_057)
    assert made.unknown == []
    assert made.kv_cell_bytes == 131072  # 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
    assert made.max_total_num_tokens is not None


def test_online_fp8_is_said_not_modelled(index_041: TreeIndex) -> None:
    """`--quantization fp8` on Llama's BF16 checkpoint: the tree's Fp8Config quantizes it at
    load (it branches on `is_checkpoint_fp8_serialized`); with the weights read from the
    checkpoint the prediction says so. Measured weights (a log) already are the FP8 ones."""
    config = json.loads((FIXTURES / "Llama-3.1-8B-Instruct.config.json").read_text())
    shape = shape_on(index_041, config)
    assert not isinstance(shape, str)
    sources = memory_sources(index_041)
    gpu = Gpu(H100_MIB * MIB, 78 * GIB)
    weights = Weights(15 * GIB, 0)

    def notes(launch: MemoryLaunch, measured: Overheads | None = None) -> list[str]:
        made = predict(index_041, sources, launch, shape, None, gpu, weights, measured)
        return [a for a in made.assumed if "--quantization fp8" in a]

    online = notes(MemoryLaunch("m", quantization="fp8"))
    assert len(online) == 1
    rel, line = online[0].split(":")[:2]
    assert (
        "is_checkpoint_fp8_serialized"
        in (index_041.tree.root / rel).read_text().splitlines()[int(line) - 1]
    )
    assert notes(MemoryLaunch("m")) == []
    assert notes(MemoryLaunch("m", quantization="fp8"), Overheads(78.0, 8.5)) == []


def test_piecewise_graphs_after_the_pool_need_no_note(index_057: TreeIndex) -> None:
    """0.5.7 captures its piecewise CUDA graphs after `init_memory_pool` (in `initialize`):
    they come out of the slack the fraction leaves, which the arithmetic already has, so no
    note, whatever the launch says of them."""
    from eaglebug.checks.memory.unmodelled import unmodelled

    assert unmodelled(index_057).piecewise_before_pool is None
    config = json.loads((FIXTURES / "Llama-3.1-8B-Instruct.config.json").read_text())
    shape = shape_on(index_057, config)
    assert not isinstance(shape, str)
    launch = MemoryLaunch("m", piecewise_cuda_graph=True)
    gpu = Gpu(H100_MIB * MIB, 78 * GIB)
    made = predict(
        index_057, memory_sources(index_057), launch, shape, None, gpu, Weights(15 * GIB, 0)
    )
    assert not [a for a in made.assumed if "piecewise" in a]


def test_a_hybrid_model_inside_a_vision_language_wrapper(
    sglang_0510: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qwen3.5-9B (`Qwen3_5ForConditionalGeneration`: its Gated-DeltaNet parameters in
    `text_config`) over 2 x RTX 4090, a real launch and log (main of 2026-04-14, between 0.5.10
    and 0.5.11), through preflight as a user runs it: the tree's own Qwen3_5Config builds its
    text config (transformers' `PretrainedConfig.__init__` keeping the keys the class does not
    name, `full_attention_interval`), so 8 of the 32 layers hold KV and the rest a mamba state;
    the pool and the state cache land on the logged ones."""
    from eaglebug.checks import GpuMemory, analyze_file, preflight
    from tests.configs import write_hub_model

    record = _record("qwen35_9b_2x_rtx4090_tp2_ctx262144_main_2026_04")
    log = tmp_path / "server.log"
    log.write_text("\n".join(record["log"]) + "\n")
    measured = analyze_file(log).memory
    assert measured is not None
    config = json.loads((FIXTURES / "Qwen3.5-9B.config.json").read_text())
    snapshot = write_hub_model(tmp_path / "hub", "Qwen/Qwen3.5-9B", config)
    (snapshot / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 19306216416}, "weight_map": {}})
    )
    words = [w for w in record["launch"].split() if "=" not in w or w.startswith("--")]
    words = [w.strip("'") for w in words]
    free = int(measured.free_before_load_gib * GIB)  # type: ignore[operator]
    gpu = GpuMemory(24564 * MIB, "an RTX 4090 (NVML)", free, "the log")
    index = TreeIndex(locate(str(sglang_0510)), use_cache=False)
    result = preflight(
        index, words, {"HF_HUB_CACHE": str(tmp_path / "hub")}, gpu, measured=measured
    )
    found = next(f for f in result.findings if f.id == "config.memory")
    details = found.to_json()["details"]
    figures = record["figures"]
    assert details["pool_kind"] == "KV for 8 full-attention layers + mamba state cache"
    assert details["max_total_num_tokens"] == pytest.approx(
        figures["max_total_num_tokens"], rel=0.01
    )
    assert abs(details["mamba_cache_requests"] - figures["max_mamba_cache_size"]) <= 1
    logged_state = figures["mamba_conv_gb"] + figures["mamba_ssm_gb"]
    assert details["mamba_gib_per_gpu"] == pytest.approx(logged_state, abs=0.05)


def test_058_reads_the_fp8_dsa_layout_from_the_pool_itself(sglang_058post1: Path) -> None:
    """0.5.8.post1 has no `calculate_mla_kv_cache_dim`: the NSA pool's constructor computes
    `override_dim` (the FP8 latent, its scales, a BF16 rope) and its base class takes it when
    `nsa_kv_cache_store_fp8`. Both are run from memory_pool.py: DeepSeek-V3.2's pool takes the
    bytes sglang #14700's log printed a token; with a BF16 KV cache, the cell's."""
    from tests import test_memory
    from tests.memconfigs import DEEPSEEK_V3_BYTES, DEEPSEEK_V32

    anchor = test_memory.ANCHORS["dsv32_dp8_kv_cell_with_indexer"]["sglang"]
    logged = anchor["kv_gb"] * GIB / anchor["tokens"]
    index = TreeIndex(locate(str(sglang_058post1)), use_cache=False)
    shape = shape_on(index, DEEPSEEK_V32)
    assert not isinstance(shape, str)
    gpu = Gpu(143771 * MIB, int(139.5 * GIB))
    weights = Weights(DEEPSEEK_V3_BYTES // 8, 0)

    def made(kv: str) -> Prediction:
        launch = MemoryLaunch("m", tp=8, dp=8, enable_dp_attention=True, kv_cache_dtype=kv)
        return predict(index, memory_sources(index), launch, shape, None, gpu, weights)

    fp8 = made("fp8_e4m3")
    assert fp8.kv_cell_bytes == (576 + 132) * 61
    assert fp8.kv_allocated_cell_bytes is not None
    assert abs(fp8.kv_allocated_cell_bytes - logged) <= 1.5
    assert (fp8.kv_allocated_from or "").startswith("sglang/srt/mem_cache/memory_pool.py:")
    assert made("auto").kv_allocated_cell_bytes is None


def test_piecewise_graphs_before_the_pool_are_said(sglang_057: Path, tmp_path: Path) -> None:
    """The reading is of the runner's order: 0.5.7's own model_runner.py with its piecewise
    capture moved before `init_memory_pool` (the order a release that captures them before
    sizing the pool has) gives the note, on by the tree's default and off with the flag."""
    from eaglebug.checks.memory.unmodelled import assumed

    rel = "sglang/srt/model_executor/model_runner.py"
    text = (sglang_057 / rel).read_text()
    pool = "        self.init_memory_pool(min_per_gpu_memory, server_args)\n"
    capture = "        self.init_piecewise_cuda_graphs()\n"
    assert text.count(pool) == 1 and text.count(capture) == 1
    moved = text.replace(capture, "").replace(pool, capture + pool)
    target = tmp_path / rel
    target.parent.mkdir(parents=True)
    target.write_text(moved)
    for folder in (tmp_path / "sglang", tmp_path / "sglang/srt", target.parent):
        (folder / "__init__.py").write_text("")
    index = TreeIndex(locate(str(tmp_path)), use_cache=False)
    notes = assumed(index, {"disable_piecewise_cuda_graph": False}, None, None, False, False)
    assert len(notes) == 1 and notes[0].startswith(f"{rel}:")
    line = int(notes[0].split(":")[1])
    assert "init_piecewise_cuda_graphs" in moved.splitlines()[line - 1]
    assert assumed(index, {"disable_piecewise_cuda_graph": False}, False, None, False, False) == []
    assert assumed(index, {"enable_piecewise_cuda_graph": False}, None, None, False, False) == []


def test_057_a_registry_algorithm_is_the_trees_member(index_057: TreeIndex, tmp_path: Path) -> None:
    """0.5.7's `SpeculativeAlgorithm` is no enum: its members are registered at import by a
    metaclass, so `from_string` cannot be run and `is_none()` (`self is
    SpeculativeAlgorithm.NONE`) could not be decided: Qwen3-Next with NEXTN said "pool size not
    read (OneOf...)". The launch's member now answers each predicate as the tree's own run of it
    said: the draft tokens' mamba state is reserved, and the pool is the speculative one."""
    model = write_model(tmp_path / "qn", QWEN3_NEXT_80B, total_size=QWEN3_NEXT_80B_BYTES)
    launch = ("--model-path", str(model), "--tp", "4", "--max-running-requests", "48")
    plain = one(memory(index_057, *launch, gpu=H200))
    nextn = one(memory(index_057, *launch, "--speculative-algorithm", "NEXTN", gpu=H200))
    assert "incomplete" not in nextn.message, nextn.message
    got, base = details(nextn), details(plain)
    assert got["mamba_cache_requests"] < base["mamba_cache_requests"]
    assert got["max_total_num_tokens"] < base["max_total_num_tokens"]


def test_053_reads_the_mamba_cache_its_runner_sizes_at_start_up(
    index_053: TreeIndex, tmp_path: Path
) -> None:
    """0.5.3 sizes Qwen3-Next's mamba state cache in `ModelRunner.initialize`, on its way to
    the pool (`if self.is_hybrid_gdn: ... max_mamba_cache_size = max_running_requests, else
    512`), and its `profile_max_num_token` multiplies it: read without the start-up it was
    "pool size not read" (None times an int). The hybrid predicate is the runner's own
    `is_hybrid_gdn`, the state the config's own `mamba_cache_per_req`."""
    model = write_model(tmp_path / "qn", QWEN3_NEXT_80B, total_size=QWEN3_NEXT_80B_BYTES)
    launch = ("--model-path", str(model), "--tp", "4")
    plain = one(memory(index_053, *launch, gpu=H200))
    assert "incomplete" not in plain.message, plain.message
    got = details(plain)
    assert got["mamba_cache_requests"] == 512  # no --max-running-requests: the tree's 512
    assert got["mamba_from"].startswith("sglang/srt/model_executor/model_runner.py:")
    assert got["pool_kind"] == "KV for 12 full-attention layers + mamba state cache"
    assert got["mamba_state_bytes_per_request"] == STATE_TP4
    assert got["kv_cell_bytes"] == 1 * (256 + 256) * 12 * 2  # the 12 full-attention layers
    given = details(one(memory(index_053, *launch, "--max-running-requests", "64", gpu=H200)))
    assert given["mamba_cache_requests"] == 64
    # The state the cache no longer holds is KV: 448 requests' state, in tokens of the cell.
    freed = (512 - 64) * STATE_TP4 // got["kv_cell_bytes"]
    assert abs(given["max_total_num_tokens"] - got["max_total_num_tokens"] - freed) <= 2


def test_053_the_start_up_read_is_the_trees_own(sglang_053: Path, tmp_path: Path) -> None:
    """The same launch on a copy of 0.5.3 whose start-up keeps 256 requests' state, not 512:
    the cache follows the tree, not a number eaglebug holds."""
    index = edited_index(
        sglang_053,
        tmp_path / "tree",
        "model_executor/model_runner.py",
        "self.server_args.max_mamba_cache_size = 512",
        "self.server_args.max_mamba_cache_size = 256",
    )
    model = write_model(tmp_path / "qn", QWEN3_NEXT_80B, total_size=QWEN3_NEXT_80B_BYTES)
    got = details(one(memory(index, "--model-path", str(model), "--tp", "4", gpu=H200)))
    assert got["mamba_cache_requests"] == 256


def test_053_reads_the_drafts_cell_in_its_own_pool_sizing(
    index_053: TreeIndex, tmp_path: Path
) -> None:
    """0.5.3 has no `get_cell_size_per_token`: the draft's runner works its cell out inside
    its own `init_memory_pool` (`profile_max_num_token`, with `getattr(hf_config,
    "num_nextn_predict_layers", self.num_effective_layers)` layers). Run the same way, a
    Llama EAGLE-3 draft's cell is its one layer's K and V at its own float16, and the check is
    complete (it said "the draft's cell size not read")."""
    target = write_model(tmp_path / "t", LLAMA31_8B, total_size=LLAMA31_8B_BYTES)
    draft = write_model(tmp_path / "d", EAGLE3_LLAMA31_8B, total_size=EAGLE3_LLAMA31_8B_BYTES)
    found = one(
        memory(
            index_053,
            *("--model-path", str(target), "--speculative-algorithm", "EAGLE3"),
            *("--speculative-draft-model-path", str(draft)),
            gpu=H200,
        )
    )
    got = details(found)
    assert "not_read" not in got and "incomplete" not in found.message, found.message
    assert got["draft_kv_cell_bytes"] == 8 * 128 * 1 * 2 * 2  # KV heads x dim x layer x K,V x 2
    assert got["kv_cell_bytes"] == 8 * 128 * 32 * 2 * 2  # the target's 32 layers, bfloat16


def test_a_config_registry_outside_utils_is_read(sglang_053: Path, tmp_path: Path) -> None:
    """0.5.2 keeps `_CONFIG_REGISTRY` in `sglang/srt/hf_transformers_utils.py`, 0.5.3 on under
    `utils/`: the registry is looked for under `utils/` first, then anywhere in `srt/`, so
    Qwen3-Next's own config class is found either way (0.5.2 said "pool size not read": its
    config had no `mamba_cache_per_req`). Here 0.5.3's file moved where 0.5.2 had it."""
    root = copy_tree(sglang_053, tmp_path / "tree")
    srt = root / "sglang" / "srt"
    (srt / "utils" / "hf_transformers_utils.py").rename(srt / "hf_transformers_utils.py")
    found = model_objects(TreeIndex(locate(str(root)), use_cache=False), QWEN3_NEXT_80B)
    assert found.qualname == "sglang.srt.configs.qwen3_next.Qwen3NextConfig"
    assert found.registry_from.startswith("sglang/srt/hf_transformers_utils.py:")


def test_the_start_up_is_followed_in_the_runners_order_to_the_pool() -> None:
    """`startup.statements` walks `__init__`, enters each `self.<method>()` where it is
    called, keeps the statements writing server-args fields, and ends at the pool's call;
    a field the same statement also sets on the runner (0.5.9's `configure_kv_cache_dtype`:
    `self.kv_cache_dtype = torch...` beside `self.server_args.kv_cache_dtype = "fp8_e4m3"`)
    is not one the flat store could hold, so it is not taken."""
    tree = ast.parse(
        textwrap.dedent(
            """
            class ModelRunner:
                def __init__(self, server_args):
                    self.server_args = server_args
                    server_args.a = 1
                    self.initialize()
                    server_args.after = 3
                def initialize(self):
                    if self.server_args.kv_cache_dtype == "auto":
                        self.kv_cache_dtype = 1
                        self.server_args.kv_cache_dtype = "fp8_e4m3"
                    self.adjust()
                    self.init_memory_pool(1)
                    self.server_args.too_late = 4
                def adjust(self):
                    if self.flag:
                        self.server_args.b = 2
            """
        )
    )
    found = startup.statements(tree, ("init_memory_pool",))
    assert [(method, startup.written(node)) for method, node in found] == [
        ("__init__", ["a"]),
        ("adjust", ["b"]),
    ]


def test_a_draft_token_count_the_launch_leaves_is_the_trees_default(index_041: TreeIndex) -> None:
    """Before 0.5 `--speculative-num-draft-tokens` has a default in `ServerArgs` itself (64
    in 0.4.1, 8 in 0.4.3) and no resolution sets it: the store held the launch's None over
    it, and 0.4.3's pool headroom (`max_num_reqs * speculative_num_draft_tokens`) was "not
    read" for any NEXTN launch that did not give the flag. A value given wins."""
    shape = model_shape(
        json.loads((FIXTURES / "Llama-3.1-8B-Instruct.config.json").read_text()), None
    )
    assert not isinstance(shape, str)
    sources = memory_sources(index_041)
    gpu = Gpu(H100_MIB * MIB, H100_MIB * MIB)
    left = Context(index_041, sources, MemoryLaunch("m", algorithm="EAGLE"), shape, None, gpu)
    given = MemoryLaunch("m", algorithm="EAGLE", speculative_num_draft_tokens=16)
    assert left.values(shape)["speculative_num_draft_tokens"] == 64
    assert (
        Context(index_041, sources, given, shape, None, gpu).values(shape)[
            "speculative_num_draft_tokens"
        ]
        == 16
    )
