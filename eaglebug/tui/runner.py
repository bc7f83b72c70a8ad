"""The one runner for the app's work: whatever goes wrong is a notification, never an exit.

Thread workers (`run_guarded`) and the key handlers that read the session on the UI thread
(`reported`) both go through `eaglebug.session.problems`: an `InputError` becomes an error
notification with its hint; any other exception a notification `internal error: ...` with its
traceback appended to `.eaglebug/eaglebug-errors.log` of the working folder (the notification
names the file). Nothing raises out of them, so Textual never ends the app with `WorkerFailed`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, runtime_checkable

from textual.app import App
from textual.dom import DOMNode
from textual.worker import Worker

from eaglebug.session.problems import Problem, guarded, problem_of

P = ParamSpec("P")
R = TypeVar("R")
N = TypeVar("N", bound=DOMNode)


@runtime_checkable
class ProblemSink(Protocol):
    """What the app offers its workers: where tracebacks go and how problems are shown."""

    @property
    def workdir(self) -> Path: ...

    def report_problem(self, problem: Problem) -> None:
        """Show a problem (safe from any thread)."""


def show_problem(app: App[Any], problem: Problem) -> None:
    """The notification of a problem (on the UI thread)."""
    app.notify(problem.text(), title=problem.title, severity=problem.severity, timeout=10)


def _workdir(app: App[Any]) -> Path:
    return app.workdir if isinstance(app, ProblemSink) else Path.cwd()


def run_guarded(
    node: DOMNode, work: Callable[[], object], title: str, *, group: str
) -> Worker[None]:
    """Run `work` in a thread worker of `node` (a newer one in `group` cancels the older)."""
    app = node.app

    def report(problem: Problem) -> None:
        if isinstance(app, ProblemSink):
            app.report_problem(problem)
        else:
            app.call_from_thread(show_problem, app, problem)

    workdir = _workdir(app)

    def run() -> None:
        guarded(work, title, workdir, report)

    return node.run_worker(run, thread=True, group=group, exclusive=True, exit_on_error=False)


def reported(
    title: str,
) -> Callable[[Callable[Concatenate[N, P], R]], Callable[Concatenate[N, P], R | None]]:
    """A UI-thread handler whose failure (a corrupt state file, say) is a notification."""

    def wrap(handler: Callable[Concatenate[N, P], R]) -> Callable[Concatenate[N, P], R | None]:
        @functools.wraps(handler)
        def run(node: N, /, *args: P.args, **kwargs: P.kwargs) -> R | None:
            try:
                return handler(node, *args, **kwargs)
            except Exception as exc:  # shown, with its traceback on file; the app goes on
                show_problem(node.app, problem_of(exc, title, _workdir(node.app)))
                return None

        return run

    return wrap
