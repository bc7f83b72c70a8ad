"""Captures CUDA graphs for the decode batch sizes (a bookkeeping stand-in here).

Mirrors sglang 0.5.9 model_executor/cuda_graph_runner.py: before capturing, an EAGLE-3 target
must already capture its auxiliary hidden states, or the graphs would record forwards without
them -- so the runner calls `set_eagle3_layers_to_capture()` on the model first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sglang.srt.model_executor.model_runner import ModelRunner


class CudaGraphRunner:
    def __init__(self, model_runner: ModelRunner) -> None:
        self.model_runner = model_runner
        max_bs = model_runner.server_args.cuda_graph_max_bs
        self.capture_bs = [bs for bs in (1, 2, 4, 8, 16, 32) if bs <= max_bs]
        self.graphs: dict[int, str] = {}

        # Speculative inference
        if model_runner.spec_algorithm.is_eagle3() and model_runner.eagle_use_aux_hidden_state:
            self.model_runner.model.set_eagle3_layers_to_capture()

        self.capture()

    def capture(self) -> None:
        for bs in self.capture_bs:
            self.graphs[bs] = f"graph(bs={bs})"
