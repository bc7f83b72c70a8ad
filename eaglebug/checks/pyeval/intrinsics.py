"""Plug-ins: what the tree's calls and names mean where the tree itself cannot say.

A call of the tree (`get_device_memory_capacity()`), or a name outside it (`torch.float16`,
`os.environ`), can have a meaning only the running box gives: the GPU's memory, torch's dtype
sizes, an environment variable. A caller registers that meaning here, by the callee's
qualified name as the resolver finds it (a module glob for functions SGLang moves between
releases: `sglang.srt.utils*` matches `sglang.srt.utils` and `sglang.srt.utils.common`), never
by the last dotted component of what the code wrote. The domain plug-ins of general Python
libraries (torch, os.environ, functools, ...) are `pyeval/brains.py` (astroid's brain modules);
SGLang's own are registered by the check that needs them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.state import Call

# A call's meaning: (the call: machine, arguments, where) -> its value.
Handler = Callable[["Call"], Any]
# What a handler returns to let the tree's own function run after all (a family that answers
# the state's getters by name declines a function of the same name that computes from its
# arguments: 0.5.23's `derive_attn_tp_size(tp_size=..., ...)` is arithmetic, not state).
DECLINE: Any = type("Decline", (), {"__repr__": lambda self: "DECLINE"})()


@dataclass
class Intrinsics:
    """What a run's plug-ins give: calls by qualified name (or module glob and name), values of
    names outside the tree, and attributes of intrinsic objects."""

    calls: dict[str, Handler] = field(default_factory=dict)
    patterns: list[tuple[str, str, Handler]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)  # `torch.float16` -> its value
    # (module glob, name -> handler or None): a family of functions answered by their names
    # (the distributed state's getters: `get_attention_tp_size`, `get_tp_group`, ...).
    families: list[tuple[str, Callable[[str], Handler | None]]] = field(default_factory=list)
    # A note said once per run when a stand-in answers (`stand-in: X() taken as 0`).
    notes: dict[str, str] = field(default_factory=dict)

    def call(self, qualname: str, handler: Handler) -> None:
        self.calls[qualname] = handler

    def call_in(self, module_glob: str, name: str, handler: Handler) -> None:
        """A function `name` of any module matching `module_glob` (SGLang moves helpers); a
        later registration wins over an earlier one."""
        self.patterns.insert(0, (module_glob, name, handler))

    def call_matching(self, module_glob: str, resolve: Callable[[str], Handler | None]) -> None:
        """Functions of the modules matching `module_glob`, answered by `resolve(name)`."""
        self.families.append((module_glob, resolve))

    def value(self, qualname: str, value: Any) -> None:
        self.values[qualname] = value

    def handler(self, qualname: str) -> Handler | None:
        found = self.calls.get(qualname)
        if found is not None:
            return found
        module, _, name = qualname.rpartition(".")
        for glob, wanted, handler in self.patterns:
            if wanted == name and fnmatch.fnmatchcase(module, glob):
                return handler
        for glob, resolve in self.families:
            if fnmatch.fnmatchcase(module, glob):
                found = resolve(name)
                if found is not None:
                    return found
        return None

    def extend(self, other: Intrinsics) -> Intrinsics:
        """These plug-ins with `other`'s added (other wins a clash)."""
        merged = Intrinsics(
            dict(self.calls), list(self.patterns), dict(self.values), list(self.families)
        )
        merged.families = list(other.families) + merged.families
        merged.calls.update(other.calls)
        merged.patterns = list(other.patterns) + merged.patterns
        merged.values.update(other.values)
        merged.notes.update({**self.notes, **other.notes})
        return merged


def constant(value: Any) -> Handler:
    """A call that answers `value` whatever its arguments."""
    return lambda call: value


def stand_in(name: str, value: Any) -> Handler:
    """A function of the tree this launch's shape does not reach, answered plainly; said in
    the run's `assumed` when it is asked."""

    def answer(call: Call) -> Any:
        call.machine.assume(f"stand-in: {name}() taken as {value!r}")
        return value

    return answer
