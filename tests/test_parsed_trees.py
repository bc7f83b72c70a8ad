"""Syntax trees kept across the indexes of one process (`eaglebug/checks/source/trees.py`), as the TUI's
session keeps them between its checks: a second index of the same tree takes the trees of the
files that did not change, parses the one a fix changed, and answers as a fresh index does."""

from __future__ import annotations

import ast
from pathlib import Path

from pytest import MonkeyPatch

from eaglebug.checks import ParsedTrees, TreeIndex, audit, locate
from eaglebug.checks.source.facts import Parsed
from eaglebug.demo import DemoScenario
from eaglebug.session.checking import HereChecks
from eaglebug.tui.demo import demo_session
from tests.live import hermetic_demo_env
from tests.test_mempools import copy_tree, edit

KIMI = "KimiK25ForConditionalGeneration"
CAPTURE = "set_eagle3_layers_to_capture"


def errors(index: TreeIndex) -> tuple[set[str], list[dict[str, object]]]:
    result = audit(index, KIMI)
    found = {f.attribute or "" for f in result.findings if f.severity == "error"}
    return found, [f.to_json() for f in result.findings]


def test_a_second_index_takes_the_unchanged_trees_and_parses_the_changed_file(
    sglang_0523: Path, tmp_path: Path
) -> None:
    root = copy_tree(sglang_0523, tmp_path / "tree")
    shared = ParsedTrees()
    first, _ = errors(TreeIndex(locate(str(root)), use_cache=False, shared=shared))
    assert CAPTURE not in first  # 0.5.23's Kimi-K2.5 delegates it
    assert len(shared) > 50 and shared.hits == 0
    # What a fix (or a user's edit) does between two checks: one file changes.
    model = root / "sglang" / "srt" / "models" / "kimi_k25.py"
    edit(model, f"    def {CAPTURE}(", f"    def {CAPTURE}_before(")
    second, said = errors(TreeIndex(locate(str(root)), use_cache=False, shared=shared))
    assert shared.hits > 50  # the files that did not change were not parsed again
    assert CAPTURE in second  # the changed file was: its method is gone
    alone, fresh = errors(TreeIndex(locate(str(root)), use_cache=False))
    assert said == fresh and second == alone


def tree(size: int) -> Parsed:
    return Parsed(ast.parse("x = 1"), "x" * size)


def test_the_kept_trees_are_bounded_oldest_use_first_out() -> None:
    shared = ParsedTrees(limit_bytes=100)
    for key in ("a", "b", "c"):
        shared.put(key, tree(40), 40)
    assert len(shared) == 2 and shared.get("a") is None  # 120 bytes: the oldest went
    assert shared.get("b") is not None  # used: now the newest
    shared.put("d", tree(40), 40)
    assert shared.get("c") is None and shared.get("b") is not None
    shared.put("big", tree(500), 500)  # over the limit alone: kept, the rest let go
    assert len(shared) == 1 and shared.get("big") is not None


def test_a_shed_index_keeps_its_class_facts_and_no_trees(sglang_0523: Path) -> None:
    """What the session keeps of its last check: class names answer, the trees live on in
    the shared set only, and the evaluator's tables over them are gone."""
    shared = ParsedTrees()
    index = TreeIndex(locate(str(sglang_0523)), use_cache=False, shared=shared)
    found, _ = errors(index)
    parsed = [rel for rel in index.files.entries if index.files.peek(rel) is not None]
    absent = object()
    assert parsed and index.kept("pyeval.source", lambda: absent) is not absent  # made by it
    index.shed()
    assert all(index.files.peek(rel) is None for rel in parsed)
    fresh = object()
    assert index.kept("pyeval.source", lambda: fresh) is fresh  # the old tables went
    assert [r.qualname for r in index.classes_named(KIMI)] == [
        "sglang.srt.models.kimi_k25.KimiK25ForConditionalGeneration"
    ]
    again, _ = errors(index)  # still a working index: it parses again what it needs
    assert again == found


def test_the_session_keeps_its_last_index_shed(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    """After a check the session holds the trees once (its shared set), not also in the index
    it keeps for class names."""
    hermetic_demo_env(monkeypatch)
    session = demo_session(DemoScenario.prepare(tmp_path / "demo"))
    assert session.run_checks().error is None
    assert isinstance(session.checks, HereChecks)
    kept = session.checks.index
    assert kept is not None and len(session.checks.parsed_trees()) > 0
    assert all(kept.files.peek(rel) is None for rel in kept.files.entries)
