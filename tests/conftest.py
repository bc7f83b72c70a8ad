from __future__ import annotations

import gc
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.demo import DemoScenario
from tests import gitrepo
from tests.live import hermetic_demo_env, prepared_demo
from tests.sglang_releases import release


@pytest.fixture(scope="session")
def sglang_053() -> Path:
    return release("0.5.3")


@pytest.fixture(scope="session")
def sglang_041post7() -> Path:
    return release("0.4.1.post7")


@pytest.fixture(scope="session")
def sglang_057() -> Path:
    return release("0.5.7")


@pytest.fixture(scope="session")
def sglang_058post1() -> Path:
    return release("0.5.8.post1")


@pytest.fixture(scope="session")
def sglang_059() -> Path:
    return release("0.5.9")


@pytest.fixture(scope="session")
def sglang_0510() -> Path:
    return release("0.5.10")


@pytest.fixture(scope="session")
def sglang_0514() -> Path:
    return release("0.5.14")


@pytest.fixture(scope="session")
def sglang_0522() -> Path:
    return release("0.5.22")


@pytest.fixture(scope="session")
def sglang_0523() -> Path:
    return release("0.5.23")


# One uncached index of a release per test module: later checks in the module reuse its
# parsed facts, and no module sees another's.
@pytest.fixture(scope="module")
def index_059(sglang_059: Path) -> TreeIndex:
    return TreeIndex(locate(str(sglang_059)), use_cache=False)


@pytest.fixture(scope="module")
def index_0510(sglang_0510: Path) -> TreeIndex:
    return TreeIndex(locate(str(sglang_0510)), use_cache=False)


@pytest.fixture(scope="module")
def index_0523(sglang_0523: Path) -> TreeIndex:
    return TreeIndex(locate(str(sglang_0523)), use_cache=False)


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


def pytest_unconfigure(config: pytest.Config) -> None:
    """At exit the interpreter's last collections traverse every object the suite still holds
    (the parsed trees of five releases in module fixtures): minutes of a CI run, for nothing.
    Frozen, they are skipped; the process ends right after."""
    del config
    gc.freeze()
