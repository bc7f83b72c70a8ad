"""Loads one model and runs its forward passes.

Mirrors sglang 0.5.9 model_executor/model_runner.py. The EAGLE-3 places: the target runner
(never the draft's) turns on auxiliary hidden-state capture from the draft's `eagle_config`,
and after loading calls `self.model.set_eagle3_layers_to_capture(...)` on the model class
that config.json's `architectures` names -- the outer class, wrapper or not.
"""

from __future__ import annotations

from typing import Any

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.cuda_graph_runner import CudaGraphRunner
from sglang.srt.models.registry import ModelRegistry
from sglang.srt.server_args import ServerArgs
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class ModelRunner:
    def __init__(
        self,
        model_config: ModelConfig,
        server_args: ServerArgs,
        gpu_id: int,
        tp_rank: int,
        tp_size: int,
        nccl_port: int,
        is_draft_worker: bool = False,
    ) -> None:
        # The placement (gpu_id, tp_rank, tp_size, nccl_port) is SGLang's distributed set-up,
        # which the stand-in, on no GPU, does not do.
        self.model_config = model_config
        self.server_args = server_args
        self.is_draft_worker = is_draft_worker
        self.spec_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
        self.req_to_token_pool = None
        self.token_to_kv_pool_allocator = None

        # Auxiliary hidden-state capture: only the target model feeds an EAGLE-3 draft.
        self.eagle_use_aux_hidden_state = False
        self.eagle_aux_hidden_state_layer_ids = None
        if self.spec_algorithm.is_eagle3() and not self.is_draft_worker:
            draft_model_config = ModelConfig.from_server_args(
                server_args,
                model_path=server_args.speculative_draft_model_path,
                is_draft_model=True,
            )
            self.eagle_use_aux_hidden_state = True
            eagle_config = getattr(draft_model_config.hf_config, "eagle_config", None) or {}
            self.eagle_use_aux_hidden_state = eagle_config.get("use_aux_hidden_state", True)
            self.eagle_aux_hidden_state_layer_ids = eagle_config.get(
                "eagle_aux_hidden_state_layer_ids"
            )

        self.initialize()

    def initialize(self) -> None:
        self.load_model()
        if self.server_args.disable_cuda_graph:
            self.graph_runner = None
        else:
            self.init_device_graphs()

        if self.eagle_use_aux_hidden_state:
            self.model.set_eagle3_layers_to_capture(self.eagle_aux_hidden_state_layer_ids)

    def load_model(self) -> None:
        hf_config = self.model_config.hf_config
        model_cls, _ = ModelRegistry.resolve_model_cls(hf_config.architectures)
        self.model = model_cls(hf_config)

    def init_device_graphs(self) -> None:
        self.graph_runner = CudaGraphRunner(self)

    def forward(self, forward_batch: Any) -> Any:
        return self.model.forward(forward_batch.input_ids, forward_batch.positions, forward_batch)
