"""The parallel widths the audited tree derives for a launch: attention TP, pipeline stages.

Read from the tree's own functions, evaluated on the launch's numbers (never a formula typed
here): the attention TP width from 0.5.9's `compute_dp_attention_world_info` or 0.5.23's
`derive_attn_tp_size`, each pipeline stage's layers from `get_pp_indices` (with
`SGLANG_PP_LAYER_PARTITION` from the server's environment). A tree without them says so.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from eaglebug.checks.pyeval import brains
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import FunctionSite
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex


def pp_stages(
    index: TreeIndex, layers: int, pp: int, environ: Mapping[str, str]
) -> tuple[list[tuple[int, int]], str]:
    """Each pipeline stage's [start, end) layers as the tree's `get_pp_indices` gives them
    (with `SGLANG_PP_LAYER_PARTITION` from the environment); equal runs, said, without it."""
    for rel, name, line in _tree_functions(index, (_PP_INDICES,)):
        site = _site(index, rel, name)
        if site is None:
            continue
        ranges: list[tuple[int, int]] = []
        for rank in range(pp):
            machine = Machine(Source.of(index))
            brains.register_os(machine.intrinsics, environ)  # SGLANG_PP_LAYER_PARTITION
            made = machine.run(site, [layers, rank, pp], {}).value
            if not (
                isinstance(made, (list, tuple))
                and len(made) == 2
                and all(isinstance(v, int) for v in made)
            ):
                break
            ranges.append((int(made[0]), int(made[1])))
        if len(ranges) == pp:
            return ranges, f"{rel}:{line}"
    per = max(layers // pp, 1)
    ranges = [(r * per, (r + 1) * per if r < pp - 1 else layers) for r in range(pp)]
    return ranges, "equal runs (this tree has no get_pp_indices)"


# The tree's own derivations of the attention TP width: 0.5.9's positional
# `compute_dp_attention_world_info(enable_dp_attention, tp_rank, tp_size, dp_size)` (it returns
# (attn_tp_rank, attn_tp_size, attn_dp_rank)); 0.5.23's keyword `derive_attn_tp_size(...)`.
_ATTN_TP = ("compute_dp_attention_world_info", "derive_attn_tp_size")


def attention_tp_size(index: TreeIndex, tp: int, dp: int, enabled: bool) -> tuple[int, str]:
    """The attention TP size the tree derives from tp, dp and --enable-dp-attention, with
    where it was read; tp // dp (tp without DP attention), and why, where it has none."""
    if not enabled:  # the tree's attention DP size is 1 then, its attention TP width tp
        return tp, "tp (no --enable-dp-attention)"
    for rel, name, line in _tree_functions(index, _ATTN_TP):
        site = _site(index, rel, name)
        if site is None:
            continue
        machine = Machine(Source.of(index))
        if name == _ATTN_TP[0]:
            made = machine.run(site, [enabled, 0, tp, dp], {}).value
            size = made[1] if isinstance(made, (list, tuple)) and len(made) >= 2 else None
            how = f"{rel}:{line}"
        else:
            attn_dp = dp if enabled else 1
            given = {"tp_size": tp, "attn_cp_size": 1, "attn_dp_size": attn_dp}
            size = machine.run(site, [], given).value
            how = f"{rel}:{line} (attention DP size {attn_dp}, CP 1)"
        if isinstance(size, int) and size > 0:
            return int(size), how
    fallback = tp // dp if enabled and dp else tp
    return fallback, "the tree derives no attention TP width here: tp / dp assumed"


_PP_INDICES = "get_pp_indices"


def _site(index: TreeIndex, rel: str, name: str) -> FunctionSite | None:
    """The module-level function `name` of the tree file `rel`."""
    module, _ = module_name(rel)
    return Source.of(index).function(module, name)


def _tree_functions(index: TreeIndex, names: tuple[str, ...]) -> list[tuple[str, str, int]]:
    """Where the tree defines these of the functions read here (one scan, a tree answer)."""
    found = index.answer(
        "weightsplit:functions",
        list[tuple[str, str, int]],
        lambda: _find_functions(index, (*_ATTN_TP, _PP_INDICES)),
    )
    return [f for f in found if f[1] in names]


def _find_functions(index: TreeIndex, names: tuple[str, ...]) -> list[tuple[str, str, int]]:
    """(file, function, line) of module-level functions with these names (bytes first)."""
    needles = [f"def {n}(".encode() for n in names]
    out: list[tuple[str, str, int]] = []
    for rel in sorted(index.files.module_files.values()):
        data = index.files.source(rel)
        if data is None or not any(n in data for n in needles):
            continue
        parsed = index.parse_file(rel)
        for node in parsed.tree.body if parsed else []:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                out.append((rel, node.name, node.lineno))
    return out
