"""Applying fixes as git commits, one per fix, each a transaction, and undoing them.

GitPython refuses to load where it cannot run git: that is a fact about the machine, said in
one line like any other input error, not a traceback (every module here imports `git`, after
this package)."""

from eaglebug.checks import InputError

try:
    import git  # noqa: F401  (loaded here once, for `ops` and `fixing`)
except ImportError as exc:
    raise InputError(
        f"git cannot be run here (GitPython: {str(exc).strip().splitlines()[0]})",
        "install git, or point GIT_PYTHON_GIT_EXECUTABLE at it",
    ) from None
