"""SGLang's own memory lines in a launch log: what the first launch measured.

SGLang logs, per rank: `Load weight begin. avail mem=X GB` (free memory before each model's
load; the first is the figure its KV budget starts from), `Load weight end. ... avail mem=X GB,
mem usage=Y GB` (target first, then the draft), `KV Cache is allocated. [dtype: ..., ]#tokens:
N, K size: ...` (`KV size:` for MLA; 0.5.23 names the cache first), `Memory pool end. avail mem=X GB`, `Capture [draft] cuda graph end. ...
mem usage=Y GB`, and the scheduler's `max_total_num_tokens=N, ..., max_running_requests=M`
(model_runner.py, memory_pool.py, cuda_graph_runner.py, scheduler.py in 0.5.9 and 0.5.23).
These are the measured overheads preflight uses in place of its estimates on the next check
of the same launch, and what `diagnose` and the TUI show beside the prediction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from eaglebug.checks.contract import codec
from eaglebug.checks.contract.numbers import float_text, float_value, int_text, int_value

# A number as SGLang prints one (`%.2f`); what it says is read by `contract.numbers`, so a
# 5,000-digit figure in a hostile log is no number rather than an exception.
_NUM = r"(-?\d+(?:\.\d+)?)"
_BEGIN = re.compile(rf"Load weight begin\. avail mem={_NUM} GB")
_END = re.compile(rf"Load weight end\..*?avail mem={_NUM} GB(?:, mem usage={_NUM} GB)?")
_TYPE = re.compile(r"type=(\w+)")
_KV = re.compile(
    rf"is allocated\..*?#tokens: (\d+), (?:K size: {_NUM} GB, V size: {_NUM} GB"
    rf"|KV size: {_NUM} GB)"
)
_POOL_END = re.compile(rf"Memory pool end\. avail mem={_NUM} GB")
_GRAPH = re.compile(rf"Capture (?:\w+ )?cuda graph end\..*?mem usage={_NUM} GB")
_TOTAL = re.compile(r"max_total_num_tokens=(\d+)")
_REQUESTS = re.compile(r"max_running_requests=(\d+)")
MAX_GIB = 1024.0**2  # a petabyte: more than any GPU holds


@dataclass(frozen=True)
class Overheads:
    """What the first launch measured (SGLang's own log lines), keyed by the launch."""

    free_before_load_gib: float | None = None  # "Load weight begin. avail mem="
    target_weights_gib: float | None = None  # "Load weight end ... mem usage="
    draft_weights_gib: float | None = None
    graph_gib: float | None = None  # "Capture cuda graph end ... mem usage=" (all captures)


@dataclass
class RankMemory:
    """One rank's memory lines, in the order it logged them."""

    begins: list[float] = field(default_factory=list)  # GB free before each model's load
    loads: list[tuple[str | None, float | None]] = field(default_factory=list)  # (type, usage)
    kv: list[tuple[int, float]] = field(default_factory=list)  # (#tokens, GB) per pool
    pool_end: list[float] = field(default_factory=list)
    graphs: list[float] = field(default_factory=list)  # GB per capture (target, draft)


@dataclass(frozen=True)
class MemoryLog:
    """What the launch measured (the rank with the least free memory before the load)."""

    rank: str
    free_before_load_gib: float | None
    target_weights_gib: float | None
    draft_weights_gib: float | None
    kv_tokens: int | None
    kv_gib: float | None  # the target's pool
    graph_gib: float | None
    max_total_num_tokens: int | None
    max_running_requests: int | None

    def overheads(self) -> Overheads:
        return Overheads(
            free_before_load_gib=self.free_before_load_gib,
            target_weights_gib=self.target_weights_gib,
            draft_weights_gib=self.draft_weights_gib,
            graph_gib=self.graph_gib,
        )

    def to_record(self) -> dict[str, float]:
        """The measured figures for the state file (the ones the log printed)."""
        return {
            key: float(value)
            for key, value in self.to_json().items()
            if key != "rank" and isinstance(value, (int, float))
        }

    @classmethod
    def from_record(cls, figures: Mapping[str, float]) -> MemoryLog:
        """The figures `to_record` kept (counts come back whole)."""

        def gib(key: str) -> float | None:
            return float_value(figures.get(key), lo=0, hi=MAX_GIB)

        def count(key: str) -> int | None:
            return int_value(figures.get(key), lo=0)

        return cls(
            rank="",
            free_before_load_gib=gib("free_before_load_gib"),
            target_weights_gib=gib("target_weights_gib"),
            draft_weights_gib=gib("draft_weights_gib"),
            kv_tokens=count("kv_tokens"),
            kv_gib=gib("kv_gib"),
            graph_gib=gib("graph_gib"),
            max_total_num_tokens=count("max_total_num_tokens"),
            max_running_requests=count("max_running_requests"),
        )

    def to_json(self) -> dict[str, object]:
        return codec.named(self)


def _usage(value: str | None) -> float | None:
    """A load's `mem usage`; a negative one (another process freed memory meanwhile, as on a
    busy CI GPU) measures nothing."""
    if value is None:
        return None
    usage = _gib(value)
    return usage if usage is not None and usage >= 0 else None


def _gib(text: str | None) -> float | None:
    """A GB figure of a memory line (a 5,000-digit one, or one past a petabyte, is none)."""
    return float_text(text, hi=MAX_GIB) if text is not None else None


def _count(text: str | None) -> int | None:
    return int_text(text, lo=0) if text is not None else None


class MemoryLines:
    """SGLang's memory lines as a launch logs them, rank by rank; `LogAnalyzer` feeds it the
    prefixed messages its scan selects before the server is ready (the memory lines belong to
    the launch), so no second pass over the log reads them."""

    def __init__(self) -> None:
        self._ranks: dict[str, RankMemory] = {}
        self._total: int | None = None
        self._requests: int | None = None

    def feed(self, rank: str, body: str) -> None:
        """One message (the text after SGLang's prefix) of `rank` ("" when it names none)."""
        if m := _BEGIN.search(body):
            if (free := _gib(m.group(1))) is not None:
                self._rank(rank).begins.append(free)
        elif m := _END.search(body):
            kind = _TYPE.search(body)
            self._rank(rank).loads.append((kind.group(1) if kind else None, _usage(m.group(2))))
        elif m := _KV.search(body):
            tokens = _count(m.group(1))
            size = _kv_gib(m)
            if tokens is not None and size is not None:
                self._rank(rank).kv.append((tokens, size))
        elif m := _POOL_END.search(body):
            if (free := _gib(m.group(1))) is not None:
                self._rank(rank).pool_end.append(free)
        elif (m := _GRAPH.search(body)) and (used := _gib(m.group(1))) is not None:
            self._rank(rank).graphs.append(used)
        if m := _TOTAL.search(body):
            self._total = _count(m.group(1))
            more = _REQUESTS.search(body)
            self._requests = _count(more.group(1)) if more else self._requests

    def _rank(self, rank: str) -> RankMemory:
        return self._ranks.setdefault(rank, RankMemory())

    def result(self) -> MemoryLog | None:
        """What the launch measured (None when it logged no memory line)."""
        total, requests = self._total, self._requests
        measured = {rank: r for rank, r in self._ranks.items() if r.begins or r.loads or r.kv}
        if not measured and total is None:
            return None
        if not measured:
            return MemoryLog("", None, None, None, None, None, None, total, requests)
        rank, seen = min(measured.items(), key=lambda item: item[1].begins[:1] or [float("inf")])
        usages = [usage for _, usage in seen.loads]
        # The pool is one size on every rank (SGLang sizes it on the least free memory across
        # them): where the reference rank's KV line is missing, another rank's stands.
        kv = seen.kv or next((r.kv for _, r in sorted(measured.items()) if r.kv), [])
        return MemoryLog(
            rank=rank,
            free_before_load_gib=seen.begins[0] if seen.begins else None,
            target_weights_gib=usages[0] if usages else None,
            draft_weights_gib=usages[1] if len(usages) > 1 else None,
            kv_tokens=kv[0][0] if kv else None,
            kv_gib=kv[0][1] if kv else None,
            graph_gib=sum(seen.graphs) if seen.graphs else None,
            max_total_num_tokens=total,
            max_running_requests=requests,
        )


def _kv_gib(m: re.Match[str]) -> float | None:
    if m.group(2) is not None:
        k, v = _gib(m.group(2)), _gib(m.group(3))
        return k + v if k is not None and v is not None else None
    return _gib(m.group(4))
