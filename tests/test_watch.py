"""The launch watch without any UI: snapshots of the log by offset, phases, findings, problems.

Most tests drive `LaunchWatch.step()` by hand after explicit writes (what the thread does each
beat), so nothing waits on a clock; one runs the thread itself and waits on its callback.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from eaglebug.logs.follow import LogFollower
from eaglebug.server.state import LaunchRecord, State, load_state, save_state, state_dir
from eaglebug.session.problems import Problem
from eaglebug.session.session import Session, SessionConfig
from eaglebug.session.watch import LaunchWatch, WatchSnapshot
from tests.live import NO_SUCH_PID

CRASH_LOG = Path(__file__).parent / "fixtures" / "logs" / "missing_method_8ranks.log"


class Collect:
    def __init__(self) -> None:
        self.snapshots: list[WatchSnapshot] = []
        self.problems: list[Problem] = []
        self.arrived = threading.Event()

    def snapshot(self, snap: WatchSnapshot) -> None:
        self.snapshots.append(snap)
        self.arrived.set()

    def problem(self, problem: Problem) -> None:
        self.problems.append(problem)


def record(workdir: Path, number: int, log: Path, started_at: float = 1000.0) -> LaunchRecord:
    return LaunchRecord(
        number=number,
        argv=["python", "-m", "sglang.launch_server"],
        env_additions={},
        log=str(log),
        pid=NO_SUCH_PID,
        create_time=0.0,
        started_at=started_at,
    )


def launched(workdir: Path, *records: LaunchRecord) -> None:
    save_state(workdir, State(launches=list(records)))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    (state_dir(path) / "logs").mkdir(parents=True)
    return path


def watch_of(workdir: Path, log_path: Path | None = None) -> tuple[LaunchWatch, Collect]:
    got = Collect()
    session = Session(SessionConfig(workdir, log_path=log_path, readonly=True))
    return LaunchWatch(session, got.snapshot, on_problem=got.problem), got


def server_log(folder: Path, text: str) -> Path:
    """The log of a server started elsewhere (what `watch --log` follows), holding `text`."""
    log = folder / "server.log"
    log.write_text(text)
    return log


def lines_of(snap: WatchSnapshot) -> list[tuple[str, int]]:
    return [(line.text, line.offset) for part in snap.parts for line in part.lines]


def test_a_launch_log_comes_as_lines_by_offset_with_its_phase_findings_and_record(
    workdir: Path,
) -> None:
    log = state_dir(workdir) / "logs" / "launch-001.log"
    log.write_bytes(b"")
    launched(workdir, record(workdir, 1, log))
    watch, got = watch_of(workdir)
    watch.step()
    first = got.snapshots[-1]
    assert [p.restart.label for p in first.parts if p.restart] == ["launch-001.log"]
    assert (first.phase, first.launch_number, first.started_at) == ("launching", 1, 1000.0)

    data = CRASH_LOG.read_bytes()
    log.write_bytes(data)
    while watch.step():  # more than one beat's budget? read on
        pass
    snaps = got.snapshots[1:]
    lines = [line for snap in snaps for line in lines_of(snap)]
    expected, offset = [], 0
    for raw in data.split(b"\n")[:-1]:
        expected.append(offset)
        offset += len(raw) + 1
    assert [at for _, at in lines] == expected  # every line once, by its byte offset
    last = got.snapshots[-1]
    assert last.phase == "crashed"
    assert [(f.id, f.attribute) for f in last.findings] == [
        ("log.missing_interface_method", "set_eagle3_layers_to_capture")
    ]
    assert {"load weight end", "CUDA graph capture begin"} <= set(last.milestones)
    # The phase is recorded for the launch whose log this is.
    assert load_state(workdir).latest.phase == "crashed"  # type: ignore[union-attr]
    # Nothing new: no snapshot.
    count = len(got.snapshots)
    assert watch.step() is False
    assert len(got.snapshots) == count


def test_a_relaunch_switches_to_the_new_log_from_its_start(workdir: Path) -> None:
    logs = state_dir(workdir) / "logs"
    first, second = logs / "launch-001.log", logs / "launch-002.log"
    shutil.copyfile(CRASH_LOG, first)
    launched(workdir, record(workdir, 1, first))
    watch, got = watch_of(workdir)
    while watch.step():
        pass
    assert got.snapshots[-1].phase == "crashed"
    second.write_text("[2026-01-30 10:40:00 TP0] Load weight begin. avail mem=138.52 GB\n")
    state = load_state(workdir)
    state.launches.append(record(workdir, 2, second, started_at=2000.0))
    save_state(workdir, state)
    watch.step()
    snap = got.snapshots[-1]
    assert snap.parts[0].restart is not None
    assert snap.parts[0].restart.label == "launch-002.log"
    assert lines_of(snap) == [
        ("[2026-01-30 10:40:00 TP0] Load weight begin. avail mem=138.52 GB", 0)
    ]
    assert (snap.launch_number, snap.started_at) == (2, 2000.0)
    assert snap.phase != "crashed" and snap.findings == ()  # a fresh reading of a fresh log
    assert [r.phase for r in load_state(workdir).launches] == ["crashed", snap.phase]


def test_a_watched_log_records_no_phase_in_someone_elses_launch(
    workdir: Path, tmp_path: Path
) -> None:
    own = state_dir(workdir) / "logs" / "launch-001.log"
    own.write_text("")
    launched(workdir, record(workdir, 1, own))
    other = tmp_path / "elsewhere.log"
    shutil.copyfile(CRASH_LOG, other)
    watch, got = watch_of(workdir, log_path=other)
    while watch.step():
        pass
    snap = got.snapshots[-1]
    assert snap.phase == "crashed" and snap.launch_number is None
    assert load_state(workdir).latest.phase == "launching"  # type: ignore[union-attr]


def test_a_log_that_cannot_be_read_is_one_problem_and_the_watch_recovers(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = server_log(tmp_path, "[2026-01-30 10:36:03 TP0] Init torch distributed begin.\n")
    watch, got = watch_of(workdir, log_path=log)
    real_poll = LogFollower.poll
    failing = [True]

    def poll(self: LogFollower, max_bytes: int | None = None) -> list[object]:
        if failing[0]:
            raise PermissionError(13, "Permission denied")
        return real_poll(self, max_bytes)  # type: ignore[return-value]

    monkeypatch.setattr(LogFollower, "poll", poll)
    assert watch.beat() is None
    assert watch.beat() is None  # the same problem again: said once
    (problem,) = got.problems
    assert not problem.internal and problem.title == "log"
    assert problem.message == f"{log}: cannot read the log (Permission denied)"
    assert problem.hint and "tries again" in problem.hint
    failing[0] = False
    assert watch.beat() is False
    assert lines_of(got.snapshots[-1]) == [
        ("[2026-01-30 10:36:03 TP0] Init torch distributed begin.", 0)
    ]
    failing[0] = True
    assert watch.beat() is None  # after a good beat, a failure is news again
    assert len(got.problems) == 2


def test_a_bug_in_a_beat_is_an_internal_error_with_its_traceback_on_file(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = server_log(tmp_path, "a line\n")
    watch, got = watch_of(workdir, log_path=log)

    def broken(self: object, line: str, offset: int | None = None) -> None:
        raise ZeroDivisionError("in the analyzer")

    monkeypatch.setattr("eaglebug.checks.logs.parse.LogAnalyzer.feed", broken)
    assert watch.beat() is None
    (problem,) = got.problems
    assert (
        problem.internal and problem.message == "internal error: ZeroDivisionError: in the analyzer"
    )
    assert problem.log is not None and "ZeroDivisionError" in problem.log.read_text()


def test_the_thread_publishes_and_stops(workdir: Path, tmp_path: Path) -> None:
    log = server_log(tmp_path, "one\n")
    watch, got = watch_of(workdir, log_path=log)
    watch.start()
    try:
        assert got.arrived.wait(30)
        got.arrived.clear()
        with log.open("a") as out:
            out.write("two\n")
        assert got.arrived.wait(30)
        watch.republish()  # nothing new, but the findings are resolved and sent again
        got.arrived.clear()
        assert got.arrived.wait(30)
    finally:
        assert watch.stop()
    assert [text for snap in got.snapshots for text, _ in lines_of(snap)] == ["one", "two"]
    assert got.problems == []
