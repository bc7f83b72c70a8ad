"""The classes of an inner object a wrapper makes with a method of its own instance.

sglang's MiniCPM models write `self.llm = self.init_llm(config=..., ...)` in a shared base's
`__init__`, and each version overrides `init_llm` (`return Qwen2ForCausalLM(...)`, or builds it
in a local first). Which class `llm` holds depends on the instance's class, so the index keeps
such an assignment as `@self:init_llm` (`source/initfacts.py`) and this module runs that method,
as the instance's lookup order resolves it, in the one evaluator: the classes of the tree it
may return are the inner object's classes. What the method constructs is not built (a class
called there is the object it makes; its `__init__`, a model, is not run).
"""

from __future__ import annotations

from typing import Any

from eaglebug.checks.pyeval.budget import Budget
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine, Observer
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import UNSET, ClassVal, FuncVal, Instance, alternatives, one_of
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.index import TreeIndex

# A factory method is a few lines: far below the default limits.
_BUDGET = Budget(depth=4, steps=5_000)


class _NotBuilt(Observer):
    """A call of a class of the tree gives a new object of it; its `__init__` is not run."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine

    def on_call(self, call: Call) -> Any:
        made = []
        for one in alternatives(call.callee):
            if not isinstance(one, ClassVal) or one.ref is None:
                return UNSET
            made.append(self.machine.new_object(one))
        return one_of(made, self.machine.budget.alternatives) if made else UNSET


class MadeBy:
    """`classes(instance, method)`: the classes `instance.method(...)` may return, per index."""

    def __init__(self, index: TreeIndex) -> None:
        self.index = index
        self._memo: dict[tuple[str, str], list[ClassRef]] = {}

    def classes(self, instance: ClassRef, method: str) -> list[ClassRef]:
        key = (instance.qualname, method)
        if key not in self._memo:
            self._memo[key] = self._classes(instance, method)
        return self._memo[key]

    def _classes(self, instance: ClassRef, method: str) -> list[ClassRef]:
        source = Source.of(self.index)
        order, _ = source.mro(instance)
        owner, site = next(
            ((ref, found) for ref in order if (found := source.method(ref, method)) is not None),
            (None, None),
        )
        if owner is None or site is None:
            return []
        machine = Machine(source, Intrinsics(), budget=_BUDGET)
        machine.observer = _NotBuilt(machine)
        cls = source.class_val(instance.qualname)
        this = machine.new_object(cls)
        params = [a.arg for a in site.node.args.args[1:]]  # type: ignore[union-attr]
        given = {name: machine.new_object(None) for name in params}
        result = machine.run(
            FuncVal(site, source.class_val(owner.qualname), this, "method"), [], given
        )
        out: list[ClassRef] = []
        for value in alternatives(result.value):
            ref = value.cls.ref if isinstance(value, Instance) and value.cls is not None else None
            if ref is not None and all(r.qualname != ref.qualname for r in out):
                out.append(ref)
        return out


def made_by(index: TreeIndex) -> MadeBy:
    """One per index: what a method returns does not depend on the audit that asks."""
    return index.kept("interface.made_by", lambda: MadeBy(index))
