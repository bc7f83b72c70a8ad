"""A hybrid linear-attention model (Mamba, Gated DeltaNet, KDA) as the audited tree sees it.

Whether a model is one, and which of its layers keep a KV cache, is the tree's own answer:
its predicates (`mambaish_config`, `hybrid_gdn_config`, `hybrid_kda_config`: module functions
of `configs/hybrid_arch.py` in 0.5.23, `ModelRunner` properties in 0.5.9) test the config
object against the classes the tree registers, and the state a request holds is that
config's `mamba2_cache_params.mamba_cache_per_req`. Here the config.json becomes an object of
the registered class (`memobjects.from_config`), the predicates run on it, and their answers
are what the configurator and the runner keep (`kvc.mambaish_config`, `self.mambaish_config`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eaglebug.checks.pyeval.memeval import Evaluator, Ref
from eaglebug.checks.pyeval.memobjects import Instance, attribute, from_config

if TYPE_CHECKING:
    from eaglebug.checks.memory.fit import Context

HYBRID = ("mambaish_config", "hybrid_gdn_config", "hybrid_kda_config")


def evaluator(ctx: Context) -> Evaluator:
    """An evaluator on the target's values, with the tree's classes."""
    ev = Evaluator(ctx.table, ctx.values(ctx.target), ctx.stubs(ctx.target))
    ev.objects = ctx.classes
    return ev


def hybrid_values(ctx: Context) -> dict[str, object]:
    """`model_config.hf_config` as the registered class's object and the tree's hybrid
    predicates on it ("name:from" their file:line); evaluated once per Context."""
    if ctx.hybrid_cache is not None or ctx.classes is None or ctx.objects is None:
        return ctx.hybrid_cache or {}
    made: dict[str, object] = {"_is_cpu": False}  # a CUDA box, as `_is_hip` / `_is_npu`
    ctx.hybrid_cache = dict(made)  # while its own evaluation runs
    cls = ctx.classes.classes.get(ctx.objects.config_class)
    if cls is not None:
        made["model_config.hf_config"] = from_config(
            evaluator(ctx), cls, dict(ctx.target.hf), ctx.objects.class_from
        )
    ctx.hybrid_cache = dict(made)
    for name in HYBRID:
        runner = f"ModelRunner.{name}"
        if name in ctx.table and not ctx.table[name].owner:
            reading, _ = ctx.run(name, [Ref("model_config")], ctx.target)
        elif runner in ctx.table:
            reading, _ = ctx.run(runner, [], ctx.target)
        else:
            continue
        made[name] = reading.value
        made[f"{name}:from"] = reading.anchor
        ctx.hybrid_cache = dict(made)
    return ctx.hybrid_cache


def mamba_config(ctx: Context) -> Instance | None:
    """The model's mamba-ish config (an object of the tree's class), or None."""
    found = hybrid_values(ctx).get("mambaish_config")
    return found if isinstance(found, Instance) else None


def state_bytes_per_request(ctx: Context) -> object:
    """The config's own `mamba2_cache_params.mamba_cache_per_req` (conv + temporal states
    of every linear-attention layer, at their dtypes' sizes)."""
    config = mamba_config(ctx)
    if config is None:
        return None
    ev = evaluator(ctx)
    params = attribute(ev, config, "mamba2_cache_params", "mamba2_cache_params")
    return attribute(ev, params, "mamba_cache_per_req", "mamba_cache_per_req")


def pool_kind(ctx: Context) -> tuple[str, str] | None:
    """ "KV for N full-attention layers + mamba state cache", and the predicate's place."""
    config = mamba_config(ctx)
    if config is None:
        return None
    full = attribute(evaluator(ctx), config, "full_attention_layer_ids", "layer ids")
    count = len(full) if isinstance(full, list) else "?"
    where = hybrid_values(ctx).get("mambaish_config:from")
    return f"KV for {count} full-attention layers + mamba state cache", str(where)
