"""Bad input of every kind ends in one `error:` line, one `hint:` line and exit 2.

Never `internal error: <Exception>` (a traceback in disguise), never a hang, never a half-written
file. The cases are those a battery of hostile inputs found (issue 9): configs nested 100,000
deep or with a head count of 0, a 400-digit --tp, `nan` for a size, a state file that is not
UTF-8 or holds a pid of "abc", -1 or 12.5, FIFOs where files belong, a tree file that does not
parse (warned about on every audit, cached or not), paths with a newline in them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import clirun
from tests.clirun import Run, cli, state_file_in
from tests.configs import eagle3, llama, write_model

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "examples" / "sglang-mini"
KIMI = "KimiK25ForConditionalGeneration"
LAUNCH = ["python", "-m", "sglang.launch_server"]
HUGE = "9" * 5000


def refused(run: Run, *needles: str) -> str:
    """The CLI's refusal (`tests.clirun.refused`); its error line, which holds every needle."""
    line = clirun.refused(run)[0]
    for needle in needles:
        assert needle in line, (needle, line)
    return line


@pytest.fixture
def models(tmp_path: Path) -> Path:
    write_model(tmp_path / "target", llama())
    write_model(tmp_path / "draft", eagle3())
    return tmp_path


def preflight(
    capsys: pytest.CaptureFixture[str], sglang: Path, *words: str, options: tuple[str, ...] = ()
) -> Run:
    """`preflight` of the launch `words`; `options` are eaglebug's own (before the `--`)."""
    return cli(capsys, "preflight", "--sglang", str(sglang), *options, "--", *LAUNCH, *words)


def eagle(models: Path, draft: str = "draft") -> list[str]:
    return [
        "--model-path",
        str(models / "target"),
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        str(models / draft),
    ]


# -- model configs ---------------------------------------------------------------------------


def test_a_config_nested_100000_deep(
    sglang_059: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(cli(capsys, "audit", "--sglang", str(sglang_059), "--model-path", str(deep)), "nested")
    refused(preflight(capsys, sglang_059, "--model-path", str(deep)), "nested too deeply")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_key_value_heads", 0),
        ("num_attention_heads", 0),
        ("num_hidden_layers", -1),
        ("hidden_size", "4096"),
        ("vocab_size", True),
    ],
)
def test_a_draft_with_an_impossible_size(
    sglang_059: Path, models: Path, capsys: pytest.CaptureFixture[str], key: str, value: Any
) -> None:
    write_model(models / "bad", eagle3(**{key: value}))
    line = refused(preflight(capsys, sglang_059, *eagle(models, "bad"), "--tp", "8"), key)
    assert "bad/config.json" in line and "positive integer" in line


def test_a_sub_config_with_an_impossible_size(
    sglang_059: Path, models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_model(models / "wrapped", llama(text_config={"num_key_value_heads": 0}))
    run = preflight(capsys, sglang_059, "--model-path", str(models / "wrapped"))
    refused(run, "text_config.num_key_value_heads is 0")


def test_config_json_that_is_a_folder(
    sglang_059: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m" / "config.json").mkdir(parents=True)
    run = cli(capsys, "audit", "--sglang", str(sglang_059), "--model-path", str(tmp_path / "m"))
    refused(run, "is a folder")


# -- numbers on the command line -------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--tp", "9" * 400, "too large"),
        ("--tp", "nan", "expected an integer"),
        ("--mem-fraction-static", "nan", "expected a finite number"),
        ("--mem-fraction-static", "inf", "expected a finite number"),
    ],
)
def test_launch_flag_values_no_launch_can_use(
    sglang_059: Path,
    models: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    value: str,
    says: str,
) -> None:
    run = preflight(capsys, sglang_059, "--model-path", str(models / "target"), flag, value)
    line = refused(run, flag, says)
    assert len(line) < 200, "the 400 digits are echoed back"


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", "lots"])
@pytest.mark.parametrize("flag", ["--gpu-mem-gib", "--gpu-free-gib"])
def test_gpu_mem_gib_must_be_a_positive_finite_number(
    sglang_059: Path, models: Path, capsys: pytest.CaptureFixture[str], value: str, flag: str
) -> None:
    run = preflight(
        capsys, sglang_059, "--model-path", str(models / "target"), options=(flag, value)
    )
    refused(run, flag)


# -- the state file ----------------------------------------------------------------------------

LAUNCH_ROW = {
    "number": 1,
    "argv": LAUNCH,
    "env_additions": {},
    "log": "launch-001.log",
    "pid": 4_194_304,
    "create_time": 1.0,
    "started_at": 1.0,
}
# Numbers no pid or time can be (issue 24; the other hostile numbers: test_hostile_numbers.py).
NUMBER_STATES = {
    "pid of 31 digits": json.dumps({"schema": 1, "launches": [{**LAUNCH_ROW, "pid": 10**30}]}),
    "pid past a C int": json.dumps({"schema": 1, "launches": [{**LAUNCH_ROW, "pid": 2**40}]}),
    "pid of 5000 digits": json.dumps({"schema": 1, "launches": [LAUNCH_ROW]}).replace(
        "4194304", HUGE
    ),
    "create_time 1e400": json.dumps({"schema": 1, "launches": [LAUNCH_ROW]}).replace(
        '"create_time": 1.0', '"create_time": 1e400'
    ),
    "started_at NaN": json.dumps({"schema": 1, "launches": [LAUNCH_ROW]}).replace(
        '"started_at": 1.0', '"started_at": NaN'
    ),
    "number a bool": json.dumps({"schema": 1, "launches": [{**LAUNCH_ROW, "number": True}]}),
    "exit_code 2**40": json.dumps({"schema": 1, "launches": [{**LAUNCH_ROW, "exit_code": 2**40}]}),
}
BAD_STATES: dict[str, bytes] = {
    "not UTF-8": b"\xff\xfe{}",
    "not JSON": b"{not json",
    "a list": b"[]",
    "nested deep": b"[" * 100_000 + b"]" * 100_000,
    **{
        f"{key}={value!r}": json.dumps(
            {"schema": 1, "launches": [{**LAUNCH_ROW, key: value}]}
        ).encode()
        for key, value in [
            ("pid", "abc"),
            ("pid", -1),
            ("pid", 0),
            ("pid", 12.5),
            ("ready_after_s", "soon"),
            ("create_time", None),
            ("argv", "python"),
            ("env_additions", {"A": 1}),
        ]
    },
    "launches not a list": json.dumps({"schema": 1, "launches": {}}).encode(),
    "missing pid": json.dumps(
        {"schema": 1, "launches": [{k: v for k, v in LAUNCH_ROW.items() if k != "pid"}]}
    ).encode(),
    **{case: text.encode() for case, text in NUMBER_STATES.items()},
}


@pytest.fixture(params=["status", "stop", "launch", "probe"])
def reads_state(request: pytest.FixtureRequest) -> list[str]:
    """The words of a command that reads the state file first; `launch` with a command to
    launch (it would start nothing)."""
    command: str = request.param
    return [command] + (["--", sys.executable, "-c", "pass"] if command == "launch" else [])


@pytest.mark.parametrize("case", sorted(BAD_STATES))
def test_a_bad_state_file_is_reported_not_crashed_on(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    reads_state: list[str],
) -> None:
    state = state_file_in(tmp_path, monkeypatch, BAD_STATES[case])
    line = refused(cli(capsys, *reads_state), str(state))
    assert "not a state file eaglebug can read" in line
    assert HUGE not in line, "a 5000-digit number is echoed back"
    assert state.read_bytes() == BAD_STATES[case], "the bad file was overwritten"
    assert sorted(p.name for p in state.parent.iterdir()) == ["state.json"], "something started"


def test_a_state_file_without_newer_fields_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state_file_in(tmp_path, monkeypatch, json.dumps({"schema": 1, "launches": [LAUNCH_ROW]}))
    run = cli(capsys, "status")
    assert run.code == 0, run.err
    assert run.out.startswith("launch 1: exited, pid 4194304"), run.out


def test_state_folder_that_is_a_file_or_a_file_that_is_a_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    reads_state: list[str],
) -> None:
    argv = reads_state
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    (tmp_path / "a" / ".eaglebug").write_text("not a folder\n")
    refused(cli(capsys, *argv), ".eaglebug: is a file")
    (tmp_path / "b" / ".eaglebug" / "state.json").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "b")
    refused(cli(capsys, *argv), "state.json: is a folder")
    assert list((tmp_path / "b" / ".eaglebug").iterdir()) == [
        tmp_path / "b" / ".eaglebug" / "state.json"
    ]


# -- what eaglebug reads must be a regular file ------------------------------------------------


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    """A private copy of the example tree (its python/ folder)."""
    shutil.copytree(
        MINI / "python", tmp_path / "python", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path / "python"


def test_a_fifo_in_the_tree_is_skipped_with_a_warning(mini: Path) -> None:
    os.mkfifo(mini / "sglang" / "srt" / "models" / "pipe.py")
    run = subprocess.run(
        [sys.executable, "-m", "eaglebug", "audit", "--sglang", str(mini), "--model-class", KIMI],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stderr  # the wrapper's findings, not a hang or a crash
    assert "warning: sglang/srt/models/pipe.py: skipped, not a regular file" in run.stderr


@pytest.mark.parametrize("mode", ["diagnose", "watch"])
def test_a_fifo_as_the_log_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    argv = ["diagnose", "--log", str(fifo)] if mode == "diagnose" else ["watch", "--log", str(fifo)]
    run = subprocess.run(
        [sys.executable, "-m", "eaglebug", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    refused(Run(run.returncode, run.stdout, run.stderr), "not a regular file")


def test_an_unreadable_log_has_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 00:00:00] Load weight begin.\n")
    real_open = Path.open

    def denied(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == log:
            raise PermissionError(13, "Permission denied")  # what a non-root user meets
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", denied)
    refused(cli(capsys, "diagnose", "--log", str(log)), "Permission denied")


# -- the tree's own files --------------------------------------------------------------------


def test_a_file_that_does_not_parse_is_warned_about_on_every_audit(
    mini: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = mini / "sglang" / "srt" / "model_executor" / "cuda_graph_runner.py"
    runner.write_text(runner.read_text() + "\ndef broken(:\n")
    warning = "warning: sglang/srt/model_executor/cuda_graph_runner.py: skipped, syntax error"
    for attempt in ("cold", "warm (cached)"):
        run = cli(capsys, "audit", "--sglang", str(mini), "--model-class", KIMI)
        assert run.code == 1, (attempt, run.err)
        assert warning in run.err, attempt


def test_a_syntax_error_in_the_class_file_names_the_file_and_line(
    mini: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = mini / "sglang" / "srt" / "models" / "kimi_k25.py"
    lines = kimi.read_text().splitlines()
    lines.insert(10, "def broken(:")
    kimi.write_text("\n".join(lines) + "\n")
    for _attempt in ("cold", "warm"):
        line = refused(
            cli(capsys, "audit", "--sglang", str(mini), "--model-class", KIMI),
            "sglang/srt/models/kimi_k25.py: syntax error on line 11",
        )
        assert "did you mean" not in capsys.readouterr().err
        assert KIMI in line


def test_a_newline_in_a_path_stays_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    line = refused(cli(capsys, "audit", "--sglang", "/tmp/a\nb", "--model-class", KIMI))
    assert "/tmp/a\\nb" in line


# -- the machine ---------------------------------------------------------------------------------


def test_fix_apply_without_git_is_one_error_line_and_writes_nothing(
    mini: Path, tmp_path: Path
) -> None:
    """GitPython refuses to load where git cannot be run: that is the machine's fact, said in
    one line (it was an "internal error" with GitPython's whole message), before any write."""
    before = {p: p.read_bytes() for p in mini.rglob("*") if p.is_file()}
    nowhere = tmp_path / "bin"
    nowhere.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "eaglebug", "fix", "--apply", "--sglang", str(mini),
         "--model-class", KIMI],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": str(nowhere)},
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    error, hint = run.stderr.splitlines()
    assert error.startswith("error: git cannot be run here (GitPython: "), error
    assert hint == "hint: install git, or point GIT_PYTHON_GIT_EXECUTABLE at it"
    assert {p: p.read_bytes() for p in mini.rglob("*") if p.is_file()} == before
