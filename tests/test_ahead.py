"""Work started ahead in helper processes (`checks/source/ahead.py`): the run takes over exactly
what it would have computed itself, keeps what the helpers learnt, and leaves no helper behind.

Why: a cold preflight forks the start-up walk and the memory stage off while it audits. A
helper's answer, warnings, facts or looked-into files that did not come back would give a
different report, a cache that misses next time, or a fingerprint that misses an edit."""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.launch.devices import GpuMemory
from eaglebug.checks.orchestrator import PreflightResult, preflight
from eaglebug.checks.source.ahead import Handed, Pending
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.session.forkmap import in_background
from tests.configs import write_model
from tests.memconfigs import (
    KIMI_K25_BYTES,
    KIMI_K25_EAGLE3_BYTES,
    kimi_k25_config,
    kimi_k25_eagle3_config,
)

GIB = 1 << 30
H200 = GpuMemory(143771 << 20, "--gpu-mem-gib", int(139.5 * GIB), "--gpu-free-gib")


class Recorded:
    """The CLI's background (`in_background`), remembering what it started."""

    def __init__(self) -> None:
        self.started: list[Pending[Any]] = []

    def __call__(self, compute: Callable[[], Any]) -> Pending[Any]:
        pending = in_background(compute)
        self.started.append(pending)
        return pending


def _launch(tmp_path: Path) -> list[str]:
    target = write_model(tmp_path / "target", kimi_k25_config(), total_size=KIMI_K25_BYTES)
    draft = write_model(
        tmp_path / "draft", kimi_k25_eagle3_config(), total_size=KIMI_K25_EAGLE3_BYTES
    )
    return ["python", "-m", "sglang.launch_server", "--model-path", str(target),
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
            "--tp", "8", "--trust-remote-code"]  # fmt: skip


def _learnt(index: TreeIndex) -> dict[str, tuple[Any, ...]]:
    """What the index knows of each file it learnt something of."""
    return {
        rel: (e.parsed, e.error, sorted(e.learnt), sorted(e.kept), e.facts_json)
        for rel, e in index.files.entries.items()
        if e.parsed or e.kept
    }


def test_a_preflight_with_helpers_is_the_preflight_without(
    sglang_0523: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cores: Callable[[int], None],
) -> None:
    """The seed launch on 0.5.23, cold, with the memory stage and the start-up walk made in
    helpers, against the same run done all here: the same findings and warnings, the same
    answers, facts and looked-into files; and the answers and facts are saved, so the next run
    reads them."""
    assert threading.active_count() == 1, "another test left a thread running: no fork here"
    cores(4)  # a core for each analysis made ahead, and one for the maps they start
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    words = _launch(tmp_path)
    tree = locate(str(sglang_0523))
    here = TreeIndex(tree, use_cache=False)
    alone: PreflightResult = preflight(here, words, {}, H200)

    background = Recorded()
    helped_index = TreeIndex(tree, use_cache=True, background=background)
    helped = preflight(helped_index, words, {}, H200)
    helped_index.close()

    handed = [p() for p in background.started]
    assert handed and all(isinstance(h, Handed) for h in handed)
    assert all(h.pid != os.getpid() for h in handed), "a helper made each, not this process"
    assert any(h.answers for h in handed) and any(h.entries for h in handed)
    assert helped.findings == alone.findings
    assert helped.warnings == alone.warnings and helped_index.warnings == here.warnings
    assert any(f.id == "config.memory" for f in helped.findings)
    assert helped_index.files.looked == here.files.looked
    assert _learnt(helped_index) == _learnt(here)
    keys = set(helped_index.answers.keys(""))
    assert keys == set(here.answers.keys("")) and "startup:EAGLE3" in keys

    again = TreeIndex(tree, use_cache=True)  # what was saved: every answer, every fact
    assert again.answers.quick and set(again.answers.keys("")) == keys
    again.files.entries  # noqa: B018  (the walk, with each file's facts from the store)
    assert _learnt(again) == _learnt(here)


def _blocks_in_the_helper(told: int) -> Callable[[], int]:
    parent = os.getpid()

    def compute() -> int:
        if os.getpid() != parent:
            os.write(told, os.getpid().to_bytes(4, "little"))
            select.select([], [], [])  # never returns: only a kill ends it
        return 0

    return compute


def test_work_no_one_asked_for_is_killed_and_reaped_when_the_index_closes() -> None:
    read, write = os.pipe()
    try:
        index = TreeIndex(locate(str(Path(__file__).parent.parent / "examples/sglang-mini/python")),
                          use_cache=False, background=in_background)  # fmt: skip
        index.ahead(_blocks_in_the_helper(write))
        assert select.select([read], [], [], 30.0)[0], "the helper never started"
        pid = int.from_bytes(os.read(read, 4), "little")
        assert pid != os.getpid()
        index.close()
    finally:
        os.close(read)
        os.close(write)
    with pytest.raises(ChildProcessError):  # reaped: no zombie, nothing left running
        os.waitpid(pid, os.WNOHANG)


def test_a_helper_that_fails_leaves_the_work_to_this_process() -> None:
    parent = os.getpid()

    def compute() -> str:
        if os.getpid() != parent:
            os._exit(3)
        return "made here"

    mini = Path(__file__).parent.parent / "examples/sglang-mini/python"
    index = TreeIndex(locate(str(mini)), use_cache=False, background=in_background)
    assert index.join(index.ahead(compute)) == "made here"


def test_an_answer_a_helper_dropped_is_dropped_here(tmp_path: Path) -> None:
    """Answers kept per launch keep the newest few (`answer_for`); a helper that drops the
    oldest hands the drop back too, or the answers file would grow with every launch."""
    mini = Path(__file__).parent.parent / "examples/sglang-mini/python"
    index = TreeIndex(locate(str(mini)), use_cache=False, background=in_background)
    for n in range(2):
        index.answer_for("per-launch:", [n], int, lambda n=n: n, keep=2)
    first = index.answers.keys("per-launch:")
    made = index.ahead(lambda: index.answer_for("per-launch:", [9], int, lambda: 9, keep=2))
    assert index.join(made) == 9
    kept = index.answers.keys("per-launch:")
    assert len(kept) == 2 and first[0] not in kept and first[1] in kept


def test_work_ahead_waits_for_the_walk_and_runs_here_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index whose answers held has not walked the tree: a helper forked then would walk
    it on its own, and the run again if it needs to, so the work runs here. Once the files are
    walked, it goes to a helper."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tree = locate(str(Path(__file__).parent.parent / "examples/sglang-mini/python"))
    TreeIndex(tree, use_cache=True).save()  # walked, and its answers kept for the tree

    quick = TreeIndex(tree, use_cache=True, background=in_background)
    assert quick.answers.quick and not quick.files.scanned
    assert quick.join(quick.ahead(os.getpid)) == os.getpid()
    assert not quick.files.scanned, "nothing walked the tree for work that did not need it"

    quick.files.walk()
    assert quick.join(quick.ahead(os.getpid)) != os.getpid()
