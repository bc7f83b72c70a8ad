"""The prefixes of a log line: SGLang's own (`[time DPn TPn]`), and what other programs put in
front of it when a user copies a log (docker compose, kubectl, srun, torch, glog, logging,
a Markdown quote), with the rank and the log level they carry.

SGLang's prefix: `configure_logger` formats records as `[%(asctime)s{ms}{prefix}] %(message)s`
with `datefmt="%Y-%m-%d %H:%M:%S"` (srt/utils/common.py:1216 in 0.5.9, :2618 in 0.5.23);
`run_scheduler_process` builds the prefix from `" DP{n}"`, `" PP{n}"`, `" ATTN_CP{n}"`,
`" MOE_DP{n}"`, `" TP{n}"`, `" EP{n}"` in that order (srt/managers/scheduler.py:3081-3096 in
0.5.9, :6279-6291 in 0.5.23). `SGLANG_LOG_MS` adds `.%(msecs)03d`.
"""

from __future__ import annotations

import re

# `[2026-01-30 10:36:11 DP0 TP4] message`, optionally after a wrapper that another logger or a
# container runtime put in front (`2025-03-08 02:04:48,693 - __main__ - INFO - `, an ISO
# timestamp and a tab). The wrapper holds no `[`, so the match never backtracks far. A copied
# line that lost its `[` (a paste that began mid-line) still counts.
PREFIX_RX = re.compile(
    r"^(?P<wrap>[^\[\n]{0,120}?)"
    r"\[?(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] "
)
RANK_PART_RX = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP|rank)(\d+)")
RANK_KINDS = ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP", "rank")

# What other programs put in front of SGLang's lines when a user copies a log: a docker compose
# service name (`sglang-1  | `), a kubectl/journal ISO timestamp (`2025-02-27T16:30:43.48Z `,
# also in brackets), an srun task id (`0: `), torch.distributed's `[rank3]:`, a glog header
# (`[E227 16:30:43.486750 12 ProcessGroupNCCL.cpp:1785] `), Python logging's default format
# (`2025-03-08 02:04:48,693 - name - INFO - `). Each is stripped with exactly its separator,
# so a traceback's indentation survives; a rank it names is kept.
FOREIGN_PREFIX_RX = re.compile(
    r"(?:(?P<quote>> ?)"  # a Markdown quote of a pasted log
    r"|\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]? "
    r"(?:(?:stdout|stderr) [FP] )?"  # kubectl / containerd's CRI format
    r"|(?P<svc>[A-Za-z0-9][\w.-]{0,80}?) +\| ?"
    r"|\d{1,5}: "
    r"|\[(?P<rank>rank\d+)\]:"
    r"|\[?(?P<glog>[IWEF])\d{3,4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? [^\]\s]+:\d+\] ?"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - [\w.]+ - (?P<level>[A-Z]+) - "
    r"|[\w.-]+:\d+:\d+ \[\d+\] (?=(?:[\w./]+:\d+ )?NCCL )"  # NCCL's own host:pid:tid [dev]
    r")"
)
FOREIGN_PREFIXES_MAX = 4


def strip_foreign(line: str) -> tuple[str, str | None, str | None]:
    """`line` without the prefixes other programs added; a rank and a log level they named
    (glog's E/F and logging's ERROR/CRITICAL mean the line reports a failure)."""
    rank = level = None
    for _ in range(FOREIGN_PREFIXES_MAX):
        if PREFIX_RX.match(line) and not line.startswith(">"):
            break  # SGLang's own prefix: read by PREFIX_RX
        m = FOREIGN_PREFIX_RX.match(line)
        if m is None or not m.end():
            break
        rank = m["rank"] or rank
        level = m["glog"] or m["level"] or level
        line = line[m.end() :]
    return line, rank, level


ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
