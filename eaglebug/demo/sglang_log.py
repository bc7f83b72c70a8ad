"""SGLang's log output, written the way sglang 0.5.9 writes it, for the stand-in server.

- Records: `configure_logger` formats `[%(asctime)s{prefix}] %(message)s` with
  `datefmt="%Y-%m-%d %H:%M:%S"`; a scheduler's prefix is `" TP{rank}"` when `tp_size > 1`
  (srt/utils/common.py:1216, srt/managers/scheduler.py:3081-3096). A multi-line message (a
  traceback) gets the prefix on its first line only. The stand-in runs its ranks as threads, so
  the prefix comes from a thread-local set by each rank.
- Weight loading: tqdm with 0.5.9's `BAR_FORMAT` (srt/utils/common.py:129), which ends in a
  newline, so every update is `\\r` + a whole line.
- CUDA graph capture: a default tqdm bar (srt/model_executor/cuda_graph_runner.py:489), whose
  updates are joined by `\\r` on one line until it closes with a newline.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TextIO

DATEFMT = "%Y-%m-%d %H:%M:%S"
_local = threading.local()


class _RankFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.rank_prefix = getattr(_local, "prefix", "")
        return True


class SglangLog:
    """One output stream shared by every rank: log records and raw tqdm writes, never torn."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(
            logging.Formatter("[%(asctime)s%(rank_prefix)s] %(message)s", datefmt=DATEFMT)
        )
        self.handler.addFilter(_RankFilter())
        root = logging.getLogger()
        for old in list(root.handlers):
            root.removeHandler(old)
        root.addHandler(self.handler)
        root.setLevel(logging.INFO)

    @staticmethod
    def set_rank(prefix: str) -> None:
        """This thread's record prefix: `" TP3"`, or `""` for the launcher."""
        _local.prefix = prefix

    def write_raw(self, text: str) -> None:
        """Bytes as tqdm writes them (no prefix), atomically with respect to log records."""
        self.handler.acquire()
        try:
            self.stream.write(text)
            self.stream.flush()
        finally:
            self.handler.release()

    def flush(self) -> None:
        self.handler.flush()


def format_interval(seconds: float) -> str:
    """tqdm's `[MM:SS]` (or `H:MM:SS`)."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _timing(n: int, total: int, elapsed_s: float) -> tuple[str, str]:
    """tqdm's `{remaining}` and `{rate_fmt}`."""
    rate = n / elapsed_s if n and elapsed_s > 0 else 0.0
    if not rate:
        return "?", "?it/s"
    remaining = format_interval((total - n) / rate)
    return remaining, f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"


class _Bar:
    """A progress bar written into the log as it advances, started at 0 of `total`."""

    def __init__(self, log: SglangLog, total: int, desc: str) -> None:
        self.log = log
        self.total = max(total, 1)
        self.desc = desc
        self.started_s = time.monotonic()
        self.update(0)

    def update(self, n: int) -> None:
        raise NotImplementedError

    def _times(self, n: int) -> str:
        """tqdm's `[elapsed<remaining, rate]` at `n` done."""
        elapsed_s = time.monotonic() - self.started_s
        remaining, rate = _timing(n, self.total, elapsed_s)
        return f"[{format_interval(elapsed_s)}<{remaining}, {rate}]"


class ShardBar(_Bar):
    """`Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:06<00:07,  4.61it/s]`."""

    def __init__(
        self, log: SglangLog, total: int, desc: str = "Loading safetensors checkpoint shards"
    ) -> None:
        super().__init__(log, total, desc)

    def update(self, n: int) -> None:
        pct = 100 * n / self.total
        self.log.write_raw(
            f"\r{self.desc}: {pct:3.0f}% Completed | {n}/{self.total} {self._times(n)}\n"
        )


_BLOCKS = " ▏▎▍▌▋▊▉"


class TqdmBar(_Bar):
    """A default tqdm bar: `desc:  50%|█████     | 2/4 [00:01<00:01,  1.98it/s]`, `\\r`-joined."""

    WIDTH = 10  # tqdm's bar width when it cannot ask a terminal

    def _bar(self, fraction: float) -> str:
        eighths = int(fraction * self.WIDTH * 8)
        full, part = divmod(eighths, 8)
        text = "█" * full + (_BLOCKS[part] if full < self.WIDTH else "")
        return text.ljust(self.WIDTH)

    def update(self, n: int, desc: str | None = None) -> None:
        if desc is not None:
            self.desc = desc
        fraction = n / self.total
        self.log.write_raw(
            f"\r{self.desc}: {100 * fraction:3.0f}%|{self._bar(fraction)}| {n}/{self.total} "
            + self._times(n)
        )

    def close(self) -> None:
        self.log.write_raw("\n")
