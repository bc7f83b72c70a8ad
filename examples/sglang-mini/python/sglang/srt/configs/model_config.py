"""A model's config.json and the context length derived from it.

Mirrors sglang 0.5.9 configs/model_config.py: `ModelConfig.from_server_args` and the check
that refuses a context length longer than the model's own `max_position_embeddings` unless
SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1. For an EAGLE-3 draft the requested length is
the target's, so a 131072-token draft under a 262144-token target stops the launch here.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from sglang.srt.server_args import ServerArgs

logger = logging.getLogger(__name__)


class PretrainedConfig:
    """Stand-in for transformers.PretrainedConfig: config.json keys as attributes."""

    SUB_CONFIGS = ("text_config", "vision_config")

    def __init__(self, **values: Any) -> None:
        for key, value in values.items():
            if key in self.SUB_CONFIGS and isinstance(value, dict):
                value = PretrainedConfig(**value)
            setattr(self, key, value)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes"}


class ModelConfig:
    def __init__(
        self, model_path: str, context_length: int | None = None, is_draft_model: bool = False
    ) -> None:
        self.model_path = model_path
        self.is_draft_model = is_draft_model
        raw = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
        self.hf_config = PretrainedConfig(**raw)
        # Multimodal wrappers keep the language model's sizes under text_config.
        self.hf_text_config = getattr(self.hf_config, "text_config", self.hf_config)
        self._derive_context_length(context_length)

    @staticmethod
    def from_server_args(
        server_args: ServerArgs, model_path: str | None = None, is_draft_model: bool = False
    ) -> ModelConfig:
        return ModelConfig(
            model_path=model_path or server_args.model_path,
            context_length=server_args.context_length,
            is_draft_model=is_draft_model,
        )

    def _derive_context_length(self, context_length: int | None) -> None:
        derived = self.hf_text_config.max_position_embeddings
        if context_length is None or context_length <= derived:
            self.context_len = context_length or derived
            return
        reason = "Target model's" if self.is_draft_model else "User-specified"
        msg = (
            f"Warning: {reason} context_length ({context_length}) is greater than the derived "
            f"context_length ({derived}). This may lead to incorrect model outputs or CUDA errors."
        )
        if not _env_flag("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"):
            raise ValueError(
                f"{msg} To allow overriding this maximum, set the env var "
                "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
            )
        logger.warning(msg)
        self.context_len = context_length
        if self.is_draft_model:
            self.hf_text_config.max_position_embeddings = context_length
