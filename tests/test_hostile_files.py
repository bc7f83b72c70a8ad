"""Files and packages from outside, built for real (issue 24): a model package folder without
read permission, `--external-models ''`, a symlink loop beside a user's wrapper, 300 node logs
under `ulimit -n 128`, and `fix --apply` on a file with CRLF line endings.

Permissions are real: as a normal user `chmod 000` is enough; as root (CI containers) it stops
nothing, so the command runs in a child whose capability bounding set lacks CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH (prctl PR_CAPBSET_DROP before exec), which makes root obey the mode bits.
The child first proves the folder cannot be listed; if neither way exists the test fails and
says so. The file-descriptor limit is real too: `resource.setrlimit` in the child.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import gitrepo
from tests.clirun import cli, refused
from tests.test_external_models import KIMI, USER_WRAPPER, write_package
from tests.test_fix import inserted_only

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "examples" / "sglang-mini"
KIMI_FILE = "python/sglang/srt/models/kimi_k25.py"
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _obey_mode_bits() -> None:
    """In the child, before exec: root without the capabilities that bypass file modes."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def as_reader(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`argv` in a child that file modes apply to, whoever runs the tests."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        cwd=cwd,
        preexec_fn=_obey_mode_bits,
        timeout=300,
        check=False,
    )


@contextlib.contextmanager
def unreadable(folder: Path) -> Iterator[None]:
    """`folder` with mode 000, proven unreadable to `as_reader` children; restored after."""
    mode = folder.stat().st_mode
    folder.chmod(0)
    try:
        probe = as_reader(sys.executable, "-c", f"import os; os.listdir({str(folder)!r})")
        if "PermissionError" not in probe.stderr:
            pytest.fail(
                "cannot make a folder unreadable here (chmod 000 did not stop a listing, and "
                f"dropping CAP_DAC_OVERRIDE failed): {probe.stderr[-300:]}"
            )
        yield
    finally:
        folder.chmod(mode)


def eaglebug(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return as_reader(sys.executable, "-m", "eaglebug", *argv, cwd=cwd)


def one_line_refusal(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: "), proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# -- external packages --------------------------------------------------------------------------


def test_a_package_folder_without_read_permission(sglang_0523: Path, tmp_path: Path) -> None:
    package = write_package(tmp_path / "site")
    with unreadable(package):
        proc = eaglebug(
            "audit", "--sglang", str(sglang_0523), "--model-class", KIMI,
            "--external-models", str(package),
        )  # fmt: skip
    one_line_refusal(proc, "cannot read the package folder (Permission denied)")


@pytest.mark.parametrize("command", ["audit", "preflight", "fix"])
def test_an_empty_external_models_is_refused(
    sglang_059: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    which = ["--model-class", KIMI] if command != "preflight" else []
    launch = ["--", "python", "-m", "sglang.launch_server"] if command == "preflight" else []
    run = cli(capsys, command, "--sglang", str(sglang_059), "--external-models", "", *which,
              *launch)  # fmt: skip
    refused(run, "--external-models '': names no package")


def _loops_beside(package: Path) -> None:
    os.symlink("b.py", package / "a.py")
    os.symlink("a.py", package / "b.py")
    os.symlink("self.py", package / "self.py")


def test_a_symlink_loop_beside_the_wrapper_keeps_its_findings(
    sglang_0523: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = write_package(tmp_path / "site", USER_WRAPPER)
    _loops_beside(package)
    run = cli(capsys, "audit", "--sglang", str(sglang_0523), "--model-class", KIMI,
              "--external-models", str(package), "--json")  # fmt: skip
    assert run.code == 1, run.err  # the wrapper's two errors, as without the loops
    data = json.loads(run.out)
    errors = sorted(f["attribute"] for f in data["findings"] if f["severity"] == "error")
    assert errors == ["get_embed_and_head", "set_eagle3_layers_to_capture"]
    assert data["classes"][0]["class"] == f"my_models.kimi_k25.{KIMI}"
    loops = [w for w in data["warnings"] if "Too many levels of symbolic links" in w]
    assert sorted(w.split(":")[0] for w in loops) == [
        "my_models/a.py",
        "my_models/b.py",
        "my_models/self.py",
    ]


# -- several logs under a file-descriptor limit --------------------------------------------------


def _at_most_128_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))


def test_300_node_logs_under_ulimit_128(tmp_path: Path) -> None:
    """`diagnose --log` x 300 merges the logs by time: one log open at a time, not 300."""
    logs = []
    for node in range(300):
        log = tmp_path / f"node{node}.log"
        log.write_text(
            f"[2026-01-30 10:36:{node % 60:02d} TP{node * 8}] Load weight begin. "
            "avail mem=70.00 GB\n"
            f"[2026-01-30 10:37:{node % 60:02d} TP{node * 8}] Load weight end. "
            "type=DeepseekV3ForCausalLM, avail mem=30.00 GB, mem usage=40.00 GB\n"
        )
        logs += ["--log", str(log)]
    proc = subprocess.run(
        [sys.executable, "-m", "eaglebug", "diagnose", *logs, "--json"],
        capture_output=True,
        text=True,
        preexec_fn=_at_most_128_files,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Too many open files" not in proc.stderr
    data = json.loads(proc.stdout)
    assert data["findings"] == []
    # the limit was real: the same child cannot open 300 files at once
    probe = subprocess.run(
        [sys.executable, "-c", f"[open({str(logs[1])!r}) for _ in range(300)]"],
        capture_output=True,
        text=True,
        preexec_fn=_at_most_128_files,
        check=False,
    )
    assert "Too many open files" in probe.stderr


# -- fix --apply on a CRLF file -----------------------------------------------------------------


@pytest.fixture
def crlf_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    gitrepo.hermetic(monkeypatch)
    repo = tmp_path / "repo"
    shutil.copytree(MINI, repo, ignore=shutil.ignore_patterns("__pycache__"))
    wrapper = repo / KIMI_FILE
    wrapper.write_bytes(wrapper.read_bytes().replace(b"\n", b"\r\n"))
    return gitrepo.init(repo)


def test_fix_apply_on_a_crlf_file_keeps_crlf(
    crlf_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrapper = crlf_repo / KIMI_FILE
    before = wrapper.read_bytes()
    sglang = str(crlf_repo / "python")
    run = cli(capsys, "fix", "--sglang", sglang, "--model-class", KIMI, "--apply")
    assert run.code == 0, run.out + run.err
    after = wrapper.read_bytes()
    (added,) = inserted_only(before, after)  # every old line as it was, one block added
    assert "def set_eagle3_layers_to_capture(" in added
    assert after.count(b"\n") == after.count(b"\r\n")  # no bare LF: CRLF kept
    assert gitrepo.git(crlf_repo, "status", "--porcelain") == ""  # committed
    again = cli(capsys, "audit", "--sglang", sglang, "--model-class", KIMI)
    assert again.code == 0, again.out
