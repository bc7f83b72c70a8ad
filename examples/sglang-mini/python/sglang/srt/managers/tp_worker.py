"""A tensor-parallel worker: one model, one ModelRunner, on one GPU.

Mirrors sglang 0.5.9 managers/tp_worker.py. The scheduler builds one for the target model;
the speculative workers subclass it with `is_draft_worker=True` for the draft model.
"""

from __future__ import annotations

from typing import Any

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.model_runner import ModelRunner
from sglang.srt.server_args import ServerArgs


class TpModelWorker:
    def __init__(
        self,
        server_args: ServerArgs,
        gpu_id: int,
        tp_rank: int,
        nccl_port: int = 0,
        is_draft_worker: bool = False,
    ) -> None:
        # The placement (gpu_id, tp_rank, nccl_port) only travels on to the ModelRunner here.
        self.server_args = server_args
        self.is_draft_worker = is_draft_worker

        self.model_config = ModelConfig.from_server_args(
            server_args,
            model_path=(
                server_args.speculative_draft_model_path
                if is_draft_worker
                else server_args.model_path
            ),
            is_draft_model=is_draft_worker,
        )
        self.model_runner = ModelRunner(
            model_config=self.model_config,
            server_args=server_args,
            gpu_id=gpu_id,
            tp_rank=tp_rank,
            tp_size=server_args.tp_size,
            nccl_port=nccl_port,
            is_draft_worker=is_draft_worker,
        )

    def get_memory_pool(self) -> tuple[Any, Any]:
        return self.model_runner.req_to_token_pool, self.model_runner.token_to_kv_pool_allocator

    def forward_batch_generation(self, batch: Any) -> Any:
        return self.model_runner.forward(batch)
