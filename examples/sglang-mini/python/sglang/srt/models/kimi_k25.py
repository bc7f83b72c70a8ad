"""Kimi-K2.5: a vision-language wrapper around a DeepSeek-V3 language model.

Mirrors sglang 0.5.9 models/kimi_k25.py, including what it lacks: the runtime calls
`set_eagle3_layers_to_capture` and `get_embed_and_head` on this outer class when EAGLE-3 is on,
and neither they nor `set_embed_and_head` are defined here -- only on `self.language_model`.
(sglang 0.5.10 adds the three as delegations.) The MoonViT vision tower is left out.
"""

from __future__ import annotations

from typing import Any

from sglang.srt import torch_stub as nn
from sglang.srt.configs.model_config import PretrainedConfig
from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM


class KimiK25ForConditionalGeneration(nn.Module):
    def __init__(
        self,
        config: PretrainedConfig,
        quant_config: Any = None,
        prefix: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.config = config
        self.quant_config = quant_config
        self.language_model = DeepseekV3ForCausalLM(config.text_config, quant_config)

    def forward(
        self,
        input_ids: list[int],
        positions: Any,
        forward_batch: Any,
        get_embedding: bool = False,
    ) -> Any:
        # Image features would be merged into the input embeddings first.
        return self.language_model(input_ids, positions, forward_batch)

    def load_weights(self, weights: Any) -> int:
        """Split the checkpoint: vision weights stay here, the rest goes to the language model."""
        vision_weights = []
        language_weights = []
        for name, loaded_weight in weights:
            if "vision_tower" in name or "mm_projector" in name:
                vision_weights.append((name, loaded_weight))
            else:
                language_weights.append((name.replace("language_model.", ""), loaded_weight))
        return len(vision_weights) + self.language_model.load_weights(language_weights)


EntryClass = [KimiK25ForConditionalGeneration]
