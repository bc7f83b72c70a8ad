from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.checks.source.trees import ParsedTrees, keep_in_process
from eaglebug.demo import DemoScenario
from eaglebug.session import forkmap
from eaglebug.session.collector import THRESHOLDS
from tests import gitrepo
from tests.live import hermetic_demo_env, prepared_demo
from tests.sglang_releases import release


def _release_tree(name: str, version: str) -> Any:
    """A session fixture `name`: the SGLang release `version`, fetched once into the shared cache."""

    @pytest.fixture(scope="session", name=name)
    def tree() -> Path:
        return release(version)

    return tree


def _release_index(name: str, tree: str) -> Any:
    """A module fixture `name`: one uncached index of the release fixture `tree` per test
    module, so later checks in the module reuse its parsed facts and no module sees another's."""

    @pytest.fixture(scope="module", name=name)
    def index(request: pytest.FixtureRequest) -> TreeIndex:
        return TreeIndex(locate(str(request.getfixturevalue(tree))), use_cache=False)

    return index


sglang_041post7 = _release_tree("sglang_041post7", "0.4.1.post7")
sglang_053 = _release_tree("sglang_053", "0.5.3")
sglang_057 = _release_tree("sglang_057", "0.5.7")
sglang_058post1 = _release_tree("sglang_058post1", "0.5.8.post1")
sglang_059 = _release_tree("sglang_059", "0.5.9")
sglang_0510 = _release_tree("sglang_0510", "0.5.10")
sglang_0512 = _release_tree("sglang_0512", "0.5.12")
sglang_0514 = _release_tree("sglang_0514", "0.5.14")
sglang_0519 = _release_tree("sglang_0519", "0.5.19")
sglang_0522 = _release_tree("sglang_0522", "0.5.22")
sglang_0523 = _release_tree("sglang_0523", "0.5.23")

index_041 = _release_index("index_041", "sglang_041post7")
index_053 = _release_index("index_053", "sglang_053")
index_057 = _release_index("index_057", "sglang_057")
index_059 = _release_index("index_059", "sglang_059")
index_0510 = _release_index("index_0510", "sglang_0510")
index_0519 = _release_index("index_0519", "sglang_0519")
index_0522 = _release_index("index_0522", "sglang_0522")
index_0523 = _release_index("index_0523", "sglang_0523")


@pytest.fixture(scope="module")
def template_059(sglang_059: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 0.5.9 package committed once per module; each test clones it (`repo_059`)."""
    repo = tmp_path_factory.mktemp("sglang-0.5.9") / "repo"
    shutil.copytree(
        sglang_059 / "sglang", repo / "sglang", ignore=shutil.ignore_patterns("__pycache__")
    )
    return gitrepo.init(repo, "sglang 0.5.9")


@pytest.fixture
def repo_059(template_059: Path, tmp_path: Path) -> Path:
    """A git copy of the real 0.5.9 tree, for the tests that fix and undo in it."""
    return gitrepo.clone(template_059, tmp_path / "repo")


@pytest.fixture
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DemoScenario]:
    """The fast demo (`eaglebug demo --fast`) in the test's own folder, with no git config or
    demo knob from outside; whatever it launched is killed after, whatever the test did."""
    hermetic_demo_env(monkeypatch)
    yield from prepared_demo(tmp_path / "demo")


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets its own parse cache, so no test sees another's cached facts."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture(autouse=True)
def cores(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], None]]:
    """Each test's own pool of core tokens for the helpers `session/forkmap.py` forks, as on a
    machine with `n` cores (two unless the test asks for more): what a test forks does not hang
    on this machine's core count, nor on a helper an earlier test of the worker left unreaped."""
    made: list[list[tuple[int, int]]] = []

    def use(n: int) -> None:
        pool: list[tuple[int, int]] = []
        made.append(pool)
        monkeypatch.setattr(forkmap, "_POOL", pool)
        monkeypatch.setattr(forkmap, "_cores", lambda: n)

    use(2)
    yield use
    for pool in made:
        for fd in pool[0] if pool else ():
            os.close(fd)


# Source bytes whose syntax trees a worker keeps across tests (about 32 bytes of memory per
# byte of source): the files of the releases most tests parse again and again. A preflight
# parses ~7.5 MB of a release, and tests take turns between releases, so a smaller store is
# emptied as fast as it fills (at 24 MB the heaviest files took 187 s, at 64 MB 162 s, at
# 128 MB no less; the workers' peak memory 1.9, 2.0 and 2.0 GB).
KEPT_TREES_BYTES = 64_000_000


def pytest_configure(config: pytest.Config) -> None:
    """Every index a test builds in this process takes the syntax trees of files another test
    of the worker parsed already (by each file's path and bytes, `source/trees.py`): parsing
    the same releases' files test after test was about a quarter of the suite's time. A test of
    the parsing itself asks for `cold_parsing`.

    The collector runs as it does while the TUI's checks run (`session/collector.py`): a
    worker's heap holds those trees and several releases' indexes, and with the default
    thresholds every tenth collection visited all of it, a quarter of the suite's CPU (714
    against 553 s of CPU for the whole suite, its workers' peak memory 2.9 against 3.3 GB)."""
    del config
    keep_in_process(ParsedTrees(KEPT_TREES_BYTES))
    gc.set_threshold(*THRESHOLDS)


@pytest.fixture
def cold_parsing() -> Iterator[None]:
    """This test's indexes parse every file they need themselves, as a one-shot run does."""
    kept = keep_in_process(None)
    yield
    keep_in_process(kept)


def pytest_unconfigure(config: pytest.Config) -> None:
    """At exit the interpreter's last collections traverse every object the suite still holds
    (the parsed trees of five releases in module fixtures): minutes of a CI run, for nothing.
    Frozen, they are skipped; the process ends right after."""
    del config
    gc.freeze()


# A worker reading the real releases peaks near this much (the largest test files hold several
# releases' indexes at once): `-n auto` starts no more workers than the free memory holds.
WORKER_PEAK_GIB = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker per core the process may use, as far as the free memory allows."""
    del config
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    free_gib = psutil.virtual_memory().available / 2**30
    return max(1, min(cores or 1, int(free_gib // WORKER_PEAK_GIB)))
