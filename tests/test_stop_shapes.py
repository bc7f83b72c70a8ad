"""`stop` and `status` against the process shapes that escape a single walk of the tree.

Each test launches a real tree (tests/process_shapes.py) through `Server` or the CLI, stops it,
and then reads the process table: nothing carrying the launch's tag, nothing of its session,
none of the pids the shape reported is left; a bystander process of the same user, started
after the launch but not by it, is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.server.launcher import Server
from eaglebug.server.proctree import LAUNCH_ENV
from eaglebug.server.state import load_state
from tests.live import kill_launches, run_eaglebug, session_pids, wait_for

SHAPES = Path(__file__).with_name("process_shapes.py")


def tagged(tag: str) -> set[int]:
    """Every live process whose environment carries the launch's tag."""
    found = set()
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(LAUNCH_ENV) == tag:
                found.add(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def reported(ready: Path) -> list[int]:
    wait_for(ready.exists)
    return [int(line) for line in ready.read_text().split()]


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the same user, in a session of its own, that no launch owns."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    yield srv
    kill_launches(srv.workdir, also=lambda record: tagged(record.tag))


def shape(server: Server, tmp_path: Path, name: str) -> tuple[list[int], Path]:
    ready = tmp_path / f"{name}.pids"
    server.launch([sys.executable, str(SHAPES), name, str(ready)], {})
    return reported(ready), ready


def assert_all_gone(server: Server, pids: list[int]) -> None:
    record = server.state().latest
    assert record is not None
    assert tagged(record.tag) == set()
    assert session_pids(record.pid) == set()
    assert [p for p in pids if alive(p)] == []


def test_stop_finds_a_grandchild_that_left_the_session(
    server: Server, tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    pids, _ = shape(server, tmp_path, "setsid-grandchild")
    root, grandchild = pids
    record = server.state().latest
    assert record is not None
    assert os.getsid(grandchild) == grandchild != record.pid, "the shape did not setsid"
    assert psutil.Process(grandchild).ppid() != root
    result = server.stop(record, grace_s=2.0)
    assert result.survivors == ()
    assert grandchild in {*result.terminated, *result.killed}
    assert_all_gone(server, pids)
    assert alive(bystander.pid), "a process of another launch was signalled"


def test_a_launch_through_env_i_keeps_its_tag_and_is_stopped_whole(
    server: Server, tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    """`env -i` (or `env -u EAGLEBUG_LAUNCH`) in the launch command would clear the tag for
    every process of the launch: a grandchild that left the session would be found by
    nothing. The launcher sets it again after such an `env`'s own words."""
    ready = tmp_path / "env-i.pids"
    env = subprocess.run(["which", "env"], capture_output=True, text=True, check=True)
    words = [env.stdout.strip(), "-i", "A=1", sys.executable, str(SHAPES)]
    server.launch([*words, "setsid-grandchild", str(ready)], {})
    pids = reported(ready)
    record = server.state().latest
    assert record is not None and record.argv[:3] == words[:3]  # the command as written
    grandchild = pids[1]
    assert os.getsid(grandchild) == grandchild != record.pid, "the shape did not setsid"
    assert psutil.Process(grandchild).environ().get(LAUNCH_ENV) == record.tag
    assert psutil.Process(grandchild).environ().get("A") == "1"
    result = server.stop(record, grace_s=2.0)
    assert result.survivors == ()
    assert grandchild in {*result.terminated, *result.killed}
    assert_all_gone(server, pids)
    assert alive(bystander.pid), "a process of another launch was signalled"


def test_stop_walks_again_after_sigterm(server: Server, tmp_path: Path) -> None:
    pids, ready = shape(server, tmp_path, "fork-on-term")
    record = server.state().latest
    assert record is not None
    result = server.stop(record, grace_s=1.0)
    forked = reported(ready.with_name(ready.name + ".forked"))
    assert result.survivors == ()
    assert forked[0] in result.killed, "the process forked during SIGTERM needed SIGKILL"
    assert_all_gone(server, [*pids, *forked])


def test_children_of_an_exited_root_are_alive_in_status_and_stopped(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    ready = tmp_path / "orphans.pids"
    shape = [sys.executable, str(SHAPES), "orphans", str(ready)]
    launched = run_eaglebug("launch", "--json", "--", *shape, cwd=tmp_path)
    assert launched.returncode == 0, launched.stderr
    record = json.loads(launched.stdout)
    children = reported(ready)
    try:
        wait_for(lambda: not alive(record["pid"]))
        status = run_eaglebug("status", "--json", cwd=tmp_path, check=True)
        [row] = json.loads(status.stdout)["launches"]
        assert row["alive"] is True and row["root_alive"] is False
        assert sorted(row["processes"]) == sorted(children)
        text = run_eaglebug("status", cwd=tmp_path, check=True).stdout
        assert "2 of its processes still run" in text
        stopped = run_eaglebug("stop", "--grace", "1", "--json", cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert sorted(json.loads(stopped.stdout)["terminated"]) == sorted(children)
        assert [p for p in children if alive(p)] == []
        assert alive(bystander.pid)
    finally:
        for pid in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


def test_a_negative_grace_is_refused_before_any_signal(tmp_path: Path) -> None:
    ready = tmp_path / "stubborn.pids"
    shape = [sys.executable, str(SHAPES), "stubborn", str(ready)]
    launched = run_eaglebug("launch", "--json", "--", *shape, cwd=tmp_path, check=True)
    record = json.loads(launched.stdout)
    pids = reported(ready)
    try:
        for grace in ("-1", "nan", "inf"):
            refused = run_eaglebug("stop", "--grace", grace, cwd=tmp_path)
            assert refused.returncode == 2
            assert refused.stderr.startswith("error: argument --grace: ")
            assert len(refused.stderr.splitlines()) == 2
            assert all(alive(p) for p in pids), "a refused stop signalled the tree"
        stopped = run_eaglebug("stop", "--grace", "0.5", cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert [p for p in pids if alive(p)] == []
        assert tagged(record["tag"]) == set()
    finally:
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()


def _with_marker(tmp_path: Path) -> tuple[list[str], str]:
    marker = uuid.uuid4().hex
    return [sys.executable, "-c", "import time; time.sleep(600)", marker], marker


def _running_with(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in (proc.info["cmdline"] or []) and alive(proc.pid):
            found.append(proc.pid)
    return found


def test_a_launch_that_cannot_be_recorded_is_not_left_running(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state file fails after the start (a full disk, say): the server is stopped again."""
    import eaglebug.server.launcher as server_module

    real_save = server_module.save_state
    calls = []

    def failing_save(workdir: Path, state: object) -> None:
        calls.append(workdir)
        raise InputError(f"{workdir}/.eaglebug/state.json: cannot write (No space left on device)")

    argv, marker = _with_marker(tmp_path)
    server_module.save_state(tmp_path, load_state(tmp_path))  # an empty state file
    before = (tmp_path / ".eaglebug" / "state.json").read_bytes()
    monkeypatch.setattr(server_module, "save_state", failing_save)
    with pytest.raises(InputError, match="No space left"):
        server.launch(argv, {})
    monkeypatch.setattr(server_module, "save_state", real_save)
    assert calls, "the record was never written"
    assert _running_with(marker) == [], "a server nobody recorded is still running"
    assert (tmp_path / ".eaglebug" / "state.json").read_bytes() == before


def test_a_launch_whose_state_folder_is_unwritable_starts_nothing(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import eaglebug.server.launcher as server_module

    def unwritable(workdir: Path) -> None:
        raise InputError(f"{workdir}/.eaglebug/state.json: cannot write (Read-only file system)")

    monkeypatch.setattr(server_module, "check_writable", unwritable)
    argv, marker = _with_marker(tmp_path)
    with pytest.raises(InputError, match="Read-only"):
        server.launch(argv, {})
    assert _running_with(marker) == []
    assert not (tmp_path / ".eaglebug" / "logs").exists() or not any(
        (tmp_path / ".eaglebug" / "logs").iterdir()
    )


def test_a_command_that_cannot_start_leaves_no_log(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "eaglebug", "launch", "--", str(tmp_path / "nonexistent")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: cannot start ")
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a log or state folder was left"


def test_sigterm_of_the_root_alone_is_not_a_stop(server: Server, tmp_path: Path) -> None:
    """Killing the root by hand leaves its child; eaglebug still sees the launch and stops it."""
    pids, _ = shape(server, tmp_path, "stubborn")
    root, child = pids
    os.kill(root, signal.SIGKILL)
    wait_for(lambda: not alive(root))
    record = server.attached()
    assert record is not None, "the stubborn child is part of the launch"
    assert server.processes(record) == [child]
    with pytest.raises(InputError, match="left processes running"):
        server.launch([sys.executable, "-c", "pass"], {})
    assert server.stop(record, grace_s=0.5).killed == (child,)
    assert server.attached() is None
