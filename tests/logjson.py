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
