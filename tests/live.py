"""Helpers shared by the tests that start real processes (the stand-in servers, the demo)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from eaglebug.demo import DemoScenario
from eaglebug.demo import scenario as scenario_module
from eaglebug.server.state import LaunchRecord, State, load_state, save_state, state_dir
from tests import gitrepo

CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"


NO_SUCH_PID = 4_194_304  # Linux's largest pid_max: no process ever has it


def recorded_launch(scenario: DemoScenario, log_name: str, **fields: Any) -> Path:
    """The demo's state file holding one launch of the demo's command, whose process is gone
    and whose log is `logs/<log_name>` (made empty here); `fields` fill the rest of its record
    (`started_at`, `phase`, ...). Returns the log, for the test to write what the launch said."""
    logs = state_dir(scenario.workdir) / "logs"
    logs.mkdir(parents=True)
    log = logs / log_name
    log.write_text("")
    launch = LaunchRecord(
        number=1,
        argv=scenario.launch_argv,
        env_additions=fields.pop("env_additions", {}),
        log=str(log),
        pid=NO_SUCH_PID,
        create_time=0.0,
        **fields,
    )
    save_state(scenario.workdir, State(launches=[launch]))
    return log


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


def run_eaglebug(
    *args: str, cwd: Path | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """`python -m eaglebug ARGS` as a user runs it: a process of its own (in `cwd`), text out."""
    return subprocess.run(
        [sys.executable, "-m", "eaglebug", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=check,
    )


def kill_launches(
    workdir: Path, also: Callable[[LaunchRecord], set[int]] = lambda record: set()
) -> None:
    """Kill every live process of every launch recorded in `workdir` (and the pids `also` finds
    for a launch): a fixture's teardown, so that no test leaves a process behind, whatever it did."""
    for record in load_state(workdir).launches:
        for pid in also(record) | session_pids(record.pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


def prepared_demo(root: Path, story: str = "seed") -> Iterator[DemoScenario]:
    """A fixture's body: the fast demo prepared under `root`, and its launches killed after."""
    prepared = DemoScenario.prepare(root, fast=True, story=story)
    yield prepared
    kill_launches(prepared.workdir)


def hermetic_demo_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer git config, no context-length override and no demo knobs from outside."""
    gitrepo.hermetic(monkeypatch)
    for name in (CONTEXT_ENV, scenario_module.TREE_ENV):
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
