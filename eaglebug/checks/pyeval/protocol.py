"""What a caller and the machine agree on: the run's policy, its result, the observer's hooks,
and the signals that end a path, a function or a run (the machine's own control flow)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval.values import UNSET, Instance, Raised

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.state import Call, Frame


@dataclass(frozen=True)
class Policy:
    # A definite raise ends the whole run (a launch stops there); else only the raising call.
    stop_at_raise: bool = False
    # Record raises at all (the layer walk ignores refusals of other launches: what is built
    # after a check is still built).
    record_raises: bool = True
    # A `raise` or failing `assert` is passed over and the statements after it run (the layer
    # walk: a refusal of some other launch; what is built after it is still built).
    skip_raises: bool = False


@dataclass(frozen=True)
class Result:
    value: Any
    raised: tuple[Raised, ...] = ()
    assumed: tuple[str, ...] = ()
    incomplete: str | None = None  # the limit reached, and where

    @property
    def definite_raise(self) -> Raised | None:
        return next((r for r in self.raised if r.definite), None)


class Observer:
    """What a caller wants to know of a run; each method a no-op unless overridden."""

    def on_assign(self, frame: Frame, name: str, value: Any, stmt: ast.stmt, before: Any) -> None:
        """A local name assigned (`before`: its value before an augmented assignment)."""

    def on_field(
        self, frame: Frame, obj: Instance, key: str, value: Any, stmt: ast.stmt, before: Any
    ) -> None:
        """An attribute of an object assigned by a statement of the tree."""

    def on_write(self, obj: Instance, key: str, value: Any, rel: str, line: int) -> None:
        """An attribute of an object written (`self.x = ...`, `args.tp_size = ...`)."""

    def on_store(self, target: ast.Attribute, value: Any, stmt: ast.stmt, frame: Frame) -> None:
        """Any attribute assignment as written, whatever its object evaluated to (the
        object may be unknown: `self.model.layers_to_capture = ...` on an unread `model`)."""

    def on_statement(self, frame: Frame, stmt: ast.stmt) -> None:
        """A statement about to run, on the path `frame.tests` says (a loop the reading does
        not run is not entered: its body's statements are not seen)."""

    def on_call(self, call: Call) -> Any:
        """A call about to be made; a value other than UNSET is taken as its result."""
        return UNSET

    def on_return(self, frame: Frame, value: Any) -> None:
        """A `return` evaluated (on whichever path)."""

    def on_binop(self, node: ast.BinOp, left: Any, right: Any, frame: Frame) -> None:
        """A binary operation evaluated (the layer walk watches divisions by group sizes)."""


# The hooks that hear what a run does beyond the state it leaves (a call site, a store on an
# unknown object, a statement reached): a branch that only does such things is not idle.
_EVENTS = ("on_store", "on_statement", "on_call", "on_return", "on_binop")


def hears_events(observer: Observer) -> bool:
    """Does `observer` override a hook of `_EVENTS`?"""
    return any(getattr(type(observer), name) is not getattr(Observer, name) for name in _EVENTS)


class PathEnded(Exception):
    """This path returned or raised inside an undecided branch: its branch ended."""


class Returned(Exception):
    """A return on the frame's definite path: unwinds the call."""


class Thrown(Exception):
    """A builtin raised on known values inside a `try` (`int("40960.5")`): the `try` looks for
    the `except` that takes it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(kind)
        self.kind, self.message = kind, message


class Stopped(Exception):
    """A definite raise under `stop_at_raise`: unwinds the run."""

    def __init__(self, raised: Raised) -> None:
        super().__init__(raised.kind)
        self.raised = raised


class Break(Exception):
    pass


class Continue(Exception):
    pass
