"""The same files in another folder, or installed again, take over the answers made for them
(`eaglebug/checks/source/content.py`): nothing is parsed again for what they answer, and any
difference in what the answers read (a runtime file, a file outside the runtime they read, a
file added) makes them a miss."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from eaglebug.checks.interface.audit import audit
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate

REPO = Path(__file__).resolve().parent.parent
KIMI = "KimiK25ForConditionalGeneration"
RUNNER = "python/sglang/srt/model_executor/model_runner.py"


def _copy(to: Path) -> Path:
    shutil.copytree(REPO / "examples" / "sglang-mini" / "python", to / "python")
    return to


@pytest.fixture
def first(tmp_path: Path) -> Path:
    return _copy(tmp_path / "first")


def _audited(root: Path) -> tuple[list[str], list[str], list[str]]:
    """(the errors found, the files parsed, the warnings), by a fresh index as a run makes."""
    parsed: list[str] = []
    index = TreeIndex(locate(str(root)), parsed=parsed.append)
    result = audit(index, KIMI)
    index.save()
    errors = sorted(f"{f.id}:{f.attribute}" for f in result.findings if f.severity == "error")
    return errors, parsed, list(index.warnings)


def test_the_same_files_in_another_folder_take_the_answers_over(
    first: Path, tmp_path: Path
) -> None:
    cold = _audited(first)
    assert cold[0] and cold[1], "the first folder is audited: it parses and finds the errors"
    again = _copy(tmp_path / "again")
    errors, parsed, warnings = _audited(again)
    assert (errors, warnings) == (cold[0], cold[2])
    assert parsed == [], "the audit's answer was taken over: no file parsed"
    assert _audited(again)[1] == [], "and kept for this folder"


def test_a_reinstall_that_changed_every_mtime_takes_them_over(first: Path) -> None:
    cold = _audited(first)
    for path in first.rglob("*.py"):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    errors, parsed, _ = _audited(first)
    assert (errors, parsed) == (cold[0], [])


def test_a_changed_runtime_file_is_another_content(first: Path, tmp_path: Path) -> None:
    _audited(first)
    other = _copy(tmp_path / "other")
    with (other / RUNNER).open("a") as handle:
        handle.write("\nCHANGED = 1\n")
    assert _audited(other)[1], "a runtime file differs: computed afresh"


def test_a_read_file_outside_the_runtime_is_checked(first: Path, tmp_path: Path) -> None:
    _audited(first)
    index = TreeIndex(locate(str(first)))
    outside = sorted(r for r in index.answers.content[1]) if index.answers.content else []
    assert outside, "the answers read a file outside the runtime (the launch module)"
    other = _copy(tmp_path / "other")
    with (other / "python" / outside[0]).open("a") as handle:
        handle.write("\n# edited\n")
    assert _audited(other)[1], "a file the answers read differs: computed afresh"


def test_a_file_added_is_another_content(first: Path, tmp_path: Path) -> None:
    _audited(first)
    other = _copy(tmp_path / "other")
    (other / "python" / "sglang" / "extra_module.py").write_text("X = 1\n")
    assert _audited(other)[1]


def test_a_stale_pointer_is_a_miss(first: Path, tmp_path: Path) -> None:
    """The folder the pointer names changed (and was audited again) since: its answers are
    for another content now, so the copy made before the change computes its own."""
    _audited(first)
    other = _copy(tmp_path / "other")
    with (first / RUNNER).open("a") as handle:
        handle.write("\nCHANGED = 1\n")
    _audited(first)  # its answers file now says another content
    errors, parsed, _ = _audited(other)
    assert parsed and errors
