"""The order in which SGLang starts, read from the audited tree: a trace of its start-up.

A launch that fails after the weight loads costs minutes; one that fails in the argument
checks costs seconds. To say which, the tree's start-up is walked as the server would run it
(`startup/walk.py`): entering a function whose name is one of the start-up's milestones opens a
span: `load_model` is the target's or the draft's load by the role it runs in,
`init_memory_pool` the KV pools, and so on. The names are anchors only: which milestones exist,
in which order, under which role, and what runs inside each, is what the tree says.

The result is a `StartupTrace`: the spans in order and, for every function visited, the order
counter of each call in it, so that any file:line inside the start-up maps to the span it runs
in (or the one it runs just before). It is a tree answer, cached per state of the tree.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

# The launcher whose `__main__` block starts the server (`python -m sglang.launch_server`).
LAUNCHER = "sglang.launch_server"
# Milestones: (name, label, function-name pattern). The first that matches wins; a span opens
# only where no span is open (the outermost milestone names the step).
MILESTONES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("arguments", "argument checks", re.compile(r"^(prepare_server_args|ServerArgs\.\w+|check_server_args)$")),
    ("distributed_init", "distributed init", re.compile(r"^init_(torch_)?distributed")),
    ("load", "weight load", re.compile(r"^load_model$")),
    ("kv_pools", "KV pools", re.compile(r"memory_pool|profile_max_num_token|^init_kv_cache")),
    ("lm_head", "token map / lm head", re.compile(r"embed_and_head|hot_token|token_map|^init_lm_head$")),
    ("attention_backends", "attention backends", re.compile(r"^init_attention_backend")),
    ("cuda_graphs", "CUDA graphs", re.compile(r"^init_(cuda|device)_graphs?$|^init_cuda_graph_state$")),
    ("warmup", "warmup", re.compile(r"^_?(wait_and_)?warmup$|server_warmup")),
    ("serving", "serving", re.compile(r"^event_loop")),
)  # fmt: skip
LABELS = {name: label for name, label, _ in MILESTONES} | {
    "target_load": "target load",
    "draft_load": "draft load",
}


@dataclass(frozen=True)
class Span:
    """One milestone of the start-up, as run: `start`..`end` are order counters."""

    name: str  # arguments | distributed_init | target_load | draft_load | kv_pools | ...
    role: str  # target | draft
    start: int
    end: int
    site: str  # file:line of the call that entered it

    @property
    def label(self) -> str:
        return LABELS.get(self.name, self.name)


@dataclass(frozen=True)
class Visit:
    """One function as run in the start-up: its lines and the counter at each call in it."""

    role: str
    first: int  # the counter when it was entered
    lines: tuple[int, int]  # its def's first and last line
    calls: tuple[tuple[int, int], ...]  # (line, counter) of each call, in order


@dataclass(frozen=True)
class StartupTrace:
    algorithm: str
    spans: tuple[Span, ...]
    visits: dict[str, tuple[Visit, ...]] = field(default_factory=dict)  # file -> its visits
    root: str | None = None  # the launcher's file, None when the tree has none
    # The counter of the first call (or hand-over) of each name: where a function the walk did
    # not enter (inside a milestone, in a file that never touches the model) first runs.
    first_named: dict[str, int] = field(default_factory=dict)  # "role:name" -> counter

    def counter_at(self, file: str, line: int, role: str | None = None) -> int | None:
        """The order counter of a line of the start-up as the walk ran it in `role` (any
        role when None), or None when the walk never ran it so."""
        best: tuple[int, int] | None = None  # (size of the function, counter)
        for visit in self.visits.get(file, ()):
            lo, hi = visit.lines
            if not lo <= line <= hi or role not in (None, visit.role):
                continue
            counter = visit.first
            for call_line, call_counter in visit.calls:
                if call_line > line:
                    break
                counter = call_counter
            rank = (hi - lo, counter)
            if best is None or rank < best:
                best = rank
        return best[1] if best else None

    def named(self, name: str, role: str | None = None) -> int | None:
        """The counter of the first call, mention or hand-over of `name` (in `role`)."""
        return self.first_named.get(f"{role or 'any'}:{name}")


@functools.lru_cache(maxsize=8192)
def milestone(name: str) -> str | None:
    """The milestone a function (`Class.method` or a name) begins, if any."""
    short = name.rpartition(".")[2]
    for milestone, _, pattern in MILESTONES:
        if pattern.search(name) or pattern.search(short):
            return milestone
    return None
