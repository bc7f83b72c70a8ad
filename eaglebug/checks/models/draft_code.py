"""What a draft class's own code says about its checkpoint, read from the audited tree.

Two facts, each read from the class as the tree defines it (its MRO, followed through imports):
- whether it is an EAGLE-3 draft: its `__init__` sets `capture_aux_hidden_states` to a
  constant (True in `LlamaForCausalLMEagle3`, False in `LlamaForCausalLMEagle`), the attribute
  the runtime's EAGLE-3 capture path turns on;
- where its lm_head comes from: its `__init__` run over the draft's config (`models/effects.py`, the one evaluator)
  gives `load_lm_head_from_target` and whether `self.lm_head` is a fresh module (its weight
  must then be in the checkpoint) or an alias of the embedding (tied).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.models.effects import method_effects
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef, Provider
from eaglebug.checks.source.index import TreeIndex, parsed_with

CAPTURE_FLAG = "capture_aux_hidden_states"
_LM_FROM_TARGET = "load_lm_head_from_target"
_LM_HEAD = "lm_head"


@dataclass(frozen=True)
class Flavour:
    """Whether a draft class takes EAGLE-3's captured hidden states, and where that is said."""

    eagle3: bool
    owner: str  # the class whose __init__ sets it
    read_from: str  # file:line


@dataclass(frozen=True)
class LmHead:
    """Where a draft's lm_head weight comes from, for one config."""

    from_target: bool
    fresh: bool  # a module of its own (ParallelLMHead), so its weight must be loaded
    read_from: str  # file:line of the assignment that decides it


def method_node(index: TreeIndex, provider: Provider) -> ast.FunctionDef | None:
    """The syntax of the method a provider names (by its file and line)."""
    if provider.file is None or provider.line is None:
        return None
    parsed = index.parse_file(provider.file)
    if parsed is None:
        return None
    for node in syntax.statements(parsed.tree):
        if isinstance(node, ast.FunctionDef) and node.lineno == provider.line:
            return node
    return None


def _init_assigning(
    index: TreeIndex, ref: ClassRef, attribute: str
) -> tuple[ClassRef, ast.FunctionDef] | None:
    """The class in `ref`'s MRO whose `__init__` assigns `self.<attribute>`, and that
    `__init__`'s node."""
    order, _, _ = index.classes.mro(ref)
    owner = next((c for c in order if attribute in c.facts.init_attrs), None)
    method = owner.facts.methods.get("__init__") if owner is not None else None
    if owner is None or method is None:
        return None
    provider = Provider("__init__", owner.qualname, "method", owner.file, method.line, ())
    init = method_node(index, provider)
    return (owner, init) if init is not None else None


def flavour(index: TreeIndex, ref: ClassRef) -> Flavour | None:
    """EAGLE-3 or not, from the constant `__init__` gives `capture_aux_hidden_states`."""
    found = _init_assigning(index, ref, CAPTURE_FLAG)
    if found is None:
        return None
    owner, init = found
    values = set()
    line = 0
    for node in syntax.statements(init):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and ast.unparse(node.targets[0]) == f"self.{CAPTURE_FLAG}"
        ):
            if not isinstance(node.value, ast.Constant) or not isinstance(node.value.value, bool):
                return None
            values.add(node.value.value)
            line = line or node.lineno
    if len(values) != 1:
        return None
    return Flavour(values.pop(), owner.qualname, f"{owner.file}:{line}")


def lm_head(index: TreeIndex, ref: ClassRef, config: Mapping[str, Any]) -> LmHead | None:
    """The draft's `__init__` run over its config: lm_head from the target, tied, or its own."""
    found = _init_assigning(index, ref, _LM_HEAD)
    if found is None:
        return None
    owner, init = found
    tracked = frozenset({_LM_FROM_TARGET, _LM_HEAD})
    effects = method_effects(index, owner, init, owner.file, config, {}, tracked)
    if effects is None:
        return None
    head_key = f"self.{_LM_HEAD}"
    kind = effects.kind(head_key)
    if kind is None:
        return None
    from_key = f"self.{_LM_FROM_TARGET}"
    from_target = effects.value(from_key) if from_key in effects.assigned else False
    if not isinstance(from_target, bool):
        return None
    key = f"self.{_LM_FROM_TARGET}" if from_target else head_key
    decided = effects.lines.get(key, effects.lines[head_key])
    return LmHead(from_target, kind == "call", f"{owner.file}:{decided}")


_SPECULATIVE = "sglang/srt/speculative/"


@dataclass(frozen=True)
class KeepsOwnHead:
    """Under which algorithms the draft worker keeps the draft's own lm_head: the branch
    `if <algo>.is_X(): if ...load_lm_head_from_target: set_embed_and_head(...) else:
    set_embed(...)` of its `init_lm_head` (outside it, every draft gets the target's head)."""

    predicate: str  # is_eagle3
    read_from: str  # file:line of the `set_embed(` call that keeps the draft's head


def keeps_own_head(index: TreeIndex) -> tuple[KeepsOwnHead, ...]:
    """Every such branch in the tree's draft workers (a tree answer)."""
    return index.answer(
        "keeps_own_lm_head", tuple[KeepsOwnHead, ...], lambda: _keeps_own_head(index)
    )


def _keeps_own_head(index: TreeIndex) -> tuple[KeepsOwnHead, ...]:
    found: list[KeepsOwnHead] = []
    for rel in sorted(r for r in index.entries if r.startswith(_SPECULATIVE)):
        parsed = parsed_with(index, rel, _LM_FROM_TARGET)
        if parsed is None:
            continue
        for node in syntax.statements(parsed.tree):
            predicate = _predicate_test(node)
            if predicate is None or not isinstance(node, ast.If):
                continue
            for inner in node.body:
                if not (isinstance(inner, ast.If) and _LM_FROM_TARGET in ast.unparse(inner.test)):
                    continue
                kept = _call_line(inner.orelse, "set_embed")
                if kept is not None and _call_line(inner.body, "set_embed_and_head"):
                    found.append(KeepsOwnHead(predicate, f"{rel}:{kept}"))
    return tuple(dict.fromkeys(found))


def _predicate_test(node: ast.AST) -> str | None:
    """`if self.speculative_algorithm.is_eagle3():` -> "is_eagle3"."""
    if not isinstance(node, ast.If):
        return None
    test = node.test
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and not test.args:
        name = test.func.attr
        return name if name.startswith("is_") else None
    return None


def _call_line(stmts: list[ast.stmt], method: str) -> int | None:
    for stmt in stmts:
        for node in syntax.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == method
            ):
                return node.lineno
    return None
