"""The weights each GPU holds, per tensor: safetensors headers placed in the audited tree.

The checkpoints are sparse safetensors files whose headers are built from the published
configs (tests/checkpoints.py says how); the trees are the real releases 0.5.9 and 0.5.23,
and a synthetic tree where one layer's class is switched shows the split is read from the
tree, not from the tensor names.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.launch.devices import GpuMemory
from eaglebug.checks.memory.parallel import Layout
from eaglebug.checks.memory.plan import Weights
from eaglebug.checks.memory.safetensors import CheckpointTensors, checkpoint_tensors, header_sizes
from eaglebug.checks.memory.weights import RankWeights, fold, per_rank_bytes, rank_weights
from eaglebug.checks.models.source import ModelSource
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests import test_memory
from tests.checkpoints import (
    Tensor,
    deepseek_v3_tensors,
    eagle3_llama_tensors,
    llama_tensors,
    nbytes,
    write_checkpoint,
)
from tests.configs import kimi_k25
from tests.memconfigs import EAGLE3_LLAMA31_8B, LLAMA31_8B, LLAMA31_8B_BYTES
from tests.synthetic import write_tree

GIB = 1 << 30
MIB = 1 << 20
H200 = GpuMemory(143771 * MIB, "--gpu-mem-gib", int(139.5 * GIB), "--gpu-free-gib")
DEEPSEEK_V3: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures/configs/deepseek-v3.config.json").read_text()
)
# What SGLang's DeepSeek-V3 keeps whole on every rank: the MLA down-projections
# (ReplicatedLinear), every RMSNorm, the MoE gate's raw parameter and its bias.
_REPLICATED = re.compile(
    r"(q_a_proj|kv_a_proj_with_mqa)\.weight|layernorm\.weight|model\.norm\.weight|mlp\.gate\."
)


index = test_memory.index


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dsv3")
    return write_checkpoint(folder, DEEPSEEK_V3, deepseek_v3_tensors(DEEPSEEK_V3), shards=8)


def _layout(tp: int, dp: int = 1, dp_attention: bool = False, pp: int = 1) -> Layout:
    return Layout(tp, tp, dp, 1, pp, dp_attention)


def _headers(folder: Path) -> CheckpointTensors:
    """The checkpoint's tensors from its headers (that they read is part of every test here)."""
    read = checkpoint_tensors(folder)
    assert not isinstance(read, str)
    return read


def _deepseek_ranks(
    index: TreeIndex,
    read: CheckpointTensors,
    layout: Layout,
    environ: dict[str, str] | None = None,
) -> RankWeights:
    """What one rank of DeepSeek-V3 holds under `layout`, as the tree's layers place it."""
    entry = index.exporters_of("DeepseekV3ForCausalLM")[0]
    return rank_weights(index, entry, DEEPSEEK_V3, read, layout, environ)


def _source(folder: Path) -> ModelSource:
    return ModelSource(
        str(folder), folder, "local folder", json.loads((folder / "config.json").read_text())
    )


# -- the header reader ---------------------------------------------------------------------
def test_the_headers_give_each_tensors_exact_bytes(tmp_path: Path) -> None:
    tensors = llama_tensors(LLAMA31_8B)
    folder = write_checkpoint(tmp_path / "llama", LLAMA31_8B, tensors)
    read = _headers(folder)
    assert read.files == 4 and len(read.sizes) == len(tensors)
    # The tensors built from the published config add up to the published index's total_size.
    assert read.total_bytes == LLAMA31_8B_BYTES
    assert read.sizes["model.layers.0.self_attn.k_proj.weight"] == 1024 * 4096 * 2


def test_an_unreadable_shard_says_why(tmp_path: Path) -> None:
    folder = write_checkpoint(tmp_path / "m", LLAMA31_8B, llama_tensors(LLAMA31_8B), shards=2)
    first, second = sorted(folder.glob("*.safetensors"))
    second.unlink()
    assert "1 of the 2 shard files the index names are absent" in str(checkpoint_tensors(folder))
    second.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 9\n")
    assert "Git LFS pointer" in str(checkpoint_tensors(folder))
    with first.open("rb") as shard:  # the shards are sparse files of gigabytes: read a prefix
        raw = shard.read(4096)
        length = struct.unpack("<Q", raw[:8])[0]
        shard.seek(0)
        header = shard.read(8 + length)
    second.write_bytes(raw)  # a download cut inside the header
    assert "truncated" in str(header_sizes(second))
    second.write_bytes(header + b"\0" * 16)  # cut inside the data
    assert "shorter than its header" in str(header_sizes(second))


# -- real releases -------------------------------------------------------------------------
def test_a_model_with_nothing_replicated_at_tp1_is_its_total(
    index: TreeIndex, tmp_path: Path
) -> None:
    folder = write_checkpoint(tmp_path / "llama", LLAMA31_8B, llama_tensors(LLAMA31_8B))
    got = per_rank_bytes(index, _source(folder), _layout(1), LLAMA31_8B_BYTES, "x", 1)
    rank, how = got.bytes, got.how
    assert rank == LLAMA31_8B_BYTES
    assert how.startswith("safetensors headers")


def test_llama_at_tp8_keeps_only_its_norms_whole(index: TreeIndex, tmp_path: Path) -> None:
    tensors = llama_tensors(LLAMA31_8B)
    folder = write_checkpoint(tmp_path / "llama", LLAMA31_8B, tensors)
    entry = index.exporters_of("LlamaForCausalLM")[0]
    read = _headers(folder)
    found = rank_weights(index, entry, LLAMA31_8B, read, _layout(8))
    norms = sum(nbytes(t) for t in tensors if "norm" in t[0])
    assert found.replicated_bytes == norms == 65 * 4096 * 2
    assert found.per_rank_bytes == int((LLAMA31_8B_BYTES - norms) / 8 + norms)
    assert found.unplaced == 0  # q/k/v and gate/up placed through stacked_params_mapping


def test_deepseek_v3_at_tp8_holds_its_replicated_parts_whole(
    index: TreeIndex, deepseek: Path
) -> None:
    read = _headers(deepseek)
    found = _deepseek_ranks(index, read, _layout(8))
    built = {n: s for n, s in read.sizes.items() if ".layers.61." not in n}  # NextN: the draft's
    whole = sum(s for n, s in built.items() if _REPLICATED.search(n))
    assert found.not_built_bytes == read.total_bytes - sum(built.values())
    assert found.replicated_bytes == whole
    assert 1.0 * GIB < whole < 1.1 * GIB
    exact = sum(built.values()) / 8
    assert found.per_rank_bytes == pytest.approx(exact + whole * 7 / 8, abs=1)
    assert found.per_rank_bytes > read.total_bytes / 8 - found.not_built_bytes / 8 + 0.9 * GIB
    text = found.describe(8)
    assert "ReplicatedLinear: sglang/srt/layers/linear.py:" in text
    assert "MoEGate: sglang/srt/models/deepseek_v2.py:" in text
    assert found.unplaced == 0


def test_dp_attention_keeps_the_attention_whole_on_each_rank(
    index: TreeIndex, deepseek: Path
) -> None:
    read = _headers(deepseek)
    plain = _deepseek_ranks(index, read, _layout(8))
    dp = _deepseek_ranks(index, read, _layout(8, dp=8, dp_attention=True))
    # --dp-size 8 --enable-dp-attention: attention TP 8 // 8 = 1, as the tree derives it.
    assert dp.attn_tp == 1 and dp.attn_tp_from.startswith("sglang/srt/")
    attention = sum(
        s
        for n, s in read.sizes.items()
        if re.search(r"self_attn\.(q_b_proj|kv_b_proj|o_proj)\.", n) and ".layers.61." not in n
    )
    assert dp.per_rank_bytes - plain.per_rank_bytes >= attention * 7 / 8 - 1
    assert dp.per_rank_bytes > plain.per_rank_bytes + 8 * GIB


def test_preflight_carries_the_per_rank_figure_and_says_how(
    index_0523: TreeIndex, deepseek: Path
) -> None:
    launch = ["python", "-m", "sglang.launch_server", "--model-path", str(deepseek), "--tp", "8"]
    found = [f for f in preflight(index_0523, launch, {}, H200).findings if f.id == "config.memory"]
    details = found[0].to_json()["details"]
    read = _headers(deepseek)
    expected = _deepseek_ranks(index_0523, read, _layout(8)).per_rank_bytes
    assert details["weights_gib_per_gpu"] == round(expected / GIB, 3)
    assert details["weights_from"].startswith("target: safetensors headers (")
    assert "GiB replicated on every rank" in details["weights_from"]
    # The launch's DP flags reach the split: the attention is whole on each rank.
    dp = [*launch, "--dp-size", "8", "--enable-dp-attention"]
    found = [f for f in preflight(index_0523, dp, {}, H200).findings if f.id == "config.memory"]
    with_dp = found[0].to_json()["details"]
    assert with_dp["weights_gib_per_gpu"] > details["weights_gib_per_gpu"] + 8
    assert "attention tp 1 from sglang/srt/runtime_context.py:" in with_dp["weights_from"]


@pytest.mark.parametrize("draft_path", ["the target's folder", "none given"])
def test_an_mtp_draft_from_the_targets_checkpoint_is_its_nextn_layers(
    index_0523: TreeIndex, deepseek: Path, draft_path: str
) -> None:
    """DeepSeek-V3 + NEXTN loads its draft from the target's own checkpoint: the draft is the
    layer past num_hidden_layers that the target does not build, not the whole checkpoint a
    second time (which would read as 'no memory left for the KV cache' on 8 x H200)."""
    launch = ["python", "-m", "sglang.launch_server", "--model-path", str(deepseek), "--tp", "8"]
    plain = [f for f in preflight(index_0523, launch, {}, H200).findings if f.id == "config.memory"]
    spec = [*launch, "--speculative-algorithm", "NEXTN"]
    if draft_path == "the target's folder":
        spec += ["--speculative-draft-model-path", str(deepseek)]
    found = [f for f in preflight(index_0523, spec, {}, H200).findings if f.id == "config.memory"]
    assert found[0].severity == "info", found[0].message
    before, after = plain[0].to_json()["details"], found[0].to_json()["details"]
    nextn = sum(nbytes(t) for t in deepseek_v3_tensors(DEEPSEEK_V3) if ".layers.61." in t[0])
    added = after["weights_gib_per_gpu"] - before["weights_gib_per_gpu"]
    assert added == pytest.approx(nextn / 8 / GIB, abs=0.002)
    assert "the draft's NextN layers), split by tp 8" in after["weights_from"]


def test_without_the_shards_the_exact_split_is_kept_and_said(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    folder = write_checkpoint(tmp_path / "llama", LLAMA31_8B, llama_tensors(LLAMA31_8B))
    for shard in folder.glob("*.safetensors"):
        shard.unlink()
    got = per_rank_bytes(index_0523, _source(folder), _layout(2), LLAMA31_8B_BYTES, "idx", 2)
    rank, how = got.bytes, got.how
    assert rank == LLAMA31_8B_BYTES // 2
    assert how == (
        "idx, split by 2 ranks (no per-tensor split: 4 of the 4 shard files the index names "
        "are absent (first: model-00001-of-00004.safetensors))"
    )


# -- a synthetic tree: the class, not the name, decides ------------------------------------
_LINEAR = """
from torch import nn


def divide(numerator, denominator):
    return numerator // denominator


def get_tensor_model_parallel_world_size():
    return _TP


def get_attention_tp_size():
    return _ATTN_TP


class ColumnParallelLinear(nn.Module):
    def __init__(self, input_size, output_size, tp_size=None):
        super().__init__()
        if tp_size is None:
            tp_size = get_tensor_model_parallel_world_size()
        self.output_size_per_partition = divide(output_size, tp_size)


class ReplicatedLinear(nn.Module):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.output_size = output_size
"""
_MODEL = """
from torch import nn

from sglang.srt.layers.linear import (
    ColumnParallelLinear,
    ReplicatedLinear,
    get_attention_tp_size,
)

class ToyLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        attn_tp_size = get_attention_tp_size()
        self.proj = {cls}(config.hidden_size, config.hidden_size{kwargs})


class ToyModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList(
            [ToyLayer(config) for _ in range(config.num_hidden_layers)]
        )


class ToyForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.model = ToyModel(config)


EntryClass = ToyForCausalLM
"""


@pytest.mark.parametrize(
    ("proj", "share"),
    [
        ("ColumnParallelLinear", 4),
        ("ReplicatedLinear", 1),
        ("ColumnParallelLinear, tp_size=1", 1),  # the call site's own tp_size decides
        ("ColumnParallelLinear, tp_size=attn_tp_size", 2),  # a local, evaluated
    ],
)
def test_the_layer_class_in_the_tree_decides_the_split(
    tmp_path: Path, proj: str, share: int
) -> None:
    root = write_tree(
        tmp_path / "tree",
        {
            "sglang/srt/layers/linear.py": _LINEAR,
            "sglang/srt/models/toy.py": _MODEL.replace("{cls}", proj.split(",")[0]).replace(
                "{kwargs}", proj[len(proj.split(",")[0]) :]
            ),
        },
    )
    config = {"architectures": ["ToyForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2}
    tensors: list[Tensor] = [(f"model.layers.{i}.proj.weight", "BF16", (64, 64)) for i in range(2)]
    folder = write_checkpoint(tmp_path / "ckpt", config, tensors, shards=1)
    index = TreeIndex(locate(str(root)), use_cache=False)
    total = 2 * 64 * 64 * 2
    # tp 4, dp 2 with DP attention: the attention TP group has 2 ranks (this tree derives no
    # width, so tp / dp is taken and said).
    got = per_rank_bytes(index, _source(folder), _layout(4, 2, True), total, "x", 4)
    rank, how = got.bytes, got.how
    assert rank == total // share
    held_whole = f"replicated on every rank ({proj.split(',')[0]}: sglang/srt/layers/linear.py:"
    assert (held_whole in how) is (share == 1)


# -- the draft, pipeline stages, the environment, a wrapper ----------------------------------
def test_the_eagle3_draft_matches_what_sglang_logged_for_it(
    index: TreeIndex, tmp_path: Path
) -> None:
    # tests/fixtures/logs/corpus/ready_eagle3_llama31_8b_draft_context_warning.log: SGLang
    # loaded jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B on one H100 with "mem usage=1.77 GB"
    # (its GB are GiB); the draft's tensors from its published config give the same.
    tensors = eagle3_llama_tensors(EAGLE3_LLAMA31_8B)
    folder = write_checkpoint(tmp_path / "draft", EAGLE3_LLAMA31_8B, tensors, shards=1)
    source = _source(folder)
    total = sum(nbytes(t) for t in tensors)
    got = per_rank_bytes(index, source, _layout(1), total, "x", 1)
    one, how = got.bytes, got.how
    assert one == total and round(one / GIB, 2) == 1.77
    got = per_rank_bytes(index, source, _layout(8), total, "x", 8)
    eight, how = got.bytes, got.how
    # fc is a torch.nn.Linear (no TP group), the norms and d2t / t2d are whole as well.
    whole = sum(nbytes(t) for t in tensors if t[0] == "fc.weight" or "norm" in t[0] or "2" in t[0])
    assert eight == int((total - whole) / 8 + whole)
    assert "Linear: sglang/srt/models/llama_eagle3.py:" in how
    assert "not placed" not in how


def test_pipeline_stages_follow_the_trees_get_pp_indices(
    index_0523: TreeIndex, deepseek: Path
) -> None:
    read = _headers(deepseek)
    found = _deepseek_ranks(index_0523, read, _layout(4, pp=2))
    # 61 layers over 2 stages: the tree gives the extra layer to the last stage (30 + 31).
    assert found.pp_note is not None
    assert "0-29, 30-60" in found.pp_note and "distributed/utils.py:" in found.pp_note
    last = {
        n: s
        for n, s in read.sizes.items()
        if ((m := re.search(r"layers\.(\d+)\.", n)) is None and "embed" not in n)
        or (m is not None and 30 <= int(m.group(1)) < 61)
    }
    whole = sum(s for n, s in last.items() if _REPLICATED.search(n))
    assert found.per_rank_bytes == pytest.approx((sum(last.values()) - whole) / 4 + whole, abs=1)


def test_the_servers_environment_reaches_the_layers(index_0523: TreeIndex, deepseek: Path) -> None:
    read = _headers(deepseek)
    plain = _deepseek_ranks(index_0523, read, _layout(8))
    env = {"SGLANG_ENABLE_EMBED_REPLICATION": "1"}  # get_embedding_tp_kwargs reads it
    replicated = _deepseek_ranks(index_0523, read, _layout(8), env)
    embed = read.sizes["model.embed_tokens.weight"]
    assert replicated.per_rank_bytes - plain.per_rank_bytes == pytest.approx(embed * 7 / 8, abs=1)


def test_a_wrappers_language_model_is_walked_with_its_own_renames(index_0523: TreeIndex) -> None:
    """Kimi-K2.5's wrapper holds the DeepseekV3 model as `self.language_model`; the fused
    `q_a_proj` rename is the inner model's (`packed_modules_mapping`), not the wrapper's."""
    config = kimi_k25()
    index_0523.use_model_config(config)
    entry = index_0523.exporters_of(config["architectures"][0])[0]
    names = {
        "language_model.model.layers.3.self_attn.q_a_proj.weight": ("BF16", (1536, 7168)),
        "language_model.model.layers.3.self_attn.q_b_proj.weight": ("BF16", (64 * 192, 1536)),
    }
    read = CheckpointTensors({n: 2 * math.prod(s) for n, (_, s) in names.items()}, 1)
    found = rank_weights(index_0523, entry, config, read, _layout(8))
    assert found.unplaced == 0
    assert found.replicated_bytes == 2 * 1536 * 7168
    assert dict(found.replicated_by) == {"ReplicatedLinear": found.replicated_by[0][1]}


def test_a_larger_tp_shrinks_only_the_split_part(index: TreeIndex, deepseek: Path) -> None:
    """The `--tp` alternative config.memory offers re-divides the weights: what every rank
    holds whole stays whole."""
    read = _headers(deepseek)
    source = _source(deepseek)
    at8 = per_rank_bytes(index, source, _layout(8), read.total_bytes, "x", 8)
    at16 = per_rank_bytes(index, source, _layout(16), read.total_bytes, "x", 16)
    assert at8.whole_bytes == at16.whole_bytes > GIB
    scaled = Weights(at8.bytes, 0, at8.whole_bytes, 0).at_tp(8 / 16)
    assert scaled.target_bytes == pytest.approx(at16.bytes, abs=2)
    assert scaled.target_bytes > at8.bytes / 2 + at8.whole_bytes / 3


def test_folding_the_experts_keeps_every_figure(index_0523: TreeIndex, deepseek: Path) -> None:
    """Preflight sums a MoE checkpoint's ~90,000 tensors folded by layer (the experts of a
    layer under one key): the same bytes per rank, the same counts, far fewer entries."""
    named, folded = checkpoint_tensors(deepseek), checkpoint_tensors(deepseek, fold)
    assert not isinstance(named, str) and not isinstance(folded, str)
    assert folded.total_bytes == named.total_bytes and len(folded.sizes) * 20 < len(named.sizes)
    layout = _layout(8, dp=8, dp_attention=True)
    a = _deepseek_ranks(index_0523, named, layout)
    b = _deepseek_ranks(index_0523, folded, layout)
    assert a.per_rank_bytes == pytest.approx(b.per_rank_bytes, abs=2)
    assert (a.replicated_bytes, a.unplaced, a.unread) == (b.replicated_bytes, b.unplaced, b.unread)


def test_the_kept_headers_follow_the_shard_files(index_0523: TreeIndex, tmp_path: Path) -> None:
    """The headers' reading is kept with the answers while the shard files are unchanged; a
    shard that changes (here: a download cut short) is read again."""
    folder = write_checkpoint(tmp_path / "llama", LLAMA31_8B, llama_tensors(LLAMA31_8B))
    source = _source(folder)
    first = per_rank_bytes(index_0523, source, _layout(2), LLAMA31_8B_BYTES, "idx", 2)
    again = per_rank_bytes(index_0523, source, _layout(2), LLAMA31_8B_BYTES, "idx", 2)
    assert first == again and first.how.startswith("safetensors headers")
    shard = sorted(folder.glob("*.safetensors"))[-1]
    with shard.open("r+b") as handle:
        handle.truncate(100)
    cut = per_rank_bytes(index_0523, source, _layout(2), LLAMA31_8B_BYTES, "idx", 2)
    assert cut.bytes == LLAMA31_8B_BYTES // 2
    assert f"{shard.name} has no readable safetensors header" in cut.how
