"""tqdm progress bars as SGLang prints them: what one says (done of total, its own rate).

Why: a launch spends most of its minutes behind two bars, the weight load and the CUDA graph
capture, and SGLang prints each of them again for every update: with `\\r` and no newline
(tqdm's default, 0.5.23's loaders), or `\\r` and a newline each time (0.5.9's `BAR_FORMAT`), or
one line per update once a terminal, `docker logs` or a pasted issue turned the `\\r` into
newlines. The screen shows such a bar as one row that updates and the time left from the bar's
own rate, so both need to know what a line of a bar says. Shapes (all real, see
`tests/fixtures/logs/bars/README.md`):

    Loading safetensors checkpoint shards:  83% Completed | 53/64 [00:11<00:02,  4.54it/s]
    Capturing batches (bs=16 avail_mem=13.56 GB):  17%|█▋        | 1/6 [00:16<01:22, 16.57s/it]
      0%|          | 0/8 [00:00<?, ?it/s]
    Loading safetensors checkpoint shards:   0% 0/1 [00:00<?, ?it/s]

The first is 0.5.9's `BAR_FORMAT` (srt/utils/common.py), the second tqdm's default
(`{l_bar}{bar}{r_bar}`, cuda_graph_runner.py), the third a bar before its `set_description`,
the fourth a bar whose `|...|` a wrapper left out. A multi-node log merged by eaglebug (or a
compose log) puts a tag in front (`node1  | `): `tag` keeps it, so each node's bar stays its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from eaglebug.checks.contract.numbers import float_text, int_text

BarKind = Literal["loading", "capturing"]

# The part every bar has, from its percentage to its rate; what stands before it (a description
# and `: `, a tag) is read from the text between it and the bar before it. No part of it can
# scan far: a 64 KiB line costs one pass (no description pattern that could start anywhere).
_CORE = (
    r"(?P<pct>\d{1,3})%(?: Completed \| ?|\|[^|\r\n]{0,400}\| ?| )"
    r"(?P<n>\d{1,12})/(?P<total>\d{1,12}) ?"
    r"\[(?P<elapsed>\d{1,6}(?::\d\d){1,2})<(?P<remaining>\d{1,6}(?::\d\d){1,2}|\?), *"
    r"(?P<rate>\?|\d{1,12}(?:\.\d{1,12})?)(?P<unit>it/s|s/it)[^\]\r\n]{0,80}\]"
)
CORE_RX = re.compile(_CORE)
_TAG = r"[\w.@:/-]{1,64} +\| "  # `node1  | `: eaglebug's merge of node logs, docker compose
TAG_RX = re.compile(_TAG)
_LEAD_RX = re.compile(rf"(?P<tag>{_TAG})?(?:(?P<desc>[^\r\n]*): +| *)")
# What every bar line holds: a cheap test before the regex.
RATE_MARKS = ("it/s]", "s/it]")
# Bars a launch's progress is read from: the weight loaders' (weight_utils.py: "Loading
# safetensors checkpoint shards", "Loading pt checkpoint shards", "Multi-thread loading
# shards") and the CUDA graph capture's ("Capturing batches (bs=.. avail_mem=..)").
_LOADING = re.compile(r"[Ll]oading|shards")
_CAPTURING = re.compile(r"^Capturing batches")


@dataclass(frozen=True)
class Bar:
    """One state of a tqdm bar: `done` of `total`, and what tqdm said of its pace."""

    tag: str  # what a merge or compose put in front ("node1  | "), or ""
    desc: str  # "Loading safetensors checkpoint shards", "" before a description is set
    done: int
    total: int
    percent: int
    elapsed_s: int
    seconds_per_item: float | None  # from tqdm's rate (`4.54it/s`, `1.68s/it`); None at `?`
    remaining_field_s: int | None  # tqdm's own `<remaining`; None at `?`

    @property
    def kind(self) -> BarKind | None:
        """Which step of a launch the bar counts: the weight load, the CUDA graph capture."""
        if _CAPTURING.match(self.desc):
            return "capturing"
        if _LOADING.search(self.desc):
            return "loading"
        return None

    @property
    def remaining_s(self) -> float | None:
        """The time left at the bar's own rate (tqdm's remaining field where it has no rate)."""
        if self.done >= self.total:
            return 0.0
        if self.seconds_per_item is not None:
            return (self.total - self.done) * self.seconds_per_item
        return float(self.remaining_field_s) if self.remaining_field_s is not None else None


def read_bar(text: str) -> Bar | None:
    """The newest bar state in a line (the last of several joined by `\\r`), or None."""
    if not any(mark in text for mark in RATE_MARKS):
        return None
    matches = list(CORE_RX.finditer(text))
    if not matches:
        return None
    found = matches[-1]
    lead_from = matches[-2].end() if len(matches) > 1 else 0
    lead = text[lead_from : found.start()].rsplit("\r", 1)[-1]
    desc = lead.rstrip()
    desc = desc[:-1] if desc.endswith(":") else ""  # a description ends in `: `
    tag = TAG_RX.match(desc) or TAG_RX.match(lead)
    if tag is not None:
        desc = desc[tag.end() :] if desc.startswith(tag[0]) else desc
    return _bar(found, tag[0] if tag else "", desc.strip())


def bar_line(text: str) -> Bar | None:
    """The bar a line holds when the line is that bar and nothing else (no log record glued
    to it), with the tag in front of it; None otherwise."""
    if not any(mark in text for mark in RATE_MARKS):
        return None
    found = CORE_RX.search(text)
    if found is None or text[found.end() :].strip():
        return None
    lead = _LEAD_RX.fullmatch(text, 0, found.start())
    if lead is None:
        return None
    return _bar(found, lead["tag"] or "", (lead["desc"] or "").strip())


def _bar(found: re.Match[str], tag: str, desc: str) -> Bar | None:
    done, total = int_text(found["n"], lo=0), int_text(found["total"], lo=1)
    percent = int_text(found["pct"], lo=0, hi=100)
    elapsed = _clock_s(found["elapsed"])
    if done is None or total is None or percent is None or elapsed is None:
        return None
    rate = float_text(found["rate"], lo=0.0) if found["rate"] != "?" else None
    per_item: float | None = None
    if rate:  # 0 or unknown: no pace yet
        per_item = rate if found["unit"] == "s/it" else 1.0 / rate
    remaining = _clock_s(found["remaining"]) if found["remaining"] != "?" else None
    return Bar(tag, desc, done, total, percent, elapsed, per_item, remaining)


def _clock_s(text: str) -> int | None:
    """tqdm's `MM:SS` or `H:MM:SS` in seconds."""
    seconds = 0
    for part in text.split(":"):
        value = int_text(part, lo=0)
        if value is None:
            return None
        seconds = seconds * 60 + value
    return seconds
