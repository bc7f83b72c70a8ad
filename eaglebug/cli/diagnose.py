"""`eaglebug diagnose --log FILE [--log FILE ...] [--json]`: what an SGLang log says about its
launch (several logs: one per node of a multi-node launch, read as one, see `lognodes`).

Prints the launch phase, the weight-loading progress and the log findings (one per problem,
with the ranks that reported it). Exit 0 when nothing is at error severity, 1 otherwise; a file
that is missing or not a text log is an `InputError` (the CLI's exit 2).

This module imports only the log parser, so the command starts fast; Rich is imported when the
human summary is printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks import (
    THRESHOLD,
    Finding,
    InputError,
    LogAnalyzer,
    MemoryLog,
    Report,
    analyze_file,
    finding_json,
    has_errors,
    low_acceptance,
    one_line,
    read_memory_file,
    regular_file,
    reports_in,
)
from eaglebug.cli.output import write_json
from eaglebug.cli.view import finding_lines, markup

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

EXIT_OK, EXIT_FINDINGS = 0, 1
SAME_CLOCK_S = 120.0  # a log's last timestamp this close to its mtime: the same clock, live
_SNIFF_BYTES = 64 * 1024
_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}
_TEXT_CONTROLS = frozenset(b"\t\n\r\x0c\x08\x1b")


def ensure_text_log(path: Path) -> None:
    """Raise `InputError` unless `path` is a readable file that looks like text."""
    if not path.exists():
        raise InputError(
            f"{path}: no such file", "pass the server's log file, e.g. --log server.log"
        )
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a log file", "pass one log file")
    if not regular_file(path):
        raise InputError(
            f"{path} is not a regular file (a pipe or a device never ends)",
            f"save the output to a file first (cat {path} > server.log), then pass that",
        )
    try:
        with path.open("rb") as stream:
            head = stream.read(_SNIFF_BYTES)
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror or exc}", "check the file's permissions"
        ) from None
    if head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x28\xb5\x2f\xfd")):
        raise InputError(
            f"{path} is not a text log (it is compressed)",
            f"decompress it first, e.g. zcat {path} > server.log",
        )
    controls = sum(1 for byte in head if byte < 0x20 and byte not in _TEXT_CONTROLS)
    if b"\x00" in head or controls > len(head) // 100:
        raise InputError(
            f"{path} is not a text log",
            "pass the file SGLang's output was written to (python -m sglang.launch_server ... "
            "> server.log 2>&1)",
        )


TAIL_BYTES = 8 * 1024 * 1024  # the decode lines that say how acceptance ends up, at most
TAIL_STEP_BYTES = 256 * 1024
TAIL_REPORTS = 64  # the last reports are enough to say how acceptance ends up


def acceptance_reports(path: Path) -> list[Report]:
    """The acceptance the log's last decode lines report: read from the end of the log, a
    block at a time, until the last `TAIL_REPORTS` reports (or `TAIL_BYTES`) are in. The
    decode lines are what a log is made of, so they do not ride the scan (that would feed
    every line to Python); where they end up is the log's tail."""
    reports: list[Report] = []
    try:
        with path.open("rb") as stream:
            end = stream.seek(0, 2)
            size, carry = end, b""  # carry: the start of a line the later block cut
            while end > 0 and len(reports) < TAIL_REPORTS and size - end < TAIL_BYTES:
                start = max(0, end - TAIL_STEP_BYTES)
                stream.seek(start)
                data = stream.read(end - start) + carry
                cut = data.find(b"\n") + 1 if start > 0 else 0
                carry, whole = data[:cut], data[cut:]
                reports = reports_in(whole.decode("utf-8", "replace")) + reports
                end = start
    except OSError:
        return []
    return reports[-TAIL_REPORTS:]


# The wall clock `diagnose` measures a log's silence by; a test sets its own (a stall test that
# read the real clock would depend on how loaded the machine is).
wall_clock: Callable[[], float] = time.time


def silence_s(path: Path, analyzer: LogAnalyzer, now: float | None = None) -> float | None:
    """How long the log has been silent: since the file last changed, if its last timestamp
    agrees with that (a copied log's mtime is the copy's, and then nobody can tell)."""
    last = analyzer.last_time
    if last is None:
        return None
    try:
        mtime = path.stat().st_mtime
        stamped = time.mktime(time.strptime(last[:19], "%Y-%m-%d %H:%M:%S"))
    except (OSError, ValueError, OverflowError):
        return None
    if abs(mtime - stamped) > SAME_CLOCK_S:
        return None
    return max(0.0, (wall_clock() if now is None else now) - mtime)


def cut_message(path: Path, cut: dict[str, int | None]) -> str:
    """The one line that says what the reader cut of a log's over-long lines."""
    count, kept = cut["count"] or 0, (cut["kept_bytes"] or 0) // 1024
    lines = "1 line" if count == 1 else f"{count} lines"
    return (
        f"{path}: {lines} longer than {kept} KiB read only up to their first {kept} KiB "
        f"(the first at byte {cut['first_offset']})"
    )


def _analyzed(path: Path) -> LogAnalyzer:
    try:
        return analyze_file(path)
    except OSError as exc:  # gone or swapped for a FIFO since it was checked
        raise InputError(
            f"cannot read {path}: {exc.strerror or exc}", "pass a regular log file"
        ) from None


def diagnose_command(args: argparse.Namespace) -> int:
    from eaglebug.cli.numbers import stall_limits

    paths = [Path(log) for log in (args.log if isinstance(args.log, list) else [args.log])]
    for each in paths:
        ensure_text_log(each)
    path = paths[0]  # node 0's: the one that serves, with the decode lines and the memory
    nodes: dict[str, str] | None = None
    if len(paths) > 1:
        from eaglebug.checks import analyze_nodes, with_nodes

        analyzer, rank_nodes, tags = analyze_nodes(paths)
        findings = with_nodes(analyzer.findings(), rank_nodes)
        nodes = {tag: str(each) for tag, each in zip(tags, paths, strict=True)}
    else:
        analyzer = _analyzed(path)
        findings = analyzer.findings()
    cuts = [(path, analyzer.cut_json())] if analyzer.lines_cut else []
    acceptance = acceptance_reports(path)
    low = low_acceptance(acceptance, threshold=getattr(args, "min_accept", None) or THRESHOLD)
    if low is not None:
        findings.append(low)
    silences = [s for each in paths if (s := silence_s(each, analyzer)) is not None]
    silent = min(silences) if silences else None
    stalled = analyzer.stalled(silent, stall_limits(args)) if silent is not None else None
    if stalled is not None:
        findings.append(stalled)
    memory = analyzer.memory if nodes is None else read_memory_file(path)
    for each, cut in cuts:
        sys.stderr.write(f"warning: {cut_message(each, cut)}\n")
    prediction = None
    if getattr(args, "sglang", None):
        from eaglebug.cli.predict import predicted

        prediction = predicted(args.sglang, path, memory)
    if args.json:
        data = analyzer.to_json()
        data["findings"] = [finding_json(f) for f in findings]
        data["silent_s"] = round(silent) if silent is not None else None
        data["acceptance"] = (
            {"reports": len(acceptance), "last": acceptance[-1].length} if acceptance else None
        )
        data["memory"] = memory.to_json() if memory else None
        if prediction is not None:
            data["memory_predicted"] = prediction
        if nodes is not None:
            data["nodes"] = nodes
        write_json(data)
    else:
        shown = path if nodes is None else Path(" + ".join(str(each) for each in paths))
        print_diagnosis(shown, analyzer, findings, memory=memory, prediction=prediction)
    return EXIT_FINDINGS if has_errors(findings) else EXIT_OK


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _escape(text: str) -> str:
    """A log's text for Rich markup: brackets escaped, terminal-safe (`one_line`)."""
    from rich.markup import escape

    return escape(one_line(text))


def _print_finding(console: Console, f: Finding) -> None:
    style = _STYLE[f.severity]
    console.print(f"  [{style}]{f.severity:<7}[/] [bold]{_escape(f.id)}[/]  {_escape(f.message)}")
    for text in markup(finding_lines(f)):
        console.print(text)


def memory_line(memory: MemoryLog) -> str:
    """SGLang's own memory figures of the launch, as it logged them (GB = GiB)."""
    parts = []
    if memory.free_before_load_gib is not None:
        parts.append(f"{memory.free_before_load_gib:.2f} GB free before the load")
    if memory.target_weights_gib is not None:
        draft = (
            f" + draft {memory.draft_weights_gib:.2f}"
            if memory.draft_weights_gib is not None
            else ""
        )
        parts.append(f"weights {memory.target_weights_gib:.2f}{draft} GB")
    tokens = memory.max_total_num_tokens or memory.kv_tokens
    if tokens is not None:
        size = f" ({memory.kv_gib:.2f} GB)" if memory.kv_gib is not None else ""
        parts.append(f"KV pool {tokens} tokens{size}")
    if memory.graph_gib is not None:
        parts.append(f"CUDA graphs {memory.graph_gib:.2f} GB")
    if memory.max_running_requests is not None:
        parts.append(f"max_running_requests {memory.max_running_requests}")
    rank = f" ({memory.rank})" if memory.rank else ""
    return f"memory{rank}: " + ", ".join(parts)


def print_diagnosis(
    path: Path,
    analyzer: LogAnalyzer,
    findings: list[Finding],
    console: Console | None = None,
    memory: MemoryLog | None = None,
    prediction: dict[str, object] | None = None,
) -> None:
    console = console or _console()
    console.print(f"[dim]eaglebug diagnose · {_escape(str(path))}[/]")
    phase = analyzer.phase
    line = f"phase: [bold]{phase}[/]"
    if phase == "crashed" and analyzer.crashed_during:
        during = "serving" if analyzer.crashed_during == "ready" else analyzer.crashed_during
        line += f" (during {during})"
    progress = analyzer.progress
    if progress is not None:
        line += f" · weights {progress.done}/{progress.total} shards ({progress.percent}%)"
    console.print(line)
    if memory is not None:
        console.print(_escape(memory_line(memory)))
    if prediction is not None:
        if "max_total_num_tokens" in prediction:
            ratio = prediction.get("ratio")
            beside = f", {ratio:.0%} of the logged {prediction['logged']}" if ratio else ""
            console.print(
                f"memory predicted by this tree's arithmetic: max_total_num_tokens="
                f"{prediction['max_total_num_tokens']}{beside}"
            )
        else:
            console.print(f"[dim]no memory prediction: {_escape(str(prediction['skipped']))}[/]")
    console.print()
    if not findings:
        console.print("  [green]ok[/]  no failure in the log")
    for f in findings:
        _print_finding(console, f)
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
    plural = {"error": "errors", "warning": "warnings", "info": "info"}
    summary = ", ".join(f"{n} {s if n == 1 else plural[s]}" for s, n in counts.items())
    console.print()
    console.print(f"[bold]{summary}[/]" if counts["error"] else summary)
