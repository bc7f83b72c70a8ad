"""DeepSeek-V2/V3 causal LM: the language model inside Kimi-K2.5.

Mirrors sglang 0.5.9 models/deepseek_v2.py. DeepseekV2ForCausalLM provides everything EAGLE-3
needs from a target: `get_embed_and_head`, `set_embed_and_head`, and
`set_eagle3_layers_to_capture`. The decoder layers (MLA attention, MoE) are left out.
"""

from __future__ import annotations

from typing import Any

from sglang.srt import torch_stub as nn
from sglang.srt.configs.model_config import PretrainedConfig


class DeepseekV2Model(nn.Module):
    def __init__(self, config: PretrainedConfig, quant_config: Any = None) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.num_layers = config.num_hidden_layers
        self.layers_to_capture: list[int] = []

    def forward(self, input_ids: list[int], positions: Any, forward_batch: Any) -> Any:
        hidden_states = self.embed_tokens(input_ids)
        aux_hidden_states = []
        for layer_id in range(self.num_layers):
            if layer_id in self.layers_to_capture:
                aux_hidden_states.append(hidden_states)
            # (decoder layer `layer_id` runs here in the real model)
        return hidden_states, aux_hidden_states


class DeepseekV2ForCausalLM(nn.Module):
    def __init__(
        self, config: PretrainedConfig, quant_config: Any = None, prefix: str = ""
    ) -> None:
        super().__init__()
        self.config = config
        self.quant_config = quant_config
        self.model = DeepseekV2Model(config, quant_config)
        self.lm_head = nn.Embedding(config.vocab_size, config.hidden_size)
        self.capture_aux_hidden_states = False

    def forward(self, input_ids: list[int], positions: Any, forward_batch: Any) -> Any:
        hidden_states, aux_hidden_states = self.model(input_ids, positions, forward_batch)
        if self.capture_aux_hidden_states:
            return hidden_states, aux_hidden_states
        return hidden_states

    def load_weights(self, weights: Any) -> int:
        # Each (name, tensor) pair lands in its parameter in the real loader; count them here.
        return sum(1 for _ in weights)

    def get_embed_and_head(self) -> tuple[nn.Parameter, nn.Parameter]:
        return self.model.embed_tokens.weight, self.lm_head.weight

    def set_embed_and_head(self, embed: nn.Parameter, head: nn.Parameter) -> None:
        self.model.embed_tokens.weight = embed
        self.lm_head.weight = head

    def set_eagle3_layers_to_capture(self, layer_ids: list[int] | None = None) -> None:
        self.capture_aux_hidden_states = True
        if layer_ids is None:
            num_layers = self.config.num_hidden_layers
            self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
        else:
            # Layer i's input is layer i-1's output, hence the shift by one.
            self.model.layers_to_capture = [layer_id + 1 for layer_id in layer_ids]


class DeepseekV3ForCausalLM(DeepseekV2ForCausalLM):
    pass


EntryClass = [DeepseekV2ForCausalLM, DeepseekV3ForCausalLM]
