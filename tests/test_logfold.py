"""Folding by rank without any UI: which lines fold, into which row, and positions both ways.

Lines go into a real `LogIndex` and its `Folds` as the log panel adds them (a part at a time,
straight after the index took it); the 8-rank crash log is a fixture of what SGLang prints.
"""

from __future__ import annotations

from pathlib import Path

from eaglebug.logs.fold import WINDOW_ROWS, Folds, fold_key, folded_text
from eaglebug.logs.follow import LogLine
from eaglebug.logs.index import LogIndex, LogPart, LogSource, Restart, display

CRASH_LOG = Path(__file__).parent / "fixtures" / "logs" / "missing_method_8ranks.log"


def feed(
    index: LogIndex,
    folds: Folds,
    texts: list[str],
    restart: str | None = None,
    log: Path | None = None,
) -> None:
    """Add lines as the panel does: to the index, then to the folds of its last segment.
    With `log`, the lines are written to it first and read back from it (a restart opens it)."""
    offset = 0
    source = None
    if log is not None:
        offset = log.stat().st_size if log.exists() else 0
        with log.open("a", encoding="utf-8") as out:
            out.writelines(text + "\n" for text in texts)
        source = LogSource.open(log) if restart else None
    lines = []
    for text in texts:
        lines.append(LogLine(text, offset))
        offset += len(text.encode()) + 1
    gone = index.add(LogPart(Restart(restart, source) if restart else None, tuple(lines)))
    if gone:
        folds.forget_removed()
    if lines:
        folds.add(index.segments[-1], texts)


def shown(index: LogIndex, folds: Folds) -> list[str]:
    return [index[folds[y]] for y in range(len(folds))]


def check_positions(folds: Folds, index: LogIndex) -> None:
    """Every position maps to a row that maps back to it; every row maps to a position whose
    row is itself or the row it folded into."""
    for y in range(len(folds)):
        assert folds.position(folds[y]) == y
    for row in range(len(index)):
        head = folds[folds.position(row)]
        assert head == row or row in range(head, head + WINDOW_ROWS + 1)


def test_the_eight_ranks_of_a_crash_log_fold_into_one_row_each() -> None:
    texts = [display(raw) for raw in CRASH_LOG.read_bytes().split(b"\n")[:-1]]
    index = LogIndex()
    folds = Folds(index)
    for k in range(0, len(texts), 50):  # in parts, as snapshots bring them
        feed(index, folds, texts[k : k + 50])
    rows = shown(index, folds)
    begin = [t for t in rows if "Init torch distributed begin" in t]
    assert begin == ["[2026-01-30 10:36:03 TP0] Init torch distributed begin."]
    row = folds[rows.index(begin[0])]
    assert folds.members(row) == [f"TP{i}" for i in range(1, 8)]
    assert folded_text(index[row], folds.members(row)) == (
        "[2026-01-30 10:36:03 TP0-TP7] Init torch distributed begin."
    )
    capture = [t for t in rows if "Capture cuda graph begin" in t]
    assert len(capture) == 1 and " TP0]" in capture[0]
    # A line with a traceback below it stays as it is: each rank's traceback keeps its head.
    heads = [t for t in rows if "Scheduler hit an exception" in t]
    assert len(heads) == sum("Scheduler hit an exception" in t for t in texts) > 1
    # What only one rank printed (the bs list) and what no rank printed stay too.
    assert any("Capture cuda graph bs" in t for t in rows)
    assert sum(t.startswith("AttributeError") for t in rows) == sum(
        t.startswith("AttributeError") for t in texts
    )
    # Eight milestones (distributed init begin and end, weights begin and end, the KV cache's
    # dtype and allocation, the memory pool, graph capture), seven copies each.
    assert folds.folded_lines == 8 * 7
    assert len(folds) == len(index) - 8 * 7
    check_positions(folds, index)


def test_one_rank_repeating_itself_never_folds() -> None:
    index = LogIndex()
    folds = Folds(index)
    decode = [
        f"[2026-01-30 10:40:{i % 60:02d} TP0] Decode batch. #running-req: 1, #token: {i}, "
        "gen throughput (token/s): 41.2"
        for i in range(200)
    ]
    feed(index, folds, decode)
    assert len(folds) == len(index) == 200
    assert folds.folded_lines == 0


def test_only_lines_within_the_window_fold_and_numbers_do_not_matter() -> None:
    index = LogIndex()
    folds = Folds(index)
    first = "[2026-01-30 10:36:05 TP0] Load weight end. mem usage=74.18 GB"
    near = "[2026-01-30 10:36:07 TP1] Load weight end. mem usage=74.20 GB"
    gap = [f"[2026-01-30 10:36:07 TP0] step {i}" for i in range(WINDOW_ROWS + 1)]
    far = "[2026-01-30 10:37:00 TP2] Load weight end. mem usage=74.18 GB"
    other = "[2026-01-30 10:37:00 TP3] Load weight begin. avail mem=1.00 GB"
    feed(index, folds, [first, near, *gap, far, other])
    rows = shown(index, folds)
    assert near not in rows  # folded into the first
    assert far in rows and other in rows  # too far below it; says something else
    assert folds.members(0) == ["TP1"]


def test_dp_tp_ep_prefixes_and_a_lead_fold_and_keep_every_rank() -> None:
    index = LogIndex()
    folds = Folds(index)
    lines = [
        f"sglang-1  | [2026-01-30 10:36:0{i} DP{i} TP{i} EP{i}] Capture cuda graph begin."
        for i in range(4)
    ]
    feed(index, folds, lines)
    assert len(folds) == 1
    assert folds.members(0) == ["DP1 TP1 EP1", "DP2 TP2 EP2", "DP3 TP3 EP3"]
    assert folded_text(lines[0], folds.members(0)).startswith(
        "sglang-1  | [2026-01-30 10:36:00 DP0 TP0 EP0, DP1 TP1 EP1, DP2 TP2 EP2, DP3 TP3 EP3]"
    )
    assert fold_key('  File "x.py", line 1') is None


def test_a_member_that_a_traceback_follows_comes_back() -> None:
    index = LogIndex()
    folds = Folds(index)
    head = "[2026-01-30 10:37:14 TP0] Scheduler hit an exception: details"
    again = head.replace("TP0", "TP1")
    feed(index, folds, [head, again])
    assert len(folds) == 1  # folded, for now
    feed(index, folds, ["Traceback (most recent call last):", '  File "x.py", line 1'])
    assert shown(index, folds) == [
        head,
        again,
        "Traceback (most recent call last):",
        '  File "x.py", line 1',
    ]
    check_positions(folds, index)


def test_nothing_folds_across_a_divider_and_removed_segments_take_their_folds(
    tmp_path: Path,
) -> None:
    index = LogIndex(max_segments=2, tail_rows=1)  # rows are read back from the files
    folds = Folds(index)
    line = "[2026-01-30 10:36:03 TP{}] Init torch distributed begin."
    a, b, c = (tmp_path / f"{name}.log" for name in "abc")
    feed(index, folds, [line.format(0), line.format(1)], "launch log a.log", a)
    feed(index, folds, [line.format(2)], "launch log b.log", b)
    assert shown(index, folds) == [
        "──── log launch log a.log ────",
        line.format(0),
        "──── log launch log b.log ────",
        line.format(2),
    ]
    check_positions(folds, index)
    feed(index, folds, [line.format(3), line.format(4)], "launch log c.log", c)
    # a.log's segment went (two segments at most): its folded line with it.
    assert folds.folded_lines == 1
    assert shown(index, folds) == [
        "──── log launch log b.log ────",
        line.format(2),
        "──── log launch log c.log ────",
        line.format(3),
    ]
    check_positions(folds, index)
