"""Speculative decoding with an ordinary small model as the draft (STANDALONE).

Mirrors sglang 0.5.9 speculative/standalone_worker.py: an EAGLEWorker subclass whose draft is
a complete model, so nothing is shared with the target and no embedding or head changes hands.
"""

from __future__ import annotations

from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.server_args import ServerArgs
from sglang.srt.speculative.eagle_worker import EAGLEWorker
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class StandaloneWorker(EAGLEWorker):
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
        self.hot_token_id = None

        server_args.context_length = target_worker.model_runner.model_config.context_len

        # Skips EAGLEWorker.__init__: the draft keeps its own embedding and LM head.
        TpModelWorker.__init__(
            self,
            server_args=server_args,
            gpu_id=gpu_id,
            tp_rank=tp_rank,
            nccl_port=nccl_port,
            is_draft_worker=True,
        )
