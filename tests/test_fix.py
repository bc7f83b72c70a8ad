"""`eaglebug fix` and `eaglebug undo`: the generated delegations, the commit, and every refusal.

Acceptance runs on the real sglang 0.5.9 tree in a scratch git repository and compares the
result with the fix sglang 0.5.10 shipped; the refusals run on a copy of the example tree
(examples/sglang-mini) in a fresh repository; the generation rules run on small synthetic trees.
The CLI runs in-process (`eaglebug.cli.parser.main`), and every repository lives under tmp_path.
"""

from __future__ import annotations
import __future__

import ast
import dataclasses
import difflib
import inspect
import json
import os
import shutil
import stat
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.interface.audit import audit
from eaglebug.checks.interface.patching import Patch, plan_patches
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.git.fixing import apply_patch, find_repo
from tests import gitrepo
from tests.clirun import Run, cli
from tests.synthetic import write_tree

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "examples" / "sglang-mini"
KIMI = "KimiK25ForConditionalGeneration"
KIMI_QUALNAME = "sglang.srt.models.kimi_k25.KimiK25ForConditionalGeneration"
KIMI_FILE = "sglang/srt/models/kimi_k25.py"  # relative to the folder holding sglang/
MINI_KIMI = f"python/{KIMI_FILE}"  # relative to the mini repository's root
THREE = ("get_embed_and_head", "set_eagle3_layers_to_capture", "set_embed_and_head")


@pytest.fixture(autouse=True)
def _hermetic_git(monkeypatch: pytest.MonkeyPatch) -> None:
    gitrepo.hermetic(monkeypatch)


def fix(capsys: pytest.CaptureFixture[str], sglang: Path, *flags: str) -> Run:
    return cli(capsys, "fix", "--sglang", str(sglang), "--model-class", KIMI, *flags)


def assert_refused(run: Run, *needles: str) -> None:
    """Exit 2, nothing on stdout, and exactly one `error:` line and one `hint:` line."""
    assert run.code == 2, (run.code, run.out, run.err)
    assert run.out == ""
    lines = run.err.splitlines()
    assert len(lines) == 2, run.err
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), run.err
    assert "Traceback" not in run.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# pyflakes' rules only, no project or user config: undefined names, unused imports, ...
RUFF_F = (
    *(sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache"),
    *("--select", "F", "--output-format", "concise"),
)


def ruff_f(path: Path) -> None:
    """pyflakes' rules (undefined names, unused imports, ...) pass on the file."""
    proc = subprocess.run(
        [*RUFF_F, str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def inserted_only(before: bytes, after: bytes) -> list[str]:
    """The blocks of lines `after` adds to `before`; fails if any line of `before` changed."""
    old = before.decode().splitlines(keepends=True)
    new = after.decode().splitlines(keepends=True)
    blocks = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, old, new, autojunk=False
    ).get_opcodes():
        assert tag in {"equal", "insert"}, (tag, old[i1:i2], new[j1:j2])
        if tag == "insert":
            blocks.append("".join(new[j1:j2]))
    return blocks


def interface_problems(findings: list[Finding]) -> list[tuple[str, str | None]]:
    """Interface findings at error or warning severity (info-level uses outside speculative
    decoding, such as forward_split_prefill, are not the fix's business)."""
    return [
        (f.id, f.attribute)
        for f in findings
        if f.id.startswith("interface.") and f.severity in {"error", "warning"}
    ]


# -- reading methods back out of a patched file ----------------------------------------------


def class_methods(source: str | bytes, class_name: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(source)
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def calls_on(fn: ast.FunctionDef, delegate: str) -> list[str]:
    """The methods of `self.<delegate>` that `fn` calls (`delegate` may be a dotted path)."""
    return [
        n.func.attr
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and ast.unparse(n.func.value) == f"self.{delegate}"
    ]


def compiled(fn: ast.FunctionDef) -> Callable[..., Any]:
    """One method compiled on its own (annotations stay unevaluated), ready to call with a
    stand-in `self`; a property gives its getter."""
    module = ast.Module(body=[fn], type_ignores=[])
    flags = __future__.annotations.compiler_flag
    code = compile(module, f"<{fn.name}>", "exec", flags=flags, dont_inherit=True)
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    obj = namespace[fn.name]
    return obj.fget if isinstance(obj, property) else obj


class Recorder:
    """Stands in for the inner model: records every method call, returns a token."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., str]:
        if name.startswith("__"):
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> str:
            self.calls.append((name, args, kwargs))
            return f"{name}-result"

        return method


def forwarded(
    fn: Callable[..., Any], delegate: str, *args: Any, **kwargs: Any
) -> tuple[Any, list[tuple[str, tuple[Any, ...], dict[str, Any]]]]:
    """Call a delegation method on a stand-in wrapper: (its result, the calls the inner got)."""
    inner = Recorder()
    result = fn(types.SimpleNamespace(**{delegate: inner}), *args, **kwargs)
    return result, inner.calls


# -- 1. acceptance on the real sglang 0.5.9 tree ---------------------------------------------


def test_fix_on_059_previews_applies_once_and_matches_the_0510_fix(
    repo_059: Path, sglang_0510: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = repo_059 / KIMI_FILE
    original = kimi.read_bytes()
    start = gitrepo.head(repo_059)
    # What `audit --json` tells the user the fix is, method by method.
    shown = cli(capsys, "audit", "--sglang", str(repo_059), "--model-class", KIMI, "--json")
    told = {
        f["attribute"]: f["fix"]
        for f in json.loads(shown.out)["findings"]
        if f["fix_detail"] and f["fix_detail"]["kind"] == "patch"
    }
    assert sorted(told) == sorted(THREE)

    preview = fix(capsys, repo_059)
    assert preview.code == 1, preview.err
    assert f"--- a/{KIMI_FILE}" in preview.out
    assert "+    def get_embed_and_head" in preview.out
    assert kimi.read_bytes() == original and gitrepo.head(repo_059) == start

    applied = fix(capsys, repo_059, "--apply")
    assert applied.code == 0, applied.err
    assert gitrepo.count(repo_059, f"{start}..HEAD") == 1
    assert gitrepo.git(repo_059, "rev-parse", "HEAD~1") == start
    assert gitrepo.changed_files(repo_059) == [KIMI_FILE]
    stat_text = gitrepo.git(repo_059, "show", "--stat", "--format=", "HEAD")
    assert KIMI_FILE in stat_text and "1 file changed" in stat_text
    assert gitrepo.status(repo_059) == ""
    message = gitrepo.message(repo_059)
    subject = message.splitlines()[0]
    assert KIMI in subject and "self.language_model" in subject
    assert all(name in subject for name in THREE), subject
    assert f"Eaglebug-Fix: {KIMI_QUALNAME}" in message.splitlines()
    head_sha = gitrepo.head(repo_059)
    assert head_sha[:10] in applied.out

    # Only additions, at the end of the class: every original line is still there, in order.
    patched = kimi.read_bytes()
    [block] = inserted_only(original, patched)
    assert all(f"def {name}(" in block for name in THREE)
    # ... and exactly what the audit said the fix was: one generator for both.
    for name, text in told.items():
        assert text in block, (name, text, block)

    # A fresh audit of the patched tree has nothing left to say about the interface.
    fresh = audit(TreeIndex(locate(str(repo_059)), use_cache=False), KIMI)
    assert interface_problems(fresh.findings) == []

    # The same delegations sglang 0.5.10 added by hand.
    mine = class_methods(patched, KIMI)
    release = class_methods((sglang_0510 / KIMI_FILE).read_bytes(), KIMI)
    for name in THREE:
        assert name in mine and name in release
        assert calls_on(mine[name], "language_model") == [name]
        assert calls_on(release[name], "language_model") == [name]
    capture = mine["set_eagle3_layers_to_capture"].args
    assert [a.arg for a in capture.posonlyargs + capture.args] == ["self", "layer_ids"]
    assert len(capture.defaults) == 1 and not capture.kwonlyargs
    for name, args, kwargs in [
        ("get_embed_and_head", (), {}),
        ("set_eagle3_layers_to_capture", (), {}),
        ("set_eagle3_layers_to_capture", ([2, 30, 58],), {}),
        ("set_eagle3_layers_to_capture", (), {"layer_ids": [2, 30, 58]}),
        ("set_embed_and_head", ("embed", "head"), {}),
    ]:
        _, got = forwarded(compiled(mine[name]), "language_model", *args, **kwargs)
        _, expected = forwarded(compiled(release[name]), "language_model", *args, **kwargs)
        assert got == expected and len(got) == 1, (name, got, expected)
    result, _ = forwarded(compiled(mine["get_embed_and_head"]), "language_model")
    assert result == "get_embed_and_head-result"
    ruff_f(kimi)

    # Idempotent: the second run finds nothing to fix and makes no commit.
    again = fix(capsys, repo_059, "--apply")
    assert again.code == 0, again.err
    assert "nothing to fix" in again.out
    assert gitrepo.head(repo_059) == head_sha
    assert kimi.read_bytes() == patched
    assert gitrepo.status(repo_059) == ""


def test_undo_on_059_restores_the_original_bytes_with_a_revert(
    repo_059: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = repo_059 / KIMI_FILE
    original = gitrepo.sha256(kimi)
    start = gitrepo.head(repo_059)
    assert fix(capsys, repo_059, "--apply").code == 0
    fixed = gitrepo.head(repo_059)
    assert gitrepo.sha256(kimi) != original

    undone = cli(capsys, "undo", "--repo", str(repo_059))
    assert undone.code == 0, undone.err
    assert gitrepo.sha256(kimi) == original
    assert gitrepo.count(repo_059, f"{start}..HEAD") == 2  # the fix and its revert, no reset
    assert gitrepo.git(repo_059, "rev-parse", "HEAD~1") == fixed
    assert gitrepo.changed_files(repo_059) == [KIMI_FILE]
    revert = gitrepo.message(repo_059)
    assert revert.startswith('Revert "') and f"This reverts commit {fixed}" in revert
    assert fixed[:10] in undone.out
    assert gitrepo.status(repo_059) == ""


MISTRAL3 = "Mistral3ForConditionalGeneration"
MISTRAL_FILE = "sglang/srt/models/mistral.py"


def test_two_level_wrapper_on_059_is_fixed_through_the_whole_path_in_one_commit(
    repo_059: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.5.9's Mistral3 `__getattr__` forwards to `self.inner` (a LlavaForConditionalGeneration)
    which lacks the EAGLE-3 methods too and holds `self.language_model`: the delegate is the
    path `inner.language_model`, and the fix delegates through it, one commit, one file."""
    shown = cli(capsys, "audit", "--sglang", str(repo_059), "--model-class", MISTRAL3, "--json")
    errors = {
        f["attribute"]: f["delegate"]
        for f in json.loads(shown.out)["findings"]
        if f["severity"] == "error"
    }
    assert errors == {
        "get_embed_and_head": "inner.language_model",
        "set_eagle3_layers_to_capture": "inner.language_model",
    }
    start = gitrepo.head(repo_059)
    applied = cli(capsys, "fix", "--sglang", str(repo_059), "--model-class", MISTRAL3, "--apply")
    assert applied.code == 0, applied.err
    assert gitrepo.count(repo_059, f"{start}..HEAD") == 1
    assert gitrepo.changed_files(repo_059) == [MISTRAL_FILE]
    assert "self.inner.language_model" in gitrepo.message(repo_059).splitlines()[0]
    mine = class_methods((repo_059 / MISTRAL_FILE).read_bytes(), MISTRAL3)
    for name in errors:
        assert calls_on(mine[name], "inner.language_model") == [name]
    fresh = audit(TreeIndex(locate(str(repo_059)), use_cache=False), MISTRAL3)
    assert interface_problems(fresh.findings) == []


# -- 2. preview ------------------------------------------------------------------------------


@pytest.fixture
def mini_repo(tmp_path: Path) -> Path:
    """The example tree (and its model folders) in a fresh repository, everything committed."""
    repo = tmp_path / "repo"
    shutil.copytree(MINI, repo, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "NOTES.md").write_text("notes\n")
    return gitrepo.init(repo)


def test_preview_prints_the_diff_and_changes_nothing(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.state(mini_repo, kimi)
    run = fix(capsys, mini_repo / "python")
    assert run.code == 1, run.err
    assert f"--- a/{KIMI_FILE}\n+++ b/{KIMI_FILE}\n" in run.out
    assert "+    def get_embed_and_head" in run.out
    assert "--apply" in run.out
    assert gitrepo.state(mini_repo, kimi) == before

    as_json = fix(capsys, mini_repo / "python", "--json")
    assert as_json.code == 1, as_json.err
    data = json.loads(as_json.out)
    [patch] = data["patches"]
    assert patch["class"] == KIMI_QUALNAME and patch["file"] == KIMI_FILE
    assert sorted(patch["methods"]) == sorted(THREE)
    assert patch["delegate"] == "language_model" and patch["refused"] == {}
    assert "+    def get_embed_and_head" in patch["diff"]
    assert patch["diff"] in run.out  # the text preview shows the very same diff
    assert data["applied"] == []
    assert gitrepo.state(mini_repo, kimi) == before


def test_no_commit_without_apply_is_a_usage_error(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.state(mini_repo, kimi)
    assert_refused(fix(capsys, mini_repo / "python", "--no-commit"), "--no-commit")
    assert gitrepo.state(mini_repo, kimi) == before


# -- 3. refusals: nothing is written, the repository is exactly as it was ---------------------


@pytest.mark.parametrize("kind", ["unstaged", "staged"])
def test_refuses_a_target_with_uncommitted_changes(
    mini_repo: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    kimi = mini_repo / MINI_KIMI
    with kimi.open("a") as handle:
        handle.write("# a local edit eaglebug must not touch\n")
    if kind == "staged":
        gitrepo.git(mini_repo, "add", MINI_KIMI)
    before = gitrepo.state(mini_repo, kimi)
    assert_refused(fix(capsys, mini_repo / "python", "--apply"), "uncommitted changes")
    assert gitrepo.state(mini_repo, kimi) == before


def test_refuses_an_untracked_target(mini_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gitrepo.git(mini_repo, "rm", "-q", "--cached", MINI_KIMI)
    gitrepo.git(mini_repo, "commit", "-q", "-m", "untrack kimi_k25.py")
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.state(mini_repo, kimi)
    assert before[1] == f"?? {MINI_KIMI}"
    assert_refused(fix(capsys, mini_repo / "python", "--apply"), "untracked")
    assert gitrepo.state(mini_repo, kimi) == before


def test_an_ignored_target_is_refused_before_anything_is_written(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ignored files do not show in `git status --porcelain`, and `git add` refuses them; the
    # fix cannot become a commit, so it is refused up front and the file stays as it was.
    gitrepo.git(mini_repo, "rm", "-q", "--cached", MINI_KIMI)
    (mini_repo / ".gitignore").write_text("kimi_k25.py\n")
    gitrepo.commit_all(mini_repo, "ignore kimi_k25.py")
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.state(mini_repo, kimi)
    run = fix(capsys, mini_repo / "python", "--apply")
    assert gitrepo.state(mini_repo, kimi) == before
    assert_refused(run, "is ignored by git")


def test_other_dirty_files_are_left_alone_and_out_of_the_commit(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (mini_repo / "STAGED.md").write_text("a new file, staged\n")
    version = mini_repo / "python/sglang/version.py"
    version.write_text(version.read_text() + "# staged edit\n")
    gitrepo.git(mini_repo, "add", "STAGED.md", "python/sglang/version.py")
    server_args = mini_repo / "python/sglang/srt/server_args.py"
    server_args.write_text(server_args.read_text() + "# unstaged edit\n")
    (mini_repo / "scratch.txt").write_text("untracked\n")
    status = gitrepo.status(mini_repo)
    staged = gitrepo.git(mini_repo, "diff", "--cached")
    unstaged = gitrepo.git(mini_repo, "diff")
    start = gitrepo.head(mini_repo)

    run = fix(capsys, mini_repo / "python", "--apply", "--json")
    assert run.code == 0, run.err
    [applied] = json.loads(run.out)["applied"]
    assert applied["commit"] == gitrepo.head(mini_repo) != start
    assert gitrepo.count(mini_repo, f"{start}..HEAD") == 1
    assert gitrepo.changed_files(mini_repo) == [MINI_KIMI]
    # The staged changes are still staged, the rest still dirty, all exactly as before.
    assert gitrepo.status(mini_repo) == status
    assert gitrepo.git(mini_repo, "diff", "--cached") == staged
    assert gitrepo.git(mini_repo, "diff") == unstaged


def conflicting_branches(repo: Path) -> None:
    """`main` and `other` both change NOTES.md differently; `main` is checked out."""
    gitrepo.git(repo, "checkout", "-q", "-b", "other")
    (repo / "NOTES.md").write_text("notes, as other has them\n")
    gitrepo.commit_all(repo, "other: notes")
    gitrepo.git(repo, "checkout", "-q", "main")
    (repo / "NOTES.md").write_text("notes, as main has them\n")
    gitrepo.commit_all(repo, "main: notes")


def test_refuses_during_a_merge(mini_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conflicting_branches(mini_repo)
    gitrepo.git(mini_repo, "merge", "other", check=False)
    assert (mini_repo / ".git" / "MERGE_HEAD").exists()
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.state(mini_repo, kimi)
    assert "UU NOTES.md" in before[1]
    assert_refused(fix(capsys, mini_repo / "python", "--apply"), "a merge is in progress")
    assert gitrepo.state(mini_repo, kimi) == before


def test_refuses_during_a_rebase(mini_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conflicting_branches(mini_repo)
    gitrepo.git(mini_repo, "checkout", "-q", "other")
    gitrepo.git(mini_repo, "rebase", "main", check=False)
    git_dir = mini_repo / ".git"
    assert (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply").is_dir()
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.state(mini_repo, kimi)
    assert_refused(fix(capsys, mini_repo / "python", "--apply"), "a rebase is in progress")
    assert gitrepo.state(mini_repo, kimi) == before


def plan_kimi(sglang: Path) -> Patch:
    index = TreeIndex(locate(str(sglang)), use_cache=False)
    [patch] = plan_patches(index, audit(index, KIMI).reports)
    return patch


def test_outside_a_git_repository_only_with_no_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "plain"
    shutil.copytree(MINI / "python", tree / "python", ignore=shutil.ignore_patterns("__pycache__"))
    kimi = tree / MINI_KIMI
    assert find_repo(kimi) is None, "tmp_path lies inside a git repository"
    original = kimi.read_bytes()
    names = sorted(p.name for p in kimi.parent.iterdir())

    assert_refused(fix(capsys, tree / "python", "--apply"), "not in a git repository")
    assert kimi.read_bytes() == original

    expected = plan_kimi(tree / "python").patched
    run = fix(capsys, tree / "python", "--apply", "--no-commit")
    assert run.code == 0, run.err
    assert "written (no commit)" in run.out
    assert kimi.read_bytes() == expected != original
    assert sorted(p.name for p in kimi.parent.iterdir()) == names, "a temporary file was left"
    fresh = audit(TreeIndex(locate(str(tree / "python")), use_cache=False), KIMI)
    assert interface_problems(fresh.findings) == []
    ruff_f(kimi)
    assert not (tree / ".git").exists()


@pytest.fixture
def read_only(mini_repo: Path) -> Iterator[Path]:
    """kimi_k25.py at 0o444 in a folder at 0o555; the modes are put back afterwards."""
    kimi = mini_repo / MINI_KIMI
    folder_mode = stat.S_IMODE(kimi.parent.stat().st_mode)
    kimi.chmod(0o444)
    kimi.parent.chmod(0o555)
    try:
        yield kimi
    finally:
        kimi.parent.chmod(folder_mode)
        kimi.chmod(0o644)


def test_read_only_file(
    mini_repo: Path, read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused for root too: the mode says read-only, whatever os.access answers root.
    before = gitrepo.state(mini_repo, read_only)
    assert_refused(fix(capsys, mini_repo / "python", "--apply"), "read-only")
    assert gitrepo.state(mini_repo, read_only) == before
    assert stat.S_IMODE(read_only.stat().st_mode) == 0o444


def test_refuses_a_file_the_user_may_not_write(
    mini_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a non-root user's os.access says of a 0o444 file (see test_read_only_file).
    kimi = mini_repo / MINI_KIMI
    real_access = os.access

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        if mode & os.W_OK and Path(path).resolve() == kimi.resolve():
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    before = gitrepo.state(mini_repo, kimi)
    assert_refused(fix(capsys, mini_repo / "python", "--apply"), "read-only")
    assert gitrepo.state(mini_repo, kimi) == before


def test_refuses_a_file_changed_since_the_preview(mini_repo: Path) -> None:
    patch = plan_kimi(mini_repo / "python")
    kimi = mini_repo / MINI_KIMI
    with kimi.open("a") as handle:
        handle.write("# edited after the preview\n")
    before = gitrepo.state(mini_repo, kimi)
    with pytest.raises(InputError, match="changed on disk since the preview") as raised:
        apply_patch(patch, commit=True, reaudit=list)
    assert raised.value.hint
    assert gitrepo.state(mini_repo, kimi) == before


@pytest.mark.parametrize("failure", ["still reported", "does not parse"])
def test_a_patch_that_does_not_verify_is_rolled_back(mini_repo: Path, failure: str) -> None:
    patch = plan_kimi(mini_repo / "python")
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.state(mini_repo, kimi)
    reaudit: Callable[[], list[Finding]] = list
    if failure == "still reported":

        def reaudit() -> list[Finding]:
            return list(patch.fixes)

        needle = "a fresh audit still reports"
    else:
        patch = dataclasses.replace(patch, patched=patch.patched + b"\ndef broken(:\n")
        needle = "does not parse"
    with pytest.raises(InputError, match=needle):
        apply_patch(patch, commit=True, reaudit=reaudit)
    assert gitrepo.state(mini_repo, kimi) == before  # bytes, status (no temp file), no commit


# -- 4. undo refusals ------------------------------------------------------------------------


def test_undo_without_an_eaglebug_commit_is_refused(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kimi = mini_repo / MINI_KIMI
    before = gitrepo.state(mini_repo, kimi)
    assert_refused(cli(capsys, "undo", "--repo", str(mini_repo)), "no eaglebug fix to undo")
    assert gitrepo.state(mini_repo, kimi) == before


def test_undo_outside_a_repository_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert find_repo(tmp_path) is None
    assert_refused(cli(capsys, "undo", "--repo", str(tmp_path)), "not in a git repository")


def test_undo_refuses_when_the_patched_file_has_uncommitted_changes(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fix(capsys, mini_repo / "python", "--apply").code == 0
    kimi = mini_repo / MINI_KIMI
    with kimi.open("a") as handle:
        handle.write("# work in progress\n")
    before = gitrepo.state(mini_repo, kimi)
    assert_refused(cli(capsys, "undo", "--repo", str(mini_repo)), "uncommitted changes")
    assert gitrepo.state(mini_repo, kimi) == before


def test_undo_reverts_each_fix_once(mini_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kimi = mini_repo / MINI_KIMI
    original = kimi.read_bytes()
    assert fix(capsys, mini_repo / "python", "--apply").code == 0
    assert cli(capsys, "undo", "--repo", str(mini_repo)).code == 0
    assert kimi.read_bytes() == original
    before = gitrepo.state(mini_repo, kimi)
    assert_refused(cli(capsys, "undo", "--repo", str(mini_repo)), "no eaglebug fix to undo")
    assert gitrepo.state(mini_repo, kimi) == before


# -- 5. generation rules on synthetic trees ---------------------------------------------------

WRAPPER = "WrapperForConditionalGeneration"
WRAPPER_FILE = "sglang/srt/models/wrapper.py"
INNER_FILE = "sglang/srt/models/inner.py"
WORKER_FILE = "sglang/srt/speculative/eagle_worker.py"
RUNNER_FILE = "sglang/srt/model_executor/model_runner.py"

# The runtime's uses: the EAGLE worker shares embed/head, the runner turns on aux capture.
WORKER_SOURCE = """
class EAGLEWorker:
    def __init__(self, server_args, target_worker, draft_model_runner):
        self.target_worker = target_worker
        self.draft_model_runner = draft_model_runner

    def init_lm_head(self):
        embed, head = self.target_worker.model_runner.model.get_embed_and_head()
        self.draft_model_runner.model.set_embed_and_head(embed, head)
"""
RUNNER_SOURCE = """
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class ModelRunner:
    def __init__(self, server_args, is_draft_worker=False):
        self.server_args = server_args
        self.spec_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)

    def load_model(self):
        if self.spec_algorithm.is_eagle3():
            self.model.set_eagle3_layers_to_capture([1, 2])
"""
# Plain classes (no torch), so a patched module can really be imported.
INNER_SOURCE = """
class InnerForCausalLM:
    def __init__(self, config):
        self.config = config

    def get_embed_and_head(self):
        return self.embed, self.head

    def set_embed_and_head(self, embed, head):
        self.embed, self.head = embed, head

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        self.layers_to_capture = layer_ids
"""
WRAPPER_SOURCE = """
from sglang.srt.models.inner import InnerForCausalLM


class WrapperForConditionalGeneration:
    def __init__(self, config):
        self.language_model = InnerForCausalLM(config)

    def forward(self, input_ids, positions, forward_batch):
        return self.language_model(input_ids, positions, forward_batch)


EntryClass = [WrapperForConditionalGeneration]
"""


def delegation_tree(
    root: Path,
    wrapper: str | bytes = WRAPPER_SOURCE,
    inner: str = INNER_SOURCE,
    worker: str = WORKER_SOURCE,
    extra: dict[str, str] | None = None,
) -> Path:
    files = {
        WORKER_FILE: worker,
        RUNNER_FILE: RUNNER_SOURCE,
        INNER_FILE: inner,
        WRAPPER_FILE: wrapper,
        **(extra or {}),
    }
    return write_tree(root, files)


def plan(root: Path) -> Patch:
    index = TreeIndex(locate(str(root)), use_cache=False)
    [patch] = plan_patches(index, audit(index, WRAPPER).reports)
    assert patch.file == WRAPPER_FILE
    return patch


def apply_no_commit(root: Path, patch: Patch) -> bytes:
    """Write the patch the way `fix --apply --no-commit` does (verified by a fresh audit)."""

    def reaudit() -> list[Finding]:
        return audit(TreeIndex(locate(str(root)), use_cache=False), WRAPPER).findings

    apply_patch(patch, commit=False, reaudit=reaudit)
    return (root / WRAPPER_FILE).read_bytes()


def import_error(root: Path, module: str = "sglang.srt.models.wrapper") -> str:
    """'' when `import module` works in a fresh interpreter rooted at the tree, else stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(root)},
    )
    return proc.stderr if proc.returncode else ""


def test_plain_wrapper_gets_all_three_and_still_imports(tmp_path: Path) -> None:
    root = delegation_tree(tmp_path)
    patch = plan(root)
    assert patch.methods == THREE and patch.refused == {} and patch.notes == ()
    patched = apply_no_commit(root, patch)
    methods = class_methods(patched, WRAPPER)
    for name in THREE:
        assert calls_on(methods[name], "language_model") == [name]
    ruff_f(root / WRAPPER_FILE)
    assert import_error(root) == ""


LOGITS_FORWARD = """
from sglang.srt.models.inner import InnerForCausalLM


class WrapperForConditionalGeneration:
    def __init__(self, config):
        self.model = InnerForCausalLM(config)
        self.logits_processor = None

    def forward(self, input_ids, positions, forward_batch):
        hidden_states = self.model.model(input_ids, positions, forward_batch)
        {capture}return self.logits_processor(input_ids, hidden_states, self.model.lm_head, forward_batch)


EntryClass = [WrapperForConditionalGeneration]
"""
INNER_WITH_MODEL = INNER_SOURCE.replace("self.config = config", "self.model = config")


@pytest.mark.parametrize("forward", ["computes logits", "captures aux hidden states"])
def test_forward_that_computes_logits_refuses_aux_capture(tmp_path: Path, forward: str) -> None:
    capture = (
        "aux_hidden_states = self.model.model.aux_hidden_states\n        "
        if forward == "captures aux hidden states"
        else ""
    )
    root = delegation_tree(
        tmp_path, LOGITS_FORWARD.replace("{capture}", capture), inner=INNER_WITH_MODEL
    )
    patch = plan(root)
    assert patch.delegate == "model"
    if forward == "captures aux hidden states":
        assert patch.methods == THREE and patch.refused == {}
        return
    assert patch.methods == ("get_embed_and_head", "set_embed_and_head")
    assert list(patch.refused) == ["set_eagle3_layers_to_capture"]
    reason = patch.refused["set_eagle3_layers_to_capture"]
    line = 1 + (root / WRAPPER_FILE).read_text().splitlines().index(
        "        return self.logits_processor(input_ids, hidden_states, self.model.lm_head, "
        "forward_batch)"
    )
    assert "logits_processor" in reason and f"{WRAPPER_FILE}:{line}" in reason
    assert "Not delegated: set_eagle3_layers_to_capture" in patch.commit_message()
    patched = apply_no_commit(root, patch)
    methods = class_methods(patched, WRAPPER)
    assert "set_eagle3_layers_to_capture" not in methods
    assert calls_on(methods["get_embed_and_head"], "model") == ["get_embed_and_head"]
    ruff_f(root / WRAPPER_FILE)


def test_annotation_with_a_name_the_wrapper_lacks_is_dropped(tmp_path: Path) -> None:
    inner = """
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch, SomeType


    class InnerForCausalLM:
        def get_embed_and_head(self) -> ForwardBatch:
            return self.embed, self.head

        def set_embed_and_head(self, embed: SomeType, head: "SomeType") -> None:
            self.embed, self.head = embed, head

        def set_eagle3_layers_to_capture(self, layer_ids: list[SomeType] | None = None):
            self.layers_to_capture = layer_ids
    """
    extra = {"sglang/srt/model_executor/forward_batch_info.py": "ForwardBatch = SomeType = int\n"}
    root = delegation_tree(tmp_path, inner=inner, extra=extra)
    patch = plan(root)
    assert patch.methods == THREE and patch.refused == {}
    assert any(
        n.startswith("get_embed_and_head: annotation dropped") and "ForwardBatch" in n
        for n in patch.notes
    ), patch.notes
    for param in ("embed", "head"):
        assert any(
            n.startswith("set_embed_and_head: annotation dropped")
            and param in n
            and "SomeType" in n
            for n in patch.notes
        ), patch.notes
    patched = apply_no_commit(root, patch)
    methods = class_methods(patched, WRAPPER)
    assert methods["get_embed_and_head"].returns is None
    setter = methods["set_embed_and_head"]
    assert [a.annotation for a in setter.args.args] == [None, None, None]
    assert ast.unparse(setter.returns) == "None"  # None needs no import: kept
    capture = methods["set_eagle3_layers_to_capture"].args
    assert capture.args[1].annotation is None and ast.unparse(capture.defaults[0]) == "None"
    assert b"ForwardBatch" not in patched and b"SomeType" not in patched
    ruff_f(root / WRAPPER_FILE)
    assert import_error(root) == ""


@pytest.mark.parametrize("header", ["", '"""A wrapper."""\n\nfrom __future__ import annotations\n'])
def test_missing_typing_names_are_imported(tmp_path: Path, header: str) -> None:
    inner = """
    from typing import Dict, List, Optional


    class InnerForCausalLM:
        def get_embed_and_head(self) -> Dict[str, int]:
            return {}

        def set_embed_and_head(self, embed, head):
            self.embed, self.head = embed, head

        def set_eagle3_layers_to_capture(self, layer_ids: Optional[List[int]] = None) -> None:
            self.layers_to_capture = layer_ids
    """
    wrapper = header + WRAPPER_SOURCE.lstrip("\n")
    root = delegation_tree(tmp_path, wrapper.encode(), inner=inner)
    patch = plan(root)
    assert patch.methods == THREE and patch.refused == {}
    assert "imported from typing: Dict, List, Optional" in patch.notes
    patched = apply_no_commit(root, patch)
    methods = class_methods(patched, WRAPPER)
    capture = methods["set_eagle3_layers_to_capture"]
    assert ast.unparse(capture.args.args[1].annotation) == "Optional[List[int]]"
    assert ast.unparse(methods["get_embed_and_head"].returns) == "Dict[str, int]"
    imports = [
        node
        for node in ast.parse(patched).body
        if isinstance(node, ast.ImportFrom) and node.module == "typing"
    ]
    assert [sorted(a.name for a in node.names) for node in imports] == [
        ["Dict", "List", "Optional"]
    ]
    if header:
        assert patched.startswith(header.encode())  # the docstring and __future__ stay first
    ruff_f(root / WRAPPER_FILE)
    assert import_error(root) == ""


TAB_WRAPPER = (
    "from sglang.srt.models.inner import InnerForCausalLM\n"
    "\n"
    "# A module comment, kept as written.\n"
    "NAME = 'wrapper'  # a trailing comment\n"
    "SPACED = ( 1 ,2 )\n"
    "\n"
    "\n"
    "class WrapperForConditionalGeneration:\n"
    "\t'''Tab-indented, single quotes.'''\n"
    "\n"
    "\tdef __init__(self, config):\n"
    "\t\tself.language_model = InnerForCausalLM(config)  # the inner model\n"
    "\t\tself.name = 'x'\n"
    "\n"
    "\t# a comment between methods\n"
    "\tdef forward(self, input_ids, positions, forward_batch):\n"
    "\t\treturn self.language_model(input_ids,positions ,  forward_batch)\n"
    "\n"
    "\n"
    "# trailing module comment\n"
    "EntryClass = [WrapperForConditionalGeneration]\n"
)


def test_tabs_single_quotes_and_the_rest_of_the_file_are_kept(tmp_path: Path) -> None:
    inner = INNER_SOURCE.replace(
        "def set_eagle3_layers_to_capture(self, layer_ids=None):",
        "def set_eagle3_layers_to_capture(self, layer_ids=None, mode=None, scale=1.5):",
    )
    root = delegation_tree(tmp_path, TAB_WRAPPER.encode(), inner=inner)
    patch = plan(root)
    assert patch.methods == THREE
    patched = apply_no_commit(root, patch)
    original = TAB_WRAPPER.encode()
    # Everything up to the insertion point (the end of forward) is byte for byte the original,
    # and so is everything after it.
    cut = original.index(b"forward_batch)\n") + len(b"forward_batch)\n")
    assert patched.startswith(original[:cut])
    assert patched.endswith(original[cut:])
    [block] = inserted_only(original, patched)
    lines = [line for line in block.splitlines() if line.strip()]
    assert all(line.startswith("\t") and not line.startswith(" ") for line in lines), block
    assert not any(" " * 4 in line[: len(line) - len(line.lstrip())] for line in lines)
    for name in THREE:
        assert any(line.startswith(f"\tdef {name}(self") for line in lines), name
    docstrings = [line.strip() for line in lines if "added by eaglebug" in line]
    assert len(docstrings) == 3
    assert all(d.startswith("'''") and d.endswith("'''") for d in docstrings), docstrings
    assert all(line.startswith("\t\t") for line in lines if not line.lstrip().startswith("def"))
    assert '"' not in block
    ruff_f(root / WRAPPER_FILE)
    assert import_error(root) == ""


def test_a_property_on_the_inner_class_is_delegated_as_a_property(tmp_path: Path) -> None:
    inner = INNER_SOURCE + ("\n    @property\n    def lm_head(self):\n        return self._head\n")
    worker = (
        WORKER_SOURCE + "        self.hot_head = self.target_worker.model_runner.model.lm_head\n"
    )
    root = delegation_tree(tmp_path, inner=inner, worker=worker)
    patch = plan(root)
    assert "lm_head" in patch.methods
    patched = apply_no_commit(root, patch)
    lm_head = class_methods(patched, WRAPPER)["lm_head"]
    assert [ast.unparse(d) for d in lm_head.decorator_list] == ["property"]
    assert [a.arg for a in lm_head.args.args] == ["self"]
    sentinel = object()
    getter = compiled(lm_head)
    assert getter(
        types.SimpleNamespace(language_model=types.SimpleNamespace(lm_head=sentinel))
    ) is (sentinel)
    fresh = audit(TreeIndex(locate(str(root)), use_cache=False), WRAPPER)
    assert [f for f in fresh.findings if f.attribute == "lm_head"] == []
    ruff_f(root / WRAPPER_FILE)


VARARGS_INNER = """
class InnerForCausalLM:
    def get_embed_and_head(self, *, dtype=None, copy: bool = False):
        return self.embed, self.head

    def set_embed_and_head(self, embed, head, /, tie=False):
        self.embed, self.head = embed, head

    def set_eagle3_layers_to_capture(
        self, layer_ids=None, *extra, strict: bool = False, **options
    ) -> None:
        self.layers_to_capture = layer_ids
"""


def test_varargs_keyword_only_and_positional_only_are_mirrored_and_forwarded(
    tmp_path: Path,
) -> None:
    root = delegation_tree(tmp_path, inner=VARARGS_INNER)
    patch = plan(root)
    assert patch.methods == THREE and patch.refused == {}
    patched = apply_no_commit(root, patch)
    mine = class_methods(patched, WRAPPER)
    theirs = class_methods(VARARGS_INNER, "InnerForCausalLM")
    for name in THREE:
        assert inspect.signature(compiled(mine[name])) == inspect.signature(
            compiled(theirs[name])
        ), name

    capture = compiled(mine["set_eagle3_layers_to_capture"])
    assert forwarded(capture, "language_model")[1] == [
        ("set_eagle3_layers_to_capture", (None,), {"strict": False})
    ]
    assert forwarded(capture, "language_model", [1, 2], 3, 4, strict=True, tp=8)[1] == [
        ("set_eagle3_layers_to_capture", ([1, 2], 3, 4), {"strict": True, "tp": 8})
    ]
    head = compiled(mine["get_embed_and_head"])
    assert forwarded(head, "language_model", dtype="bf16") == (
        "get_embed_and_head-result",
        [("get_embed_and_head", (), {"dtype": "bf16", "copy": False})],
    )
    with pytest.raises(TypeError):
        head(types.SimpleNamespace(language_model=Recorder()), "bf16")  # keyword-only stays so
    setter = compiled(mine["set_embed_and_head"])
    assert forwarded(setter, "language_model", "E", "H", tie=True)[1] == [
        ("set_embed_and_head", ("E", "H", True), {})
    ]
    with pytest.raises(TypeError):
        setter(types.SimpleNamespace(language_model=Recorder()), embed="E", head="H")
    ruff_f(root / WRAPPER_FILE)
    assert import_error(root) == ""


# -- annotations and defaults the generated code must be able to evaluate ---------------------


def test_a_string_default_is_mirrored(tmp_path: Path) -> None:
    # A string literal default is a value, not a forward reference to a name.
    inner = INNER_SOURCE.replace(
        "def set_embed_and_head(self, embed, head):",
        'def set_embed_and_head(self, embed, head, mode="aux"):',
    )
    root = delegation_tree(tmp_path, inner=inner)
    patch = plan(root)
    assert patch.refused == {}
    assert patch.methods == THREE
    patched = apply_no_commit(root, patch)
    setter = compiled(class_methods(patched, WRAPPER)["set_embed_and_head"])
    assert forwarded(setter, "language_model", "E", "H")[1] == [
        ("set_embed_and_head", ("E", "H", "aux"), {})
    ]
    ruff_f(root / WRAPPER_FILE)


FORWARD_BATCH = {
    "sglang/srt/model_executor/forward_batch_info.py": "class ForwardBatch:\n    pass\n"
}
INNER_WITH_BATCH = """
from sglang.srt.model_executor.forward_batch_info import ForwardBatch


class InnerForCausalLM:
    def get_embed_and_head(self, batch: ForwardBatch = None) -> ForwardBatch:
        return self.embed, self.head
"""


def test_a_name_imported_only_inside_a_function_is_not_available(tmp_path: Path) -> None:
    wrapper = WRAPPER_SOURCE.replace(
        "    def forward(self, input_ids, positions, forward_batch):\n",
        "    def forward(self, input_ids, positions, forward_batch):\n"
        "        from sglang.srt.model_executor.forward_batch_info import ForwardBatch\n\n"
        "        assert isinstance(forward_batch, ForwardBatch)\n",
    )
    root = delegation_tree(tmp_path, wrapper, inner=INNER_WITH_BATCH, extra=FORWARD_BATCH)
    patch = plan(root)
    assert patch.methods == ("get_embed_and_head",)
    apply_no_commit(root, patch)
    ruff_f(root / WRAPPER_FILE)
    assert import_error(root) == ""


@pytest.mark.parametrize("future", [True, False])
def test_a_type_checking_import_is_only_used_where_annotations_are_postponed(
    tmp_path: Path, future: bool
) -> None:
    wrapper = (
        ("from __future__ import annotations\n\n" if future else "")
        + "from typing import TYPE_CHECKING\n\n"
        + "from sglang.srt.models.inner import InnerForCausalLM\n\n"
        + "if TYPE_CHECKING:\n"
        + "    from sglang.srt.model_executor.forward_batch_info import ForwardBatch\n\n\n"
        + WRAPPER_SOURCE.split("\n\n\n", 1)[1].replace(
            "forward_batch):", 'forward_batch: "ForwardBatch"):'
        )
    )
    root = delegation_tree(tmp_path, wrapper.encode(), inner=INNER_WITH_BATCH, extra=FORWARD_BATCH)
    patch = plan(root)
    assert patch.methods == ("get_embed_and_head",)
    apply_no_commit(root, patch)
    ruff_f(root / WRAPPER_FILE)
    # The module must still import: without `from __future__ import annotations`, an
    # annotation naming a TYPE_CHECKING-only import is evaluated at class creation.
    assert import_error(root) == ""
