"""Model configs and model folders for the preflight tests, written from Python dicts.

`kimi_k25()` and `kimi_k25_eagle3()` follow the published layouts of the seed scenario (a
multimodal wrapper whose `text_config` is a DeepseekV3 model, and its EAGLE-3 draft); `llama()`
and `eagle3()` are small, self-consistent pairs that a test bends one key at a time. Folders are
written by `write_model` (a local model folder) and `write_hub_model` (a Hugging Face hub cache
entry: `models--org--name/refs/<ref>` + `snapshots/<sha>/`). Weight files are sparse
(`os.truncate`), so a "600 GiB" checkpoint costs no disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

GIB = 1024**3
KIMI = "KimiK25ForConditionalGeneration"
EAGLE3_DRAFT = "LlamaForCausalLMEagle3"


def kimi_k25() -> dict[str, Any]:
    """Kimi-K2.5 as published: a vision wrapper around a DeepseekV3 (MLA, MoE) text model."""
    return {
        "architectures": [KIMI],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k25.KimiK25Config",
            "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        },
        "model_type": "kimi_k25",
        "media_placeholder_token_id": 163605,
        "pad_token_id": 163839,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.56.2",
        "text_config": {
            "architectures": ["DeepseekV3ForCausalLM"],
            "model_type": "kimi_k2",
            "hidden_size": 7168,
            "intermediate_size": 18432,
            "moe_intermediate_size": 2048,
            "num_hidden_layers": 61,
            "first_k_dense_replace": 1,
            "num_attention_heads": 64,
            "num_key_value_heads": 64,
            "n_routed_experts": 384,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "kv_lora_rank": 512,
            "q_lora_rank": 1536,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "vocab_size": 163840,
            "max_position_embeddings": 262144,
            "rope_theta": 50000.0,
            "rope_scaling": {
                "type": "yarn",
                "factor": 64.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            },
            "bos_token_id": 163584,
            "eos_token_id": 163585,
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "quantization_status": "compressed",
                "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "input_activations": None,
                        "output_activations": None,
                        "weights": {
                            "num_bits": 4,
                            "type": "int",
                            "group_size": 32,
                            "symmetric": True,
                            "strategy": "group",
                            "dynamic": False,
                            "observer": "minmax",
                        },
                    }
                },
            },
        },
        "vision_config": {
            "model_type": "kimi_k25_vision",
            "patch_size": 14,
            "init_pos_emb_height": 64,
            "init_pos_emb_width": 64,
            "merge_kernel_size": [2, 2],
            "vt_hidden_size": 1152,
            "vt_num_hidden_layers": 27,
            "vt_num_attention_heads": 16,
            "mm_hidden_size": 1152,
            "text_hidden_size": 7168,
        },
    }


def kimi_k25_eagle3() -> dict[str, Any]:
    """An EAGLE-3 draft trained for Kimi-K2.5: one Llama layer, reduced draft vocabulary."""
    return {
        "architectures": [EAGLE3_DRAFT],
        "model_type": "llama",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_hidden_layers": 1,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 112,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-05,
        "max_position_embeddings": 131072,
        "rope_theta": 50000.0,
        "vocab_size": 163840,
        "draft_vocab_size": 32000,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": [1, 29, 57],
            "use_aux_hidden_state": True,
            "use_input_layernorm_in_first_layer": True,
            "use_last_layernorm": True,
        },
    }


def llama(**overrides: Any) -> dict[str, Any]:
    """A small Llama target (8K context, 32 layers, GQA 32/8) that preflight finds no fault in."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        **overrides,
    }


def eagle3(**overrides: Any) -> dict[str, Any]:
    """An EAGLE-3 draft that matches `llama()` in every checked key."""
    return {
        "architectures": [EAGLE3_DRAFT],
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 1,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]},
        **overrides,
    }


def _write_weights(
    folder: Path,
    total_size: int | None,
    weight_map: Mapping[str, str] | None,
    weight_files: Mapping[str, int] | None,
) -> None:
    if total_size is not None or weight_map is not None:
        index: dict[str, Any] = {"weight_map": dict(weight_map or {})}
        if total_size is not None:
            index["metadata"] = {"total_size": total_size}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    for name, size in (weight_files or {}).items():
        path = folder / name
        path.touch()
        os.truncate(path, size)  # sparse: the size is recorded, no bytes are written


def write_model(
    folder: Path,
    config: Mapping[str, Any],
    *,
    total_size: int | None = None,
    weight_map: Mapping[str, str] | None = None,
    weight_files: Mapping[str, int] | None = None,
) -> Path:
    """A local model folder: config.json, optionally a weight index and (sparse) weight files."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    _write_weights(folder, total_size, weight_map, weight_files)
    return folder


def write_hub_model(
    hub: Path,
    repo_id: str,
    config: Mapping[str, Any],
    *,
    sha: str = "0123456789abcdef0123456789abcdef01234567",
    ref: str | None = "main",
) -> Path:
    """One snapshot of `repo_id` in a hub cache laid out like huggingface_hub's; its folder."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / sha
    write_model(snapshot, config)
    if ref is not None:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(sha)
    return snapshot
