"""The launch arguments. Mirrors sglang 0.5.9 server_args.py, reduced to what the mini tree reads."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    context_length: int | None = None
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: int = 8

    # Speculative decoding
    speculative_algorithm: str | None = None  # EAGLE, EAGLE3, STANDALONE, NGRAM
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int = 3
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 4
    speculative_token_map: str | None = None
