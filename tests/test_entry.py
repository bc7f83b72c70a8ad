"""The `eaglebug` command's routing: which mode builds which app (or tells which story).

Each mode runs through the real entry point (`eaglebug.tui.entry.main`, or `python -m
eaglebug` through runpy) and the real app factory; only `App.run` is replaced, by a stand-in
that keeps the app it was called on, so the test reads what the user would get: the session's
command and log, read-only or not, the guide, the launch policy.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from eaglebug.server.state import LaunchRecord, State, save_state
from eaglebug.tui import entry
from eaglebug.tui.app import EaglebugApp

LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "/models/m", "--tp", "8"]


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[EaglebugApp]:
    """The apps `run()` was called on (none actually runs); the working folder is tmp_path."""
    apps: list[EaglebugApp] = []

    def run(self: EaglebugApp, *args: object, **kwargs: object) -> None:
        apps.append(self)

    monkeypatch.setattr(EaglebugApp, "run", run)
    monkeypatch.chdir(tmp_path)
    return apps


def record_a_launch(workdir: Path) -> None:
    log = workdir / ".eaglebug" / "logs" / "launch-001.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    save_state(
        workdir,
        State(
            launches=[
                LaunchRecord(1, LAUNCH, {}, str(log), 4_194_304, 0.0, 1000.0),
            ]
        ),
    )


def test_watch_follows_the_given_log_read_only(built: list[EaglebugApp], tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-01-30 10:36:03 TP0] Init torch distributed begin.\n")
    assert entry.main(["watch", "--log", str(log), "--simulate-gpus", "2"]) == 0
    (app,) = built
    config = app.session.config
    assert config.log_path == log and config.readonly and config.launch_words == []
    assert app.session.log_path() == log
    assert not app.controller.launch_when_clear and not app.main.open_guide_on_start
    assert app.gpu_source.describe() == "simulated (--simulate-gpus)"


def test_the_stall_flags_reach_the_launch_watch(built: list[EaglebugApp], tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-01-30 10:36:03 TP0] Init torch distributed begin.\n")
    argv = ["watch", "--log", str(log), "--simulate-gpus", "1", "--stall-graph-min", "2"]
    assert entry.main(argv) == 0
    assert entry.main([*argv[:-2], "--stall-loading-min", "30"]) == 0
    watches = [app.launch_watch for app in built]
    assert [w.stall_limits for w in watches] == [{"cuda_graph": 120.0}, {"loading": 1800.0}]
    # Its GPU sampler is where the watch learns that memory moved.
    assert watches[0].memory_moved_at == built[0].sampler.memory_moved_at


def test_watch_without_a_log_is_one_error_line(
    built: list[EaglebugApp], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert entry.main(["watch"]) == 2
    assert capsys.readouterr().err == (
        "error: watch needs --log FILE\nhint: eaglebug watch --log /path/to/server.log\n"
    )
    assert entry.main(["watch", "--log", str(tmp_path / "nowhere.log")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert built == []


@pytest.mark.parametrize("words", [["launch", "--tui", "--"], ["--"]])
def test_a_launch_command_is_checked_then_launched_when_clear(
    built: list[EaglebugApp], tmp_path: Path, words: list[str]
) -> None:
    assert entry.main([*words, *LAUNCH]) == 0
    (app,) = built
    config = app.session.config
    assert config.launch_words == LAUNCH and config.log_path is None and not config.readonly
    assert config.workdir == tmp_path
    assert app.controller.launch_when_clear  # after the first checks, if nothing blocks
    assert app.main.run_checks_on_start and not app.main.open_guide_on_start


def test_readonly_with_a_launch_command(built: list[EaglebugApp]) -> None:
    assert entry.main(["--readonly", "--", *LAUNCH]) == 0
    assert built[0].session.config.readonly


def test_guide_opens_over_the_launch_recorded_here(
    built: list[EaglebugApp], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert entry.main(["guide"]) == 2  # nothing recorded yet
    err = capsys.readouterr().err
    assert err.startswith("error: no launch recorded in this folder")
    assert "hint: eaglebug -- LAUNCH COMMAND" in err
    record_a_launch(tmp_path)
    assert entry.main(["guide"]) == 0
    (app,) = built
    assert app.main.open_guide_on_start and not app.controller.launch_when_clear
    assert app.session.launch_words == LAUNCH  # the recorded launch is what it checks


def test_no_arguments_reattaches_to_the_launch_recorded_here(
    built: list[EaglebugApp], tmp_path: Path
) -> None:
    record_a_launch(tmp_path)
    assert entry.main([]) == 0
    (app,) = built
    assert app.session.log_path() == tmp_path / ".eaglebug" / "logs" / "launch-001.log"
    assert not app.controller.launch_when_clear and not app.main.open_guide_on_start


def test_python_dash_m_eaglebug_demo_headless_tells_the_story(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    told: list[bool] = []

    def story(fast: bool = True, **kwargs: object) -> int:
        told.append(fast)
        return 0

    monkeypatch.setattr("eaglebug.demo.story.run_story", story)
    for argv, fast in ((["demo", "--headless"], False), (["demo", "--headless", "--fast"], True)):
        monkeypatch.setattr(sys, "argv", ["eaglebug", *argv])
        with pytest.raises(SystemExit) as done:
            runpy.run_module("eaglebug", run_name="__main__", alter_sys=True)
        assert done.value.code == 0
        assert told[-1] is fast


def test_python_dash_m_eaglebug_watch_is_the_same_app(
    built: list[EaglebugApp], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    log.write_text("x\n")
    monkeypatch.setattr(
        sys, "argv", ["eaglebug", "watch", "--log", str(log), "--simulate-gpus", "1"]
    )
    with pytest.raises(SystemExit) as done:
        runpy.run_module("eaglebug", run_name="__main__", alter_sys=True)
    assert done.value.code == 0
    assert built[0].session.config.log_path == log and built[0].session.config.readonly


def test_the_demo_opens_over_a_tree_made_and_committed_for_it(
    built: list[EaglebugApp], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The tree is made while Textual loads (in a helper where a core is free): the app
    gets it whole, in a repository with its one commit, as before."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert entry.main(["demo", "--fast"]) == 0
    tree = Path(built[0].session.config.sglang or "")
    assert tree.is_relative_to(tmp_path / "cache" / "eaglebug" / "demo")
    assert (tree / "python" / "sglang" / "srt" / "model_executor" / "model_runner.py").is_file()
    log = subprocess.run(
        ["git", "log", "--format=%s"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert len(log.stdout.splitlines()) == 1


def test_the_demo_tui_loads_without_gitpython_and_the_tree_index() -> None:
    """GitPython took some 70 ms of the demo's ~550 ms to first paint, the engine's tree index
    (the checks run in their own process) some 15 ms: the TUI loads without them (the demo's
    repository is made apart, a patch loads GitPython when applied)."""
    probe = (
        "import sys, eaglebug.tui.entry, eaglebug.tui.demo\n"
        "print(*(m in sys.modules for m in ('git', 'eaglebug.checks.source.index')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["False", "False"]


# A git that answers GitPython's `git version` and refuses everything else.
_REFUSING_GIT = """#!/bin/sh
if [ "$1" = version ]; then echo "git version 2.43.0"; exit 0; fi
echo "fatal: not today" >&2
exit 128
"""


@pytest.mark.parametrize(
    ("git", "said", "hint"),
    [
        ("missing", "git cannot be run here (GitPython: ", "install git, or point "),
        ("refusing", "cannot make the demo's git repository: fatal: not today", "run `git init`"),
    ],
)
def test_the_demo_without_a_working_git_is_one_error_line_and_leaves_no_folder(
    tmp_path: Path, git: str, said: str, hint: str
) -> None:
    """No git on PATH (GitPython refuses to load), or a git that fails (its own reason is
    said): one line and a hint, exit 2, and nothing of the demo left in the cache."""
    path = tmp_path / "bin"
    path.mkdir()
    if git == "refusing":
        (path / "git").write_text(_REFUSING_GIT)
        (path / "git").chmod(0o755)
    env = {**os.environ, "PATH": str(path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-m", "eaglebug", "demo", "--headless", "--fast"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    error, hinted = run.stderr.splitlines()
    assert error.startswith(f"error: {said}"), error
    assert hinted.startswith(f"hint: {hint}"), hinted
    demos = tmp_path / "cache" / "eaglebug" / "demo"
    assert not demos.exists() or not any(demos.iterdir())
