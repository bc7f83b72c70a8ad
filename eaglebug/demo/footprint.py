"""What a model takes on each GPU, read from its folder, for the stand-in's simulated memory.

Rough on purpose — it only has to look right on the GPU panel and in the log's `avail mem=`
numbers: weights from `model.safetensors.index.json`'s `metadata.total_size` (else the weight
files' sizes, else an estimate from config.json's sizes), split over the TP ranks; the KV cache
per token from the attention shape (MLA's compressed latent, replicated on every rank, or
K and V per KV head, split over the ranks); 2 bytes per value (bf16).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 2**30
BYTES_PER_VALUE = 2  # bf16


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def _int(config: dict[str, Any], key: str, default: int) -> int:
    value = config.get(key)
    return value if isinstance(value, int) and value > 0 else default


@dataclass(frozen=True)
class Footprint:
    architecture: str
    shards: int  # weight files, as the loader's progress bar counts them
    weight_bytes: int  # per GPU
    kv_bytes_per_token: int  # per GPU
    mla: bool  # MLA logs "KV size", others "K size" and "V size"


def _estimated_params(text: dict[str, Any]) -> int:
    hidden = _int(text, "hidden_size", 4096)
    layers = _int(text, "num_hidden_layers", 32)
    vocab = _int(text, "vocab_size", 32000)
    inter = _int(text, "intermediate_size", 4 * hidden)
    experts = _int(text, "n_routed_experts", 0) if "n_routed_experts" in text else 0
    moe_inter = _int(text, "moe_intermediate_size", inter)
    mlp = 3 * hidden * (moe_inter * (experts + 1) if experts else inter)
    return 2 * vocab * hidden + layers * (4 * hidden * hidden + mlp)


def read_footprint(model_path: Path, tp: int) -> Footprint:
    config = _read_json(model_path / "config.json")
    text = _text_config(config)
    archs = config.get("architectures") or ["?"]
    index = _read_json(model_path / "model.safetensors.index.json")
    weight_map = index.get("weight_map")
    files = sorted(set(weight_map.values())) if isinstance(weight_map, dict) else []
    if not files:
        files = sorted(p.name for p in model_path.glob("*.safetensors"))
    metadata = index.get("metadata")
    total_size = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total_size, int) and total_size > 0:
        total = total_size
    elif files and all((model_path / f).is_file() for f in files):
        total = sum((model_path / f).stat().st_size for f in files)
    else:
        total = _estimated_params(text) * BYTES_PER_VALUE
    tp = max(tp, 1)
    layers = _int(text, "num_hidden_layers", 1)
    mla = isinstance(text.get("kv_lora_rank"), int)
    if mla:
        latent = _int(text, "kv_lora_rank", 512) + _int(text, "qk_rope_head_dim", 64)
        per_token = latent * layers * BYTES_PER_VALUE
    else:
        heads = _int(text, "num_attention_heads", 32)
        kv_heads = _int(text, "num_key_value_heads", heads)
        head_dim = _int(text, "head_dim", _int(text, "hidden_size", 4096) // heads)
        per_token = 2 * max(kv_heads // tp, 1) * head_dim * layers * BYTES_PER_VALUE
    return Footprint(
        architecture=str(archs[0]),
        shards=max(len(files), 1),
        weight_bytes=total // tp,
        kv_bytes_per_token=per_token,
        mla=mla,
    )
