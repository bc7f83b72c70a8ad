"""Applying delegation patches safely: one atomic write and one git commit per class.

Never loses a user's work: a target file with uncommitted changes, a merge or rebase in
progress, a read-only file, or a file that changed since the preview is refused before anything
is written; a patched file that does not parse, compile, or clear its findings on a fresh audit
is restored byte for byte. Undo is `git revert` of eaglebug's newest commit, never a reset.
"""

from __future__ import annotations

import ast
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import git

from eaglebug.checks.delegation import TRAILER, Patch
from eaglebug.checks.errors import InputError
from eaglebug.checks.findings import Finding

_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "BISECT_LOG": "a bisect",
}


@dataclass(frozen=True)
class Applied:
    patch: Patch
    commit: str | None  # the commit's sha, or None with --no-commit


def find_repo(path: Path) -> git.Repo | None:
    try:
        return git.Repo(path if path.is_dir() else path.parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def _first_line(exc: git.GitCommandError) -> str:
    """Git's own reason, on one line (its stderr often runs to several)."""
    text = str(exc.stderr or "").strip() or str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = next(
        (line for line in lines if line.lower().startswith(("error", "fatal", "hint"))), ""
    )
    return (reason or (lines[0] if lines else "unknown error")).removeprefix("stderr: ").strip("'")


def _operation_in_progress(repo: git.Repo) -> str | None:
    git_dir = Path(repo.git_dir)
    for name, what in _IN_PROGRESS.items():
        if (git_dir / name).exists():
            return what
    return None


def _relative(repo: git.Repo, path: Path) -> str:
    assert repo.working_tree_dir is not None
    return os.path.relpath(path.resolve(), Path(repo.working_tree_dir).resolve())


def check_can_apply(patch: Patch, commit: bool) -> git.Repo | None:
    """Every refusal, before a single byte is written."""
    path = patch.path
    try:
        current = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    if current != patch.original:
        raise InputError(
            f"{patch.file} changed on disk since the preview",
            "run the fix again to preview the patch against the current file",
        )
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        raise InputError(f"{path}: read-only", "make the file and its folder writable, then rerun")
    repo = find_repo(path)
    if repo is None:
        if commit:
            raise InputError(
                f"{path.parent} is not in a git repository, so the fix cannot be a commit",
                "pass --no-commit to write the file without one (undo is then up to you)",
            )
        return None
    what = _operation_in_progress(repo)
    if what:
        raise InputError(
            f"{what} is in progress in {repo.working_tree_dir}",
            "finish or abort it (git status says how), then rerun",
        )
    rel = _relative(repo, path)
    if repo.ignored(rel):
        raise InputError(
            f"{patch.file} is ignored by git (.gitignore), so the fix cannot be committed",
            "pass --no-commit to write it without a commit, or stop ignoring the file",
        )
    status = repo.git.status("--porcelain", "--", rel)
    if status.strip():
        state = "untracked" if status.startswith("??") else "has uncommitted changes"
        raise InputError(
            f"{patch.file} {state}; eaglebug never writes over work that is not committed",
            f"commit or stash it first (git -C {repo.working_tree_dir} stash), then rerun",
        )
    return repo


def _write_atomically(path: Path, data: bytes) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".eaglebug", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def apply_patch(
    patch: Patch,
    commit: bool,
    reaudit: Callable[[], list[Finding]],
) -> Applied:
    """Write, verify (parse, compile, re-audit), commit; restore the original on any failure."""
    repo = check_can_apply(patch, commit)
    _write_atomically(patch.path, patch.patched)
    try:
        _verify(patch, reaudit)
    except Exception as exc:
        _write_atomically(patch.path, patch.original)
        if isinstance(exc, InputError):
            raise
        raise InputError(
            f"{patch.file}: the patch did not verify ({exc}); the file was restored"
        ) from None
    sha = None
    if commit and repo is not None:
        rel = _relative(repo, patch.path)
        try:
            repo.git.add("--", rel)
            repo.git.commit("--only", "-m", patch.commit_message(), "--", rel)
        except git.GitCommandError as exc:
            _write_atomically(patch.path, patch.original)
            raise InputError(
                f"git commit failed ({_first_line(exc)}); {patch.file} was restored",
                "check `git status` and your git identity (user.name, user.email)",
            ) from None
        sha = repo.head.commit.hexsha
    return Applied(patch, sha)


def _verify(patch: Patch, reaudit: Callable[[], list[Finding]]) -> None:
    source = patch.path.read_bytes()
    try:
        compile(ast.parse(source, filename=str(patch.path)), str(patch.path), "exec")
    except SyntaxError as exc:
        raise InputError(
            f"{patch.file}: the patched file does not parse ({exc.msg}); the file was restored"
        ) from None
    fixed = {(f.class_, f.attribute) for f in patch.fixes}
    still = [
        f for f in reaudit() if f.id == "interface.missing" and (f.class_, f.attribute) in fixed
    ]
    if still:
        names = ", ".join(sorted(str(f.attribute) for f in still))
        raise InputError(
            f"{patch.file}: a fresh audit still reports {names}; the file was restored"
        )


@dataclass(frozen=True)
class Undone:
    reverted: str  # sha of eaglebug's commit
    commit: str  # sha of the revert
    summary: str


def _reverted_shas(repo: git.Repo, limit: int) -> set[str]:
    reverted = set()
    for commit in repo.iter_commits(max_count=limit):
        message = str(commit.message)
        marker = "This reverts commit "
        if marker in message:
            reverted.add(message.split(marker, 1)[1][:40])
    return reverted


def undo(path: Path, limit: int = 500) -> Undone:
    repo = find_repo(path)
    if repo is None:
        raise InputError(
            f"{path}: not in a git repository", "pass --repo with the repository eaglebug patched"
        )
    what = _operation_in_progress(repo)
    if what:
        raise InputError(
            f"{what} is in progress in {repo.working_tree_dir}", "finish or abort it, then rerun"
        )
    reverted = _reverted_shas(repo, limit)
    target = None
    for commit in repo.iter_commits(max_count=limit):
        if f"\n{TRAILER}: " in str(commit.message) and commit.hexsha not in reverted:
            target = commit
            break
    if target is None:
        raise InputError(
            f"no eaglebug fix to undo in {repo.working_tree_dir}", "`git log` shows what is there"
        )
    files = list(target.stats.files)
    dirty = [f for f in files if repo.git.status("--porcelain", "--", str(f)).strip()]
    if dirty:
        raise InputError(
            f"{', '.join(map(str, dirty))} has uncommitted changes; undo would mix them with the revert",
            "commit or stash them first, then rerun",
        )
    try:
        repo.git.revert("--no-edit", target.hexsha)
    except git.GitCommandError as exc:
        if (Path(repo.git_dir) / "REVERT_HEAD").exists():
            repo.git.revert("--abort")
        raise InputError(
            f"git revert {target.hexsha[:10]} failed ({_first_line(exc)}); nothing changed",
            "later commits touch the same lines; revert by hand",
        ) from None
    return Undone(target.hexsha, repo.head.commit.hexsha, str(target.summary))
