"""The HTTP server's start. Mirrors sglang 0.5.9 entrypoints/http_server.py, reduced to the
order of start-up: the scheduler process first, then the warmup request once it is up."""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections.abc import Callable

from sglang.srt.managers.scheduler import run_scheduler_process
from sglang.srt.server_args import ServerArgs


def launch_server(
    server_args: ServerArgs,
    run_scheduler_process_func: Callable[[ServerArgs], None] = run_scheduler_process,
) -> None:
    proc = mp.Process(target=run_scheduler_process_func, args=(server_args,))
    proc.start()
    warmup_thread = threading.Thread(target=_wait_and_warmup, args=(server_args,))
    warmup_thread.start()


def _wait_and_warmup(server_args: ServerArgs) -> None:
    """The first request: one short generation, once /health answers."""
    del server_args
