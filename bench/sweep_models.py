"""Published model configs for the release sweep's launch shapes (`release_sweep.py`).

Each constant is a model's `config.json` as it was read, with where it was read beside it (a
copy kept in a public repository; the Hugging Face repository it copies). No published
config.json of an EAGLE-3 draft for these models was found: the drafts are the configs
SGLang's own draft trainer (sgl-project/SpecForge) ships for them, in the same
`LlamaForCausalLMEagle3` format, and say so. A size is the checkpoint's
`model.safetensors.index.json` `metadata.total_size` where one was found; a model without one
is swept without the memory check (it says it skipped it).

JSON -> Python: true/false/null as True/False/None.
"""

# ---------------------------------------------------------------------------
# 1. Qwen/Qwen3-30B-A3B  (verbatim config.json)
# Source: github.com/ai-dynamo/aiconfigurator @095f58a5
#   aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-30B-A3B_config.json
# Identical copies: github.com/alibaba/InferSim hf_configs/qwen3-30B-A3B_config.json
#   (commit c1c36d6, 2025-09-28) and github.com/citsjtu2020/LLM-Prof sglang/Model_Config.md
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "output_router_logits": False,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.001,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
# metadata.total_size of Qwen/Qwen3-30B-A3B model.safetensors.index.json
# Source: github.com/dAppCore/go-inference @b77acee7
#   go/model/qwenmoe/testdata/Qwen-Qwen3-30B-A3B-model.safetensors.index.json
#   (a copy of https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/model.safetensors.index.json,
#   16 shards, 18867 weight_map entries); the same number appears in several
#   unrelated repos (e.g. a Go test TestWeightMap_Good, a doc quoting the index).
QWEN3_30B_A3B_BYTES = 61064245248

# ---------------------------------------------------------------------------
# 2. EAGLE-3 drafts for Qwen3 MoE.
# NOT FOUND verbatim: the config.json of Tengyunw/qwen3_30b_moe_eagle3 and of
# lmsys/Qwen3-235B-A22B-EAGLE3 could not be located in any stored source.
# What follows are SpecForge's (sgl-project/SpecForge, the trainer of the lmsys
# drafts) draft-model configs, which use the same LlamaForCausalLMEagle3 format.
#
# Source: github.com/sgl-project/SpecForge @a6b6b023 configs/qwen3-30B-A3B-eagle3.json
#   (unchanged since it was added in commit cbb0d956, PR #58, 2025-07-27)
# NB: intermediate_size is 12288 here (not the target's 6144), and
# max_position_embeddings is 2048, exactly as in that file.
QWEN3_30B_A3B_EAGLE3 = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 12288,
    "max_position_embeddings": 2048,
    "max_window_layers": 48,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 1,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.53.2",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
    "draft_vocab_size": 32000,
}


# ---------------------------------------------------------------------------
# 3. zai-org/GLM-4.5-Air  (verbatim config.json)
# Source: github.com/triple-mu/aiconfigurator @ba4dfe36
#   src/aiconfigurator/model_configs/zai-org--GLM-4.5-Air_config.json
GLM45_AIR = {
    "architectures": ["Glm4MoeForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "pad_token_id": 151329,
    "eos_token_id": [151329, 151336, 151338],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "partial_rotary_factor": 0.5,
    "initializer_range": 0.02,
    "intermediate_size": 10944,
    "max_position_embeddings": 131072,
    "model_type": "glm4_moe",
    "moe_intermediate_size": 1408,
    "norm_topk_prob": True,
    "num_attention_heads": 96,
    "n_group": 1,
    "topk_group": 1,
    "n_routed_experts": 128,
    "n_shared_experts": 1,
    "routed_scaling_factor": 1.0,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 1,
    "num_hidden_layers": 46,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.54.0",
    "use_cache": True,
    "use_qk_norm": False,
    "vocab_size": 151552,
}
# GLM45_AIR_BYTES: not found (no copy of its model.safetensors.index.json located).

# ---------------------------------------------------------------------------
# 4. meta-llama/Llama-4-Scout-17B-16E-Instruct  (config.json, as stored — TRIMMED)
# Source: github.com/ai-dynamo/aiconfigurator, commit 54cb8c65a (branch
#   codex/aic-1740-llama4-vision, 2026-08-12)
#   aic-core/src/aiconfigurator_core/model_configs/meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json
#   (main @095f58a5 has the same file without boi/eoi/image tokens and vision_config).
# CAVEAT: this stored copy omits text_config keys the HF file has (no_rope_layers,
# moe_layers, attn_scale, attn_temperature_tuning, floor_scale, bos/eos/pad ids,
# ...).  They are NOT added here because no verbatim source for the *Instruct*
# file was found.  (The base model's file, pasted in AMD-AGI/Primus PR #165,
# differs: max_position_embeddings 262144.)
LLAMA4_SCOUT = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "boi_token_index": 200080,
    "eoi_token_index": 200081,
    "image_processor_config": {
        "add_global_tile": True,
        "max_patches": 16,
        "resize_to_max_canvas": False,
    },
    "image_token_index": 200092,
    "model_type": "llama4",
    "text_config": {
        "attention_bias": False,
        "attention_chunk_size": 8192,
        "attention_dropout": 0.0,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 5120,
        "interleave_moe_layer_step": 1,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "max_position_embeddings": 10485760,
        "model_type": "llama4_text",
        "num_attention_heads": 40,
        "num_experts_per_tok": 1,
        "num_hidden_layers": 48,
        "num_key_value_heads": 8,
        "num_local_experts": 16,
        "output_router_logits": False,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "factor": 16.0,
            "high_freq_factor": 1.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "rope_theta": 500000.0,
        "router_aux_loss_coef": 0.001,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_qk_norm": True,
        "vocab_size": 202048,
    },
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0.dev0",
    # vision_config trimmed to architecture-identifying keys (same source).
    "vision_config": {
        "model_type": "llama4_vision_model",
        "hidden_size": 1408,
        "num_hidden_layers": 34,
        "num_attention_heads": 16,
        "image_size": 336,
        "patch_size": 14,
        "vision_output_dim": 4096,
    },
}
# LLAMA4_SCOUT_BYTES: not found.

# ---------------------------------------------------------------------------
# 5. EAGLE-3 draft for Llama 4.
# NOT FOUND verbatim: config.json of nvidia/Llama-4-Maverick-17B-128E-Eagle3 and of
# lmsys/sglang-EAGLE3-Llama-4-Scout-17B-16E-Instruct-v1.
# Source used instead: github.com/sgl-project/SpecForge @a6b6b023
#   configs/llama4-scout-17B-16E-eagle3.json (present since v0.1.0, commit 3234e24a,
#   2025-07-22) — SpecForge's draft config for Llama-4-Scout.
LLAMA4_EAGLE3 = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_act": "silu",
    "hidden_size": 5120,
    "initializer_range": 0.02,
    "intermediate_size": 32768,
    "max_position_embeddings": 2048,
    "model_type": "llama",
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "num_hidden_layers": 1,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.52.3",
    "use_cache": True,
    "vocab_size": 202048,
    "draft_vocab_size": 32000,
}

# GEMMA3_27B_BYTES: not found.


# ---------------------------------------------------------------------------
# 8a. Qwen/Qwen3-8B  (verbatim config.json)
# Source: github.com/ai-dynamo/aiconfigurator @095f58a5
#   aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-8B_config.json
# Identical copies: github.com/alibaba/InferSim hf_configs/qwen3-8B_config.json,
#   github.com/citsjtu2020/LLM-Prof sglang/Model_Config.md
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 12288,
    "max_position_embeddings": 40960,
    "max_window_layers": 36,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
# metadata.total_size of Qwen/Qwen3-8B model.safetensors.index.json
# Sources (no full index copy located, but several independent public files state
# it): a pytest reading a Qwen3-8B index fixture (399 weights, 5 shards, asserts
# total_size == 16381470720); a Rust const "Tensor-data bytes declared by the pinned
# Qwen3-8B safetensors index: 16_381_470_720"; a notes file "real Qwen/Qwen3-8B
# inventory covers 399 tensors and reconciles expected_total_size_bytes=16381470720
# with the safetensors index total".  (= 8,190,735,360 params x 2 bytes.)
QWEN3_8B_BYTES = 16381470720

# 8b. EAGLE-3 draft for Qwen3-8B.
# NOT FOUND verbatim: config.json of AngelSlim/Qwen3-8B_eagle3 and Tengyunw/qwen3_8b_eagle3.
# Source used instead: github.com/sgl-project/SpecForge @a6b6b023 configs/qwen3-8b-eagle3.json
#   (max_position_embeddings changed 2048 -> 40960 in commit 7064fc6b, PR #271).
# (Tencent/AngelSlim's training config angelslim/compressor/speculative/train/configs/
#  qwen3-8b-eagle3.json has the same sizes but architectures ["Eagle3LlamaForCausalLM"].)
QWEN3_8B_EAGLE3 = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 12288,
    "max_position_embeddings": 40960,
    "max_window_layers": 36,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 1,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
    "draft_vocab_size": 32000,
}
