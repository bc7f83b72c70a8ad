"""Several nodes' logs read as one launch: `diagnose --log node0.log --log node1.log ...`.

A multi-node launch (`--nnodes N`) writes one log per node (SLURM writes them side by side on
a shared filesystem); each node's schedulers print their own global ranks (`TP8`..`TP15` on
node 1 of two, as SGLang numbers them), so the lines of every log can go through one
`LogAnalyzer` and the ranks stay distinct. The logs are merged by their timestamps as they are
read (a k-way merge of streams, never the whole of any file in memory); a line without a
timestamp (a traceback's) keeps its place after the stamped line before it. Which node printed
which rank is remembered, so `log.rank_desync` names the node that did not finish a phase.
"""

from __future__ import annotations

import dataclasses
import heapq
import io
from collections.abc import Iterator, Sequence
from pathlib import Path

from eaglebug.checks.contract.evidence import LogEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.logs.parse import LogAnalyzer
from eaglebug.checks.logs.prefix import PREFIX_RX, RANK_PART_RX
from eaglebug.checks.logs.scan import MAX_LINE_BYTES, open_regular

_NO_TIME = ""


def node_tag(path: Path, position: int) -> str:
    """`node0`, `node1`, ... unless the file's name says which node it is."""
    stem = path.stem
    for part in (stem, *stem.replace("-", "_").split("_")):
        if part.startswith("node") and part[4:].isdigit():
            return part
    return f"node{position}"


# Lines read from one log per opening: the merge holds one such batch per log, and a log is
# open only while its batch is read (300 nodes' logs under `ulimit -n 128` are merged too).
BATCH_BYTES = 64 * 1024


def _lines(path: Path, order: int) -> Iterator[tuple[str, int, int, str]]:
    """(time, file order, line number, line) for each line, a line cut to the reader's
    `MAX_LINE_BYTES` (the rest is skipped, never held); untimed lines take the time of the line
    before them, so the merge keeps them where they were. The file is opened for each batch of
    lines and closed before they are merged, never held open across the merge (a launch over
    many nodes would hold a descriptor per node for the whole read)."""
    last = _NO_TIME
    number = 0
    position = 0
    while True:
        batch: list[bytes] = []
        size = 0
        with open_regular(path) as raw, io.BufferedReader(raw) as stream:
            stream.seek(position)
            while size < BATCH_BYTES and (raw_line := stream.readline(MAX_LINE_BYTES)):
                if not raw_line.endswith(b"\n"):  # cut: skip to the end of the line
                    while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                        pass
                batch.append(raw_line)
                size += len(raw_line)
            position = stream.tell()
        if not batch:
            return
        for raw_line in batch:
            number += 1
            line = raw_line.decode("utf-8", "replace")
            match = PREFIX_RX.match(line)
            if match is not None:
                last = match.group("ts")
            yield last, order, number, line


def line_ranks(line: str) -> list[str]:
    """The ranks a line's SGLang prefix names: its TP ranks (global across nodes), else the
    last rank it names."""
    match = PREFIX_RX.match(line)
    if match is None or not match.group("ranks"):
        return []
    parts = RANK_PART_RX.findall(match.group("ranks"))
    return [f"{kind}{n}" for kind, n in parts if kind == "TP"] or [
        f"{kind}{n}" for kind, n in parts[-1:]
    ]


def analyze_nodes(paths: Sequence[Path]) -> tuple[LogAnalyzer, dict[str, str], list[str]]:
    """One analyzer over every node's log, the node of each rank, and the node tags."""
    tags = [node_tag(path, i) for i, path in enumerate(paths)]
    analyzer = LogAnalyzer()
    rank_nodes: dict[str, str] = {}
    streams = [_lines(path, i) for i, path in enumerate(paths)]
    for _, order, _, line in heapq.merge(*streams, key=lambda item: (item[0], item[1], item[2])):
        for rank in line_ranks(line):
            rank_nodes.setdefault(rank, tags[order])
        analyzer.feed(line.rstrip("\r\n"))
    analyzer.finish()
    return analyzer, rank_nodes, tags


def with_nodes(findings: list[Finding], rank_nodes: dict[str, str]) -> list[Finding]:
    """Each finding names the nodes of its ranks; `log.rank_desync` the nodes behind."""
    out = []
    for finding in findings:
        log = finding.log
        ranks: tuple[object, ...] = finding.ranks
        if log is not None and finding.id == "log.rank_desync":
            behind = log.get("behind")  # the ranks that did not get as far
            ranks = behind if isinstance(behind, tuple) else ()
        nodes = sorted({rank_nodes[r] for r in ranks if isinstance(r, str) and r in rank_nodes})
        if log is None or not nodes:
            out.append(finding)
            continue
        if finding.id == "log.rank_desync":
            message = f"{finding.message} (on {', '.join(nodes)}: read that node's log first)"
        else:
            message = f"{finding.message} (on {', '.join(nodes)})"
        out.append(dataclasses.replace(finding, message=message, evidence=_tagged(log, nodes)))
    return out


def _tagged(log: LogEvidence, nodes: list[str]) -> LogEvidence:
    captured = tuple((k, v) for k, v in log.captured if k != "nodes")
    return dataclasses.replace(log, captured=(*captured, ("nodes", tuple(nodes))))
