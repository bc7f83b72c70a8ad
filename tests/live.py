"""Helpers shared by the tests that start real processes (the stand-in servers, the demo)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import psutil
import pytest

from eaglebug.demo import scenario as scenario_module
from tests import gitrepo

CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


def session_pids(sid: int) -> set[int]:
    """Every live (non-zombie) process of one session: a launch's whole tree, orphans included."""
    pids = set()
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                pids.add(proc.pid)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    return pids


def hermetic_demo_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer git config, no context-length override and no demo knobs from outside."""
    for name, value in gitrepo.HERMETIC_ENV.items():
        monkeypatch.setenv(name, value)
    for name in (*gitrepo.FOREIGN_ENV, CONTEXT_ENV, scenario_module.TREE_ENV):
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("EAGLEBUG_DEMO_"):
            monkeypatch.delenv(name)


def wait_for(
    condition: Callable[[], bool], what: str = "the condition", timeout_s: float = 60.0
) -> None:
    """Poll a condition until it holds, bounded (processes under test run on their own clocks:
    a test waits for what they do, never for a time)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
