"""EAGLE-3's capture layers as the target will really capture them, read from the audited tree.

Three things decide them, each read from the tree rather than assumed:
- where SGLang takes the ids from: the draft config's `eagle_config[...]` (the runner's
  `eagle_aux_hidden_state_layer_ids = eagle_config["..."]`, inside a `try` whose `except` sets
  None): ids anywhere else in the draft config are ignored, and None means the target's
  defaults;
- the target class's own convention: its `set_eagle3_layers_to_capture`, evaluated over the ids
  (`models/effects.py`): `[val + 1 for val in layer_ids]` in most classes, conditional forms in others
  (DeepSeek-V2 and gpt-oss in later releases), delegations to an inner model followed;
- which capture layers its forward can reach: `for i in range(start_layer, end_layer)` checks
  `i in self.layers_to_capture`, so a layer id of `num_hidden_layers` is captured only where the
  model's file also tests `self.end_layer in self.layers_to_capture`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import AdviceFix
from eaglebug.checks.models import checks as configchecks
from eaglebug.checks.models.checks import text_config
from eaglebug.checks.models.draft_code import method_node
from eaglebug.checks.models.effects import method_effects
from eaglebug.checks.pyeval.values import is_known
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.index import TreeIndex, find_class, parsed_with

_FIELD = "eagle_aux_hidden_state_layer_ids"
_SETTER = "set_eagle3_layers_to_capture"
_CAPTURE = "layers_to_capture"
_RUNNER_FOLDER = "sglang/srt/model_executor/"
_END_LAYER = re.compile(r"\bend_layer\s+in\s+self\.layers_to_capture\b")
_MAX_DELEGATION = 3


@dataclass(frozen=True)
class IdsSource:
    """Where the runner reads the capture ids from the draft config."""

    container: str | None  # the draft config attribute holding them (eagle_config), or top level
    key: str
    read_from: str  # file:line


@dataclass(frozen=True)
class Capture:
    """The layers a target class captures for given ids, and which it can reach."""

    layers: tuple[int, ...]
    reachable: int  # the largest capture layer its forward checks
    read_from: str  # file:line of the assignment that set them
    via: tuple[str, ...] = ()  # file:line of the delegating calls on the way there


def ids_source(index: TreeIndex) -> IdsSource | None:
    """Where this tree reads EAGLE-3's capture ids from the draft config (a tree answer)."""
    return index.answer("eagle3_ids_source", IdsSource | None, lambda: _ids_source(index))


def _ids_source(index: TreeIndex) -> IdsSource | None:
    for rel in sorted(r for r in index.entries if r.startswith(_RUNNER_FOLDER)):
        parsed = parsed_with(index, rel, _FIELD)
        if parsed is None:
            continue
        for fn in syntax.statements(parsed.tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            found = _ids_in(fn, rel)
            if found is not None:
                return found
    return None


def _ids_in(fn: ast.FunctionDef, rel: str) -> IdsSource | None:
    holders: dict[str, str] = {}  # local name -> the config attribute it was read from
    for node in syntax.statements(fn):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "getattr"
            and len(value.args) >= 2
            and isinstance(value.args[1], ast.Constant)
            and isinstance(value.args[1].value, str)
        ):
            holders[target.id] = value.args[1].value
    for node in syntax.statements(fn):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not (isinstance(target, ast.Attribute) and target.attr == _FIELD):
            continue
        if (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Name)
            and isinstance(value.slice, ast.Constant)
            and isinstance(value.slice.value, str)
        ):
            return IdsSource(holders.get(value.value.id), value.slice.value, f"{rel}:{node.lineno}")
    return None


def capture(
    index: TreeIndex,
    ref: ClassRef,
    config: Mapping[str, Any],
    ids: list[int] | None,
    depth: int = 0,
) -> Capture | None:
    """Run `ref.set_eagle3_layers_to_capture(ids)` over the target's config."""
    provider = index.classes.lookup(ref, _SETTER)
    if provider is None or provider.file is None or depth > _MAX_DELEGATION:
        return None
    node = method_node(index, provider)
    if node is None or len(node.args.args) < 2:
        return None
    owner = find_class(index, provider.owner)
    param = node.args.args[1].arg
    tracked = frozenset({_CAPTURE, _SETTER})
    effects = method_effects(index, owner, node, provider.file, config, {param: ids}, tracked)
    if effects is None:
        return None
    for key in effects.assigned:
        if not key.endswith(_CAPTURE):
            continue
        value = effects.value(key)
        if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
            return None  # not one list of layer ids on every path: nothing to say
        where = f"{provider.file}:{effects.lines[key]}"
        return Capture(tuple(value), _reachable(index, provider.file, config), where)
    for callee, args, line in effects.calls:
        attr = callee.split(".")[-2] if callee.count(".") >= 2 else None
        if attr is None or not args or not is_known(args[0]) or not _int_list(args[0]):
            return None
        inner = _inner(index, owner, attr, config)
        if inner is None:
            return None
        inner_config = config if attr == "model" else text_config(config)
        found = capture(index, inner, inner_config, args[0], depth + 1)
        if found is None:
            return None
        return Capture(
            found.layers, found.reachable, found.read_from, (f"{provider.file}:{line}", *found.via)
        )
    return None


def _int_list(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, int) for v in value))


def _inner(
    index: TreeIndex, owner: ClassRef, attr: str, config: Mapping[str, Any]
) -> ClassRef | None:
    """The class `self.<attr>` holds: the only candidate, or the one the text config names."""
    candidates = [
        c for c in index.classes.inner_classes(owner, attr) if index.classes.lookup(c, _SETTER)
    ]
    if len(candidates) == 1:
        return candidates[0]
    archs = text_config(config).get("architectures")
    named = archs[0] if isinstance(archs, list) and archs else None
    return next((c for c in candidates if c.facts.name == named), None)


def _reachable(index: TreeIndex, rel: str, config: Mapping[str, Any]) -> int:
    layers = config.get("num_hidden_layers")
    count = layers if isinstance(layers, int) else 0
    parsed = index.parse_file(rel)
    end_checked = parsed is not None and _END_LAYER.search(parsed.text) is not None
    return count if end_checked else count - 1


def check_aux_layers(
    index: TreeIndex, target_class: str, target: Mapping[str, Any], draft: Mapping[str, Any]
) -> list[Finding] | None:
    """The effective capture layers of an EAGLE-3 launch; None when the tree's rule is unread."""
    source = ids_source(index)
    ref = find_class(index, target_class)
    layers = text_config(target).get("num_hidden_layers")
    if source is None or not isinstance(layers, int):
        return None
    holder: Any = draft.get(source.container) if source.container else draft
    given = holder.get(source.key) if isinstance(holder, dict) else None
    ids = given if isinstance(given, list) and all(isinstance(i, int) for i in given) else None
    short = ref.facts.name
    config = _own_config(index, target, ref)
    got = capture(index, ref, config, ids)
    if got is None:
        return None
    where = f"{source.container}.{source.key}" if source.container else source.key
    findings: list[Finding] = []
    stray = draft.get(source.key) if source.container else None
    if ids is None and isinstance(stray, list):
        meant = capture(index, ref, config, [i for i in stray if isinstance(i, int)])
        if meant is None or meant.layers != got.layers:
            findings.append(
                Finding(
                    id="config.aux_layers",
                    severity="warning",
                    message=(
                        f"the draft config gives {source.key} {stray} at its top level, but SGLang "
                        f"reads only {where}: they are ignored and {short} captures its default "
                        f"layers {list(got.layers)} instead, not the ones the draft was trained on"
                    ),
                    role="draft",
                    attribute=source.key,
                    fix=AdviceFix(
                        f'move the ids into "{source.container}": {{"{source.key}": ...}}'
                    ),
                    evidence=ConfigEvidence.of(
                        {"ids": stray, "captured": list(got.layers), "target_layers": layers},
                        read_from=source.read_from,
                    ),
                )
            )
    lost = [v for v in got.layers if v < 0 or v > got.reachable]
    if lost:
        findings.append(
            Finding(
                id="config.aux_layers",
                severity="error",
                message=(
                    f"{where} {ids if ids is not None else '(none: defaults)'} become capture "
                    f"layers {list(got.layers)} in {short} ({got.read_from}); its forward "
                    f"captures at layers 0..{got.reachable}, so {lost} is never captured and the "
                    "draft gets fewer hidden states than it was trained on"
                ),
                role="draft",
                class_=short,
                attribute=source.key,
                fix=AdviceFix("use the layer ids the draft was trained with for this target"),
                evidence=ConfigEvidence.of(
                    {
                        "ids": ids,
                        "captured": list(got.layers),
                        "target_layers": layers,
                        "ids_read_from": source.read_from,
                        "via": list(got.via),
                    },
                    read_from=got.read_from,
                ),
            )
        )
    return findings


def _own_config(index: TreeIndex, target: Mapping[str, Any], ref: ClassRef) -> Mapping[str, Any]:
    """The config a class's `self.config` is: a wrapper that delegates the setter sees the
    whole config; a text model, the text config (the same, for a text-only target)."""
    provider = index.classes.lookup(ref, _SETTER)
    if provider is not None and provider.method is not None and provider.method.delegate:
        return target
    return text_config(target)


def aux_layer_findings(
    index: TreeIndex, target_class: str | None, target: Mapping[str, Any], draft: Mapping[str, Any]
) -> list[Finding]:
    """The effective check where the target class's rule reads; else the ids as given against
    the target's layers (`configchecks.check_aux_layers`). A tree answer for these inputs: a
    warm preflight reads it without finding the class in the tree again."""
    return index.answer_for(
        "auxlayers:",
        [target_class, target, draft],
        list[Finding],
        lambda: _aux_layer_findings(index, target_class, target, draft),
        16,
    )


def _aux_layer_findings(
    index: TreeIndex, target_class: str | None, target: Mapping[str, Any], draft: Mapping[str, Any]
) -> list[Finding]:
    effective = check_aux_layers(index, target_class, target, draft) if target_class else None
    return effective if effective is not None else configchecks.check_aux_layers(target, draft)
