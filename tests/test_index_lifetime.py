"""An index and everything learnt from it go when its user drops it.

Why: the TUI re-checks on every edit and a session lives for hours; a per-index cache held in a
module-level map whose values point back at the index (a weak map's value keeps its own key
alive) kept every index of a session, its syntax trees and the evaluator's tables: gigabytes
in the test suite, which runs the checks thousands of times in one process.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from eaglebug.checks.interface.audit import audit
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate

MINI = Path(__file__).resolve().parent.parent / "examples" / "sglang-mini"
LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", str(MINI / "model"),
          "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
          str(MINI / "draft"), "--tp", "8"]  # fmt: skip


def test_an_index_is_freed_after_audit_and_preflight() -> None:
    # What the worker held before the test is left out of the collection below: a module-level
    # map made earlier that kept the index would still keep it (its reference counts), and the
    # collection visits the test's own objects only, not every release other tests parsed.
    gc.freeze()
    try:
        freed_after_checks()
    finally:
        gc.unfreeze()


def freed_after_checks() -> None:
    index = TreeIndex(locate(str(MINI / "python")), use_cache=False)
    result = audit(index, "KimiK25ForConditionalGeneration")
    assert any(r.findings for r in result.reports)  # the audit did its work on this index
    assert preflight(index, LAUNCH, {}, None).findings
    assert Source.of(index) is Source.of(index)  # one evaluator table per index, kept by it
    dropped = weakref.ref(index)
    del index, result
    gc.collect()
    assert dropped() is None, [type(r).__name__ for r in gc.get_referrers(dropped())][:8]
