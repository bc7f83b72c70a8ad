"""Published model configs for the memory tests, the keys SGLang's memory arithmetic reads.

Each is the `config.json` of a public Hugging Face repository (URL beside it), cut to the keys
that matter here (layers, heads, MLA ranks, context, dtype, the NextN layer count); the sizes
are the checkpoints' `model.safetensors.index.json` `metadata.total_size` where noted, else the
size SGLang itself logged for the loaded weights.
"""

from __future__ import annotations

from typing import Any

from tests.configs import kimi_k25, kimi_k25_eagle3

GIB = 1 << 30

# https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json
LLAMA31_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
# model.safetensors.index.json of the same repository: "total_size": 16060522496
LLAMA31_8B_BYTES = 16060522496

# https://huggingface.co/jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B/blob/main/config.json
EAGLE3_LLAMA31_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 1,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 2048,
    "draft_vocab_size": 32000,
    "torch_dtype": "float16",
    "vocab_size": 128256,
}
# SGLang's own log of this draft loading (tests/fixtures/logs/corpus/
# ready_eagle3_llama31_8b_draft_context_warning.log): "mem usage=1.77 GB".
EAGLE3_LLAMA31_8B_BYTES = int(1.77 * GIB)

# https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_nextn_predict_layers": 1,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "torch_dtype": "bfloat16",
    "vocab_size": 129280,
}
# The FP8 checkpoint with its NextN layer, about 689 GB (163 shards of ~4.3 GB).
DEEPSEEK_V3_BYTES = 689 * 10**9


def kimi_k25_config() -> dict[str, Any]:
    """Kimi-K2.5 (tests/configs.py: the published layout, a DeepseekV3 text model inside)."""
    return kimi_k25()


def kimi_k25_eagle3_config() -> dict[str, Any]:
    return kimi_k25_eagle3()


# Kimi-K2.5's INT4 (compressed-tensors) checkpoint, about 595 GB.
KIMI_K25_BYTES = 595 * 10**9
# Its EAGLE-3 draft: one 7168-wide layer, a 163840 x 7168 embedding and a 32000-token head.
KIMI_K25_EAGLE3_BYTES = 3 * GIB

# https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json: DeepSeek-V3's
# shape with the DSA lightning indexer (`index_head_dim`, `index_n_heads`, `index_topk`).
DEEPSEEK_V32: dict[str, Any] = {
    **DEEPSEEK_V3,
    "architectures": ["DeepseekV32ForCausalLM"],
    "model_type": "deepseek_v32",
    "index_head_dim": 128,
    "index_n_heads": 64,
    "index_topk": 2048,
}

# https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json: 36 layers alternating
# sliding-window (128 tokens) and full attention, 8 KV heads of 64.
GPT_OSS_120B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_hidden_layers": 36,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_local_experts": 128,
    "num_experts_per_tok": 4,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "rope_type": "yarn",
        "truncate": False,
    },
    "quantization_config": {"quant_method": "mxfp4"},
    "torch_dtype": "bfloat16",
    "vocab_size": 201088,
}
# The MXFP4 checkpoint, about 65 GB.
GPT_OSS_120B_BYTES = 65 * 10**9

# https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json
# (a hybrid of Gated DeltaNet linear-attention layers and a full-attention layer every 4th)
QWEN3_NEXT_80B: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_size": 2048,
    "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "num_attention_heads": 16,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
# 80B parameters in bfloat16 (the repository's safetensors index: 162 GB)
QWEN3_NEXT_80B_BYTES = 162_000_000_000

# google/gemma-3-27b-it, https://huggingface.co/google/gemma-3-27b-it/blob/main/config.json:
# its text config as NVIDIA/TensorRT-LLM's tests keep the file's layout
# (tests/unittest/_torch/modeling/test_modeling_gemma3.py, GEMMA3_27B_CONFIG, shrunk there to
# 6 layers and a window of 4), with the published 62 layers and window of 1024 (Lightning-AI/
# litgpt litgpt/config.py, "Gemma-3-27b-it"). Like the published file it names no context
# length: transformers' Gemma3TextConfig supplies max_position_embeddings (131072), and
# `save_pretrained` leaves a value equal to the class default out of config.json.
GEMMA3_27B: dict[str, Any] = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {
        "head_dim": 128,
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "model_type": "gemma3_text",
        "num_attention_heads": 32,
        "num_hidden_layers": 62,
        "num_key_value_heads": 16,
        "query_pre_attn_scalar": 168,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
    "torch_dtype": "bfloat16",
    "vision_config": {"model_type": "siglip_vision_model", "num_hidden_layers": 27},
}
# keras-team/keras-hub keras_hub/src/models/gemma3/gemma3_presets.py, "gemma3_instruct_27b":
# 27,432,062,576 parameters, in bfloat16.
GEMMA3_27B_BYTES = 27_432_062_576 * 2


def shape_on(index: Any, config: dict[str, Any]) -> Any:
    """The model's shape as a launch without --context-length has it: the context length the
    tree itself derives from the config (`models/context.py`)."""
    from eaglebug.checks.memory.fit import model_shape
    from eaglebug.checks.models.context import context_rules, derived_context_length

    shape = model_shape(config, derived_context_length(index, config, context_rules(index)))
    assert not isinstance(shape, str), shape
    return shape
