"""The weights each GPU really holds: each checkpoint tensor, placed in the audited tree.

SGLang does not split every tensor by `--tp`: ReplicatedLinear layers (MLA's
`fused_qkv_a_proj_with_mqa`), norms and a MoE gate's raw parameter sit whole on every rank;
with `--enable-dp-attention` the attention layers divide only by the attention TP size; with
`--pp-size` the layers are split over the stages. So the checkpoint's total over tp x pp
under-estimates the largest rank, which is the one SGLang's minimum-across-ranks free memory
sees. Here each tensor's bytes (from the safetensors headers, `safetensorsheader`) are put on
the module class that holds it by walking its name through the EntryClass's `__init__`
constructions (`memory/layers.py`), after the checkpoint renames the loader itself lists
(`stacked_params_mapping`, `packed_modules_mapping`); the holder's own `__init__` says what it
divides by. Names that cannot be placed are split by the whole world and counted in a note.
The placement is a tree answer per (tree state, EntryClass, config, layout, names).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eaglebug.checks.args.world import declared_env
from eaglebug.checks.memory.layers import UNREAD, Built, LayerTree, class_node
from eaglebug.checks.memory.parallel import Layout
from eaglebug.checks.memory.safetensors import CheckpointTensors, checkpoint_tensors
from eaglebug.checks.memory.widths import attention_tp_size, pp_stages
from eaglebug.checks.models.checkpoint import shards_stamp
from eaglebug.checks.models.source import ModelSource
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex

_DIGITS = re.compile(r"\.\d+(?=\.|$)")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_KEEP = 8  # layouts of placements kept per tree state
_PREFIXES = ("", "model.")  # the draft loaders' `f"model.{name}"`


@dataclass(frozen=True)
class Placed:
    """Where the tensors of one name pattern (`model.layers.#.mlp.gate.weight`) live."""

    holder: str | None  # qualified class, None when the name could not be placed
    factor: int  # how many ranks share it (1: every rank holds it whole)
    groups: tuple[str, ...]
    where: str | None  # file:line of the division (or of the class that divides by nothing)


@dataclass(frozen=True)
class RankWeights:
    per_rank_bytes: int  # the largest rank's
    total_bytes: int
    replicated_bytes: int  # held whole by every rank (of the largest rank's stage)
    replicated_by: tuple[tuple[str, str], ...]  # (class short name, file:line)
    unplaced: int  # tensors counted as split by the world size
    unplaced_example: str | None
    attn_tp: int
    attn_tp_from: str
    pp_note: str | None
    not_built_bytes: int = 0  # tensors of layers the model does not build (a NextN layer)
    unread: int = 0  # placed tensors whose layer's group size was not read (tp assumed)
    unread_where: str | None = None

    def describe(self, tp: int) -> str:
        gib = 1 << 30
        classes = ", ".join(f"{name}: {where}" for name, where in self.replicated_by[:4])
        text = (
            f"safetensors headers ({self.total_bytes / gib:.1f} GiB), "
            f"{self.replicated_bytes / gib:.2f} GiB replicated on every rank"
            + (f" ({classes})" if classes else "")
            + f", the rest split by the layers' own groups (tp {tp}"
            + (
                f", attention tp {self.attn_tp} from {self.attn_tp_from}"
                if self.attn_tp != tp
                else ""
            )
            + ")"
        )
        if self.unplaced:
            text += (
                f"; {self.unplaced} tensors not placed in the tree (e.g. "
                f"{self.unplaced_example}) counted as split by tp"
            )
        if self.unread:
            text += (
                f"; {self.unread} tensors whose layer's group size was not read "
                f"({self.unread_where}) counted as split by tp"
            )
        if self.not_built_bytes:
            text += (
                f"; {self.not_built_bytes / gib:.1f} GiB of layers past num_hidden_layers "
                "(the NextN layer) not loaded by this model"
            )
        if self.pp_note:
            text += f"; {self.pp_note}"
        return text


def pattern(name: str) -> str:
    return _DIGITS.sub(".#", name)


def fold(name: str) -> str:
    """A name with its numbers but the layer's as `#` (the experts of a layer fold into one):
    what placing and summing per stage need of it."""
    layer = _LAYER.search(name)
    if layer is None:
        return pattern(name)
    head, tail = name[: layer.end()], name[layer.end() :]
    return pattern(head[: layer.start(1)]) + layer.group(1) + pattern("." + tail)


def rank_weights(
    index: TreeIndex,
    entry: ClassRef,
    config: Mapping[str, Any],
    tensors: CheckpointTensors,
    layout: Layout,
    environ: Mapping[str, str] | None = None,
) -> RankWeights:
    """The largest rank's bytes for this checkpoint under this launch layout (and the
    `SGLANG_*` variables of the server's environment, which some layers read)."""
    attn_tp, attn_from = attention_tp_size(index, layout.tp, layout.dp, layout.enable_dp_attention)
    layout = Layout(
        layout.tp,
        attn_tp,
        layout.dp,
        layout.ep,
        layout.pp,
        layout.enable_dp_attention,
        layout.enable_dp_lm_head,
    )
    patterns = sorted({pattern(n) for n in tensors.sizes})
    digest = hashlib.sha256("\n".join(patterns).encode()).hexdigest()
    env = declared_env(index, environ)  # the variables the tree declares: what layers read
    subject: list[Any] = [entry.qualname, repr(layout), digest, _config_key(config), env]
    placed = index.answer_for(
        "weightsplit:",
        subject,
        dict[str, Placed],
        lambda: _place_all(index, entry, config, layout, patterns, env),
        keep=_KEEP,
    )
    stages = (
        pp_stages(index, min(_layer_count(config), 1 << 20), layout.pp, environ or {})
        if layout.pp > 1
        else None
    )
    return _sum(tensors, placed, layout, attn_from, config, stages)


def _config_key(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(repr(sorted(config.items(), key=lambda kv: kv[0])).encode()).hexdigest()


def _place_all(
    index: TreeIndex,
    entry: ClassRef,
    config: Mapping[str, Any],
    layout: Layout,
    patterns: list[str],
    environ: Mapping[str, str],
) -> dict[str, Placed]:
    tree = LayerTree(index, layout, config, environ, lambda ref: loader_renames(index, ref))
    renames = tree.renames(entry)
    start = tree.start(entry)
    return {p: _place(tree, start, p, renames) for p in patterns}


def _place(
    tree: LayerTree,
    start: tuple[ClassRef, tuple[object, ...], dict[str, object]],
    name: str,
    renames: list[tuple[str, str]],
) -> Placed:
    # The name as written, then with each of the loader's legacy renames (`midlayer` ->
    # `layers.0`), under each prefix the loaders try.
    candidates = [name] + [
        name.replace(old, new)
        for old, new in renames
        if "." in new and re.search(rf"(^|\.){re.escape(old)}(\.|$)", name)
    ]
    for candidate in candidates:
        for prefix in _PREFIXES:
            parts = [p for p in (prefix + candidate).split(".") if p != "#" and not p.isdigit()]
            found = _walk(tree, start, parts, renames)
            if isinstance(found, Built):  # a layer of torch itself: no TP group
                return Placed(found.external, 1, (), f"{found.file}:{found.line}")
            if found is not None:
                ref, args, kwargs = found
                split = tree.split(ref, args, kwargs)
                return Placed(ref.qualname, split.factor, split.groups, split.where)
    return Placed(None, tree.layout.tp, ("tp",), None)


def _walk(
    tree: LayerTree,
    start: tuple[ClassRef, tuple[object, ...], dict[str, object]],
    parts: list[str],
    renames: list[tuple[str, str]],
) -> tuple[ClassRef, tuple[object, ...], dict[str, object]] | Built | None:
    ref, args, kwargs = start
    renames = list(renames)
    for i, part in enumerate(parts):
        if i:  # an inner model's loader renames too (Kimi's DeepseekV3 language model)
            renames += [r for r in tree.renames(ref) if r not in renames]
        built = tree.children(ref, args, kwargs)
        options = _named(built, part, renames)
        if not options:
            rest = parts[i:]
            if len(rest) == 1 or "/layers/" in ref.file:
                return ref, args, kwargs  # the parameter itself, or a layer's own sub-names
            return None
        after = parts[i + 1] if i + 1 < len(parts) else None
        chosen = _choose(tree, options, after, renames)
        if chosen.ref is None:
            if (chosen.external or "").endswith("Parameter"):
                return ref, args, kwargs  # `self.weight = nn.Parameter(...)`: its class holds it
            return chosen if len(parts) - i <= 2 else None
        ref, args, kwargs = chosen.ref, chosen.args, dict(chosen.kwargs)
    return ref, args, kwargs


def _named(built: list[Built], part: str, renames: list[tuple[str, str]]) -> list[Built]:
    found = [b for b in built if b.attr == part]
    if found:
        return found
    for shard, param in renames:
        if part == shard:
            found = [b for b in built if b.attr == param]
            if found:
                return found
    return []


def _choose(
    tree: LayerTree, options: list[Built], after: str | None, renames: list[tuple[str, str]]
) -> Built:
    """Of the classes an attribute may hold (`mlp`: MoE or dense), the one whose next
    component the tensor name has."""
    if len(options) == 1 or after is None:
        return options[0]
    for option in options:
        if option.ref is None:
            continue
        children = tree.children(option.ref, option.args, dict(option.kwargs))
        if _named(children, after, renames):
            return option
    for option in options:
        if option.ref is not None and "/layers/" in option.ref.file:
            return option
    return options[0]


def loader_renames(index: TreeIndex, entry: ClassRef) -> list[tuple[str, str]]:
    """(checkpoint part, parameter part) pairs the loader lists: `stacked_params_mapping`'s
    (param, shard, id) tuples, and `packed_modules_mapping`'s {fused: [parts]}, in the
    entry class and its bases."""
    out: list[tuple[str, str]] = []
    for ref in index.classes.mro(entry)[0]:
        node = class_node(index, ref)
        if node is None:
            continue
        for item in syntax.walk(node):
            if isinstance(item, ast.Tuple) and len(item.elts) >= 3:
                first, second = (_text(e) for e in item.elts[:2])
                if first and second:
                    out.append((second.strip("."), first.strip(".")))
            elif isinstance(item, ast.Assign) and isinstance(item.value, (ast.List, ast.Tuple)):
                target = item.targets[0]
                if isinstance(target, ast.Subscript) and "packed" in (dotted(target.value) or ""):
                    fused = _text(target.slice)
                    for elt in item.value.elts:
                        part = _text(elt)
                        if fused and part:
                            out.append((part, fused))
            elif isinstance(item, ast.Dict):  # {fused: [parts]}, or legacy {old: new}
                for key, value in zip(item.keys, item.values, strict=True):
                    fused = _text(key) if key is not None else None
                    if fused and isinstance(value, ast.List):
                        out.extend((p, fused) for p in (_text(e) for e in value.elts) if p)
                    elif fused and _text(value):
                        out.append((fused, str(_text(value))))
    return list(dict.fromkeys(out))


def _text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
        return node.value
    return None


def _sum(
    tensors: CheckpointTensors,
    placed: Mapping[str, Placed],
    layout: Layout,
    attn_from: str,
    config: Mapping[str, Any],
    stages: tuple[list[tuple[int, int]], str] | None = None,
) -> RankWeights:
    """Per stage (pipeline rank), the bytes each tensor leaves on one rank; the largest."""
    pp = max(layout.pp, 1)
    layers = _layer_count(config)
    ranges, pp_from = stages if stages is not None else ([(0, layers)], "")
    stage_bytes = [0.0] * pp
    replicated = [0] * pp
    by: dict[str, str] = {}
    unplaced = 0
    example: str | None = None
    not_built = 0
    unread = 0
    unread_where: str | None = None
    for name, size in tensors.sizes.items():
        layer = _LAYER.search(name)
        if layer is not None and int(layer.group(1)) >= layers:
            not_built += size  # `make_layers(config.num_hidden_layers, ...)` builds no more
            continue
        where = placed.get(pattern(name))
        if where is None or where.holder is None:
            unplaced += tensors.count(name)
            example = example or name
            factor = layout.tp
        else:
            factor = max(where.factor, 1)
            if UNREAD in where.groups:
                unread += tensors.count(name)
                unread_where = unread_where or where.where
        stage = _stage(name, pp, int(layer.group(1)) if layer else None, ranges)
        stage_bytes[stage] += size / factor
        if where is not None and where.holder is not None and factor == 1:
            replicated[stage] += size
            by.setdefault(where.holder.rsplit(".", 1)[-1], where.where or "")
    largest = max(range(pp), key=lambda s: stage_bytes[s])
    note = (
        f"layers over {pp} pipeline stages as {pp_from} splits them "
        f"({', '.join(f'{a}-{b - 1}' for a, b in ranges)}), the embedding on the first stage "
        f"and the rest on the last (by name); stage {largest} is the largest"
        if pp > 1
        else None
    )
    return RankWeights(
        per_rank_bytes=int(stage_bytes[largest]),
        total_bytes=tensors.total_bytes,
        replicated_bytes=replicated[largest],
        replicated_by=tuple(sorted(by.items())),
        unplaced=unplaced,
        unplaced_example=example,
        attn_tp=layout.attn_tp,
        attn_tp_from=attn_from,
        pp_note=note,
        not_built_bytes=not_built,
        unread=unread,
        unread_where=unread_where,
    )


def _layer_count(config: Mapping[str, Any]) -> int:
    text = config.get("text_config")
    source = text if isinstance(text, Mapping) else config
    value = source.get("num_hidden_layers")
    return value if isinstance(value, int) and value > 0 else 1 << 30


def _stage(name: str, pp: int, layer: int | None, ranges: list[tuple[int, int]]) -> int:
    if pp == 1:
        return 0
    if layer is not None:
        return next((i for i, (a, b) in enumerate(ranges) if a <= layer < b), pp - 1)
    return 0 if "embed" in name else pp - 1


def _checkpoint(index: TreeIndex, path: Path | None) -> CheckpointTensors | str:
    """The headers' bytes, kept with the answers while the shard files are as they were
    (their names, sizes and mtimes): a second preflight of the same model stats them only."""
    stamp = shards_stamp(path) if path is not None else None
    if stamp is None:
        return checkpoint_tensors(path, fold)
    return index.answer_for(
        "weightsplit:headers:",
        [str(path), stamp],
        CheckpointTensors | str,
        lambda: checkpoint_tensors(path, fold, index.warnings),
        keep=4,
    )


@dataclass(frozen=True)
class RankShare:
    """One model's weights on its largest rank, and how that figure was had."""

    bytes: int
    whole_bytes: int  # of which every rank holds whole (does not shrink with a larger --tp)
    how: str
    not_built_bytes: int = 0  # the checkpoint's layers this model does not build (NextN)


def per_rank_bytes(
    index: TreeIndex,
    model: ModelSource,
    layout: Layout,
    total_bytes: int,
    how: str,
    world: int,
    environ: Mapping[str, str] | None = None,
) -> RankShare:
    """The largest rank's bytes: from the checkpoint's headers placed in the tree, else
    today's exact split of `total_bytes` over `world` ranks, saying why."""
    split = f"{how}, split by {world} ranks" if world > 1 else how
    tensors = _checkpoint(index, model.path)
    if isinstance(tensors, str):
        return RankShare(total_bytes // world, 0, f"{split} (no per-tensor split: {tensors})")
    config = model.config or {}
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    entry = index.exporters_of(arch)[:1] if arch else []
    if not entry:
        why = f"no per-tensor split: {arch} is not registered"
        return RankShare(total_bytes // world, 0, f"{split} ({why})")
    found = rank_weights(index, entry[0], config, tensors, layout, environ)
    return RankShare(
        found.per_rank_bytes,
        found.replicated_bytes,
        found.describe(layout.tp),
        found.not_built_bytes,
    )
