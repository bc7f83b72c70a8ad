"""One SGLang scheduler of the stand-in: the tree's workers for one TP rank, timed and logged.

It builds what SGLang 0.5.9's `Scheduler.init_tp_model_worker` builds: the tree's own
`TpModelWorker` for the target, then (for a speculative algorithm) the worker class the tree's
`SpeculativeAlgorithm.create_worker` returns, with `target_worker=`. Hooks on the tree's
`ModelRunner.initialize`, `load_model`, `init_device_graphs` and `CudaGraphRunner.capture` add
the time, the simulated memory and the log lines a real load has around those calls.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from eaglebug.demo.footprint import GIB, Footprint
from eaglebug.demo.knobs import Settings
from eaglebug.demo.memfile import DRIVER_IDLE_BYTES, MemoryBoard
from eaglebug.demo.sglang_log import SglangLog, ShardBar, TqdmBar
from eaglebug.demo.tracing import Tracer
from eaglebug.demo.tree import Tree

DEFAULT_MEM_FRACTION = 0.85  # what preflight assumes too when --mem-fraction-static is not given
CONTEXT_BYTES = 800 * 2**20  # CUDA context and NCCL buffers, per GPU
GRAPH_BYTES = 1536 * 2**20  # the target's CUDA graphs, per GPU
DRAFT_GRAPH_BYTES = 600 * 2**20


class _Pace:
    """Step n of `steps` ends at start + n/steps of `total_s`: time spent writing the log or
    the memory file does not add up, so every rank keeps to the same clock."""

    def __init__(self, total_s: float, steps: int) -> None:
        self.started_s = time.monotonic()
        self.step_s = total_s / max(steps, 1)

    def wait(self, step: int) -> None:
        time.sleep(max(0.0, self.started_s + step * self.step_s - time.monotonic()))


@dataclass(frozen=True)
class LaunchContext:
    """What every scheduler of one launch shares."""

    tree: Tree
    server_args: Any  # the tree's ServerArgs
    settings: Settings
    log: SglangLog
    board: MemoryBoard
    tp: int
    nccl_port: int
    target_footprint: Footprint
    draft_footprint: Callable[[str], Footprint]  # by the draft's model path
    # Real ranks run within milliseconds of each other (their collectives keep them together);
    # these threads meet here before CUDA graph capture, so every rank has said "begin" first.
    sync: threading.Barrier


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / GIB:.2f}"


class Scheduler:
    """One TP rank: builds the tree's workers, with the log lines, time and memory around them."""

    def __init__(self, context: LaunchContext, rank: int) -> None:
        self.context = context
        self.rank = rank
        self.settings = context.settings
        self.log = context.log
        self.board = context.board
        self.kv_tokens = 0
        self._tic_s = 0.0
        self._before_bytes = 0

    # -- the scheduler ------------------------------------------------------------------------
    def run(self) -> bool:
        """True when both workers were built; False after printing the tree's exception."""
        SglangLog.set_rank(f" TP{self.rank}" if self.context.tp > 1 else "")
        time.sleep(self.rank * 0.004 * self.settings.total_s)  # ranks never start in lockstep
        tree = self.context.tree
        server_args = copy.deepcopy(self.context.server_args)  # each rank is its own process
        tracer = self.tracer()
        sys.settrace(tracer.trace)
        try:
            target = tree.tp_worker.TpModelWorker(
                server_args=server_args,
                gpu_id=self.rank,
                tp_rank=self.rank,
                nccl_port=self.context.nccl_port,
            )
            draft = None
            algorithm = tree.spec_info.SpeculativeAlgorithm.from_string(
                server_args.speculative_algorithm
            )
            if not algorithm.is_none():
                worker_class = algorithm.create_worker(server_args)
                draft = worker_class(
                    server_args=server_args,
                    gpu_id=self.rank,
                    tp_rank=self.rank,
                    nccl_port=self.context.nccl_port,
                    target_worker=target,
                )
        except Exception:
            sys.settrace(None)
            self.context.sync.abort()  # no rank waits for this one any more
            logging.getLogger("sglang.srt.managers.scheduler").error(
                f"Scheduler hit an exception: {traceback.format_exc()}"
            )
            return False
        finally:
            sys.settrace(None)
        has_draft_model = getattr(draft, "draft_model_runner", None) is not None
        if has_draft_model and server_args.speculative_num_steps > 1:
            self._capture_draft_graphs()
        context_len = target.model_runner.model_config.context_len
        self._info(
            f"max_total_num_tokens={self.kv_tokens}, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests={max(self.kv_tokens // 512, 1)}, "
            f"context_len={context_len}, available_gpu_mem={_gb(self._avail())} GB"
        )
        return True

    def tracer(self) -> Tracer:
        """Hooks on the tree's calls that a real load spends its time and memory in."""
        tree = self.context.tree
        runner = tree.model_runner.ModelRunner
        tracer = Tracer()
        tracer.watch(runner, "initialize", self.on_initialize, None)
        tracer.watch(runner, "load_model", self.on_load_model, self.on_model_loaded)
        tracer.watch(
            runner, "init_device_graphs", self.on_init_device_graphs, self.on_graphs_captured
        )
        tracer.watch(tree.cuda_graph_runner.CudaGraphRunner, "capture", self.on_capture, None)
        return tracer

    # -- hooks on the tree's calls ------------------------------------------------------------
    def on_initialize(self, frame: FrameType) -> None:
        if frame.f_locals["self"].is_draft_worker:
            return
        tic = time.monotonic()
        self._info("Init torch distributed begin.")
        self._sleep("init")
        self.board.add(self.rank, CONTEXT_BYTES, "launching")
        self._info(
            f"Init torch distributed ends. elapsed={time.monotonic() - tic:.2f} s, "
            f"mem usage={_gb(CONTEXT_BYTES)} GB"
        )

    def _footprint(self, runner: Any) -> tuple[Footprint, str]:
        if runner.is_draft_worker:
            return self.context.draft_footprint(runner.model_config.model_path), "draft_"
        return self.context.target_footprint, ""

    def on_load_model(self, frame: FrameType) -> None:
        footprint, step = self._footprint(frame.f_locals["self"])
        self._tic_s = time.monotonic()
        self._before_bytes = self.board.used(self.rank)
        self._info(f"Load weight begin. avail mem={_gb(self._avail())} GB")
        self.board.add(self.rank, 0, "loading")  # the phase from the step's start (GPU load)
        shards = footprint.shards
        bar = ShardBar(self.log, shards) if self.rank == 0 else None
        pace = _Pace(self.settings.seconds(step + "weights"), shards)
        for done in range(1, shards + 1):
            pace.wait(done)
            self.board.add(self.rank, footprint.weight_bytes // shards, "loading")
            if bar is not None:
                bar.update(done)

    def on_model_loaded(self, frame: FrameType) -> None:
        runner = frame.f_locals["self"]
        footprint, step = self._footprint(runner)
        usage = self.board.used(self.rank) - self._before_bytes
        self._info(
            f"Load weight end. elapsed={time.monotonic() - self._tic_s:.2f} s, "
            f"type={type(runner.model).__name__}, dtype=torch.bfloat16, "
            f"avail mem={_gb(self._avail())} GB, mem usage={_gb(usage)} GB."
        )
        if not runner.is_draft_worker:
            budget = runner.server_args.mem_fraction_static or DEFAULT_MEM_FRACTION
            static_bytes = budget * self.settings.gpu_bytes - self._held()
            self.kv_tokens = max(int(static_bytes) // footprint.kv_bytes_per_token, 4096)
        kv_bytes = self.kv_tokens * footprint.kv_bytes_per_token
        self.board.add(self.rank, 0, "kv_cache")
        steps = 4
        pace = _Pace(self.settings.seconds(step + "kv_cache"), steps)
        for done in range(1, steps + 1):
            pace.wait(done)
            self.board.add(self.rank, kv_bytes // steps, "kv_cache")
        if footprint.mla:
            sizes = f"KV size: {_gb(kv_bytes)} GB"
        else:
            sizes = f"K size: {_gb(kv_bytes / 2)} GB, V size: {_gb(kv_bytes / 2)} GB"
        self._info(f"KV Cache is allocated. #tokens: {self.kv_tokens}, {sizes}")
        self._info(f"Memory pool end. avail mem={_gb(self._avail())} GB")

    def on_init_device_graphs(self, frame: FrameType) -> None:
        self._tic_s = time.monotonic()
        self._before_bytes = self.board.used(self.rank)
        self._info(
            "Capture cuda graph begin. This can take up to several minutes. "
            f"avail mem={_gb(self._avail())} GB"
        )
        self.board.add(self.rank, 0, "cuda_graph")
        # Broken: a rank failed before it got here (its traceback says why), or is stuck.
        with contextlib.suppress(threading.BrokenBarrierError):
            self.context.sync.wait(timeout=max(5.0, self.settings.total_s))

    def on_capture(self, frame: FrameType) -> None:
        batch_sizes = list(reversed(frame.f_locals["self"].capture_bs)) or [1]
        bar = None
        if self.rank == 0:
            bar = TqdmBar(self.log, len(batch_sizes), self._capture_desc(batch_sizes[0]))
        pace = _Pace(self.settings.seconds("graphs"), len(batch_sizes))
        for done, bs in enumerate(batch_sizes, start=1):
            pace.wait(done)
            self.board.add(self.rank, GRAPH_BYTES // len(batch_sizes), "cuda_graph")
            if bar is not None:
                bar.update(done, self._capture_desc(bs))
        if bar is not None:
            bar.close()

    def on_graphs_captured(self, frame: FrameType) -> None:
        usage = self.board.used(self.rank) - self._before_bytes
        self._info(
            f"Capture cuda graph end. Time elapsed: {time.monotonic() - self._tic_s:.2f} s. "
            f"mem usage={_gb(usage)} GB. avail mem={_gb(self._avail())} GB."
        )

    # -- steps of its own ---------------------------------------------------------------------
    def _capture_draft_graphs(self) -> None:
        tic = time.monotonic()
        before = self._avail()
        self._info(
            "Capture draft cuda graph begin. This can take up to several minutes. "
            f"avail mem={_gb(before)} GB"
        )
        self.board.add(self.rank, 0, "cuda_graph")
        time.sleep(self.settings.seconds("draft_graphs"))
        self.board.add(self.rank, DRAFT_GRAPH_BYTES, "cuda_graph")
        self._info(
            f"Capture draft cuda graph end. Time elapsed: {time.monotonic() - tic:.2f} s. "
            f"mem usage={_gb(before - self._avail())} GB. avail mem={_gb(self._avail())} GB."
        )

    def _capture_desc(self, bs: int) -> str:
        return f"Capturing batches (bs={bs} avail_mem={_gb(self._avail())} GB)"

    def _held(self) -> int:
        return DRIVER_IDLE_BYTES + self.board.used(self.rank)

    def _avail(self) -> int:
        return self.settings.gpu_bytes - self._held()

    def _sleep(self, step: str) -> None:
        time.sleep(self.settings.seconds(step))

    @staticmethod
    def _info(message: str) -> None:
        logging.getLogger("sglang.srt.model_executor.model_runner").info(message)
