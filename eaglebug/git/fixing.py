"""Applying delegation patches safely: one atomic write and one git commit per class.

Never loses a user's work: a target file with uncommitted changes, a merge or rebase in
progress, a read-only file, a file that is not a regular file, a repository git cannot commit
in, or a file that changed since the preview is refused before anything is written. The write,
the verification (parse, compile, a fresh audit) and the commit run as one transaction under
the repository's eaglebug lock (`eaglebug.git.ops`): on any failure the file, the index and HEAD
are exactly as they were. A tracked symlink is patched through the link (the file it points at
is written and committed; the link stays a link). Undo reverts eaglebug's newest commit with a
new commit that touches only that commit's files, never a reset.
"""

from __future__ import annotations

import ast
import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import git

from eaglebug.checks import TRAILER, Finding, InputError, Patch
from eaglebug.git.ops import GitRepo, write_atomically

_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "BISECT_LOG": "a bisect",
}
_REVERT_MARKER = "This reverts commit "


@dataclass(frozen=True)
class Applied:
    patch: Patch
    commit: str | None  # the commit's sha, or None with --no-commit
    written: Path | None = None  # the file written, when the patch went through a symlink


def find_repo(path: Path) -> git.Repo | None:
    found = GitRepo.find(path)
    return found.repo if found else None


def _operation_in_progress(repo: GitRepo) -> str | None:
    for name, what in _IN_PROGRESS.items():
        if (repo.git_dir / name).exists():
            return what
    return None


def _refuse_in_progress(repo: GitRepo) -> None:
    what = _operation_in_progress(repo)
    if what:
        raise InputError(
            f"{what} is in progress in {repo.work_tree}",
            "finish or abort it (git status says how), then rerun",
        )


def real_target(path: Path) -> Path:
    """The regular file a patch writes: `path` itself, or what its symlink(s) point at."""
    real = Path(os.path.realpath(path))
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (a dangling symlink?)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise InputError(
            f"{path}: not a regular file", "eaglebug patches only regular Python source files"
        )
    return real


def _writable(path: Path) -> bool:
    """What docs/commands.md promises: a read-only file or folder is refused, root or not."""
    for item in (path, path.parent):
        mode = item.stat().st_mode
        if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(item, os.W_OK):
            return False
    return True


def _check_file(patch: Patch, real: Path) -> None:
    try:
        current = real.read_bytes()
    except OSError as exc:
        raise InputError(f"{patch.path}: cannot read ({exc.strerror})") from None
    if current != patch.original:
        if current == patch.patched:
            raise InputError(
                f"{patch.file} already holds this patch (another eaglebug applied it)",
                "nothing to do; `git log -1` shows the commit",
            )
        raise InputError(
            f"{patch.file} changed on disk since the preview",
            "run the fix again to preview the patch against the current file",
        )
    _refuse_duplicates(patch, current)
    if not _writable(real):
        raise InputError(f"{real}: read-only", "make the file and its folder writable, then rerun")


def _refuse_duplicates(patch: Patch, current: bytes) -> None:
    """Never add a method the class already has (a second writer that planned against an
    older copy of the file)."""
    try:
        tree = ast.parse(current)
    except SyntaxError:
        return
    short = patch.class_name.rsplit(".", 1)[-1]
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == short:
            have = {
                n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            twice = sorted(have & set(patch.methods))
            if twice:
                raise InputError(
                    f"{patch.file} already defines {', '.join(twice)} in {short}",
                    "nothing to do; `git log -1` shows who added them",
                )


def _check_repo(patch: Patch, repo: GitRepo, real: Path, commit: bool) -> str:
    """Refusals that need git; the file's path relative to the work tree."""
    _refuse_in_progress(repo)
    rel = repo.relative(real)
    if repo.succeeds("git check-ignore", "check-ignore", "-q", "--", rel):
        raise InputError(
            f"{patch.file} is ignored by git (.gitignore), so the fix cannot be committed",
            "pass --no-commit to write it without a commit, or stop ignoring the file",
        )
    status = repo.run("git status", "status", "--porcelain", "--", rel)
    if status.strip():
        state = "untracked" if status.startswith("??") else "has uncommitted changes"
        raise InputError(
            f"{patch.file} {state}; eaglebug never writes over work that is not committed",
            f"commit or stash it first (git -C {repo.work_tree} stash), then rerun",
        )
    if commit:
        repo.check_can_commit()
    return rel


@contextlib.contextmanager
def _maybe_locked(repo: GitRepo | None) -> Iterator[None]:
    if repo is None:
        yield
        return
    with repo.locked():
        yield


def apply_patch(
    patch: Patch,
    commit: bool,
    reaudit: Callable[[], list[Finding]],
) -> Applied:
    """Check, write, verify (parse, compile, re-audit), commit: all of it or none of it."""
    real = real_target(patch.path)
    repo = GitRepo.find(real)
    if repo is None and commit:
        raise InputError(
            f"{real.parent} is not in a git repository, so the fix cannot be a commit",
            "pass --no-commit to write the file without one (undo is then up to you)",
        )
    with _maybe_locked(repo):
        _check_file(patch, real)  # under the lock: another writer may have just finished
        rel = _check_repo(patch, repo, real, commit) if repo is not None else None
        with _transaction(repo, real):
            write_atomically(real, patch.patched)
            _verify(patch, real, reaudit)
            sha = None
            if commit and repo is not None and rel is not None:
                repo.run("git add", "add", "--", rel)
                repo.run("git commit", "commit", "--only", "-m", patch.commit_message(), "--", rel)
                sha = repo.head()
    return Applied(patch, sha, real if real != patch.path else None)


@contextlib.contextmanager
def _transaction(repo: GitRepo | None, real: Path) -> Iterator[None]:
    """The repository's transaction; outside git, the file alone is put back."""
    if repo is not None:
        with repo.transaction([real]):
            yield
        return
    original = real.read_bytes()
    try:
        yield
    except BaseException:
        write_atomically(real, original)
        raise


def _verify(patch: Patch, real: Path, reaudit: Callable[[], list[Finding]]) -> None:
    source = real.read_bytes()
    try:
        compile(ast.parse(source, filename=str(real)), str(real), "exec")
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


def _history(repo: GitRepo, limit: int) -> list[tuple[str, str]]:
    """(sha, message) of the newest `limit` commits."""
    if repo.head() is None:
        return []
    out = repo.run("git log", "log", f"--max-count={limit}", "--format=%H%x1f%B%x1e")
    commits = []
    for record in out.split("\x1e"):
        sha, sep, message = record.strip("\n").partition("\x1f")
        if sep:
            commits.append((sha, message))
    return commits


def _newest_fix(repo: GitRepo, limit: int) -> tuple[str, str]:
    history = _history(repo, limit)
    reverted = {
        message.split(_REVERT_MARKER, 1)[1][:40]
        for _, message in history
        if _REVERT_MARKER in message
    }
    for sha, message in history:
        if f"\n{TRAILER}: " in message and sha not in reverted:
            return sha, message
    raise InputError(
        f"no eaglebug fix to undo in {repo.work_tree}", "`git log` shows what is there"
    )


def undo(path: Path, limit: int = 500) -> Undone:
    """Revert eaglebug's newest fix with a commit of its own files only.

    Unrelated staged or unstaged work elsewhere in the repository is left as it is (git's own
    `revert` would refuse it, or mix it in); a later commit that changed the same lines is a
    refusal with nothing changed.
    """
    repo = GitRepo.find(path)
    if repo is None:
        raise InputError(
            f"{path}: not in a git repository", "pass --repo with the repository eaglebug patched"
        )
    with repo.locked():
        _refuse_in_progress(repo)
        target, message = _newest_fix(repo, limit)
        summary = message.split("\n", 1)[0]
        changes = repo.run(
            "git diff-tree", "diff-tree", "--no-commit-id", "--name-status", "-r", target
        )
        files = []
        for row in changes.splitlines():
            kind, _, name = row.partition("\t")
            if kind != "M":
                raise InputError(
                    f"eaglebug's commit {target[:10]} does not only modify files ({row})",
                    f"revert it by hand: git revert {target[:10]}",
                )
            files.append(name)
        dirty = [f for f in files if repo.run("git status", "status", "--porcelain", "--", f)]
        if dirty:
            raise InputError(
                f"{', '.join(dirty)} has uncommitted changes; undo would mix them with the revert",
                "commit or stash them first, then rerun",
            )
        repo.check_can_commit()
        diff = repo.run_bytes(
            "git diff", "diff", "--binary", "--full-index", f"{target}^", target, "--", *files
        )
        paths = [repo.work_tree / f for f in files]
        with repo.transaction(paths):
            try:
                repo.run("git apply", "apply", "-R", "--whitespace=nowarn", "-", stdin=diff)
            except InputError as exc:
                raise InputError(
                    f"git revert {target[:10]}: later commits changed the same lines of "
                    f"{', '.join(files)}; nothing changed",
                    f"revert by hand: git revert {target[:10]} (and resolve the conflict)",
                ) from exc
            revert_message = f'Revert "{summary}"\n\n{_REVERT_MARKER}{target}.\n'
            repo.run("git commit", "commit", "--only", "-m", revert_message, "--", *files)
            sha = repo.head()
    assert sha is not None
    return Undone(target, sha, summary)
