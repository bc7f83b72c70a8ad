"""Tiny safetensors files in the real format: 8 bytes little-endian header length, the JSON
header (name -> dtype, shape, data_offsets), then the data. Shapes are kept small and the data
is zeros, so a "checkpoint" costs a few bytes; the names and layout are what the checks read."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8}


def write_safetensors(path: Path, tensors: Mapping[str, tuple[str, Sequence[int]]]) -> Path:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = _BYTES[dtype] * math.prod(shape)
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header).encode("utf-8")
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    return path


# The tensors of an EAGLE-3 Llama draft as SpecForge exports them (one decoder layer named
# `midlayer`, the fc over three captured states, d2t/t2d), with small shapes.
EAGLE3_DRAFT_TENSORS: dict[str, tuple[str, Sequence[int]]] = {
    "fc.weight": ("BF16", (8, 24)),
    "midlayer.self_attn.q_proj.weight": ("BF16", (8, 16)),
    "midlayer.self_attn.k_proj.weight": ("BF16", (4, 16)),
    "midlayer.self_attn.v_proj.weight": ("BF16", (4, 16)),
    "midlayer.self_attn.o_proj.weight": ("BF16", (8, 8)),
    "midlayer.mlp.gate_proj.weight": ("BF16", (16, 8)),
    "midlayer.mlp.up_proj.weight": ("BF16", (16, 8)),
    "midlayer.mlp.down_proj.weight": ("BF16", (8, 16)),
    "midlayer.input_layernorm.weight": ("BF16", (8,)),
    "midlayer.hidden_norm.weight": ("BF16", (8,)),
    "midlayer.post_attention_layernorm.weight": ("BF16", (8,)),
    "norm.weight": ("BF16", (8,)),
    "lm_head.weight": ("BF16", (4, 8)),
    "d2t": ("I64", (4,)),
    "t2d": ("I64", (4,)),
}
