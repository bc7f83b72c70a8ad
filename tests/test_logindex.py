"""The log index: rows by offset, read back from the file exactly as the follower showed them.

The index keeps almost no text (`tail_rows` is tiny here), so every row these tests read comes
back from the file by offset; a search is checked against a plain scan of the follower's
own texts. Files are followed with a real `LogFollower`, as the launch watch does.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from eaglebug.logs.follow import LogFollower, LogLine, LogRestarted
from eaglebug.logs.index import (
    BLOCK_BYTES,
    LogIndex,
    LogPart,
    LogSource,
    Restart,
    divider_text,
    search,
)
from tests.test_logfollow import random_log


def source_of(follower: LogFollower) -> LogSource:
    fd = follower.dup_file()
    assert fd is not None
    return LogSource(fd, follower.path.name)


_SOURCES: dict[int, LogSource] = {}  # each follower's current file, as the watch keeps it


def follow_into(index: LogIndex, follower: LogFollower, label: str | None = None) -> list[LogLine]:
    """Everything the follower reads now, added to the index as the watch adds it: a divider
    with `label` first (the watch starts on a launch's log); a new source for a file that
    appeared or replaced the old one, the same source for one truncated or deleted."""
    lines: list[LogLine] = []
    events = follower.poll()
    while follower.behind:
        events += follower.poll()
    if label is not None:
        _SOURCES[id(follower)] = source_of(follower)
    restart = Restart(label, _SOURCES[id(follower)]) if label is not None else None
    for event in events:
        if isinstance(event, LogLine):
            lines.append(event)
        elif isinstance(event, LogRestarted):
            index.add(LogPart(restart, tuple(lines)))
            if event.reason in {"appeared", "replaced"}:
                _SOURCES[id(follower)] = source_of(follower)
            truncated = event.reason == "truncated"
            lines, restart = [], Restart(event.reason, _SOURCES[id(follower)], truncated)
    index.add(LogPart(restart, tuple(lines)))
    return lines


def found(index: LogIndex, pattern: re.Pattern[str], **kwargs: object) -> list[int]:
    return [row for batch in search(index.view(), pattern, **kwargs) for row in batch]  # type: ignore[arg-type]


SHOWN_DIFFERENTLY = (
    b"[TP0] plain line needle\n"
    b"\x1b[31mERROR\x1b[0m: nee\x1b[1mdle split by colour\n"  # shown as "ERROR: needle split..."
    b"\rLoading needle  10%\rLoading  50%\rLoading 100%\n"  # shown as its last state only
    b"crlf line with needle\r\n"
    b"invalid \xff\xfe utf-8 needle\n"
    + b"long " * 20_000  # 100 KB: shown cut at 64 KiB with a marker
    + b"needle at its end\n"
    + b"after the long line\n"
)


def test_rows_read_back_from_the_file_are_what_the_follower_showed(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    data = random_log(7, 5_000) + SHOWN_DIFFERENTLY
    log.write_bytes(data)
    index = LogIndex(tail_rows=2)
    with LogFollower(log, from_start=True) as follower:
        lines = follow_into(index, follower, "launch log server.log")
    assert len(index) == 1 + len(lines)
    assert index.texts_held == 2
    assert (
        index[0] == divider_text("launch log server.log") == "──── log launch log server.log ────"
    )
    assert list(index) == [index[0]] + [line.text for line in lines]
    assert index[-1] == "after the long line" and index[-3].startswith("Loading 100%") is False
    long_row = next(i for i, text in enumerate(index) if text.startswith("long long"))
    assert index[long_row].endswith(" more bytes not shown]")
    assert index.is_divider(0) and not index.is_divider(1)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[LogIndex, list[str]]:
    """A log of several blocks with the specially shown lines inside one; its rows' texts."""
    log = tmp_path_factory.mktemp("big") / "server.log"
    filler = b"".join(b"[TP1] decode batch %06d\n" % i for i in range(60_000))
    log.write_bytes(filler + SHOWN_DIFFERENTLY + filler)
    assert log.stat().st_size > 2 * BLOCK_BYTES
    index = LogIndex(tail_rows=1)
    with LogFollower(log, from_start=True) as follower:
        follow_into(index, follower, "launch log server.log")
    return index, list(index)


@pytest.mark.parametrize(
    "needle", ["needle", "NEEDLE", "nee", "Loading", "10%", "ERROR: needle", "bytes not", "\ufffd"]
)
def test_a_search_finds_exactly_the_rows_whose_shown_text_matches(
    big: tuple[LogIndex, list[str]], needle: str
) -> None:
    index, texts = big
    pattern = re.compile(re.escape(needle), re.IGNORECASE)
    wanted = [row for row, text in enumerate(texts) if row > 0 and pattern.search(text)]
    assert found(index, pattern) == wanted
    assert found(index, pattern, dividers=True) == [0, *wanted]
    if wanted:
        assert found(index, pattern, start_row=wanted[0] + 1) == wanted[1:]
    assert ("10%" in needle) == (wanted == [])  # an earlier state of a rewritten line: not shown


def test_a_truncated_file_loses_its_earlier_rows_and_a_replaced_one_keeps_them(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"first file line 0\nfirst file line 1\n")
    index = LogIndex(tail_rows=1)
    follower = LogFollower(log, from_start=True)
    follow_into(index, follower, "launch log server.log")
    # Rotation: the old file is moved away and a new one appears; the old rows still read back.
    os.rename(log, tmp_path / "server.log.1")
    log.write_bytes(b"second file line 0\n")
    follow_into(index, follower)
    assert list(index) == [
        "──── log launch log server.log ────",
        "first file line 0",
        "first file line 1",
        "──── log replaced ────",
        "second file line 0",
    ]
    (tmp_path / "server.log.1").unlink()  # gone from the disk, still held open
    assert index[1] == "first file line 0"
    generation = index.generation
    # Truncation: what the file held before is gone, and so are its rows; the rows of the
    # rotated file stay.
    log.write_bytes(b"x\n")
    follow_into(index, follower)
    follower.close()
    assert index.generation == generation + 1
    assert list(index) == [
        "──── log launch log server.log ────",
        "first file line 0",
        "first file line 1",
        "──── log truncated ────",
        "x",
    ]


def test_the_oldest_segments_go_past_the_limit(tmp_path: Path) -> None:
    index = LogIndex(max_segments=3, tail_rows=1)
    for n in range(5):
        path = tmp_path / f"launch-{n}.log"
        path.write_bytes(b"line of launch %d\n" % n)
        with LogFollower(path, from_start=True) as follower:
            follow_into(index, follower, f"launch log {path.name}")
    assert index.generation == 2
    assert list(index) == [
        row
        for n in (2, 3, 4)
        for row in (f"──── log launch log launch-{n}.log ────", f"line of launch {n}")
    ]
    assert index.key(0) == (3, -1)  # serials survive removals


def test_a_closed_source_is_an_error_not_another_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a\nb\n")
    source = LogSource.open(log)
    assert source.line(0, 2) == "a" and source.line(2, None) == "b"
    source.close()
    with pytest.raises(OSError, match="closed"):
        source.read(0, 1)
