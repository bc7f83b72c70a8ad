"""Comparing what the fast whole-file scan and line-by-line feeding say of one log."""

from __future__ import annotations

import json
from typing import Any


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    """JSON without positions: the fast path knows byte offsets, line-by-line feeding lines.

    The time of a line without a prefix is the last prefixed line's: the fast path only knows the
    lines it fed, so after more than `CONTEXT_LINES` unprefixed lines it may differ. The lines
    cut for their length are those each path read: the fast path skips a long line it has no
    hit in, where feeding every line reads (and cuts) it.
    """
    data = json.loads(json.dumps(data))
    data.pop("lines_cut", None)
    for f in data["findings"]:
        f["details"].pop("line", None)
        f["details"].pop("offset", None)
        f["details"].pop("time", None)
        for item in f["details"].get("evidence", []):
            item.pop("line", None)
            item.pop("offset", None)
    return data


# The corpus names phases as the threads do; the analyzer's names for them.
CORPUS_PHASE = {"loading_weights": "loading", "distributed_init": "launching", "serving": "ready"}


def strict_misses(case: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """How `diagnose --json` output `got` differs from a corpus case's expected reading, read
    strictly: exactly its findings (no more), each at its severity, its phase and the phase it
    crashed in. Empty: the case reads exactly."""
    want = case["expect"]
    severity = {f["id"]: f["severity"] for f in got["findings"]}
    out = []
    expected = {f: want.get("severity", {}).get(f, "error") for f in want["findings"]}
    if set(severity) != set(expected):
        out.append(f"findings {sorted(severity)} != {sorted(expected)}")
    for finding, level in expected.items():
        if finding in severity and severity[finding] != level and finding != "log.rank_desync":
            out.append(f"{finding} is {severity[finding]}, not {level}")
    if want["phase"] and got["phase"] != CORPUS_PHASE.get(want["phase"], want["phase"]):
        out.append(f"phase {got['phase']} != {want['phase']}")
    crashed = want["crashed_during"]
    if crashed and got["crashed_during"] != CORPUS_PHASE.get(crashed, crashed):
        out.append(f"crashed_during {got['crashed_during']} != {crashed}")
    return out
