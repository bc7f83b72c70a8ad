"""The EAGLE-3 draft model: one Llama decoder layer fed with the target's hidden states.

Mirrors sglang 0.5.9 models/llama_eagle3.py (there it subclasses LlamaForCausalLM, which
supplies `set_embed` and `set_embed_and_head`; here they are written out). The draft has its
own smaller-vocabulary LM head unless config.json leaves `draft_vocab_size` unset.
"""

from __future__ import annotations

from typing import Any

from sglang.srt import torch_stub as nn
from sglang.srt.configs.model_config import PretrainedConfig


class LlamaForCausalLMEagle3(nn.Module):
    def __init__(
        self, config: PretrainedConfig, quant_config: Any = None, prefix: str = ""
    ) -> None:
        super().__init__()
        self.config = config
        if config.num_hidden_layers != 1:
            raise ValueError("EAGLE3 currently only supports 1 layer")

        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.load_lm_head_from_target = False
        draft_vocab_size = getattr(config, "draft_vocab_size", None)
        if draft_vocab_size is None:
            self.load_lm_head_from_target = True
            draft_vocab_size = config.vocab_size
        self.lm_head = nn.Embedding(draft_vocab_size, config.hidden_size)
        self.capture_aux_hidden_states = True
        self.hot_token_id = None  # draft id -> target id offsets, from the `d2t` weight

    def forward(self, input_ids: list[int], positions: Any, forward_batch: Any) -> Any:
        return self.embed_tokens(input_ids)

    def load_weights(self, weights: Any) -> int:
        count = 0
        for name, loaded_weight in weights:
            if "d2t" in name:
                self.hot_token_id = loaded_weight
            count += 1
        return count

    def set_embed(self, embed: nn.Parameter) -> None:
        self.embed_tokens.weight = embed

    def set_embed_and_head(self, embed: nn.Parameter, head: nn.Parameter) -> None:
        self.embed_tokens.weight = embed
        self.lm_head.weight = head


EntryClass = [LlamaForCausalLMEagle3]
