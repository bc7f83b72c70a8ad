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

import itertools
import json
import re

# `[2026-01-30 10:36:11 DP0 TP4] message`, optionally after a wrapper that another logger or a
# container runtime put in front (`2025-03-08 02:04:48,693 - __main__ - INFO - `, an ISO
# timestamp and a tab). The wrapper holds no `[`, so the match never backtracks far. A copied
# line that lost its `[` (a paste that began mid-line) still counts. Two more shapes of the same
# record: the time-only `[17:43:28 TP4] ` of releases before 0.3 (`datefmt="%H:%M:%S"`; always
# in brackets, a bare time is too common to be a prefix), and a record format that puts the
# level and the pid before the brackets and the logging call's file:line inside them
# (`2026-03-18 11:22:06.731 ERROR 120984 [ TP0 scheduler.py:3190] `, sglang PR #21723).
PREFIX_RX = re.compile(
    r"^(?P<wrap>[^\[\n]{0,120}?)"
    r"(?:\[?(?=\d{4}-\d\d-\d\d )|\[(?=\d\d:\d\d:\d\d[ .\]]))"
    r"(?P<ts>(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:\.\d+)?)"
    r"(?: (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d+ \[)?"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)"
    r"(?:(?<=\[ )[\w.-]+\.py:\d+| [\w.-]+\.py:\d+)?\] "
)
RANK_PART_RX = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP|rank)(\d+)")
# The prefix's parts, in `run_scheduler_process`'s order (see patterns.py), and torch's `rank`:
# a table because a log is read without a tree.
RANK_KINDS = ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP", "rank")

# What other programs put in front of SGLang's lines when a user copies a log: a docker compose
# service name (`sglang-1  | `), a kubectl/journal ISO timestamp (`2025-02-27T16:30:43.48Z `,
# also in brackets), an srun task id (`0: `), torch.distributed's `[rank3]:`, a glog header
# (`[E227 16:30:43.486750 12 ProcessGroupNCCL.cpp:1785] `), Python logging's default format
# (`2025-03-08 02:04:48,693 - name - INFO - `). Each is stripped with exactly its separator,
# so a traceback's indentation survives; a rank it names is kept.
FOREIGN_PREFIX_RX = re.compile(
    r"(?:(?P<quote>> ?)"  # a Markdown quote of a pasted log
    # journald (`journalctl -o short`): `Mar 09 00:57:15 host unit[pid]: `
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w@.:-]+(?:\[\d+\])?: "
    # kubectl logs --prefix: `[pod/name/container] `
    r"|\[pod/[\w.-]+/[\w.-]+\] "
    # Ray's worker output: `(SGLangEngine pid=952, ip=10.1.2.3) `, `(WorkerDict pid=859188) `
    r"|\((?P<actor>[\w.:-]+) pid=\d+(?:, ip=[\d.:a-f]+)?\) ?"
    # Google Cloud Logging's export: `ERROR 2025-04-07T19:13:52.541718006Z `
    r"|(?P<severity>DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY) "
    r"(?=\d{4}-\d\d-\d\dT)"
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
        level = m["glog"] or m["level"] or m["severity"] or level
        line = line[m.end() :]
    return line, rank, level


ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


# Ray deduplicates the same line from many workers into one, with this suffix: the line is
# other workers' (`[repeated 22x across cluster]`), said once.
RAY_REPEATED_RX = re.compile(r" ?\[repeated \d+x across cluster\]\s*$")


def unwrap_record(line: str) -> str:
    """The log line inside a record that a container runtime wrote for it: Docker's json-file
    driver writes `{"log": "<line>\\n", "stream": "stderr", "time": "..."}` per line
    (https://docs.docker.com/engine/logging/drivers/json-file/). Anything else is returned as is.
    """
    if not line.startswith('{"log":'):
        return line
    try:
        record = json.loads(line)
    except ValueError:
        return line
    text = record.get("log") if isinstance(record, dict) else None
    return text.rstrip("\n") if isinstance(text, str) else line


# A log export's own timestamp at the start of each line (RFC 3339, maybe after a severity):
# the order of these says whether the export is newest first.
_EXPORT_TIME_RX = re.compile(rb"^(?:[A-Z]+ )?\[?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?)", re.M)
EXPORT_LINES_LOOKED_AT = 64


def newest_first(head: bytes) -> bool:
    """Whether a log's lines are in reverse order, newest first, as a log viewer exports them
    (Google Cloud Logging's download does): its lines' own timestamps only ever go back."""
    stamps = [m.group(1) for m in _EXPORT_TIME_RX.finditer(head, 0, 64 * 1024)]
    stamps = stamps[:EXPORT_LINES_LOOKED_AT]
    back = sum(1 for a, b in itertools.pairwise(stamps) if b < a)
    forward = sum(1 for a, b in itertools.pairwise(stamps) if b > a)
    return back >= 2 and forward == 0
