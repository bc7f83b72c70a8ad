"""What a tqdm bar line says, read from real launches' bars (`fixtures/logs/bars/`, the corpus)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eaglebug.checks import Bar, bar_line, read_bar

LOGS = Path(__file__).parent / "fixtures" / "logs"
CAPTURE = (LOGS / "bars" / "capture_dp_ep_newlines.log").read_text().splitlines()
GLUED = (LOGS / "bars" / "capture_glued_record.log").read_text().splitlines()
READY = (LOGS / "corpus" / "ready_eagle3_llama31_8b_draft_context_warning.log").read_text()


def test_the_weight_loaders_bar_with_its_rate_in_seconds_per_shard() -> None:
    line = next(t for t in READY.split("\n") if "| 1/4 [" in t)  # `\r` first, as 0.5.9 writes
    bar = read_bar(line)
    assert bar == Bar("", "Loading safetensors checkpoint shards", 1, 4, 25, 4, 4.36, 13)
    assert bar.kind == "loading"
    assert bar.remaining_s == pytest.approx(3 * 4.36)
    assert bar_line(line.lstrip("\r")) == bar


def test_a_capture_bar_from_before_its_description_to_done() -> None:
    bars = [bar_line(t) for t in CAPTURE[2:]]
    assert all(bar is not None for bar in bars)
    first, second, *_, last = [b for b in bars if b is not None]
    assert (first.desc, first.kind, first.done, first.total) == ("", None, 0, 6)
    assert first.remaining_s is None  # `?`: no pace yet
    assert second.desc == "Capturing batches (bs=16 avail_mem=13.56 GB)"
    assert second.kind == "capturing"
    assert (last.done, last.total, last.remaining_s) == (6, 6, 0.0)
    # tqdm's padding after a shorter state is part of the bar's line.
    padded = next(t for t in CAPTURE if t.endswith(" "))
    assert bar_line(padded) is not None


def test_a_bar_glued_to_a_record_is_read_but_is_not_a_bar_line() -> None:
    line = next(t for t in GLUED if "Capturing batches" in t)
    bar = read_bar(line)  # the newest of the two bars on the line
    assert bar is not None and bar.desc == "Capturing batches (bs=1 avail_mem=68.59 GB)"
    assert (bar.done, bar.total, bar.elapsed_s) == (64, 64, 13)
    assert bar_line(line) is None


def test_a_node_tag_in_front_is_kept_apart_from_the_description() -> None:
    line = next(t for t in CAPTURE if "3/6" in t and "bs=8" in t)
    bar = read_bar(f"node1  | {line}")
    assert bar is not None and (bar.tag, bar.kind) == ("node1  | ", "capturing")
    assert bar_line(f"node1  | {line}") == bar


@pytest.mark.parametrize(
    "line",
    [
        "[2026-01-30 10:36:03 TP0] Init torch distributed begin.",
        "Loading: 50% Completed | 1/2 [00:01<00:01, 1.00it/s",  # cut before its end
        "x: 50% Completed | " + "9" * 5000 + "/2 [00:01<00:01, 1.00it/s]",  # 5,000 digits
        "x: 50% Completed | 1/0 [00:01<00:01, 1.00it/s]",  # a total of none
    ],
)
def test_what_is_not_a_bar_is_none_and_never_raises(line: str) -> None:
    assert read_bar(line) is None and bar_line(line) is None
