"""The launch's memory, as the audited tree would size it: fraction, budget, pool, requests.

Two shapes occur. From 0.5.14 the target's configurator charges what is resident (target and
draft weights) against the free memory measured before the load (`_profile_available_bytes`)
and sizes one pool whose cell holds the draft's layers too (`DefaultPoolConfigurator`); in
0.5.9 `init_memory_pool` -> `profile_max_num_token` sizes the target's pool after the target
alone is loaded, and the draft worker then takes its weights and a pool of the same token
count out of the slack the fraction left. Which shape a tree has is read from its anchors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.logs.memory import Overheads
from eaglebug.checks.memory import hybrid as memhybrid
from eaglebug.checks.memory import startup, unmodelled
from eaglebug.checks.memory.allocation import allocation
from eaglebug.checks.memory.fit import GIB, MIB, Context, Gpu, MemoryLaunch, ModelShape
from eaglebug.checks.memory.layout import Layout
from eaglebug.checks.memory.reading import ROOTS, Flat, Reading
from eaglebug.checks.memory.rules import ANCHORS, REQUEST_LIMIT, MemorySources, kept_expression
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import UNSET, Instance, Intrinsic, Raised, Top
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex


@dataclass(frozen=True)
class Weights:
    target_bytes: int  # per rank
    draft_bytes: int  # per rank
    target_whole_bytes: int = 0  # of target_bytes, held whole on every rank (ReplicatedLinear)
    draft_whole_bytes: int = 0

    def at_tp(self, scale: float) -> Weights:
        """The same checkpoints over `scale` times the ranks: only the split part shrinks."""
        return Weights(
            int(self.target_whole_bytes + (self.target_bytes - self.target_whole_bytes) * scale),
            int(self.draft_whole_bytes + (self.draft_bytes - self.draft_whole_bytes) * scale),
            self.target_whole_bytes,
            self.draft_whole_bytes,
        )


@dataclass
class Prediction:
    launch: MemoryLaunch
    fraction: float | None = None
    fraction_from: str = ""  # "--mem-fraction-static" or the tree's file:line
    default_fraction: float | None = None
    default_from: str | None = None
    reserved_mb: float | None = None  # the tree's activation + graph reserve
    graph_reserve_mb: float | None = None
    cuda_graph_max_bs: int | None = None
    chunked_prefill_size: int | None = None
    pre_load_gib: float = 0.0
    avail_after_load_gib: float = 0.0
    weights_gib: float = 0.0  # target + draft per GPU
    draft_counted: bool = False  # does the tree charge the draft's weights to the KV budget
    draft_counted_from: str | None = None
    kv_cell_bytes: int | None = None
    cell_from: str | None = None
    draft_cell_bytes: int = 0  # 0.5.9: the draft worker's own pool, out of the slack
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    kv_gib: float | None = None  # the pool's bytes as allocated
    kv_allocated_cell_bytes: int | None = None  # where the allocation differs from the cell
    kv_allocated_from: str | None = None
    raised: Raised | None = None
    unknown: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    budget_from: str | None = None
    layout: Layout | None = None  # the attention layout the pools are sized for
    pool_kind: str = ""  # "MHA", "MLA", "MLA + DSA indexer K cache"
    pool_kind_from: str | None = None
    configurator: str | None = None  # the pool configurator class the tree picked (0.5.23)
    configurator_from: str | None = None
    full_tokens: int | None = None  # hybrid SWA: the full-attention layers' pool
    swa_tokens: int | None = None  # and the sliding-window layers'
    mamba_cache_requests: int | None = None  # the tree's max_mamba_cache_size (per DP rank)
    mamba_state_bytes_per_request: int | None = None  # mamba_cache_per_req (conv + ssm)
    mamba_gib: float | None = None  # the state cache's share of the budget
    mamba_from: str | None = None  # where the tree sizes it

    @property
    def slack_gib(self) -> float:
        """What the fraction leaves outside the static pool (SGLang's own base: total memory
        for the default, free memory before the load for the budget)."""
        return self.pre_load_gib * (1 - (self.fraction or 0))

    @property
    def draft_slack_gib(self) -> float:
        """The draft's weights and pool where the tree takes them out of the slack (0.5.9)."""
        if self.draft_counted or self.max_total_num_tokens is None:
            return 0.0
        tokens = self.max_total_num_tokens
        return self.weights_gib_draft + tokens * self.draft_cell_bytes / GIB

    weights_gib_draft: float = 0.0


def _params(ctx: Context, name: str) -> list[str]:
    found = ctx.site(name)
    node = found[0].node if found is not None else None
    if node is None or not hasattr(node.args, "args"):
        return []
    names = [a.arg for a in node.args.args]
    return names[1:] if names and names[0] in ROOTS | {"cls"} else names


def _fraction(ctx: Context, out: Prediction) -> None:
    name = ctx.sources.entries["fraction"]
    if not name:
        looked = ", ".join(ANCHORS["fraction"])
        out.unknown.append(f"this tree sets no default fraction in any of {looked}")
        return
    found = ctx.site(name)
    if found is not None and found[1] is not None:  # a method: its GPU-memory parameter, if any
        args: list[object] = [ctx.gpu.total_bytes / MIB] if _params(ctx, name) else []
    else:  # 0.5.22's `handle_gpu_memory_settings(server_args)`
        args = [ctx.gpu.total_bytes / MIB] if _params(ctx, name) else [Flat()]
    values = ctx.values(ctx.target)
    values["mem_fraction_static"] = None
    reading, env = ctx.run(name, args, ctx.target, values)
    out.assumed.extend(reading.assumed)
    value = env.get("mem_fraction_static")
    if not isinstance(value, float):
        out.unknown.append(f"default mem_fraction_static not read ({_why(reading.unknown, value)})")
        return
    out.default_fraction = value
    out.default_from = reading.line_of("mem_fraction_static")
    reserved = [s for s in reading.steps if s.name == "reserved_mem"]
    if reserved and isinstance(reserved[-1].value, (int, float)):
        out.reserved_mb = float(reserved[-1].value)
    top = min((s.depth for s in reserved), default=0)
    out.graph_reserve_mb = sum(
        float(s.value) - float(s.before)
        for s in reserved
        if s.depth == top
        and isinstance(s.value, (int, float))
        and isinstance(s.before, (int, float))
        and ("graph" in s.code or "max_bs" in s.code)
    )
    for key in ("cuda_graph_config.decode.max_bs", "cuda_graph_max_bs"):
        if isinstance(env.get(key), int):
            out.cuda_graph_max_bs = int(env[key])  # type: ignore[call-overload]
            break
    if isinstance(env.get("chunked_prefill_size"), int):
        out.chunked_prefill_size = int(env["chunked_prefill_size"])  # type: ignore[call-overload]


def predict(
    index: TreeIndex,
    sources: MemorySources,
    launch: MemoryLaunch,
    target: ModelShape,
    draft: ModelShape | None,
    gpu: Gpu,
    weights: Weights,
    measured: Overheads | None = None,
    config_class: str | None = None,
) -> Prediction:
    ctx = Context(index, sources, launch, target, draft, gpu, config_class)
    out = Prediction(launch, layout=ctx.layout)
    out.unknown.extend(ctx.layout.unknown)
    out.pool_kind, out.pool_kind_from = ctx.pool_kind(target)
    _fraction(ctx, out)
    if launch.mem_fraction_static is not None:
        out.fraction, out.fraction_from = launch.mem_fraction_static, "--mem-fraction-static"
    elif out.default_fraction is not None:
        out.fraction, out.fraction_from = out.default_fraction, out.default_from or "the tree"
    else:
        return out
    measured = measured or Overheads()
    pre = measured.free_before_load_gib or gpu.free_bytes / GIB
    target_gib = measured.target_weights_gib or weights.target_bytes / GIB
    draft_gib = measured.draft_weights_gib or weights.draft_bytes / GIB
    out.pre_load_gib = pre
    out.weights_gib = target_gib + draft_gib
    out.weights_gib_draft = draft_gib
    budget = sources.entries["budget"]
    budget_text = next(
        (f for f in sources.functions if f.qualname.rsplit(".", 1)[-1] == budget), None
    )
    # The tree says it charges the draft's weights where it sizes the budget (0.5.14 on:
    # "Loaded weights (target + draft) can exceed the static budget").
    said = [
        i
        for i, text in enumerate(budget_text.text.splitlines() if budget_text else [])
        if "draft" in text and "weight" in text
    ]
    if budget_text is not None and said:
        out.draft_counted = True
        out.draft_counted_from = f"{budget_text.file}:{budget_text.line + said[0]}"
    out.avail_after_load_gib = pre - target_gib - (draft_gib if out.draft_counted else 0.0)
    if budget == "_profile_available_bytes":
        _pool(ctx, out)
    elif budget == "profile_max_num_token":
        _pool_059(ctx, out)
    else:
        looked = ", ".join(ANCHORS["budget"])
        out.unknown.append(f"this tree sizes no KV budget in any of {looked}")
    _mamba(ctx, out)
    out.assumed.extend(
        unmodelled.assumed(
            index,
            sources.defaults,
            launch.piecewise_cuda_graph,
            launch.quantization,
            dict(target.hf).get("quantization_config.quant_method") is not None,
            measured.target_weights_gib is not None,
        )
    )
    return out


def _why(unknown: str | None, value: object) -> str:
    """Why a figure was not read, in words: the reading's own reason, or the unknown value's
    (its line and cause), or what the run left in its place."""
    if unknown:
        return unknown
    if isinstance(value, Top):
        return value.why
    if value is None or value is UNSET:
        return "the run left it unset"
    return f"the run left {value!r:.80}, not a number"


def _mamba(ctx: Context, out: Prediction) -> None:
    """A hybrid model's mamba state cache as the tree sized it beside the KV pool: the
    requests it holds (`max_mamba_cache_size`, which the budget's evaluation set) and the
    state bytes of one request (the config's own `mamba_cache_per_req`)."""
    if not memhybrid.is_mamba(ctx):
        return
    per_req = memhybrid.state_bytes_per_request(ctx)
    if isinstance(per_req, int):
        out.mamba_state_bytes_per_request = per_req
    else:
        out.unknown.append(f"mamba state size not read ({_why(None, per_req)})")
    size = out.mamba_cache_requests
    if isinstance(size, int) and isinstance(per_req, int):
        out.mamba_gib = size * per_req / GIB
    handler = next(
        (n for n in ("_handle_max_mamba_cache", "handle_max_mamba_cache") if ctx.has(n)),
        None,
    )
    found = ctx.site(handler) if handler is not None else None
    if found is not None:
        out.mamba_from = found[0].where
    else:  # 0.5.3: set in the runner's start-up
        out.mamba_from = startup.writer(ctx, "max_mamba_cache_size")


def _mamba_size(out: Prediction, values: dict[str, object]) -> None:
    """The `max_mamba_cache_size` the budget's evaluation left (set by the tree)."""
    size = values.get("max_mamba_cache_size")
    if isinstance(size, int) and not isinstance(size, bool):
        out.mamba_cache_requests = size


def _values(ctx: Context, out: Prediction) -> dict[str, object]:
    values = ctx.values(ctx.target, runner=True)
    values["mem_fraction_static"] = out.fraction
    values["chunked_prefill_size"] = out.chunked_prefill_size
    values["cuda_graph_config.decode.max_bs"] = out.cuda_graph_max_bs
    startup.apply(ctx, values, out.assumed)  # what the runner sets on its way to the pool
    return values


def _pool(ctx: Context, out: Prediction) -> None:
    values = _values(ctx, out)
    budget, left = ctx.run(
        "_profile_available_bytes", [out.pre_load_gib], ctx.target, values, out.avail_after_load_gib
    )
    values = left or values  # what the budget's run set (the mamba cache size) is read next
    out.budget_from = budget.anchor
    out.assumed.extend(budget.assumed)
    _mamba_size(out, values)
    if budget.raised is not None:
        out.raised = budget.raised
        out.max_total_num_tokens = 0
        return
    if not isinstance(budget.value, int):
        out.unknown.append(f"KV budget not read ({_why(budget.unknown, budget.value)})")
        return
    kind = _configurator(ctx, values, out)
    cell, env = ctx.run(f"{kind}.__init__", [Flat()], ctx.target, values)
    out.assumed.extend(cell.assumed)
    cell_size = env.get("_cell_size")
    if not isinstance(cell_size, (int, float)) or cell_size <= 0:
        out.unknown.append(f"KV cell size not read ({_why(cell.unknown, cell_size)})")
        return
    out.kv_cell_bytes, out.cell_from = int(cell_size), cell.line_of("_cell_size")
    sizes, env = ctx.run(
        f"{kind}.calculate_pool_sizes",
        [budget.value, ctx.launch.page_size],
        ctx.target,
        env,
    )
    tokens = getattr(sizes.value, "max_total_num_tokens", None)
    if sizes.raised is not None:  # 0.5.23's SWA pool too small for one request
        out.raised, out.max_total_num_tokens = sizes.raised, 0
        return
    if not isinstance(tokens, int):
        out.unknown.append(f"pool size not read ({_why(sizes.unknown, tokens)})")
        return
    for side in ("full", "swa"):
        made = getattr(sizes.value, f"{side}_max_total_num_tokens", None)
        if isinstance(made, int) and ctx.facts(ctx.target).hybrid_swa:
            setattr(out, f"{side}_tokens", made)
    capped, env = ctx.run("_apply_token_constraints", [tokens], ctx.target, env)
    if isinstance(capped.value, int):
        tokens = capped.value // ctx.launch.page_size * ctx.launch.page_size
    out.max_total_num_tokens = tokens
    out.kv_gib = tokens * cell_size / GIB
    reqs, _ = ctx.run(ctx.sources.entries["requests"], [tokens], ctx.target, env)
    out.assumed.extend(reqs.assumed)
    if isinstance(reqs.value, int):
        out.max_running_requests = reqs.value
    else:
        out.unknown.append(f"max_running_requests not read ({_why(reqs.unknown, reqs.value)})")


def _configurator(ctx: Context, values: dict[str, object], out: Prediction) -> str:
    """The pool configurator class the tree picks (`create_memory_pool_configurator`,
    0.5.23: hybrid SWA models get `HybridSWAPoolConfigurator`), read by evaluating it with
    each configurator class standing for itself."""
    default = "DefaultPoolConfigurator"
    picker = "create_memory_pool_configurator"
    if not ctx.has(picker):
        return default
    classes = {
        f"{module_name(f.file)[0]}.{f.qualname.rsplit('.', 1)[0]}": f.qualname.rsplit(".", 1)[0]
        for f in ctx.sources.functions
        if f.qualname.endswith("Configurator.__init__")
    }

    def stand_for_themselves(m: Machine, obj: Instance) -> None:
        for qualname, name in classes.items():  # `Cls(kvc)` answers which class, nothing more
            m.intrinsics.call(qualname, _stands_for(name))

    reading, _ = ctx.run(picker, [Flat()], ctx.target, dict(values), extra=stand_for_themselves)
    out.assumed.extend(reading.assumed)
    picked = reading.value
    name = (
        picked.qualname.removeprefix("configurator.") if isinstance(picked, Intrinsic) else default
    )
    out.configurator, out.configurator_from = name, reading.anchor
    return name if ctx.has(f"{name}.__init__") else default


def _stands_for(name: str) -> Callable[[Call], Any]:
    """A configurator class's construction, answered with which class it is."""
    return lambda call: Intrinsic(f"configurator.{name}")


def _pool_059(ctx: Context, out: Prediction) -> None:
    values = _values(ctx, out)
    handed, named = startup.handed_on(ctx, "init_memory_pool")

    def sized(shape: ModelShape, store: dict[str, object]) -> tuple[Reading, dict[str, object]]:
        """The runner's own `init_memory_pool` on `store`, handed what its caller hands it."""
        args = [out.pre_load_gib, *handed]
        return ctx.run(
            "init_memory_pool", args, shape, store, out.avail_after_load_gib, kwargs=dict(named)
        )

    pool, env = sized(ctx.target, values)
    out.budget_from = pool.anchor
    out.assumed.extend(pool.assumed)
    _mamba_size(out, env)
    cells = [s for s in pool.steps if s.name == "cell_size" and isinstance(s.value, int)]
    if cells and isinstance(cells[-1].value, int):
        out.kv_cell_bytes = cells[-1].value
        out.cell_from = f"{cells[-1].file}:{cells[-1].line}"
    tokens = env.get("max_total_num_tokens")
    if pool.raised is not None:
        out.raised = pool.raised
        out.max_total_num_tokens = min(tokens, 0) if isinstance(tokens, int) else 0
        return
    if not isinstance(tokens, int) or out.kv_cell_bytes is None:
        out.unknown.append(f"pool size not read ({_why(pool.unknown, tokens)})")
        return
    out.max_total_num_tokens = tokens
    out.kv_gib = tokens * out.kv_cell_bytes / GIB
    _allocated(ctx, out, values)
    if ctx.facts(ctx.target).hybrid_swa:  # set_num_tokens_hybrid_swa's split of the pool
        for side in ("full", "swa"):
            made = env.get(f"{side}_max_total_num_tokens")
            setattr(out, f"{side}_tokens", made if isinstance(made, int) else None)
        # The cell prices a token of every layer: the bytes are the profiled count's.
        profiled = [s.value for s in pool.steps if s.name == "max_total_num_tokens"]
        if profiled and isinstance(profiled[0], int):
            out.kv_gib = profiled[0] * out.kv_cell_bytes / GIB
    reqs = [s for s in pool.steps if s.name == "max_num_reqs"]
    known = [s.value for s in reqs if isinstance(s.value, int)]
    if known:
        out.max_running_requests = _request_limit(ctx, env, tokens, known[-1])
    elif reqs:  # said as `_pool` says it for a configurator's tree
        why = _why(pool.unknown, reqs[-1].value)
        out.unknown.append(f"max_running_requests not read ({why})")
    if ctx.draft is not None and ctx.launch.algorithm:
        draft_values = ctx.values(ctx.draft, draft_worker=True, runner=True)
        layers = ctx.draft.nextn_layers or ctx.draft.layers
        if ctx.has("get_cell_size_per_token"):
            reading, _ = ctx.run("get_cell_size_per_token", [layers], ctx.draft, draft_values)
            value = reading.value
        else:  # 0.5.3: the draft's runner works its cell out inside its own pool's sizing
            reading, _ = sized(ctx.draft, draft_values)
            sizes = [step.value for step in reading.steps if step.name == "cell_size"]
            value = sizes[-1] if sizes else None
        if isinstance(value, int):
            out.draft_cell_bytes = value
        else:
            out.unknown.append(f"the draft's cell size not read ({_why(reading.unknown, value)})")


def _allocated(ctx: Context, out: Prediction, values: dict[str, object]) -> None:
    """The KV GiB as the tree allocates the pool (`memory/allocation.py`)."""
    found = allocation(ctx, values)
    if found is None or out.kv_cell_bytes is None or out.max_total_num_tokens is None:
        return
    cell = out.kv_cell_bytes + found.extra_bytes()
    out.kv_gib = out.max_total_num_tokens * cell / GIB
    out.kv_allocated_cell_bytes = cell
    out.kv_allocated_from = found.read_from


def _request_limit(ctx: Context, env: dict[str, object], tokens: int, pool_size: int) -> int | None:
    """0.5.9's `self.max_running_requests = min(...)` (model_runner.py), evaluated with the
    pool just sized: its token count and the request pool's size; a release without it
    (0.5.10: `config.max_running_requests`) keeps the request pool's size."""
    if not any(f.qualname == REQUEST_LIMIT for f in ctx.sources.functions):
        return pool_size
    values = dict(env)
    values.update({"max_total_num_tokens": tokens, "req_to_token_pool.size": pool_size})
    made = kept_expression(ctx.index, ctx.sources, REQUEST_LIMIT, values)
    return made if isinstance(made, int) else None


def minimum_fraction(tokens_at: Callable[[float], int], tokens_needed: int) -> float | None:
    """The smallest --mem-fraction-static (to 0.001) at which `tokens_at` (the tree's own
    arithmetic: `predict`'s pool at that fraction) gives at least `tokens_needed` tokens; None
    when no fraction below 1 does."""
    tokens = tokens_at
    lo, hi = 0, 999  # in thousandths
    if tokens(hi / 1000) < tokens_needed:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if tokens(mid / 1000) >= tokens_needed:
            hi = mid
        else:
            lo = mid + 1
    return math.ceil(hi) / 1000
