"""What fixes a finding, as a typed value produced in one place and shown everywhere as it is.

A patch fix carries the planned method text that `eaglebug fix --apply` writes (from
`audit/delegation.py`, the only code generator); an environment or flag fix carries the variable or
flag and its value; a choice offers several with their trade-offs (the first environment
option is what the TUI's `p` sets for the next launch); advice is what no key can do for the
user (use another draft). Each serialises to the JSON contract's `fix` string (its `text()`)
and, in full, to `fix_detail`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from eaglebug.checks.contract import codec


@dataclass(frozen=True)
class PlannedMethod:
    """One delegation method exactly as the patch inserts it into the class body."""

    name: str
    text: str  # the inserted lines, indented as in the class body, ending with a newline
    imports: tuple[str, ...] = ()  # names the module gains an import for (from typing)
    notes: tuple[str, ...] = ()  # annotations dropped, and why


@dataclass(frozen=True)
class PatchFix:
    """Delegate a missing attribute of `class_` to `self.<delegate>`."""

    class_: str  # qualified class that gets the method
    attribute: str
    delegate: str  # the inner attribute on self, e.g. language_model
    inner_class: str  # qualified class of self.<delegate> that provides it
    provider: str  # qualified class the inner class gets it from
    file: str  # the file the method goes into, relative to the tree root
    method: PlannedMethod | None  # None: refused
    refused: str | None = None  # why no method is generated

    def text(self) -> str:
        if self.method is None:
            return f"no automatic fix: {self.refused}"
        return self.method.text

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "patch",
            "class": self.class_,
            "attribute": self.attribute,
            "delegate": self.delegate,
            "inner_class": self.inner_class,
            "provider": self.provider,
            "file": self.file,
            "method": self.method.text if self.method else None,
            "imports": list(self.method.imports) if self.method else [],
            "notes": list(self.method.notes) if self.method else [],
            "refused": self.refused,
        }


@dataclass(frozen=True)
class EnvFix:
    """Set an environment variable for the launch."""

    variable: str
    value: str
    tradeoff: str = ""

    def text(self) -> str:
        return f"{self.variable}={self.value}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "env", **codec.named(self)}


@dataclass(frozen=True)
class FlagFix:
    """Give the launch a flag (with a value, unless it is a switch)."""

    flag: str
    value: str | None
    tradeoff: str = ""

    def text(self) -> str:
        return self.flag if self.value is None else f"{self.flag} {self.value}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "flag", **codec.named(self)}


@dataclass(frozen=True)
class AdviceFix:
    """What to do, where no key can do it (the checkpoint itself is wrong, say)."""

    advice: str

    def text(self) -> str:
        return self.advice

    def to_json(self) -> dict[str, Any]:
        return {"kind": "advice", "text": self.advice}


Option: TypeAlias = EnvFix | FlagFix


@dataclass(frozen=True)
class Choice:
    """Either of several launch changes, each with its trade-off."""

    options: tuple[Option, ...]

    def text(self) -> str:
        first, *rest = (o.text() for o in self.options)
        return first + (f"   (or {', or '.join(rest)})" if rest else "")

    @property
    def env(self) -> EnvFix | None:
        """The option the TUI can set for the next launch."""
        return option_of(self, EnvFix)

    @property
    def flag(self) -> FlagFix | None:
        """The first flag option (what `p` sets when the choice has no env option)."""
        return option_of(self, FlagFix)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "choice", "options": [o.to_json() for o in self.options]}


Fix: TypeAlias = PatchFix | EnvFix | FlagFix | AdviceFix | Choice


OptionT = TypeVar("OptionT", EnvFix, FlagFix)


def option_of(fix: Fix | None, kind: type[OptionT]) -> OptionT | None:
    """The launch change of this kind a finding's fix makes: the fix itself, or the first
    option of that kind in a choice."""
    if isinstance(fix, kind):
        return fix
    if isinstance(fix, Choice):
        return next((o for o in fix.options if isinstance(o, kind)), None)
    return None


def flag_of(fix: Fix | None) -> FlagFix | None:
    """The launch flag a finding's fix sets, alone or as the first flag option."""
    return option_of(fix, FlagFix)


def env_of(fix: Fix | None) -> EnvFix | None:
    """The environment fix a finding offers, alone or as one option."""
    return option_of(fix, EnvFix)
