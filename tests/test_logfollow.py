"""LogFollower: tail -F semantics, progress bars, cleaning, and bounded memory.

Every test drives the follower with explicit polls after explicit writes: no sleeps, no threads.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eaglebug.logs import follow as logfollow
from eaglebug.logs.follow import (
    CHUNK_BYTES,
    LogEvent,
    LogFollower,
    LogLine,
    LogProgress,
    LogRestarted,
    clean_line,
)


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as out:
        out.write(data)


def texts(events: list[LogEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, LogLine)]


def drain(follower: LogFollower) -> list[LogEvent]:
    """Poll until the follower has caught up."""
    events = follower.poll()
    while follower.behind:
        events += follower.poll()
    return events


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "server.log"


Follow = Callable[..., LogFollower]


@pytest.fixture
def follow() -> Iterator[Follow]:
    """Make followers (LogFollower's arguments) that are closed after the test."""
    made: list[LogFollower] = []

    def make(path: Path, **kwargs: Any) -> LogFollower:
        made.append(LogFollower(path, **kwargs))
        return made[-1]

    yield make
    for follower in made:
        follower.close()


# -- where it starts ------------------------------------------------------------------------


def test_starts_at_the_end_and_old_lines_are_not_emitted(log: Path, follow: Follow) -> None:
    log.write_bytes(b"old 1\nold 2\n")
    follower = follow(log)
    assert follower.poll() == []
    append(log, b"new\n")
    assert follower.poll() == [LogLine("new", 12)]
    assert follower.poll() == []


def test_start_at_end_reads_a_bounded_amount_of_a_large_file(
    log: Path, follow: Follow, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = b"[2026-01-30 10:36:11 TP4] Load weight begin. avail mem=139.12 GB\n"
    log.write_bytes(line * 200_000)
    size = log.stat().st_size
    scanned = 0
    real_pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        nonlocal scanned
        data = real_pread(fd, n, offset)
        scanned += len(data)
        return data

    monkeypatch.setattr(os, "pread", counting_pread)
    follower = follow(log, tail_lines=5)
    assert scanned <= CHUNK_BYTES  # the backwards scan for the last lines
    assert follower.offset == size - 5 * len(line)  # where reading forwards starts
    assert len(follower.poll()) == 5
    assert follower.offset == size


def test_tail_lines_gives_the_last_complete_lines(log: Path, follow: Follow) -> None:
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    assert texts(follow(log, tail_lines=3).poll()) == ["line 97", "line 98", "line 99"]
    assert len(follow(log, tail_lines=500).poll()) == 100


def test_tail_lines_holds_the_unfinished_last_line(log: Path, follow: Follow) -> None:
    log.write_bytes(b"a\nb\nc\nhal")
    follower = follow(log, tail_lines=2)
    assert texts(follower.poll()) == ["b", "c"]
    append(log, b"f\n")
    assert follower.poll() == [LogLine("half", 6)]


def test_tail_scan_is_bounded_and_skips_a_cut_line(log: Path, follow: Follow) -> None:
    log.write_bytes(b"a\n" + b"y" * 1000)  # last line far longer than the scan allows
    follower = follow(log, max_line_bytes=100)
    assert follower.poll() == []
    append(log, b"z\nnext\n")
    assert texts(follower.poll()) == ["next"]


def test_from_start_reads_the_whole_file(log: Path, follow: Follow) -> None:
    log.write_bytes(b"one\ntwo\n")
    assert follow(log, from_start=True).poll() == [
        LogLine("one", 0),
        LogLine("two", 4),
    ]


def test_tail_lines_and_from_start_together_are_refused(log: Path) -> None:
    with pytest.raises(ValueError, match="tail_lines"):
        LogFollower(log, from_start=True, tail_lines=3)


# -- growth --------------------------------------------------------------------------------


def test_appended_lines_come_with_their_byte_offsets(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    append(log, "α\nb\n".encode())
    append(log, b"c\n")
    assert follower.poll() == [LogLine("α", 0), LogLine("b", 3), LogLine("c", 5)]


def test_partial_line_is_completed_across_polls(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    append(log, b"hel")
    assert follower.poll() == []  # no newline yet, no \r: not shown half-written
    assert follower.buffered_bytes == 3
    append(log, b"lo\nwor")
    assert follower.poll() == [LogLine("hello", 0)]
    append(log, b"ld\n")
    assert follower.poll() == [LogLine("world", 6)]
    assert follower.buffered_bytes == 0


def test_utf8_character_split_across_polls_is_decoded_whole(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    encoded = "mem=139 GB · ok\n".encode()
    cut = encoded.index(b"\xc2") + 1
    append(log, encoded[:cut])
    assert follower.poll() == []
    append(log, encoded[cut:])
    assert texts(follower.poll()) == ["mem=139 GB · ok"]


def test_offsets_are_exact_across_chunk_boundaries(log: Path, follow: Follow) -> None:
    lines = [b"\x1b[32mINFO\x1b[0m %d " % i + b"x" * (i % 97) for i in range(20_000)]
    data = b"\n".join(lines) + b"\n"
    assert len(data) > 4 * CHUNK_BYTES
    log.write_bytes(data)
    events = drain(follow(log, from_start=True))
    assert len(events) == len(lines)
    expected_offset = 0
    for event, raw in zip(events, lines, strict=True):
        assert isinstance(event, LogLine)
        assert event.offset == expected_offset
        assert event.text == raw.decode().replace("\x1b[32m", "").replace("\x1b[0m", "")
        expected_offset += len(raw) + 1


def test_poll_reads_at_most_its_budget_and_says_it_is_behind(log: Path, follow: Follow) -> None:
    log.write_bytes((b"z" * 99 + b"\n") * (3 * CHUNK_BYTES // 100))
    follower = follow(log, from_start=True, poll_bytes=CHUNK_BYTES)
    first = follower.poll()
    assert follower.behind
    assert 0 < len(first) <= CHUNK_BYTES // 100
    rest = drain(follower)
    assert not follower.behind
    assert len(first) + len(rest) == 3 * CHUNK_BYTES // 100


# -- the file behind the path changes -------------------------------------------------------------


def test_truncation_restarts_from_zero(log: Path, follow: Follow) -> None:
    log.write_bytes(b"first launch line 1\nfirst launch line 2\n")
    follower = follow(log)
    append(log, b"crash mid-li")
    follower.poll()
    log.write_bytes(b"second\n")  # relaunched into the same file: truncated and rewritten
    assert follower.poll() == [
        LogLine("crash mid-li", 40),  # the old file's unfinished line, as it was left
        LogRestarted("truncated"),
        LogLine("second", 0),
    ]
    append(log, b"more\n")
    assert follower.poll() == [LogLine("more", 7)]


def test_rotation_delivers_the_old_files_rest_first(log: Path, follow: Follow) -> None:
    log.write_bytes(b"before\n")
    follower = follow(log)
    append(log, b"old 1\n")
    rotated = log.with_name("server.log.1")
    os.rename(log, rotated)
    append(rotated, b"old 2\nold unfinished")  # the writer still holds the renamed file
    log.write_bytes(b"new 1\n")
    assert follower.poll() == [
        LogLine("old 1", 7),
        LogLine("old 2", 13),
        LogLine("old unfinished", 19),
        LogRestarted("replaced"),
        LogLine("new 1", 0),
    ]
    append(log, b"new 2\n")
    assert texts(follower.poll()) == ["new 2"]


def test_rotation_drains_the_old_file_over_several_polls_first(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log, poll_bytes=CHUNK_BYTES)
    append(log, (b"o" * 99 + b"\n") * (2 * CHUNK_BYTES // 100))
    os.rename(log, log.with_name("server.log.1"))
    log.write_bytes(b"new\n")
    first = follower.poll()
    assert follower.behind
    assert LogRestarted("replaced") not in first
    events = first + drain(follower)
    assert events[-2:] == [LogRestarted("replaced"), LogLine("new", 0)]
    assert len(texts(events)) == 2 * CHUNK_BYTES // 100 + 1


def test_delete_and_recreate_is_a_replacement(log: Path, follow: Follow) -> None:
    log.write_bytes(b"old\n")
    follower = follow(log)
    log.unlink()
    log.write_bytes(b"fresh\n")
    assert follower.poll() == [LogRestarted("replaced"), LogLine("fresh", 0)]


def test_deleted_then_recreated_with_a_poll_between(log: Path, follow: Follow) -> None:
    log.write_bytes(b"old\n")
    follower = follow(log)
    with log.open("ab") as writer:  # a server still writing into the file it opened
        log.unlink()
        assert follower.poll() == [LogRestarted("deleted")]
        assert follower.poll() == []  # said once
        writer.write(b"late line\n")
        writer.flush()
        assert follower.poll() == [LogLine("late line", 4)]
    log.write_bytes(b"fresh\n")
    assert follower.poll() == [LogRestarted("replaced"), LogLine("fresh", 0)]


def test_missing_file_is_waited_for_then_read_from_its_start(log: Path, follow: Follow) -> None:
    follower = follow(log)  # no exception
    assert follower.poll() == []
    assert follower.poll() == []
    log.write_bytes(b"[2026-01-30 10:36:11] server starting\n")
    assert follower.poll() == [
        LogRestarted("appeared"),
        LogLine("[2026-01-30 10:36:11] server starting", 0),
    ]
    append(log, b"next\n")
    assert texts(follower.poll()) == ["next"]


def test_close_releases_the_file_and_context_manager_closes(log: Path) -> None:
    log.write_bytes(b"x\n")
    with LogFollower(log) as follower:
        assert follower.poll() == []
    follower.close()  # twice is fine


# -- progress bars, colour, encodings ------------------------------------------------------------

BAR = "Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/64 [00:10<00:20]"


def bar(done: int) -> str:
    return BAR.format(pct=done * 100 // 64, done=done)


def test_finished_progress_line_keeps_only_its_latest_state(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    line = "[2026-01-30 10:36:11 TP0] " + "".join("\r" + bar(i) for i in range(65)) + "\n"
    append(log, line.encode())
    assert follower.poll() == [LogLine(bar(64), 0, rewritten=True)]


def test_progress_is_visible_before_its_newline(log: Path, follow: Follow) -> None:
    log.write_bytes(b"begin\n")
    follower = follow(log)
    written = [("\r" + bar(0) + "\r" + bar(27)).encode(), ("\r" + bar(28)).encode()]
    append(log, written[0])
    assert follower.poll() == [LogProgress(bar(27), 6)]
    assert follower.poll() == []  # unchanged: not repeated
    append(log, written[1])
    assert follower.poll() == [LogProgress(bar(28), 6)]
    written.append(("\r" + bar(64) + "\n").encode())
    append(log, written[2] + b"after\n")
    after = 6 + sum(map(len, written))
    assert follower.poll() == [LogLine(bar(64), 6, rewritten=True), LogLine("after", after)]


def test_first_progress_state_with_ansi_is_shown_clean(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    append(log, b"\r\x1b[32m 42%\x1b[0m|####      | 27/64")
    assert follower.poll() == [LogProgress(" 42%|####      | 27/64", 0)]


def test_progress_rewritten_for_long_without_newline_stays_bounded(
    log: Path, follow: Follow
) -> None:
    log.write_bytes(b"")
    follower = follow(log, max_line_bytes=1024)
    for step in range(2_000):  # ~170 KB of states, never a newline
        append(log, f"\r{step:5d} tokens/s | {bar(step % 65)}".encode())
        if step % 100 == 0:
            follower.poll()
            assert follower.buffered_bytes <= 300
    events = follower.poll()
    assert events == [LogProgress(f" 1999 tokens/s | {bar(1999 % 65)}", 0)]
    append(log, b"\n")
    assert follower.poll() == [LogLine(f" 1999 tokens/s | {bar(1999 % 65)}", 0, rewritten=True)]


def test_cleared_progress_bar_gives_the_text_written_after_it(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    append(log, ("\r" + bar(32) + "\r" + " " * 40 + "\r").encode())  # tqdm leave=False
    assert follower.poll() == [LogProgress(bar(32), 0)]
    append(log, b"Capture cuda graph end.\n")
    assert follower.poll() == [LogLine("Capture cuda graph end.", 0, rewritten=True)]


def test_crlf_endings_are_not_progress_rewrites(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    append(log, b"one\r\ntwo\r\nthr")
    assert follower.poll() == [LogLine("one", 0), LogLine("two", 5)]
    append(log, b"ee\r")  # the first half of \r\n: not a progress state
    assert follower.poll() == []
    append(log, b"\n\r10%\r20%\r\n")
    assert follower.poll() == [LogLine("three", 10), LogLine("20%", 17, rewritten=True)]


def test_ansi_colour_is_stripped(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    append(
        log,
        b"[2026-01-30 10:36:11] \x1b[32mINFO\x1b[0m:     127.0.0.1:53412 - ok\n"
        b"\x1b[1;31mERROR\x1b[m \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[2Kdone\n",
    )
    assert texts(follower.poll()) == [
        "[2026-01-30 10:36:11] INFO:     127.0.0.1:53412 - ok",
        "ERROR link done",
    ]


def test_invalid_utf8_is_replaced(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    append(log, b"weight name: \xff\xfe\xc3(\nnext\n")
    assert texts(follower.poll()) == ["weight name: \ufffd\ufffd\ufffd(", "next"]


def test_clean_line_matches_the_follower() -> None:
    assert clean_line(b"\x1b[33mWARN\x1b[0m x\r") == ("WARN x", False)
    assert clean_line(b"\r 1%\r 2%\r") == (" 2%", True)
    assert clean_line(b"\xff") == ("\ufffd", False)


# -- very long lines and memory --------------------------------------------------------------------


def test_five_megabyte_line_is_truncated_and_memory_stays_bounded(
    log: Path, follow: Follow
) -> None:
    log.write_bytes(b"")
    follower = follow(log)
    limit = logfollow.DEFAULT_MAX_LINE_BYTES
    total = 5 * 1024 * 1024
    append(log, b"[TP0] server_args=")
    piece = b"x" * (100 * 1024)
    written = len(b"[TP0] server_args=")
    while written < total:
        append(log, piece)
        written += len(piece)
        assert follower.poll() == []
        assert follower.buffered_bytes <= limit
    append(log, b"\nnext\n")
    events = follower.poll()
    assert len(events) == 2
    line = events[0]
    assert isinstance(line, LogLine)
    assert line.truncated
    assert line.offset == 0
    assert line.text.startswith("[TP0] server_args=xxx")
    assert line.text.endswith(f" … [{written - limit} more bytes not shown]")
    assert len(line.text) < limit + 100
    assert events[1] == LogLine("next", written + 1)
    assert follower.buffered_bytes == 0


def test_five_megabyte_line_in_one_write_is_read_in_bounded_memory(
    log: Path, follow: Follow
) -> None:
    size = 5 * 1024 * 1024
    log.write_bytes(b"")
    follower = follow(log)
    append(log, b"y" * size + b"\nafter\n")
    tracemalloc.start()
    try:
        events = drain(follower)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [type(e) for e in events] == [LogLine, LogLine]
    assert isinstance(events[0], LogLine) and events[0].truncated
    assert events[1] == LogLine("after", size + 1)
    assert follower.buffered_bytes == 0
    assert peak < 4 * CHUNK_BYTES  # a chunk, a line's worth, and their copies; never 5 MB


def test_long_line_inside_one_chunk_is_truncated(log: Path, follow: Follow) -> None:
    log.write_bytes(b"")
    follower = follow(log, max_line_bytes=10)
    append(log, b"short\n" + b"z" * 25 + b"\nend\n")
    events = follower.poll()
    assert events == [
        LogLine("short", 0),
        LogLine("z" * 10 + " … [15 more bytes not shown]", 6, truncated=True),
        LogLine("end", 32),
    ]


# -- the fast path and the careful path agree ------------------------------------------------------

PIECES = [
    b"[2026-01-30 10:36:11 TP3] Load weight begin. avail mem=139.12 GB",
    b"\x1b[32mINFO\x1b[0m",
    b"\x1b]8;;http://x\x07",
    b"\r 42% Completed | 27/64",
    b"\r",
    b"\r\x1b[2K",
    b"   ",
    "mémoire · 显存".encode(),
    b"\xff\xfe",
    b"\xe6\x98",  # a character cut short
    b"x",
]


def random_log(seed: int, lines: int) -> bytes:
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        line = b"".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 6)))
        out.append(line + rng.choice([b"\n", b"\n", b"\r\n"]))
    return b"".join(out)


def expected_lines(data: bytes) -> list[LogLine]:
    """What a follower must return, line by line, from the whole file at once."""
    expected, offset = [], 0
    for raw in data.split(b"\n")[:-1]:
        text, rewritten = clean_line(raw)
        expected.append(LogLine(text, offset, rewritten))
        offset += len(raw) + 1
    return expected


@pytest.mark.parametrize("seed", range(6))
def test_any_split_of_the_writes_gives_the_same_lines(log: Path, follow: Follow, seed: int) -> None:
    import random

    data = random_log(seed, 3_000)
    rng = random.Random(seed)
    log.write_bytes(b"")
    follower = follow(log)
    got: list[LogEvent] = []
    at = 0
    while at < len(data):
        step = rng.choice([1, 2, 3, 7, 64, 1000, CHUNK_BYTES + 5])
        append(log, data[at : at + step])
        at += step
        got += drain(follower)
        assert follower.buffered_bytes <= logfollow.DEFAULT_MAX_LINE_BYTES
    assert [e for e in got if isinstance(e, LogLine)] == expected_lines(data)
    progress = [e for e in got if isinstance(e, LogProgress)]
    assert all("\r" not in p.text and "\x1b" not in p.text for p in progress)


def test_whole_file_at_once_gives_the_same_lines(log: Path, follow: Follow) -> None:
    data = random_log(99, 20_000)
    log.write_bytes(data)
    events = drain(follow(log, from_start=True))
    assert events == expected_lines(data)
