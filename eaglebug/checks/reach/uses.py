"""What a module scan finds: uses of a model reference, and calls that pass one on.

These are the facts the parse cache keeps per file, so they are plain frozen dataclasses; how
they are found is `reach/scanner.py`, how calls are followed across modules is `reach.py`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from eaglebug.checks.reach.conditions import Cond, Origin


class UseKind(enum.Enum):
    """How the runtime touches an attribute; the value is the JSON `kind` of a site."""

    CALL = "call"  # model.x(...)
    READ = "read"  # model.x
    GETATTR = "getattr"  # getattr(model, "x")
    GETATTR_DEFAULT = "getattr-default"  # getattr(model, "x", default): never raises
    HASATTR = "hasattr"  # hasattr(model, "x"): optional
    HASATTR_RAISE = "hasattr-raise"  # `if not hasattr(model, "x"): raise ...`: required
    # `x = getattr(model, "x", None)` then `if x is None: raise ...`: required
    GETATTR_RAISE = "getattr-raise"
    ONE_OF = "one-of"  # `if hasattr(a) ... elif hasattr(b) ... else: raise`: one is required

    @property
    def required(self) -> bool:
        """Would the launch fail if the attribute were missing?"""
        return self in _REQUIRED


_REQUIRED = frozenset(
    {
        UseKind.CALL,
        UseKind.READ,
        UseKind.GETATTR,
        UseKind.HASATTR_RAISE,
        UseKind.GETATTR_RAISE,
        UseKind.ONE_OF,
    }
)


@dataclass(frozen=True)
class Use:
    origin: Origin
    attribute: str
    kind: UseKind
    line: int
    code: str
    conds: tuple[Cond, ...]
    guards: tuple[str, ...]  # the same conditions as source text, for the evidence
    scope: str  # module.Class.function
    n_args: int = 0
    keywords: tuple[str, ...] = ()
    star: bool = False  # *args / **kwargs at the call: any shape may bind
    # Inside an `except` handler: it runs only after something else failed, so it is not
    # what a launch needs (never required; its JSON kind gets an `-in-handler` suffix).
    in_handler: bool = False
    # ONE_OF: each name with the test of its branch (`chains.py`); the raise runs when every
    # test is false, and says `message`.
    one_of: tuple[tuple[str, Cond], ...] = ()
    message: str | None = None

    @property
    def required(self) -> bool:
        return self.kind.required and not self.in_handler

    @property
    def is_call(self) -> bool:
        """A call the launch makes (one whose shape the provider's signature must accept)."""
        return self.kind is UseKind.CALL and not self.in_handler

    @property
    def label(self) -> str:
        """The kind as the JSON contract writes it (`call`, `hasattr-in-handler`, ...)."""
        return f"{self.kind.value}-in-handler" if self.in_handler else self.kind.value


@dataclass(frozen=True)
class CallEdge:
    """A call that passes a model reference on to another function."""

    callee: str  # dotted name as resolved in this module (module.func, module.Class.method)
    bindings: tuple[tuple[int | str, Origin], ...]  # positional index or keyword -> origin
    conds: tuple[Cond, ...]
    guards: tuple[str, ...]
    line: int
    scope: str
    # The other arguments, as the callee's tests on them would read: position or keyword ->
    # (the argument's truth, whether it is None). `reach.py` decides the callee's tests on
    # its parameters with them (`conditions.substitute`).
    args: tuple[tuple[int | str, Cond, Cond], ...] = ()


@dataclass
class ConsumerFacts:
    uses: list[Use] = field(default_factory=list)
    calls: list[CallEdge] = field(default_factory=list)
