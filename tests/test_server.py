"""The server manager against a real stand-in server process tree (tests/standin_server.py)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.server.launcher import Server, wait_gpu_released
from eaglebug.server.state import LaunchRecord, load_state, save_state
from tests.live import kill_launches, run_eaglebug, session_pids, wait_for

STANDIN = Path(__file__).with_name("standin_server.py")


def log_text(record: LaunchRecord) -> str:
    return Path(record.log).read_text(errors="replace")


def standin(*extra: str) -> list[str]:
    return [sys.executable, str(STANDIN), "--model-path", "m", *extra]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    yield srv
    kill_launches(srv.workdir)


def test_launch_is_detached_logged_and_recorded(server: Server, tmp_path: Path) -> None:
    record = server.launch(
        standin("--ranks", "3"), {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}
    )
    wait_for(lambda: "fired up and ready" in log_text(record))
    assert os.getsid(record.pid) == record.pid, "the server must lead its own session"
    assert os.getsid(record.pid) != os.getsid(0)
    state = load_state(tmp_path)
    assert state.latest is not None and state.latest.pid == record.pid
    assert state.latest.env_additions == {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}
    assert Path(record.log).parent == tmp_path / ".eaglebug" / "logs"
    assert len(session_pids(record.pid)) == 4  # the launcher and three ranks


def test_stop_kills_the_whole_tree_including_a_rank_that_ignores_sigterm(server: Server) -> None:
    record = server.launch(standin("--ranks", "4", "--stubborn-rank", "1"), {})
    wait_for(lambda: log_text(record).count("Capture cuda graph end") == 4)
    before = session_pids(record.pid)
    assert len(before) == 5
    result = server.stop(record, grace_s=1.0)
    assert result.survivors == ()
    assert result.killed, "the stubborn rank needed SIGKILL"
    assert set(result.terminated) | set(result.killed) == before
    assert session_pids(record.pid) == set(), "no orphan may survive a stop"
    assert server.state().latest is not None
    assert server.state().latest.outcome == "stopped"  # type: ignore[union-attr]
    assert server.attached() is None


def test_relaunch_gets_a_new_log_and_refuses_while_running(server: Server) -> None:
    first = server.launch(standin("--ranks", "1"), {})
    wait_for(lambda: f"pid={first.pid})" in log_text(first))
    with pytest.raises(InputError, match="still running"):
        server.launch(standin("--ranks", "1"), {})
    server.stop(first, grace_s=1.0)
    kept = log_text(first)
    second = server.launch(standin("--ranks", "1"), {})
    assert second.number == first.number + 1
    assert second.log != first.log
    wait_for(lambda: "fired up" in log_text(second))
    # Each launch wrote its own log: the first one's is as it was when it stopped, and none
    # of it is in the second's.
    assert log_text(first) == kept
    assert f"pid={first.pid})" in kept and f"pid={second.pid})" not in kept
    assert f"pid={second.pid})" in log_text(second)
    assert f"pid={first.pid})" not in log_text(second)
    server.stop(second, grace_s=1.0)


def test_reattach_checks_pid_and_create_time(server: Server, tmp_path: Path) -> None:
    record = server.launch(standin("--ranks", "1"), {})
    again = Server(tmp_path)  # a new eaglebug process reading the same state
    attached = again.attached()
    assert attached is not None and attached.pid == record.pid
    # The same pid with another create time (and another launch's tag) is another process:
    # not ours to attach to, nor any process of its session.
    state = load_state(tmp_path)
    tag = state.launches[-1].tag
    state.launches[-1].create_time -= 1000
    state.launches[-1].tag = "another-launch"
    save_state(tmp_path, state)
    assert Server(tmp_path).attached() is None
    state.launches[-1].create_time += 1000
    state.launches[-1].tag = tag
    save_state(tmp_path, state)
    server.stop(record, grace_s=1.0)


def test_crashing_server_exits_and_is_not_attached(server: Server) -> None:
    record = server.launch(standin("--ranks", "2", "--outcome", "crash"), {})
    wait_for(lambda: server.poll_exit(record) is not None)
    assert server.poll_exit(record) == 1
    assert "has no attribute 'set_eagle3_layers_to_capture'" in log_text(record)
    assert server.attached() is None


def test_pending_env_is_applied_to_the_next_launch_only(server: Server, tmp_path: Path) -> None:
    state = load_state(tmp_path)
    state.pending_env = {"EAGLEBUG_TEST_FLAG": "on"}
    save_state(tmp_path, state)
    record = server.launch(standin("--ranks", "1"), {})
    assert record.env_additions == {"EAGLEBUG_TEST_FLAG": "on"}
    assert psutil.Process(record.pid).environ().get("EAGLEBUG_TEST_FLAG") == "on"
    assert load_state(tmp_path).pending_env == {}
    server.stop(record, grace_s=1.0)


def test_pending_flags_go_into_the_next_launch_only(server: Server, tmp_path: Path) -> None:
    state = load_state(tmp_path)
    state.pending_flags = {"--ranks": "2"}
    save_state(tmp_path, state)
    record = server.launch(standin("--ranks", "1"), {})  # as `eaglebug launch` does
    assert record.argv[-2:] == ["--ranks", "2"] and record.argv.count("--ranks") == 1
    assert record.flag_additions == {"--ranks": "2"}
    assert psutil.Process(record.pid).cmdline()[-2:] == ["--ranks", "2"]
    assert load_state(tmp_path).pending_flags == {}
    server.stop(record, grace_s=1.0)


def test_wait_gpu_released_reports_holders_until_they_let_go() -> None:
    holders = [[11, 12], [12], []]
    calls = iter(holders)
    assert wait_gpu_released([11, 12], lambda: next(calls), timeout_s=5, interval_s=0) == []
    assert wait_gpu_released([11], lambda: [11, 99], timeout_s=0) == [11]


def test_corrupt_state_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".eaglebug").mkdir()
    (tmp_path / ".eaglebug" / "state.json").write_text("{not json")
    with pytest.raises(InputError, match="not a state file"):
        load_state(tmp_path)


def test_cli_launch_outlives_eaglebug_then_status_and_stop(tmp_path: Path) -> None:
    launched = run_eaglebug(
        "launch", "--json", "--", *standin("--ranks", "2", "--stubborn-rank", "0"), cwd=tmp_path
    )
    assert launched.returncode == 0, launched.stderr
    record = json.loads(launched.stdout)
    try:
        # eaglebug has exited; the server it launched has not.
        assert psutil.pid_exists(record["pid"])
        wait_for(lambda: "fired up" in Path(record["log"]).read_text(errors="replace"))
        status = run_eaglebug("status", "--json", cwd=tmp_path, check=True)
        assert json.loads(status.stdout)["launches"][0]["alive"] is True
        stopped = run_eaglebug("stop", "--grace", "1", "--json", cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout)["survivors"] == []
        assert session_pids(record["pid"]) == set()
        again = run_eaglebug("stop", cwd=tmp_path)
        assert again.returncode == 2
        assert again.stderr.startswith("error: no running server")
    finally:
        for pid in session_pids(record["pid"]):
            psutil.Process(pid).kill()
