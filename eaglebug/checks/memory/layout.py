"""The attention layout a launch's KV pools are sized for, as the audited tree derives it.

With `--enable-dp-attention --dp-size N` (DeepSeek-V3/R1, Kimi on 8 GPUs) each attention-DP
rank holds its own pool: MHA heads are split over the attention-TP group only, the request
limit is divided by the attention-DP width, and the CUDA-graph reserve grows with it. Which
widths those are is the tree's own arithmetic: 0.5.22 on first rewrites the deprecated flags
(`handle_deprecated_dp_attention`: `attn_dp_size = dp_size`, `dp_size = 1`), then every
release takes the attention-TP width from `compute_dp_attention_world_info` (0.5.9: its
`enable_dp_attention, tp_rank, tp_size, dp_size` form; 0.5.23: `tp_rank, tp_size,
attn_dp_size` through `derive_attn_tp_size`), and 0.5.9 / 0.5.14's runner keeps a DP width of
its own (`self.dp_size = ... if server_args.enable_dp_attention else 1`). Each is evaluated
here, with the line it came from; a release without one says so.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eaglebug.checks.memory.reading import Flat, evaluate
from eaglebug.checks.memory.rules import RUNNER_DP, kept_expression
from eaglebug.checks.pyeval.values import UNSET, FunctionSite
from eaglebug.checks.source import syntax

if TYPE_CHECKING:
    from eaglebug.checks.memory.fit import Context


@dataclass(frozen=True)
class Layout:
    """The widths the pools are sized for, and the server arguments the tree resolved."""

    attn_tp_size: int
    attn_dp_size: int
    runner_dp_size: int | None  # the model runner's own DP width, where it keeps one
    resolved: dict[str, object] = field(default_factory=dict)  # server args the tree rewrote
    attn_tp_from: str | None = None  # file:line of the function that gave the width
    resolved_from: str | None = None
    unknown: tuple[str, ...] = ()

    @property
    def dp_attention(self) -> bool:
        return self.attn_dp_size > 1

    def describe(self) -> str:
        if not self.dp_attention:
            return f"attention TP {self.attn_tp_size}"
        return (
            f"DP attention: {self.attn_dp_size} attention-DP ranks of attention TP "
            f"{self.attn_tp_size}, one KV pool each"
        )


def parallel_layout(ctx: Context) -> Layout:
    """Evaluate the tree's resolution and attention-width functions for this launch."""
    launch = ctx.launch
    values = ctx.values(ctx.target)
    resolved: dict[str, object] = {}
    resolved_from = None
    unknown: list[str] = []
    rewrite = ctx.sources.entries.get("dp_resolution", "")
    if rewrite:
        before = dict(values)
        reading, env = ctx.run(rewrite, [Flat()], ctx.target, values)
        resolved = {
            k: v for k, v in env.items() if k in reading.written and before.get(k, UNSET) != v
        }
        resolved_from = reading.anchor
        values = env
    world = ctx.sources.entries.get("attention_layout", "")
    found = ctx.site(world) if world else None
    if found is None:
        if launch.enable_dp_attention:
            unknown.append("this tree has no compute_dp_attention_world_info: no DP attention")
        return Layout(launch.tp, 1, None, resolved, None, resolved_from, tuple(unknown))
    function = found[0]
    args = {
        "enable_dp_attention": values.get("enable_dp_attention"),
        "tp_rank": 0,
        "tp_size": launch.tp,
        "dp_size": values.get("dp_size"),
        "attn_dp_size": values.get("attn_dp_size", 1),
        "attn_cp_size": values.get("attn_cp_size", 1),
    }
    node = function.node
    params = [a.arg for a in node.args.args] if node is not None else []
    kwargs = {name: args[name] for name in params if name in args}
    reading, _ = ctx.run(world, [], ctx.target, dict(values), kwargs=kwargs)
    returned = reading.value
    named = _returned_names(function, returned)
    attn_tp = named.get("attn_tp_size")
    attn_dp = named.get("attn_dp_size", kwargs.get("attn_dp_size"))
    if attn_dp is None:  # 0.5.9 returns no DP width: the one its first line assigns
        attn_dp = _assigned(ctx, function, "attn_dp_size", values, kwargs)
    if attn_dp is None and isinstance(attn_tp, int) and attn_tp > 0:
        # Before 0.5.9 the function assigns no DP width either: the attention-DP ranks are the
        # attention-TP groups the TP world splits into (`initialize_dp_attention`'s
        # `range(0, tp_size, attn_tp_size)`).
        attn_dp = launch.tp // attn_tp
    if not isinstance(attn_tp, int) or not isinstance(attn_dp, int):
        unknown.append(f"attention widths not read from {world} ({reading.unknown or returned!r})")
        return Layout(launch.tp, 1, None, resolved, None, resolved_from, tuple(unknown))
    where = function.where
    runner_dp = _runner_dp(ctx, values)
    return Layout(attn_tp, attn_dp, runner_dp, resolved, where, resolved_from, tuple(unknown))


def _returned_names(function: FunctionSite, returned: object) -> dict[str, object]:
    """The returned tuple by the names the tree's `return a, b, c` statements give its parts
    (each of them: 0.5.8's `return tp_rank, tp_size, 0` without DP attention names the width
    `attn_tp_size` only in its other return)."""
    if not isinstance(returned, (list, tuple)) or function.node is None:
        return {}
    out: dict[str, object] = {}
    for node in syntax.walk(function.node):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            names = [e.id if isinstance(e, ast.Name) else "" for e in node.value.elts]
            if len(names) == len(returned):
                out.update({n: v for n, v in zip(names, returned, strict=True) if n})
    return out


def _assigned(
    ctx: Context,
    function: FunctionSite,
    name: str,
    values: dict[str, object],
    kwargs: dict[str, object],
) -> object:
    """A local the function assigns from its arguments (`attn_dp_size = dp_size if ...`)."""
    for stmt in function.node.body if isinstance(function.node, ast.FunctionDef) else []:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name
        ):
            return evaluate(ctx.index, function.rel, stmt.value, values, names=kwargs)
    return None


def _runner_dp(ctx: Context, values: dict[str, object]) -> int | None:
    """0.5.9 / 0.5.14's `self.dp_size = ...` of ModelRunner, evaluated (None: no such line)."""
    made = kept_expression(ctx.index, ctx.sources, RUNNER_DP, values)
    return made if isinstance(made, int) else None
