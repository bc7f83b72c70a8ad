"""N-gram speculation: drafts come from a token cache, not a model (NGRAM).

Mirrors sglang 0.5.9 speculative/ngram_worker.py: no draft model, no TpModelWorker base; it
only borrows the target worker to verify its guesses.
"""

from __future__ import annotations

from typing import Any

from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.server_args import ServerArgs


class NGRAMWorker:
    def __init__(
        self,
        server_args: ServerArgs,
        gpu_id: int,
        tp_rank: int,
        nccl_port: int,
        target_worker: TpModelWorker,
    ) -> None:
        self.target_worker = target_worker
        self.model_runner = target_worker.model_runner
        self.tp_rank = tp_rank
        self.draft_token_num = server_args.speculative_num_draft_tokens
        self.ngram_cache: dict[tuple[int, ...], list[int]] = {}

    def clear_cache_pool(self) -> None:
        self.ngram_cache.clear()

    def forward_batch_generation(self, batch: Any) -> Any:
        return self.target_worker.forward_batch_generation(batch)
