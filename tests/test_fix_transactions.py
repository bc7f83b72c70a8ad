"""`fix --apply` and `undo` under hostile git states: every failure leaves the work tree, the
index and HEAD exactly as they were, and says which git step failed and what to do.

The cases come from a battery run as a new user would meet them (issue 9): a commit that a
hook, a signing setup or a missing identity refuses; an undo that cannot commit; a repository
git calls "dubious"; a tracked symlink as the model file; two fixes at the same moment; an undo
beside unrelated staged work. The real sglang 0.5.9 tree is the material where the case needs
it (the Kimi-K2.5 wrapper, as in the issue); the example tree elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.interface.audit import audit
from eaglebug.checks.interface.patching import plan_patches
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.git.fixing import apply_patch
from tests import clirun, gitrepo
from tests.clirun import Run, cli

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "examples" / "sglang-mini"
KIMI = "KimiK25ForConditionalGeneration"
KIMI_FILE = "sglang/srt/models/kimi_k25.py"
MINI_KIMI = f"python/{KIMI_FILE}"
THREE = ("get_embed_and_head", "set_eagle3_layers_to_capture", "set_embed_and_head")


@pytest.fixture(autouse=True)
def _hermetic_git(monkeypatch: pytest.MonkeyPatch) -> None:
    gitrepo.hermetic(monkeypatch)


def fix(capsys: pytest.CaptureFixture[str], sglang: Path, *flags: str) -> Run:
    return cli(capsys, "fix", "--sglang", str(sglang), "--model-class", KIMI, "--apply", *flags)


def refused(run: Run, *needles: str) -> list[str]:
    """The CLI's refusal, with git's reason instead of GitPython's dump, nothing on stdout."""
    assert run.out == "", run.out
    assert "Cmd('git')" not in run.err, "GitPython's dump instead of git's reason"
    return clirun.refused(run, *needles)


@pytest.fixture
def mini_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "mini"
    shutil.copytree(MINI, repo, ignore=shutil.ignore_patterns("__pycache__"))
    return gitrepo.init(repo)


@pytest.fixture
def before_fix(mini_repo: Path, capsys: pytest.CaptureFixture[str]) -> bytes:
    """`fix --apply` committed in the mini repository; Kimi's file as it was before."""
    original = (mini_repo / MINI_KIMI).read_bytes()
    assert fix(capsys, mini_repo / "python").code == 0
    return original


def _no_identity(repo: Path) -> None:
    gitrepo.git(repo, "config", "--unset", "user.email")
    gitrepo.git(repo, "config", "user.useConfigOnly", "true")


def _failing_hook(repo: Path, text: str) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\n{text}exit 1\n")
    hook.chmod(0o755)


def _unsigned(repo: Path) -> None:
    gitrepo.git(repo, "config", "commit.gpgsign", "true")
    gitrepo.git(repo, "config", "gpg.program", "false")  # a signing program that always fails


BROKEN_COMMITS = {
    "silent hook": (lambda r: _failing_hook(r, ""), "pre-commit hook refused the commit"),
    "talking hook": (
        lambda r: _failing_hook(r, "echo 'lint: trailing whitespace' >&2\n"),
        "lint: trailing whitespace",
    ),
    "gpgsign without a key": (_unsigned, "gpg failed to sign"),
    "no identity": (_no_identity, "no email was given"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_COMMITS))
def test_a_refused_commit_leaves_nothing_staged(
    repo_059: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    breaks, says = BROKEN_COMMITS[case]
    breaks(repo_059)
    kimi = repo_059 / KIMI_FILE
    before = gitrepo.everything(repo_059, kimi)
    lines = refused(fix(capsys, repo_059), says)
    assert gitrepo.everything(repo_059, kimi) == before  # bytes, status, HEAD, index
    assert gitrepo.git(repo_059, "diff", "--cached") == "", "the patch stayed staged"
    assert "git" in lines[0]


def test_undo_that_cannot_commit_changes_nothing(
    repo_059: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fix(capsys, repo_059).code == 0
    _no_identity(repo_059)
    kimi = repo_059 / KIMI_FILE
    before = gitrepo.everything(repo_059, kimi)
    refused(cli(capsys, "undo", "--repo", str(repo_059)), "no email was given", "user.email")
    assert gitrepo.everything(repo_059, kimi) == before
    for method in THREE:  # the fix's lines are all still there
        assert f"def {method}(" in kimi.read_text()


def test_undo_whose_commit_a_hook_refuses_changes_nothing(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The revert is written and staged before git commits; a refusal must undo both."""
    assert fix(capsys, mini_repo / "python").code == 0
    _failing_hook(mini_repo, "")
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.everything(mini_repo, kimi)
    refused(cli(capsys, "undo", "--repo", str(mini_repo)), "pre-commit hook")
    assert gitrepo.everything(mini_repo, kimi) == before
    assert not (mini_repo / ".git" / "REVERT_HEAD").exists()


def test_dubious_ownership_is_one_line_with_gits_own_remedy(
    mini_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.everything(mini_repo, kimi)
    # git's own switch for "this repository belongs to another user" (shared GPU boxes).
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
    lines = refused(fix(capsys, mini_repo / "python"), "dubious ownership")
    assert lines[1] == f"hint: git config --global --add safe.directory {mini_repo}"
    lines = refused(cli(capsys, "undo", "--repo", str(mini_repo)), "dubious ownership")
    assert "safe.directory" in lines[1]
    monkeypatch.delenv("GIT_TEST_ASSUME_DIFFERENT_OWNER")
    assert gitrepo.everything(mini_repo, kimi) == before


def test_a_tracked_symlink_is_patched_through_the_link(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = mini_repo / MINI_KIMI
    real = mini_repo / "vendor" / "kimi_k25.py"
    real.parent.mkdir()
    os.replace(link, real)
    link.symlink_to(os.path.relpath(real, link.parent))
    base = gitrepo.commit_all(mini_repo, "kimi_k25.py lives in vendor/")
    original = real.read_bytes()
    run = fix(capsys, mini_repo / "python")
    assert run.code == 0, run.err
    assert link.is_symlink(), "the link was replaced by a regular file"
    assert gitrepo.git(mini_repo, "ls-tree", "HEAD", MINI_KIMI).startswith("120000 ")
    assert gitrepo.changed_files(mini_repo) == ["vendor/kimi_k25.py"]
    assert gitrepo.count(mini_repo, f"{base}..HEAD") == 1
    assert gitrepo.status(mini_repo) == ""
    patched = real.read_text()
    assert all(f"def {m}(" in patched for m in THREE)
    assert "wrote" in run.out and "vendor/kimi_k25.py" in run.out
    fresh = audit(TreeIndex(locate(str(mini_repo / "python")), use_cache=False), KIMI)
    assert [f.attribute for f in fresh.findings if f.id == "interface.missing"] == []
    assert cli(capsys, "undo", "--repo", str(mini_repo)).code == 0
    assert real.read_bytes() == original and link.is_symlink()


def test_a_symlink_out_of_the_repository_is_refused_for_a_commit(
    mini_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = mini_repo / MINI_KIMI
    outside = tmp_path / "elsewhere" / "kimi_k25.py"
    outside.parent.mkdir()
    shutil.copy(link, outside)
    link.unlink()
    link.symlink_to(outside)
    gitrepo.commit_all(mini_repo, "kimi_k25.py is a link out of the repository")
    before = (gitrepo.everything(mini_repo, link), gitrepo.sha256(outside))
    refused(fix(capsys, mini_repo / "python"), "not in a git repository")
    assert (gitrepo.everything(mini_repo, link), gitrepo.sha256(outside)) == before


def test_undo_leaves_unrelated_staged_work_staged(
    mini_repo: Path, before_fix: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = mini_repo / MINI_KIMI
    notes = mini_repo / "NOTES.md"
    notes.write_text("work in progress\n")
    gitrepo.git(mini_repo, "add", "NOTES.md")
    staged = gitrepo.git(mini_repo, "diff", "--cached")
    run = cli(capsys, "undo", "--repo", str(mini_repo))
    assert run.code == 0, run.err
    assert kimi.read_bytes() == before_fix
    assert gitrepo.changed_files(mini_repo) == [MINI_KIMI], "the revert took the staged file"
    assert gitrepo.git(mini_repo, "diff", "--cached") == staged
    assert gitrepo.status(mini_repo) == "A  NOTES.md"
    assert "This reverts commit" in gitrepo.message(mini_repo)


@pytest.mark.usefixtures("before_fix")
def test_undo_after_a_later_commit_on_the_same_lines_is_refused(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = mini_repo / MINI_KIMI
    text = kimi.read_text()
    kimi.write_text(text.replace("return self.language_model.get_embed_and_head()", "return None"))
    gitrepo.commit_all(mini_repo, "a later edit of the delegation")
    before = gitrepo.everything(mini_repo, kimi)
    refused(cli(capsys, "undo", "--repo", str(mini_repo)), "later commits changed the same lines")
    assert gitrepo.everything(mini_repo, kimi) == before


def test_undo_after_a_later_commit_elsewhere_in_the_file_still_reverts(
    mini_repo: Path, before_fix: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = mini_repo / MINI_KIMI
    kimi.write_text("# a header added later\n" + kimi.read_text())
    gitrepo.commit_all(mini_repo, "a later edit elsewhere")
    assert cli(capsys, "undo", "--repo", str(mini_repo)).code == 0
    assert kimi.read_text() == "# a header added later\n" + before_fix.decode()
    assert gitrepo.status(mini_repo) == ""


def test_a_second_apply_of_the_same_preview_sees_the_first(mini_repo: Path) -> None:
    """What the loser of a race finds once it holds the lock: the winner's commit."""
    sglang = mini_repo / "python"
    index = TreeIndex(locate(str(sglang)), use_cache=False)
    [first] = plan_patches(index, audit(index, KIMI).reports)
    [second] = plan_patches(index, audit(index, KIMI).reports)
    apply_patch(first, commit=True, reaudit=list)
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.everything(mini_repo, kimi)
    with pytest.raises(InputError, match="already holds this patch"):
        apply_patch(second, commit=True, reaudit=list)
    assert gitrepo.everything(mini_repo, kimi) == before


def test_two_fixes_at_the_same_moment_make_one_commit(mini_repo: Path) -> None:
    kimi = mini_repo / MINI_KIMI
    base = gitrepo.head(mini_repo)
    argv = [sys.executable, "-m", "eaglebug", "fix", "--sglang", str(mini_repo / "python")]
    argv += ["--model-class", KIMI, "--apply", "--no-cache"]
    env = {**os.environ, **gitrepo.HERMETIC_ENV}
    racers = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(3)
    ]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in racers]
    for racer in racers:
        for stream in (racer.stdout, racer.stderr):
            if stream:
                stream.close()
    codes = sorted(code for code, _ in results)
    assert codes[0] == 0, results
    for code, err in results:
        assert code in {0, 2}, (code, err)
        if code == 2:
            assert len(err.splitlines()) == 2 and "internal error" not in err, err
    assert gitrepo.count(mini_repo, f"{base}..HEAD") == 1, "one commit, whoever won"
    assert gitrepo.status(mini_repo) == ""
    assert gitrepo.git(mini_repo, "diff", "--cached") == ""
    assert gitrepo.git(mini_repo, "show", f"HEAD:{MINI_KIMI}") + "\n" == kimi.read_text()
    for method in THREE:
        assert kimi.read_text().count(f"def {method}(") == 1
