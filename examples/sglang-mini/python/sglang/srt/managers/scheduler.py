"""The scheduler process: builds the target worker, then the draft worker, then serves.

Mirrors sglang 0.5.9 managers/scheduler.py, reduced to the start-up order.
"""

from __future__ import annotations

from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.server_args import ServerArgs
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class Scheduler:
    def __init__(self, server_args: ServerArgs, gpu_id: int = 0, tp_rank: int = 0) -> None:
        self.server_args = server_args
        self.spec_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
        self.tp_worker = TpModelWorker(server_args=server_args, gpu_id=gpu_id, tp_rank=tp_rank)
        self.draft_worker = None
        if not self.spec_algorithm.is_none():
            DraftWorkerClass = self.spec_algorithm.create_worker(server_args)
            self.draft_worker = DraftWorkerClass(
                server_args=server_args,
                gpu_id=gpu_id,
                tp_rank=tp_rank,
                nccl_port=0,
                target_worker=self.tp_worker,
            )

    def event_loop_normal(self) -> None:
        worker = self.draft_worker or self.tp_worker
        while True:
            worker.forward_batch_generation(None)


def run_scheduler_process(server_args: ServerArgs) -> None:
    scheduler = Scheduler(server_args)
    scheduler.event_loop_normal()
