"""The EAGLE / EAGLE-3 draft worker.

Mirrors sglang 0.5.9 speculative/eagle_worker.py. It is a TpModelWorker for the draft model
(`is_draft_worker=True`) that shares the target's embedding and LM head: it calls
`get_embed_and_head()` on the *target* model object, then hands the weights to the draft.
"""

from __future__ import annotations

from typing import Any

from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.model_executor.model_runner import ModelRunner
from sglang.srt.server_args import ServerArgs
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class EAGLEWorker(TpModelWorker):
    def __init__(
        self,
        server_args: ServerArgs,
        gpu_id: int,
        tp_rank: int,
        nccl_port: int,
        target_worker: TpModelWorker,
    ) -> None:
        self.server_args = server_args
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.target_worker = target_worker
        self.speculative_algorithm = SpeculativeAlgorithm.from_string(
            server_args.speculative_algorithm
        )

        # The draft runs at the target's context length (the draft config may allow less).
        server_args.context_length = target_worker.model_runner.model_config.context_len

        # Capture the draft's CUDA graphs later, not in TpModelWorker.__init__.
        backup_disable_cuda_graph = server_args.disable_cuda_graph
        server_args.disable_cuda_graph = True
        # EAGLE-3 drafts ship their own hot-token map (d2t) with the weights.
        self.hot_token_id = None

        super().__init__(
            server_args=server_args,
            gpu_id=gpu_id,
            tp_rank=tp_rank,
            nccl_port=nccl_port,
            is_draft_worker=True,
        )

        # Share the embedding and LM head of the target with the draft.
        embed, head = self.target_worker.model_runner.model.get_embed_and_head()

        if self.speculative_algorithm.is_eagle3():
            # Most EAGLE-3 drafts keep their own (smaller-vocabulary) LM head.
            if (
                hasattr(self.draft_model_runner.model, "load_lm_head_from_target")
                and self.draft_model_runner.model.load_lm_head_from_target
            ):
                self.draft_model_runner.model.set_embed_and_head(embed, head)
            else:
                self.draft_model_runner.model.set_embed(embed)

            if self.draft_model_runner.model.hot_token_id is not None:
                self.hot_token_id = self.draft_model_runner.model.hot_token_id
        else:
            self.draft_model_runner.model.set_embed_and_head(embed, head)

        self.draft_model_runner.server_args.disable_cuda_graph = backup_disable_cuda_graph

    @property
    def draft_model_runner(self) -> ModelRunner:
        return self.model_runner

    def forward_batch_generation(self, batch: Any) -> Any:
        # Draft, verify with the target, accept: reduced to the target's forward here.
        return self.target_worker.forward_batch_generation(batch)
