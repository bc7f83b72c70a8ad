"""What a model class's method does to the attributes a check asks about, read by running it.

Some of SGLang's behaviour is a short method of the model class over its config: which layers
`set_eagle3_layers_to_capture` captures (`[val + 1 for val in layer_ids]`, or
`[2, num_layers // 2, num_layers - 3]`), whether a draft's `__init__` takes its lm_head from the
target. The method runs in the one evaluator (`pyeval`) on an object of its class whose
`config` is the model's config.json; an observer records each assignment to a tracked attribute
(as written: `self.model.layers_to_capture`) and each call of a tracked method, with their
values and lines. A tracked attribute given different values on different paths, or an unknown
value, is reported as such; the caller then says nothing rather than guess.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.pyeval.machine import Machine, Observer, Policy
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Call, Frame
from eaglebug.checks.pyeval.values import UNSET, FunctionSite, FuncVal, Top, is_known
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex


@dataclass
class Effects:
    """What a run did to the tracked attributes (keyed by the target as written)."""

    assigned: dict[str, list[Any]] = field(default_factory=dict)  # "self.model.layers_to_capture"
    lines: dict[str, int] = field(default_factory=dict)  # target -> line of its assignment
    kinds: dict[str, set[str]] = field(default_factory=dict)  # target -> {call, alias, value}
    calls: list[tuple[str, list[Any], int]] = field(default_factory=list)  # (callee, args, line)

    def value(self, key: str) -> Any:
        """The one value the target was given on every path; UNSET if none or several."""
        values = self.assigned.get(key, [])
        if not values or any(not is_known(v) for v in values):
            return UNSET
        first = values[0]
        return first if all(v == first and type(v) is type(first) for v in values) else UNSET

    def kind(self, key: str) -> str | None:
        """How the target was given its value on every path (`call`: a construction), or None
        when the paths differ or it was never assigned."""
        kinds = self.kinds.get(key, set())
        return next(iter(kinds)) if len(kinds) == 1 else None


class _Tracker(Observer):
    def __init__(self, tracked: frozenset[str], effects: Effects) -> None:
        self.tracked = tracked
        self.effects = effects

    def on_store(self, target: ast.Attribute, value: Any, stmt: ast.stmt, frame: Frame) -> None:
        if target.attr not in self.tracked:
            return
        key = ast.unparse(target)
        self.effects.assigned.setdefault(key, []).append(value)
        self.effects.lines.setdefault(key, stmt.lineno)
        written = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        kind = "call" if isinstance(written, ast.Call) else "value" if is_known(value) else "alias"
        self.effects.kinds.setdefault(key, set()).add(kind)

    def on_call(self, call: Call) -> Any:
        node = call.node
        func = node.func if node is not None else None
        if isinstance(func, ast.Attribute) and func.attr in self.tracked and node is not None:
            self.effects.calls.append((ast.unparse(func), list(call.args), node.lineno))
            return None  # its effect is the callee's: the caller follows it
        return UNSET


def method_effects(
    index: TreeIndex,
    ref: ClassRef,
    method: ast.FunctionDef,
    rel: str,
    config: Mapping[str, Any],
    args: dict[str, Any],
    tracked: frozenset[str],
) -> Effects | None:
    """Run `ref`'s `method` (defined in `rel`) on an object whose `config` is `config`, with
    `args` by parameter name (the others unknown); None when the run could not complete."""
    effects = Effects()
    source = Source.of(index)
    machine = Machine(
        source, policy=Policy(record_raises=False), observer=_Tracker(tracked, effects)
    )
    cfg = machine.bag(flat_config(config))
    owner = source.class_val(ref.qualname)
    self_obj = machine.new_object(owner, {"config": cfg})
    module, _ = module_name(rel)
    site = FunctionSite(rel, module, f"{ref.facts.name}.{method.name}", method)
    params = [a.arg for a in method.args.args[1:]]
    given = {
        name: cfg if name == "config" else args.get(name, Top(f"{name} not given"))
        for name in params
    }
    result = machine.run(FuncVal(site, owner, self_obj, "method"), [], given)
    if result.incomplete:
        return None
    return effects


# Sub-configs that transformers makes config objects of (attributes); every other mapping in
# config.json stays a dict (`rope_scaling["factor"]`, `quantization_config["quant_method"]`).
_OBJECT_SUFFIX = "_config"
_DICTS = frozenset({"quantization_config"})


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """config.json as the flat store of a config object: `text_config.num_hidden_layers`."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and key.endswith(_OBJECT_SUFFIX) and key not in _DICTS:
            out.update(flat_config(value, path + "."))
        else:
            out[path] = value
    return out
