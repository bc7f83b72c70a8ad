"""Folding without any UI: which lines fold (a rank's copy, a progress bar's update, eaglebug's
own polls), into which row, what that row shows, and positions both ways.

Lines go into a real `LogIndex` and its `Folds` as the log panel adds them (a part at a time,
straight after the index took it); the 8-rank crash log is a fixture of what SGLang prints, the
bars are real launches' (`fixtures/logs/bars/`, the corpus), read through a real `LogFollower`
where the file holds `\r`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eaglebug.logs.fold import WINDOW_ROWS, Folds, fold_key, folded_text, polled_paths
from eaglebug.logs.follow import LogFollower, LogLine
from eaglebug.logs.index import LogIndex, LogPart, LogSource, Restart, display

LOGS = Path(__file__).parent / "fixtures" / "logs"
CRASH_LOG = LOGS / "missing_method_8ranks.log"
BARS = LOGS / "bars"
# A docs-CI notebook's launch (each shard update is `\r` + a line + `\n`): see its `.json`.
READY_LOG = LOGS / "corpus" / "ready_eagle3_llama31_8b_draft_context_warning.log"


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
    row is itself, the row it folded into (a rank's copy: within the window below it; a bar's
    update: up to the newest the row shows) or, for a folded poll, the next row on show."""
    for y in range(len(folds)):
        assert folds.position(folds[y]) == y
    for row in range(len(index)):
        at = folds.position(row)
        head = folds[at]
        if head > row:  # a folded poll: nothing on show between it and that row
            assert all(folds.position(r) == at for r in range(row, head + 1))
        else:
            assert row in range(head, max(head + WINDOW_ROWS, folds.shows(head)) + 1)


def followed(path: Path) -> list[str]:
    """The lines of a log file as the launch watch hands them over (`\r` resolved)."""
    with LogFollower(path, from_start=True) as follower:
        return [event.text for event in follower.poll() if isinstance(event, LogLine)]


def on_show(index: LogIndex, folds: Folds) -> list[str]:
    """What each row on show says: a bar's row, its newest update."""
    return [index[folds.shows(folds[y])] for y in range(len(folds))]


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
    # The shard bar's 65 states (0/64 to 64/64, one line each) are its first line's row,
    # which shows the newest.
    bars = [t for t in on_show(index, folds) if "checkpoint shards" in t]
    assert bars == [
        "Loading safetensors checkpoint shards: 100% Completed | 64/64 [00:59<01:10, 1.74s/it]"
    ]
    # Eight milestones (distributed init begin and end, weights begin and end, the KV cache's
    # dtype and allocation, the memory pool, graph capture), seven copies each; 64 bar updates.
    assert folds.folded_lines == 8 * 7 + 64
    assert len(folds) == len(index) - 8 * 7 - 64
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
        "sglang-1  | [2026-01-30 10:36:00 DP0 TP0 EP0 … DP3 TP3 EP3]"  # each part counts up
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


def test_a_bar_printed_with_a_carriage_return_and_a_newline_each_time_is_one_row() -> None:
    texts = followed(READY_LOG)
    index = LogIndex()
    folds = Folds(index)
    feed(index, folds, texts)
    rows = on_show(index, folds)
    loads = [t for t in rows if "checkpoint shards" in t]
    # The target's bar (0/4 .. 4/4 and tqdm's closing repeat) and the draft's (0/1, 1/1, 1/1).
    assert loads == [
        "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:13<00:00,  3.31s/it]",
        "Loading pt checkpoint shards: 100% Completed | 1/1 [00:00<00:00,  1.88it/s]",
    ]
    assert folds.folded_lines == 5 + 2
    # Where the bar stood: after the line before its first state, before the next record.
    at = rows.index(loads[0])
    assert "Using model weights format" in rows[at - 1] and rows[at + 1] == ""
    # Unfolded (f), every state is there again, in order.
    assert sum("checkpoint shards" in t for t in index) == 6 + 3
    check_positions(folds, index)


def test_a_capture_bar_one_line_per_update_is_one_row_from_before_its_description() -> None:
    texts = followed(BARS / "capture_dp_ep_newlines.log")
    index = LogIndex()
    folds = Folds(index)
    for text in texts:  # a line per snapshot, as a slow capture arrives
        feed(index, folds, [text])
    rows = on_show(index, folds)
    assert rows == [
        texts[0],  # Capture cuda graph begin
        "",
        "Capturing batches (bs=1 avail_mem=10.17 GB): 100%|██████████| 6/6 [00:59<00:00,  9.85s/it]",
    ]
    assert index[folds[2]] == "  0%|          | 0/6 [00:00<?, ?it/s]"  # the row is its first line
    check_positions(folds, index)


def test_the_same_bar_again_from_zero_is_a_new_row() -> None:
    """The draft's graphs over the same batch sizes as the target's: two bars, two rows."""
    texts = followed(BARS / "capture_dp_ep_newlines.log")[2:]
    index = LogIndex()
    folds = Folds(index)
    feed(index, folds, texts + texts)
    assert len(folds) == 2
    assert on_show(index, folds) == [texts[-1], texts[-1]]


@pytest.mark.parametrize("lag", [1, 2, 5])
def test_two_bars_interleaved_without_a_tag_keep_a_row_or_so_each(lag: int) -> None:
    """Two pipeline stages' capture bars in one log, `lag` updates apart: nothing tells their
    lines apart (tqdm prints no rank), so a line goes to the bar furthest along that it does
    not go back from; each bar keeps a row (one more at most where they cross), never a row
    per update."""
    bar = followed(BARS / "capture_dp_ep_newlines.log")[2:]
    lines = bar[:lag] + [x for pair in zip(bar[lag:], bar, strict=False) for x in pair]
    lines += bar[len(bar) - lag :]
    index = LogIndex()
    folds = Folds(index)
    feed(index, folds, lines)
    assert len(index) == 2 * len(bar)
    assert 2 <= len(folds) <= 3
    check_positions(folds, index)


def test_a_bar_glued_to_a_log_record_stays_a_line_of_its_own() -> None:
    texts = followed(BARS / "capture_glued_record.log")
    index = LogIndex()
    folds = Folds(index)
    feed(index, folds, texts)
    assert on_show(index, folds) == texts


def test_each_node_of_a_merged_log_keeps_its_own_bar() -> None:
    """Two nodes' loads interleaved as `eaglebug watch --log a --log b` merges them."""
    states = [t for t in followed(READY_LOG) if "safetensors checkpoint shards" in t]
    merged = [f"node{n}  | {state}" for state in states for n in (0, 1)]
    index = LogIndex()
    folds = Folds(index)
    feed(index, folds, merged)
    assert on_show(index, folds) == [f"node0  | {states[-1]}", f"node1  | {states[-1]}"]
    check_positions(folds, index)


# An access line as SGLang's uvicorn logs a request (https://github.com/sgl-project/sglang/pull/6555),
# and the same for the route eaglebug's acceptance watch asks first.
METRICS = '[2025-07-11 17:40:04] INFO:     100.125.183.82:43204 - "GET /metrics HTTP/1.1" 200 OK'
INFO = METRICS.replace("/metrics", "/server_info")
DECODE = (
    "[2025-07-11 17:40:0{} DP0 TP0] Decode batch. #running-req: 1, #token: 64, token usage: "
    "0.00, accept len: 1.00, gen throughput (token/s): 40.00, #queue-req: 0, "
)


def test_eaglebugs_polls_fold_into_the_newest_which_counts_them() -> None:
    assert {"/server_info", "/metrics"} <= polled_paths()
    index = LogIndex()
    folds = Folds(index)
    models = METRICS.replace("/metrics", "/v1/models")  # someone else's request: kept
    feed(index, folds, [INFO, DECODE.format(1), METRICS, DECODE.format(2)])
    feed(index, folds, [models, INFO.replace("200 OK", "404 Not Found")])
    rows = [folds[y] for y in range(len(folds))]
    assert [index[row] for row in rows] == [
        DECODE.format(1),
        DECODE.format(2),
        models,
        INFO.replace("200 OK", "404 Not Found"),
    ]
    assert [folds.polls(row) for row in rows] == [
        None,
        None,
        None,
        (3, ("/server_info", "/metrics")),
    ]
    assert folds.folded_lines == 2
    for row in range(len(index)):  # a folded poll stands where the next row on show is
        assert folds.position(row) == sum(1 for shown_row in rows if shown_row < row)
    # The next poll takes the count over; the row that had it is a folded poll now.
    feed(index, folds, [DECODE.format(3), INFO])
    assert folds.polls(rows[-1]) is None
    assert folds.polls(folds[len(folds) - 1]) == (4, ("/server_info", "/metrics"))
    check_positions(folds, index)
