"""A stand-in SGLang server for the demo: it really runs an SGLang-shaped tree, on no GPU.

    EAGLEBUG_DEMO_SGLANG=/scratch/sglang/python python -m eaglebug.demo.standin_server \\
        --model-path /scratch/models/Kimi-K2.5 --speculative-algorithm EAGLE3 \\
        --speculative-draft-model-path /scratch/models/Kimi-K2.5-EAGLE3 --tp 8 --trust-remote-code

The command line is SGLang's own: the flags are parsed by the tree's `prepare_server_args`,
so a flag that tree does not know fails as it would there. The tree (its `python/` folder, the
repository root that holds it, or the `sglang` package folder) is put first on `sys.path` and
imported; nothing is written into it (no `__pycache__`). Then, like SGLang's launcher, it starts
one scheduler per TP rank (threads here, each with its `[... TPn]` log prefix), and each builds
the tree's own `TpModelWorker` for the target and, for a speculative algorithm, the worker class
the tree's `SpeculativeAlgorithm.create_worker` picks (`EAGLEWorker` for EAGLE3), exactly as
SGLang's scheduler does. Whatever the tree's code raises on the way — the AttributeError of a
wrapper class that lacks `set_eagle3_layers_to_capture` or `get_embed_and_head`, the ValueError
of a draft whose context length is shorter than the target's — is a real exception from that
code, printed by every rank as SGLang prints it (`Scheduler hit an exception: Traceback ...`),
after which the launcher logs `Received sigquit from a child process. It usually means the child
failed.` and kills itself (SIGKILL: exit status -9, as `kill_process_tree` leaves a real one).

The time and memory a real load takes are simulated around the tree's calls, without wrapping
them (a `sys.settrace` hook watches the tree's `ModelRunner.initialize`, `load_model`,
`init_device_graphs` and `CudaGraphRunner.capture`, so tracebacks hold only real frames): the
log lines 0.5.9 prints around those calls (`Load weight begin. avail mem=...`, the shard
progress bar, `Load weight end. ...`, `KV Cache is allocated. ...`, `Capture cuda graph
begin/end ...`, the draft's, and at last `The server is fired up and ready to roll!`), with
sizes read from the model folders (`eaglebug.demo.footprint`). Simulated GPU memory goes to
`<log>.mem.json` (format: `eaglebug.demo.memfile`). When ready it serves until SIGTERM or
SIGINT, on which it exits at once (by that signal), its memory file reporting 0 bytes.

Environment:
    EAGLEBUG_DEMO_SGLANG    the tree to import (required)
    EAGLEBUG_DEMO_SECONDS   about how long a full launch takes to reach ready (default 30)
    EAGLEBUG_DEMO_FAST=1    about 1.2 s to ready, for tests (overrides EAGLEBUG_DEMO_SECONDS)
    EAGLEBUG_DEMO_GPU_BYTES each simulated GPU's memory (default 141 GiB, an H200)
    EAGLEBUG_DEMO_MEM_FILE  where to write the memory file (default: the file stdout goes to,
                            plus `.mem.json`; none when stdout is not a regular file)
    EAGLEBUG_DEMO_PARENT    PID:CREATE_TIME of the demo; the stand-in exits (as on SIGTERM)
                            within half a second of that process ending
Exit status: -9 (SIGKILL) after a scheduler failed; 2 for bad flags or settings (argparse's
usage error, or `error: ...` / `hint: ...` on stderr); killed by the signal when stopped.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eaglebug.demo.footprint import Footprint, read_footprint
from eaglebug.demo.knobs import Settings, UsageError
from eaglebug.demo.memfile import MemoryBoard
from eaglebug.demo.scheduler import LaunchContext, Scheduler
from eaglebug.demo.sglang_log import SglangLog
from eaglebug.demo.standin_http import Serving, expected_accept_length, start_http
from eaglebug.demo.tree import Tree, import_tree

EXIT_USAGE = 2
LAUNCHER_LOGGER = "sglang.srt.entrypoints.engine"  # where the launcher logs in SGLang 0.5.9


class Launcher:
    """SGLang's launcher: schedulers for every rank, then the HTTP server, or the sigquit end."""

    def __init__(self, tree: Tree, server_args: Any, settings: Settings, log: SglangLog) -> None:
        self.server_args = server_args
        self.settings = settings
        self.log = log
        self.tp = max(int(server_args.tp_size), 1)
        self.board = MemoryBoard(settings.mem_file, self.tp, settings.gpu_bytes)
        self._draft_footprints: dict[str, Footprint] = {}
        self._lock = threading.Lock()
        self._results: dict[int, bool] = {}
        self.context = LaunchContext(
            tree=tree,
            server_args=server_args,
            settings=settings,
            log=log,
            board=self.board,
            tp=self.tp,
            nccl_port=int(server_args.port) + 233,
            target_footprint=read_footprint(Path(server_args.model_path), self.tp),
            draft_footprint=self.draft_footprint,
            sync=threading.Barrier(self.tp),
        )

    def draft_footprint(self, model_path: str) -> Footprint:
        with self._lock:
            if model_path not in self._draft_footprints:
                self._draft_footprints[model_path] = read_footprint(Path(model_path), self.tp)
            return self._draft_footprints[model_path]

    def _accept_length(self) -> float:
        """How the draft will do, from how the launch runs it (see `standin_http`)."""
        args = self.server_args
        draft = _config(getattr(args, "speculative_draft_model_path", None))
        target = _config(args.model_path)
        text = target.get("text_config") if isinstance(target.get("text_config"), dict) else target
        layers = text.get("num_hidden_layers") if isinstance(text, dict) else None
        return expected_accept_length(
            getattr(args, "speculative_algorithm", None),
            draft,
            layers if isinstance(layers, int) else None,
        )

    def _rank_main(self, rank: int) -> None:
        ok = Scheduler(self.context, rank).run()
        with self._lock:
            self._results[rank] = ok

    def run(self) -> int:
        launcher_log = logging.getLogger(LAUNCHER_LOGGER)
        launcher_log.info(f"server_args={self.server_args!r}")
        self.board.flush()
        threads = [
            threading.Thread(target=self._rank_main, args=(r,), name=f"TP{r}", daemon=True)
            for r in range(self.tp)
        ]
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads):
            for thread in threads:
                thread.join(timeout=0.1)  # short waits: SIGTERM is handled at once
        if not all(self._results.get(r, False) for r in range(self.tp)):
            launcher_log.error(
                "Received sigquit from a child process. It usually means the child failed."
            )
            self.board.finish("exited", "exited")
            self.log.flush()
            os.kill(os.getpid(), signal.SIGKILL)  # kill_process_tree(os.getpid()) does this
            return 1  # not reached
        self._serve(launcher_log)
        return 0

    def _serve(self, launcher_log: logging.Logger) -> None:
        host, port = self.server_args.host, int(self.server_args.port)
        serving = Serving(self.server_args, self._accept_length())
        launcher_log.info(f"INFO:     Started server process [{os.getpid()}]")
        try:
            start_http(serving, host, port)
        except OSError as exc:  # as uvicorn says it, and then the launch is over
            launcher_log.error(
                f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
                f"({host!r}, {port}): {exc.strerror}"
            )
            self.board.finish("exited", "exited")
            self.log.flush()
            os.kill(os.getpid(), signal.SIGKILL)
            return
        for line in (
            "Waiting for application startup.",
            "Application startup complete.",
            f"Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)",
        ):
            launcher_log.info(f"INFO:     {line}")
        time.sleep(self.settings.seconds("serve") / 2)
        SglangLog.set_rank(" TP0" if self.tp > 1 else "")
        logging.getLogger("sglang.srt.managers.scheduler").info(
            "Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0, "
        )
        serving.generate({"sampling_params": {"max_new_tokens": 32}})  # the warmup request
        SglangLog.set_rank("")
        time.sleep(self.settings.seconds("serve") / 2)
        launcher_log.info('INFO:     127.0.0.1:40518 - "POST /generate HTTP/1.1" 200 OK')
        self.board.finish("ready", "ready")
        launcher_log.info("The server is fired up and ready to roll!")
        traffic = threading.Thread(target=self._traffic, args=(serving,), daemon=True)
        traffic.start()
        while True:
            signal.pause()  # serve until SIGTERM / SIGINT

    def _traffic(self, serving: Serving) -> None:
        """Users' requests, one every few seconds: the decode lines and the acceptance a
        serving server reports (the stand-in has no users of its own)."""
        interval_s = max(self.settings.seconds("serve"), 0.2)
        while True:
            time.sleep(interval_s)
            SglangLog.set_rank(" TP0" if self.tp > 1 else "")
            serving.generate({"sampling_params": {"max_new_tokens": 64}})


def _config(folder: str | None) -> dict[str, Any]:
    if not folder:
        return {}
    try:
        data = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _install_stop(board: MemoryBoard | None, log: SglangLog) -> None:
    """SIGTERM / SIGINT: report the memory released, then die by the same signal, at once."""

    def stop(signum: int, _frame: object) -> None:
        if board is not None:
            board.finish("exited", "exited")
        log.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _watch_parent(parent: tuple[int, float], interval_s: float = 0.5) -> None:
    """End this stand-in (as SIGTERM would) once the demo that started it is gone."""
    import psutil

    def alive() -> bool:
        try:
            return abs(psutil.Process(parent[0]).create_time() - parent[1]) < 0.01
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    def watch() -> None:
        stop = threading.Event()
        while alive():
            stop.wait(interval_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="demo-parent", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    log = SglangLog()
    _install_stop(None, log)
    try:
        settings = Settings.from_env(os.environ)
        if settings.parent is not None:
            _watch_parent(settings.parent)
        tree = import_tree(settings.python_dir)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        if exc.hint:
            sys.stderr.write(f"hint: {exc.hint}\n")
        return EXIT_USAGE
    server_args = tree.server_args.prepare_server_args(args)  # argparse: usage error, exit 2
    launcher = Launcher(tree, server_args, settings, log)
    _install_stop(launcher.board, log)
    return launcher.run()


if __name__ == "__main__":
    raise SystemExit(main())
