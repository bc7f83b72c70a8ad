"""Checkpoint folders whose safetensors headers are built from published configs, as sparse files.

No whole safetensors header of these checkpoints is published in a form that can be kept
here, so each tensor list is built from the model's real `config.json` (tests/memconfigs.py,
with its URL) in the naming of the published checkpoints: DeepSeek-V3's FP8 layout as its
`model.safetensors.index.json` names it (`model.layers.{l}.self_attn.q_a_proj.weight` with its
`weight_scale_inv` per 128 x 128 block, `mlp.experts.{e}.gate_proj.weight`,
`mlp.gate.e_score_correction_bias`, the NextN layer 61), and Llama-3.1-8B's BF16 layout. The
shapes follow the config (DeepSeek-V3's `q_a_proj.weight` is [1536, 7168], as its
`q_lora_rank` x `hidden_size`). The files are real safetensors (8-byte header length, JSON
header with dtype, shape and data_offsets) truncated to their full data size with
`os.truncate`, so a 680 GB checkpoint costs no disk and the reader reads them like any other.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

Tensor = tuple[str, str, tuple[int, ...]]  # name, dtype, shape
_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I64": 8, "BOOL": 1}


def _fp8(name: str, rows: int, cols: int, block: int = 128) -> Iterator[Tensor]:
    yield name + ".weight", "F8_E4M3", (rows, cols)
    yield name + ".weight_scale_inv", "F32", (math.ceil(rows / block), math.ceil(cols / block))


def deepseek_v3_tensors(config: Mapping[str, Any]) -> list[Tensor]:
    h = config["hidden_size"]
    heads = config["num_attention_heads"]
    nope, rope, v = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    q_rank, kv_rank = config["q_lora_rank"], config["kv_lora_rank"]
    vocab = config["vocab_size"]
    dense = config.get("first_k_dense_replace", 3)
    moe = config["moe_intermediate_size"]
    out: list[Tensor] = [
        ("model.embed_tokens.weight", "BF16", (vocab, h)),
        ("model.norm.weight", "BF16", (h,)),
        ("lm_head.weight", "BF16", (vocab, h)),
    ]
    layers = config["num_hidden_layers"] + config.get("num_nextn_predict_layers", 0)
    for layer in range(layers):
        p = f"model.layers.{layer}."
        out += [
            (p + "input_layernorm.weight", "BF16", (h,)),
            (p + "post_attention_layernorm.weight", "BF16", (h,)),
            (p + "self_attn.q_a_layernorm.weight", "BF16", (q_rank,)),
            (p + "self_attn.kv_a_layernorm.weight", "BF16", (kv_rank,)),
        ]
        out += _fp8(p + "self_attn.q_a_proj", q_rank, h)
        out += _fp8(p + "self_attn.q_b_proj", heads * (nope + rope), q_rank)
        out += _fp8(p + "self_attn.kv_a_proj_with_mqa", kv_rank + rope, h)
        out += _fp8(p + "self_attn.kv_b_proj", heads * (nope + v), kv_rank)
        out += _fp8(p + "self_attn.o_proj", h, heads * v)
        if layer < dense:
            inter = config["intermediate_size"]
            out += _fp8(p + "mlp.gate_proj", inter, h)
            out += _fp8(p + "mlp.up_proj", inter, h)
            out += _fp8(p + "mlp.down_proj", h, inter)
        else:
            out += [
                (p + "mlp.gate.weight", "BF16", (config["n_routed_experts"], h)),
                (p + "mlp.gate.e_score_correction_bias", "F32", (config["n_routed_experts"],)),
            ]
            for expert in [*map(str, range(config["n_routed_experts"])), None]:
                e = p + (f"mlp.experts.{expert}." if expert is not None else "mlp.shared_experts.")
                width = moe * (config["n_shared_experts"] if expert is None else 1)
                out += _fp8(e + "gate_proj", width, h)
                out += _fp8(e + "up_proj", width, h)
                out += _fp8(e + "down_proj", h, width)
        if layer >= config["num_hidden_layers"]:  # the NextN layer's own parts
            out += [
                (p + "enorm.weight", "BF16", (h,)),
                (p + "hnorm.weight", "BF16", (h,)),
                (p + "eh_proj.weight", "BF16", (h, 2 * h)),
                (p + "shared_head.norm.weight", "BF16", (h,)),
                (p + "shared_head.head.weight", "BF16", (vocab, h)),
            ]
    return out


def llama_tensors(config: Mapping[str, Any], prefix: str = "model.") -> list[Tensor]:
    h, inter = config["hidden_size"], config["intermediate_size"]
    head = config.get("head_dim") or h // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * head
    dtype = "BF16"
    out: list[Tensor] = [
        (prefix + "embed_tokens.weight", dtype, (config["vocab_size"], h)),
        (prefix + "norm.weight", dtype, (h,)),
        ("lm_head.weight", dtype, (config["vocab_size"], h)),
    ]
    for layer in range(config["num_hidden_layers"]):
        p = f"{prefix}layers.{layer}."
        out += [
            (p + "input_layernorm.weight", dtype, (h,)),
            (p + "post_attention_layernorm.weight", dtype, (h,)),
            (p + "self_attn.q_proj.weight", dtype, (config["num_attention_heads"] * head, h)),
            (p + "self_attn.k_proj.weight", dtype, (kv, h)),
            (p + "self_attn.v_proj.weight", dtype, (kv, h)),
            (p + "self_attn.o_proj.weight", dtype, (h, config["num_attention_heads"] * head)),
            (p + "mlp.gate_proj.weight", dtype, (inter, h)),
            (p + "mlp.up_proj.weight", dtype, (inter, h)),
            (p + "mlp.down_proj.weight", dtype, (h, inter)),
        ]
    return out


def nbytes(tensor: Tensor) -> int:
    return _BYTES[tensor[1]] * math.prod(tensor[2])


def write_checkpoint(
    folder: Path, config: Mapping[str, Any], tensors: list[Tensor], shards: int = 4
) -> Path:
    """config.json, `shards` sparse safetensors files and the index naming them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    weight_map: dict[str, str] = {}
    per = math.ceil(len(tensors) / shards)
    for i in range(shards):
        chunk = tensors[i * per : (i + 1) * per]
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
        offset = 0
        for tensor_name, dtype, shape in chunk:
            size = nbytes((tensor_name, dtype, shape))
            header[tensor_name] = {
                "dtype": dtype,
                "shape": list(shape),
                "data_offsets": [offset, offset + size],
            }
            offset += size
            weight_map[tensor_name] = name
        raw = json.dumps(header).encode()
        path = folder / name
        path.write_bytes(struct.pack("<Q", len(raw)) + raw)
        os.truncate(path, 8 + len(raw) + offset)  # sparse: the data takes no disk
    total = sum(nbytes(t) for t in tensors)
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    return folder


def eagle3_llama_tensors(config: Mapping[str, Any]) -> list[Tensor]:
    """An EAGLE-3 Llama draft as SpecForge exports it: one decoder layer named `midlayer`
    whose attention reads the embedding and the hidden state concatenated (2 x hidden wide),
    `fc` over the three captured states, a `draft_vocab_size` head, `d2t` / `t2d`."""
    h, inter = config["hidden_size"], config["intermediate_size"]
    head = config.get("head_dim") or h // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * head
    vocab, draft_vocab = config["vocab_size"], config["draft_vocab_size"]
    dtype = "F16" if config.get("torch_dtype") == "float16" else "BF16"
    p = "midlayer."
    return [
        ("embed_tokens.weight", dtype, (vocab, h)),
        ("fc.weight", dtype, (h, 3 * h)),
        (p + "hidden_norm.weight", dtype, (h,)),
        (p + "input_layernorm.weight", dtype, (h,)),
        (p + "post_attention_layernorm.weight", dtype, (h,)),
        (p + "self_attn.q_proj.weight", dtype, (config["num_attention_heads"] * head, 2 * h)),
        (p + "self_attn.k_proj.weight", dtype, (kv, 2 * h)),
        (p + "self_attn.v_proj.weight", dtype, (kv, 2 * h)),
        (p + "self_attn.o_proj.weight", dtype, (h, config["num_attention_heads"] * head)),
        (p + "mlp.gate_proj.weight", dtype, (inter, h)),
        (p + "mlp.up_proj.weight", dtype, (inter, h)),
        (p + "mlp.down_proj.weight", dtype, (h, inter)),
        ("norm.weight", dtype, (h,)),
        ("lm_head.weight", dtype, (draft_vocab, h)),
        ("d2t", "I64", (draft_vocab,)),
        ("t2d", "BOOL", (vocab,)),
    ]
