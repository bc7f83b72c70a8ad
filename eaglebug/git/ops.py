"""Every git operation of `fix` and `undo`: one guarded call, one lock, one transaction.

A user's repository is theirs. Three mechanisms keep it so:

- `GitRepo.run` is the only way eaglebug runs git. A refusal (a hook, a missing identity, an
  unsigned commit, "dubious ownership", a held index lock) becomes one `InputError` naming the
  step, with git's own first line and a hint for what to do, never a `GitCommandError` dump.
- `GitRepo.locked()` serialises eaglebug's writers per repository (an `flock` on a file in the
  git directory, so the work tree never sees it): two `fix --apply` at once make one commit.
- `GitRepo.transaction(paths)` snapshots the files it will touch (bytes, mode, or absence),
  the index file and HEAD; if anything inside fails, all three are put back exactly as they were
  (a half-made revert, a patch staged by a commit that a hook refused, a commit made just before
  an interrupt).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from eaglebug.checks import InputError

LOCK_NAME = "eaglebug.lock"
LOCK_WAIT_S = 30.0  # how long a writer waits for another eaglebug to finish in the same repo
# Sequencer state a failed revert or cherry-pick may leave; removed on rollback if it was new.
_SEQUENCER = ("REVERT_HEAD", "CHERRY_PICK_HEAD", "MERGE_MSG", "AUTO_MERGE", "sequencer")
_HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg")
_SAFE_DIRECTORY = re.compile(r"git config --global --add safe\.directory [^\s']+")
# git's reason (lower case) -> what to do about it. `{repo}` is the work tree.
_HINTS: tuple[tuple[str, str], ...] = (
    ("dubious ownership", "git config --global --add safe.directory {repo}"),
    ("no email was given", "set an identity: git config --global user.email you@example.com"),
    (
        "please tell me who you are",
        "set an identity: git config --global user.email you@example.com",
    ),
    (
        "unable to auto-detect email",
        "set an identity: git config --global user.email you@example.com",
    ),
    ("empty ident name", "set an identity: git config --global user.name 'Your Name'"),
    (
        "gpg failed to sign",
        "check your signing key (user.signingkey), or commit.gpgsign=false here",
    ),
    ("failed to write commit object", "check your signing setup (commit.gpgsign, gpg.program)"),
    ("index.lock", "another git process is using the repository; wait for it, then rerun"),
    ("would be overwritten", "commit or stash your changes, then rerun"),
    ("patch does not apply", "later commits changed the same lines; revert by hand"),
    ("not a git repository", "pass a path inside the repository"),
)


def first_line(exc: git.GitCommandError) -> str:
    """Git's own reason, on one line (its stderr often runs to several)."""
    text = str(exc.stderr or "").strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line.removeprefix("stderr:").strip().strip("'").strip() for line in lines]
    lines = [line for line in lines if line]
    reason = next((line for line in lines if line.lower().startswith(("error", "fatal"))), "")
    return reason or (lines[0] if lines else "")


class GitRepo:
    """One repository, with every git call guarded and every write transactional."""

    def __init__(self, repo: git.Repo) -> None:
        self.repo = repo
        assert repo.working_tree_dir is not None
        self.work_tree = Path(repo.working_tree_dir)
        self.git_dir = Path(repo.git_dir)

    @classmethod
    def find(cls, path: Path) -> GitRepo | None:
        """The repository holding `path`, or None outside any."""
        try:
            repo = git.Repo(path if path.is_dir() else path.parent, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            return None
        if repo.bare or repo.working_tree_dir is None:
            return None
        return cls(repo)

    @property
    def common_dir(self) -> Path:
        """Shared by all worktrees of the repository (the lock must be too)."""
        return Path(self.repo.common_dir)

    # -- the one way to run git --------------------------------------------------------------
    def run(self, step: str, *args: str, stdin: bytes | None = None) -> str:
        """`git ARGS` in the work tree; a failure is an `InputError` that names `step`."""
        return self._execute(step, args, stdin, text=True).decode("utf-8", "surrogateescape")

    def succeeds(self, step: str, *args: str) -> bool:
        """Whether `git ARGS` exits 0 (for the commands that answer with exit 1, like
        check-ignore); any other failure is an `InputError` as in `run`."""
        try:
            self.repo.git.execute(["git", *args])
        except git.GitCommandError as exc:
            if exc.status == 1 and not str(exc.stderr or "").strip():
                return False
            raise self.failure(step, exc) from None
        return True

    def run_bytes(self, step: str, *args: str) -> bytes:
        """`git ARGS`'s stdout as bytes (a diff, a blob), unstripped."""
        return self._execute(step, args, None, text=False)

    def _execute(self, step: str, args: Sequence[str], stdin: bytes | None, text: bool) -> bytes:
        try:
            with tempfile.TemporaryFile() as feed:
                if stdin is not None:
                    feed.write(stdin)
                    feed.seek(0)
                out = self.repo.git.execute(
                    ["git", *args],
                    istream=feed if stdin is not None else None,
                    stdout_as_string=False,
                    strip_newline_in_stdout=text,
                )
        except git.GitCommandError as exc:
            raise self.failure(step, exc) from None
        except git.GitCommandNotFound:
            raise InputError(f"{step}: git is not installed", "install git, then rerun") from None
        assert isinstance(out, bytes)
        return out

    def failure(self, step: str, exc: git.GitCommandError) -> InputError:
        """One line for git's refusal and a hint, from git's own words where it gives them."""
        reason = first_line(exc)
        lowered = str(exc.stderr or "").lower()
        hint = None
        safe = _SAFE_DIRECTORY.search(str(exc.stderr or ""))
        if safe:
            hint = safe.group(0)
        else:
            for needle, template in _HINTS:
                if needle in lowered:
                    hint = template.format(repo=self.work_tree)
                    break
        if not reason:
            hooks = self.hooks()
            if step == "git commit" and hooks:
                reason = f"the {hooks[0]} hook refused the commit and printed nothing"
                hint = f"run `git -C {self.work_tree} commit` yourself to see why"
            else:
                reason = f"git exited {exc.status} without a message"
        return InputError(
            f"{step} failed: {reason}", hint or f"run `git -C {self.work_tree} status` to see why"
        )

    def hooks(self) -> list[str]:
        """The commit hooks git would run here (the hooks folder, or core.hooksPath)."""
        try:
            configured = self.repo.git.config("--get", "core.hooksPath")
        except git.GitCommandError:
            configured = ""
        folder = Path(configured).expanduser() if configured else self.common_dir / "hooks"
        if not folder.is_absolute():
            folder = self.work_tree / folder
        return [name for name in _HOOKS if os.access(folder / name, os.X_OK)]

    # -- what can be checked before anything is written --------------------------------------
    def check_can_commit(self) -> None:
        """A commit needs an identity; find out now, not after the files were written."""
        for variable in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
            try:
                self.repo.git.var(variable)
            except git.GitCommandError as exc:
                failure = self.failure("git commit", exc)
                raise InputError(
                    f"git cannot make a commit in {self.work_tree}: "
                    f"{failure.message.removeprefix('git commit failed: ')}",
                    failure.hint,
                ) from None

    def head(self) -> str | None:
        """HEAD's commit, or None on a branch with no commit yet."""
        try:
            return str(self.repo.git.rev_parse("--verify", "--quiet", "HEAD^{commit}")) or None
        except git.GitCommandError as exc:
            if exc.status == 1 and not str(exc.stderr or "").strip():
                return None
            raise self.failure("git rev-parse HEAD", exc) from None

    def relative(self, path: Path) -> str:
        return os.path.relpath(path, self.work_tree.resolve())

    # -- serialising eaglebug's writers ------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
        """Hold the repository's eaglebug lock; another eaglebug writer waits for it."""
        path = self.common_dir / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(
                f"{path}: cannot create eaglebug's lock ({exc.strerror})",
                "make the repository's .git folder writable, then rerun",
            ) from None
        try:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
                        raise InputError(
                            f"another eaglebug (pid {holder or '?'}) is writing to "
                            f"{self.work_tree}",
                            "wait for it to finish, then rerun",
                        ) from None
                    time.sleep(0.05)
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    # -- transactions --------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self, paths: Sequence[Path]) -> Iterator[None]:
        """On any failure inside, put the files, the index and HEAD back as they were."""
        snapshot = _Snapshot.take(self, paths)
        try:
            yield
        except BaseException:
            snapshot.restore(self)
            raise


@dataclass(frozen=True)
class _FileState:
    path: Path
    data: bytes | None  # None: the file did not exist
    mode: int


@dataclass(frozen=True)
class _Snapshot:
    files: tuple[_FileState, ...]
    index: bytes | None
    head_ref: str | None  # the branch HEAD points at, or None when detached
    head: str | None
    sequencer: frozenset[str]  # the sequencer files that already existed
    index_lock: bool

    @classmethod
    def take(cls, repo: GitRepo, paths: Sequence[Path]) -> _Snapshot:
        files = []
        for path in paths:
            try:
                files.append(_FileState(path, path.read_bytes(), stat.S_IMODE(path.stat().st_mode)))
            except FileNotFoundError:
                files.append(_FileState(path, None, 0o644))
        index_path = repo.git_dir / "index"
        try:
            index = index_path.read_bytes()
        except FileNotFoundError:
            index = None
        try:
            head_ref: str | None = repo.repo.git.symbolic_ref("--quiet", "HEAD")
        except git.GitCommandError:
            head_ref = None
        return cls(
            files=tuple(files),
            index=index,
            head_ref=head_ref,
            head=repo.head(),
            sequencer=frozenset(n for n in _SEQUENCER if (repo.git_dir / n).exists()),
            index_lock=(repo.git_dir / "index.lock").exists(),
        )

    def restore(self, repo: GitRepo) -> None:
        for state in self.files:
            if state.data is None:
                with contextlib.suppress(FileNotFoundError):
                    state.path.unlink()
            elif _read(state.path) != state.data:
                write_atomically(state.path, state.data, state.mode)
        self._restore_head(repo)
        if not self.index_lock:
            with contextlib.suppress(FileNotFoundError):
                (repo.git_dir / "index.lock").unlink()
        index_path = repo.git_dir / "index"
        if self.index is None:
            with contextlib.suppress(FileNotFoundError):
                index_path.unlink()
        elif _read(index_path) != self.index:
            write_atomically(index_path, self.index, 0o644)
        for name in _SEQUENCER:
            if name in self.sequencer:
                continue
            leftover = repo.git_dir / name
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()

    def _restore_head(self, repo: GitRepo) -> None:
        """Move the branch back, but only from where this transaction moved it (`now`)."""
        now = repo.head()
        if now == self.head or now is None:
            return
        ref = self.head_ref or "HEAD"
        deref = [] if self.head_ref else ["--no-deref"]
        if self.head is None:  # the branch was born inside the transaction
            args = ["update-ref", *deref, "-d", ref, now]
        else:
            args = ["update-ref", *deref, ref, self.head, now]
        with contextlib.suppress(git.GitCommandError):
            repo.repo.git.execute(["git", *args])


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def write_atomically(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path`'s bytes in one rename (a reader sees the old file or the new, never half)."""
    if mode is None:
        mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".eaglebug", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
