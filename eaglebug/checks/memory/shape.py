"""A model as SGLang's memory arithmetic sees it, from its config.json: the shape fields the
cell size reads, the dtype, and the config's own fields for the tree's model-config code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# torch element sizes of the dtypes a --kv-cache-dtype or a config's torch_dtype names.
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "uint8": 1,
    "int8": 1,
}
# torch dtype names for a config's torch_dtype or a --kv-cache-dtype (what the tree's
# `configure_kv_cache_dtype` turns them into: `fp8_e4m3` -> `torch.float8_e4m3fn`).
TORCH_NAMES = {
    "float32": "float32",
    "float": "float32",
    "bfloat16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
}


@dataclass(frozen=True)
class ModelShape:
    """The model-config fields SGLang's cell size and request estimate read."""

    layers: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    kv_lora_rank: int | None
    rope_dim: int | None
    context_len: int | None  # None: not known (`context_unknown` says why)
    dtype_bytes: int
    nextn_layers: int | None
    multimodal: bool
    dsa: bool
    # config.json's own fields (the outer config: what SGLang's `hf_config` holds), which the
    # tree's model-config predicates read (`index_topk`, `index_head_dim`, `architectures`).
    hf: tuple[tuple[str, object], ...] = ()
    dtype: str = "bfloat16"  # torch's name for the config's torch_dtype
    hf_text: tuple[tuple[str, object], ...] = ()  # the text config's, for a wrapper's
    context_unknown: str = "the context length was not derived"

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank is not None


def _int(config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def model_shape(config: Mapping[str, Any], context_len: int | str | None) -> ModelShape | str:
    """The shape of a model from its config.json, or why it cannot be had. `context_len`: the
    launch's `--context-length`, else the one the tree derives from the config
    (`models/context.py`), or why that is not known (a string; None: not derived)."""
    text = config
    for key in ("text_config", "language_config", "llm_config"):
        if isinstance(config.get(key), dict):
            text = config[key]
            break
    layers = _int(text, "num_hidden_layers")
    heads = _int(text, "num_attention_heads")
    hidden = _int(text, "hidden_size")
    if layers is None or heads is None or hidden is None:
        return "config.json lacks num_hidden_layers / num_attention_heads / hidden_size"
    kv_heads = _int(text, "num_key_value_heads") or heads
    rank = _int(text, "kv_lora_rank")
    head_dim = _int(text, "head_dim") or hidden // heads
    v_head_dim = head_dim
    if rank is not None:  # MLA: ModelConfig's head_dim is the rope + nope width
        head_dim = (_int(text, "qk_rope_head_dim") or 0) + (_int(text, "qk_nope_head_dim") or 0)
        v_head_dim = _int(text, "v_head_dim") or head_dim
    dtype = str(text.get("torch_dtype") or config.get("torch_dtype") or "bfloat16")
    return ModelShape(
        layers=layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        kv_lora_rank=rank,
        rope_dim=_int(text, "qk_rope_head_dim"),
        context_len=context_len if isinstance(context_len, int) else None,
        dtype_bytes=DTYPE_BYTES.get(dtype.replace("torch.", ""), 2),
        nextn_layers=_int(text, "num_nextn_predict_layers"),
        multimodal=any(k in config for k in ("vision_config", "vision_tower")),
        dsa="index_topk" in text,
        hf=tuple(sorted(_leaves(config))),
        dtype=TORCH_NAMES.get(dtype.replace("torch.", ""), "bfloat16"),
        hf_text=tuple(sorted(_leaves(text))) if text is not config else (),
        **({"context_unknown": context_len} if isinstance(context_len, str) else {}),
    )


def _leaves(
    config: Mapping[str, Any], prefix: str = "", depth: int = 3
) -> list[tuple[str, object]]:
    """config.json's plain fields by dotted path: a wrapper's nested `text_config` is
    `text_config.num_hidden_layers`, so a config class the tree builds from the flat store
    gets its sub-config's dict back (3 levels deep; a deeper one stays unknown)."""
    out: list[tuple[str, object]] = []
    for key, value in config.items():
        if _plain(value):
            out.append((prefix + key, value))
        elif isinstance(value, dict) and depth > 1:
            out.extend(_leaves(value, f"{prefix}{key}.", depth - 1))
    return out


def _plain(value: object) -> bool:
    """A JSON scalar or a list of scalars (not a nested config)."""
    if isinstance(value, list):
        return all(isinstance(v, (str, int, float, bool)) or v is None for v in value)
    return isinstance(value, (str, int, float, bool)) or value is None
