"""Scratch git repositories for the fix/undo tests, driven by the `git` command line.

Every call runs with a hermetic git configuration: no system or global config (so a developer's
hooks, templates, signing or default branch never leak in), and each repository gets its own
identity and `commit.gpgsign=false`, since CI machines may have no global identity at all.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

# What a test process sets too (see `hermetic`), so GitPython inside eaglebug sees the same.
HERMETIC_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
# Variables that would point git at some other repository than the one a test names.
# (and git's test switch that makes every repository look owned by someone else).
FOREIGN_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_TEST_ASSUME_DIFFERENT_OWNER",
)
LOCAL_CONFIG = {
    "user.name": "Eaglebug Test",
    "user.email": "eaglebug-test@example.invalid",
    "commit.gpgsign": "false",
    "core.autocrlf": "false",
}


def hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test process's git as the helpers' `git` runs it: GitPython inside eaglebug sees no
    system or global config and no variable that points it at another repository."""
    for name, value in HERMETIC_ENV.items():
        monkeypatch.setenv(name, value)
    for name in FOREIGN_ENV:
        monkeypatch.delenv(name, raising=False)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    return {**env, **HERMETIC_ENV}


def git(repo: Path, *args: str, check: bool = True) -> str:
    """`git -C repo ARGS`; its stdout (stripped of the final newline)."""
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout.removesuffix("\n")


def configure(repo: Path) -> None:
    for key, value in LOCAL_CONFIG.items():
        git(repo, "config", key, value)


def init(repo: Path, message: str = "initial import") -> Path:
    """Make `repo` (an existing folder) a repository on branch `main` with everything committed."""
    git(repo, "init", "-q", "-b", "main")
    configure(repo)
    commit_all(repo, message)
    return repo


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return head(repo)


def clone(source: Path, target: Path) -> Path:
    """A local clone (objects hard-linked, files checked out), configured like `init`'s."""
    git(source.parent, "clone", "-q", str(source), str(target))
    configure(target)
    return target


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def status(repo: Path) -> str:
    """`git status --porcelain`, untracked files listed one by one (a stray temp file shows)."""
    return git(repo, "status", "--porcelain=v1", "--untracked-files=all")


def count(repo: Path, revisions: str = "HEAD") -> int:
    return int(git(repo, "rev-list", "--count", revisions))


def changed_files(repo: Path, rev: str = "HEAD") -> list[str]:
    """The paths one commit touches."""
    return git(repo, "show", "--name-only", "--format=", rev).splitlines()


def message(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "log", "-1", "--format=%B", rev)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def state(repo: Path, path: Path) -> tuple[str, str, str]:
    """What a refusal must leave exactly as it was: the file's bytes, the status and HEAD."""
    return sha256(path), status(repo), head(repo)


def index(repo: Path) -> str:
    """The index as git sees it: every entry's mode, blob and stage, and what is staged."""
    return git(repo, "ls-files", "--stage") + "\n--cached--\n" + git(repo, "diff", "--cached")


def everything(repo: Path, path: Path) -> tuple[str, ...]:
    """`state` plus the index and the file's type (a symlink must stay a symlink)."""
    kind = "symlink" if path.is_symlink() else "file"
    return (*state(repo, path), index(repo), kind, str(count(repo)))
