from __future__ import annotations

import gc
from pathlib import Path

import pytest

from tests.sglang_releases import release


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
