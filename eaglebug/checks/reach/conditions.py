"""What a use of the model depends on: where its reference came from, and the tests guarding it.

A use is recorded with the conditions in force where it runs, as written in the runtime, and
decided only later, per algorithm, role and class (`guards.py`). Origins and conditions are
small frozen dataclasses, so they hash (the reference walk dedupes on them), pickle into the
parse cache, and are taken apart with `match` instead of by position in a tuple.

The three-valued logic lives here once: True, False, or None for "the code does not pin it
down". `guards.py` evaluates conditions with it, `algorithms.py` the enum's predicates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

# -- origins: where a model reference comes from -------------------------------------------


@dataclass(frozen=True)
class Seed:
    """A runner's model (`model_runner.model`, `self.model` in a ModelRunner)."""

    role: str  # target | draft | any


@dataclass(frozen=True)
class Param:
    """A parameter that callers may pass a model reference into (resolved per caller)."""

    function: str  # module.Class.function
    name: str


Origin: TypeAlias = Seed | Param

# -- conditions: the tests guarding a use ------------------------------------------------


@dataclass(frozen=True)
class Pred:
    """`algo.is_eagle()`: an algorithm predicate, decided by the tree's SpeculativeAlgorithm."""

    name: str


@dataclass(frozen=True)
class Flag:
    """`server_args.enable_x` / `enable_x`: decided by where the runtime sets it truthy.

    `bare` marks a plain name (`if enable_x:`): when it is a parameter of the function, what
    the caller passes decides it (`reach.py` puts the argument's condition in its place)."""

    name: str
    bare: bool = False


@dataclass(frozen=True)
class NoneTest:
    """`x is None` on a plain name: decided only where a caller's argument for it is known."""

    name: str


@dataclass(frozen=True)
class Const:
    """A test whose value is known: a constant argument, or a model reference (never None)."""

    value: bool


@dataclass(frozen=True)
class HasAttr:
    """`hasattr(model, "x")` (or `getattr(model, "x", None) is not None`) on a reference."""

    origin: Origin
    attribute: str


@dataclass(frozen=True)
class IsInstance:
    """`isinstance(model, P)`: a presence test of P's members when P is a runtime-checkable
    Protocol of the tree (`protocols.py`); any other class leaves it undecided."""

    origin: Origin
    cls: str  # the class as resolved in the testing module


@dataclass(frozen=True)
class ClassIs:
    """`model.__class__.__name__ == "X"`: decided by the audited class itself."""

    origin: Origin
    name: str


@dataclass(frozen=True)
class Not:
    cond: Cond


@dataclass(frozen=True)
class And:
    conds: tuple[Cond, ...]


@dataclass(frozen=True)
class Or:
    conds: tuple[Cond, ...]


@dataclass(frozen=True)
class Opaque:
    """Any other test: never decided, so it never drops a use."""

    text: str


Cond: TypeAlias = (
    Pred | Flag | NoneTest | Const | HasAttr | IsInstance | ClassIs | Not | And | Or | Opaque
)


def negated(cond: Cond, negate: bool) -> Cond:
    """The condition of an else-branch (or of the right side of an `or`)."""
    return Not(cond) if negate else cond


def flag_names(conds: Iterable[Cond]) -> set[str]:
    """Every flag these conditions read, so the flag search can fetch their assignments."""
    names: set[str] = set()
    for cond in conds:
        match cond:
            case Flag(name):
                names.add(name)
            case Not(inner):
                names |= flag_names([inner])
            case And(parts) | Or(parts):
                names |= flag_names(parts)
    return names


# -- three-valued logic ---------------------------------------------------------------------


# -- a callee's tests on its parameters, decided by a caller's arguments ----------------------

# Parameter name -> (the argument's truth as a condition, whether it is None as a condition).
ArgConds: TypeAlias = dict[str, tuple[Cond, Cond]]


def substitute(cond: Cond, args: ArgConds) -> Cond:
    """`cond` with the callee's tests on its plain parameters replaced by what the caller
    passes (`if draft_model is not None` where every caller passes a draft model)."""
    if not args:
        return cond
    match cond:
        case Flag(name, True) if name in args:
            return args[name][0]
        case NoneTest(name) if name in args:
            return args[name][1]
        case Not(inner):
            return Not(substitute(inner, args))
        case And(parts):
            return And(tuple(substitute(c, args) for c in parts))
        case Or(parts):
            return Or(tuple(substitute(c, args) for c in parts))
    return cond
