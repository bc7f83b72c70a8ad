"""The TUI's checks in a worker process (`eaglebug/session/checkprocess.py`): the same answers
as the checks in this process, their progress relayed, errors as they were raised there, and
no worker left behind: not by `close`, not when it is killed, not when eaglebug is."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from eaglebug.checks import InputError
from eaglebug.demo import DemoScenario
from eaglebug.session.checking import (
    AuditRequest,
    CheckRequest,
    HereChecks,
    RemoteTraceback,
    WorkerEnded,
)
from eaglebug.session.checkprocess import ProcessChecks
from eaglebug.session.progress import CheckProgress
from eaglebug.tui.demo import demo_session
from tests.live import hermetic_demo_env

REPO = Path(__file__).resolve().parent.parent
KIMI = "KimiK25ForConditionalGeneration"
ENV_VAR = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
ENDED_S = 30.0  # a process that should be gone is waited for this long at most


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_demo_env(monkeypatch)


@pytest.fixture
def request_(tmp_path: Path) -> CheckRequest:
    """The demo's launch on its tree, as the demo's session asks for it."""
    session = demo_session(DemoScenario.prepare(tmp_path / "demo"))
    return session._request(session.launch_words, session.launch_words, [])


@pytest.fixture
def apart() -> Iterator[ProcessChecks]:
    checks = ProcessChecks()
    yield checks
    checks.close()


def gone(pid: int) -> bool:
    """Wait (bounded) for process `pid` to end; whether it did."""
    try:
        ended = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        if select.select([ended], [], [], ENDED_S)[0]:
            return True
        signal.pidfd_send_signal(ended, signal.SIGKILL)  # not left running after the test
        return False
    finally:
        os.close(ended)


def test_the_worker_checks_as_this_process_does(
    request_: CheckRequest, apart: ProcessChecks
) -> None:
    here_told: list[CheckProgress] = []
    there_told: list[CheckProgress] = []
    here = HereChecks().check(request_, here_told.append)
    assert apart.class_named(KIMI) is None  # no check has run there: nothing to ask
    there = apart.check(request_, there_told.append)
    assert there.flight.findings == here.flight.findings
    assert {f.id for f in there.flight.findings} >= {"interface.missing", "config.context_length"}
    assert [p.diff() for p in there.patches] == [p.diff() for p in here.patches] != []
    assert there.flight.warnings == here.flight.warnings
    # the stages in the same order, each reported as it started
    stages = [p.stage for p in there_told if not (p.done or p.total or p.parsed)]
    assert stages == [p.stage for p in here_told if not (p.done or p.total or p.parsed)]
    assert len(stages) > 2
    # the class names a traceback gives, from the worker's index
    assert apart.class_named(KIMI) == "sglang.srt.models.kimi_k25." + KIMI
    assert apart.class_named("NoSuchClass") is None
    # a fix's re-audit there, as here
    target = next(r.ref.qualname for r in there.flight.reports if r.role == "target")
    audit = AuditRequest(request_.tree, None, target, "EAGLE3", None)
    assert apart.reaudit(audit) == HereChecks().reaudit(audit) != []
    worker = apart.pid
    assert worker is not None and worker != os.getpid()
    apart.close()
    assert gone(worker)


def test_errors_come_back_as_raised_in_the_worker(
    request_: CheckRequest, apart: ProcessChecks
) -> None:
    """An InputError whole (its hint too), as the checks panel shows it; a bug with the
    worker's traceback for the errors log; and the worker goes on to the next check."""
    words = [*request_.words, "--tp", "x"]
    with pytest.raises(InputError) as bad:
        apart.check(CheckRequest(**{**request_.__dict__, "words": words}), None)
    assert (bad.value.message, bad.value.hint) == (
        "--tp x: expected an integer",
        "fix --tp in the launch command",
    )
    worker = apart.pid
    with pytest.raises(TypeError) as bug:
        apart._ask(("nonsense",))
    cause = bug.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "in _answer" in str(cause) and "not a request of the checks' process" in str(cause)
    assert apart.check(request_, None).flight.findings  # the same worker, still working
    assert apart.pid == worker


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_killed_worker_fails_its_check_and_the_next_starts_anew(
    request_: CheckRequest, apart: ProcessChecks, sig: signal.Signals
) -> None:
    """Killed (the OOM killer's SIGKILL) it says nothing: not a crash to log. Crashed (a
    segfault in a C extension) it writes its Python stack to its stderr (faulthandler), and
    the app keeps the end of it as the failure's cause, for the errors log."""
    killed: list[int] = []

    def kill_it(_: CheckProgress) -> None:
        if not killed and apart.pid is not None:
            killed.append(apart.pid)
            os.kill(apart.pid, sig)

    with pytest.raises(WorkerEnded, match=rf"ended \(killed by {sig.name}\)") as ended:
        apart.check(request_, kill_it)
    words = ended.value.last_words
    if sig == signal.SIGKILL:
        assert words == ""
    else:
        assert "Fatal Python error: Segmentation fault" in words
        assert 'File "' in words  # the stack, with where it was
        assert "Segmentation fault" in str(ended.value.__cause__)
    assert apart.pid is None and gone(killed[0])
    assert apart.check(request_, None).flight.findings  # a fresh worker
    assert apart.pid not in (None, killed[0])


def _draft(request: CheckRequest) -> Path:
    return Path(request.words[request.words.index("--speculative-draft-model-path") + 1])


def test_a_kept_answer_is_reused_only_for_the_same_question(request_: CheckRequest) -> None:
    """The worker's engine keeps whole answers (`keptchecks.py`): the same launch on the same
    tree is answered without an index; an edited model config, another environment, a changed
    file of the tree is a new question, computed (and right)."""
    engine = HereChecks(keep=True)

    def ids(request: CheckRequest) -> list[tuple[str, str]]:
        return [(f.id, f.severity) for f in engine.check(request, None).flight.findings]

    first = ids(request_)
    assert ("config.context_length", "error") in first and engine.index is not None
    assert ids(request_) == first and engine.index is None  # kept: no index was built
    assert engine.class_named(KIMI) == "sglang.srt.models.kimi_k25." + KIMI  # one made for it

    allowed = CheckRequest(**{**request_.__dict__, "environ": {**request_.environ, ENV_VAR: "1"}})
    assert ("config.context_length", "info") in ids(allowed) and engine.index is not None

    config = _draft(request_) / "config.json"
    target = json.loads(
        (Path(request_.words[request_.words.index("--model-path") + 1]) / "config.json").read_text()
    )
    draft = json.loads(config.read_text())
    draft["max_position_embeddings"] = target["text_config"]["max_position_embeddings"]
    config.write_text(json.dumps(draft))
    assert not any(i == "config.context_length" for i, _ in ids(request_))
    assert engine.index is not None  # the folder's stamp changed: computed afresh

    kimi = request_.tree.package_dir / "srt" / "models" / "kimi_k25.py"
    kimi.write_text(kimi.read_text() + "\n# edited\n")
    ids(request_)
    assert engine.index is not None  # another state of the tree: its answers start empty


def test_where_no_worker_can_run_the_checks_run_here(
    request_: CheckRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that ends with an error before saying anything (this interpreter cannot
    run it: `false` stands in for one without eaglebug on its path) is not retried at every
    check: the checks run in this process, with the same findings."""
    monkeypatch.setattr(sys, "executable", "/bin/false")
    checks = ProcessChecks()
    try:
        told: list[CheckProgress] = []
        found = checks.check(request_, told.append).flight.findings
        assert found == HereChecks().check(request_, None).flight.findings != []
        assert told and checks.pid is None
        assert checks.class_named(KIMI) == "sglang.srt.models.kimi_k25." + KIMI
        checks.check(request_, None)
        assert checks.pid is None  # not started again
    finally:
        checks.close()


def test_a_progress_callback_that_raises_ends_the_worker(
    request_: CheckRequest, apart: ProcessChecks
) -> None:
    """Its remaining frames would be read as the next request's answer: it is not reused."""

    def fails(_: CheckProgress) -> None:
        raise RuntimeError("the screen went away")

    apart.check(request_, None)
    worker = apart.pid
    assert worker is not None
    with pytest.raises(RuntimeError, match="the screen went away"):
        apart.check(request_, fails)
    assert gone(worker) and apart.pid is None
    assert apart.check(request_, None).flight.findings


def test_closing_mid_check_kills_the_worker(request_: CheckRequest, apart: ProcessChecks) -> None:
    """The app leaves while its checks run: the worker is killed, the check says so."""
    seen: list[int] = []

    def close_now(_: CheckProgress) -> None:
        if not seen and apart.pid is not None:
            seen.append(apart.pid)
            apart.close()  # what the app's unmount does, here from within the request

    with pytest.raises(WorkerEnded):
        apart.check(request_, close_now)
    assert gone(seen[0])
    with pytest.raises(WorkerEnded, match="closed"):
        apart.check(request_, None)  # closed for good: no new worker


def test_the_worker_ends_with_the_thread_that_started_it(request_: CheckRequest) -> None:
    """Linux's parent-death signal follows the starting thread: the TUI starts its worker
    on the controller's thread, which lives as long as the app; a worker started on a
    thread that ended would be killed, here on purpose, not left running."""
    checks = ProcessChecks()
    started: list[int] = []

    def first_check() -> None:
        checks.check(request_, None)
        started.append(checks.pid or 0)

    thread = threading.Thread(target=first_check)
    thread.start()
    thread.join()
    try:
        assert started and started[0] > 0
        assert gone(started[0])
    finally:
        checks.close()


_ORPHAN_SCRIPT = """
import sys
from pathlib import Path
from eaglebug.demo import DemoScenario
from eaglebug.tui.demo import demo_session

session = demo_session(DemoScenario.prepare(Path(sys.argv[1])), checks_apart=True)
assert session.run_checks().error is None
print(session.checks.pid, flush=True)
sys.stdin.read()  # until the test kills this process
"""


def test_no_worker_outlives_eaglebug(tmp_path: Path) -> None:
    """`kill -9` of the TUI: its checks' worker goes with it."""
    app = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path / "demo")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    assert app.stdout is not None
    try:
        worker = int(app.stdout.readline())
        assert worker not in (app.pid, os.getpid())
        os.kill(worker, 0)  # alive while eaglebug is
    finally:
        app.kill()
        app.wait()
    assert gone(worker), f"worker {worker} outlived eaglebug"
