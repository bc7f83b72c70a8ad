"""A hybrid linear-attention model (Mamba, Gated DeltaNet, KDA) as the audited tree sees it.

Whether a model is one, and which of its layers keep a KV cache, is the tree's own answer:
its predicates (`mambaish_config`, `hybrid_gdn_config`, `hybrid_kda_config`: module functions
of `configs/hybrid_arch.py` in 0.5.23, `ModelRunner` properties in 0.5.9) test the config
object against the classes the tree registers, and the state a request holds is that
config's `mamba2_cache_params.mamba_cache_per_req`. In each reading the config.json under
`model_config.hf_config` becomes an object of the registered class (its own `__init__` run on
the keys it takes, as `from_pretrained` does), the predicates run on it, and their answers are
what the runner and the configurator keep (`self.mambaish_config`, `kvc.mambaish_config`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from eaglebug.checks.memory.reading import evaluate
from eaglebug.checks.pyeval import objects
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.values import FunctionSite, FuncVal, Instance, Top, is_known

if TYPE_CHECKING:
    from eaglebug.checks.memory.fit import Context

HYBRID = ("mambaish_config", "hybrid_gdn_config", "hybrid_kda_config", "is_hybrid_gdn")
_CONFIG = "model_config.hf_config"


def register(ctx: Context, m: Machine, obj: Instance) -> None:
    """Make the registered config object and give the run the tree's hybrid predicates'
    answers (a model the tree registers no config class for answers none: the defaults)."""
    if not ctx.config_class:
        return
    cls = m.source.class_val(ctx.config_class)
    if cls.ref is None:
        return
    if not m.heap.deeper.under(m.fields(obj), _CONFIG):
        return  # a reading whose flat object holds no config there (ModelConfig's own methods)
    config = Instance(obj.oid, None, _CONFIG)
    m.heap.path_classes[(obj.oid, _CONFIG)] = cls
    _from_config(m, obj, config)
    for name in HYBRID:
        found = _predicate(ctx, name)
        if found is None:
            continue
        site, owner = found
        if owner:  # 0.5.9: a property of ModelRunner
            fn = FuncVal(site, m.source.class_val(owner), obj, "property")
            made = m.call_within(fn, [], {})
        else:  # 0.5.23: a function of the model config
            made = m.call_within(FuncVal(site), [Instance(obj.oid, None, "model_config")], {})
        m.write(obj, name, made, site.rel, site.line)


def _from_config(m: Machine, obj: Instance, config: Instance) -> None:
    """`from_pretrained`'s object: the class's own `__init__` on the keys it takes, every key
    kept as an attribute; a value `__init__` could not work out stays the file's."""
    store = m.fields(obj)
    prefix = _CONFIG + "."
    given = _nested({k[len(prefix) :]: v for k, v in store.items() if k.startswith(prefix)})
    init = objects.attribute(m, config, "__init__", "from_config")
    node = m.source.node_of(init.site) if isinstance(init, FuncVal) else None
    if isinstance(node, ast.FunctionDef):
        spec = node.args
        taken = {a.arg for a in (*spec.args, *spec.kwonlyargs)}
        m.call_within(init, [], {k: v for k, v in given.items() if k in taken})
    for key, value in given.items():
        if not is_known(m.fields(obj).get(prefix + key)):
            m.heap.set(obj.oid, prefix + key, value)


def _nested(flat: dict[str, object]) -> dict[str, object]:
    """config.json's keys from the flat store's paths (`text_config.num_hidden_layers` is
    the `text_config` dict's key), as `from_pretrained` hands them to `__init__`."""
    out: dict[str, object] = {}
    for key, value in flat.items():
        head, _, rest = key.partition(".")
        if not rest:
            out.setdefault(head, value)
            continue
        inner = out.setdefault(head, {})
        if isinstance(inner, dict):
            inner[rest] = value
    return {
        k: _nested(v) if isinstance(v, dict) and any("." in i for i in v) else v
        for k, v in out.items()
    }


def _predicate(ctx: Context, name: str) -> tuple[FunctionSite, str | None] | None:
    """A hybrid predicate of the tree: a function of the model config (0.5.23) or a property
    of `ModelRunner` (0.5.3, 0.5.9), and the class it is a method of."""
    return ctx.site(name) or ctx.site(f"ModelRunner.{name}")


# The tree's own predicate of a hybrid linear-attention model, with the expressions (over the
# runner) of its answer, of one request's state bytes and of the full-attention layers, as the
# releases that have that predicate keep them: `mambaish_config` (0.5.7 on) an object of
# cache parameters; `is_hybrid_gdn` (0.5.3) a runner property beside the config's own
# `mamba_cache_per_req` and layer list.
class _Form(NamedTuple):
    """One release family's hybrid predicate: the expressions (over the runner) of its answer,
    of one request's state bytes, and of the full-attention layers."""

    hybrid: str
    state_bytes: str
    full_layers: str


_FORMS: dict[str, _Form] = {
    "mambaish_config": _Form(
        "self.mambaish_config is not None",
        "self.mambaish_config.mamba2_cache_params.mamba_cache_per_req",
        "self.mambaish_config.full_attention_layer_ids",
    ),
    "is_hybrid_gdn": _Form(
        "self.is_hybrid_gdn",
        "self.model_config.hf_config.mamba_cache_per_req",
        "self.model_config.hf_config.full_attention_layer_ids",
    ),
}


def _form(ctx: Context) -> tuple[_Form, FunctionSite] | None:
    """The tree's predicate (the first of `_FORMS` it has) and where it is."""
    for name, form in _FORMS.items():
        found = _predicate(ctx, name)
        if found is not None:
            return form, found[0]
    return None


def _read(ctx: Context, expression: Callable[[_Form], str]) -> Any:
    """One of the form's expressions over the flat object (`self`), with the reading's
    plug-ins (the config object and the predicates above)."""
    found = _form(ctx)
    if found is None:
        return None
    form, site = found
    node = ast.parse(expression(form), mode="eval").body
    return evaluate(ctx.index, site.rel, node, ctx.values(ctx.target), ctx.world())


def is_mamba(ctx: Context) -> bool:
    """Does the tree's own predicate say this model is a hybrid linear-attention one?"""
    if "mamba" not in ctx.cache:
        said = _read(ctx, lambda form: form.hybrid) if ctx.config_class else False
        ctx.cache["mamba"] = said is True
    return bool(ctx.cache["mamba"])


def state_bytes_per_request(ctx: Context) -> object:
    """The config's own `mamba_cache_per_req` (conv + temporal states of every
    linear-attention layer, at their dtypes' sizes)."""
    if not is_mamba(ctx):
        return None
    made = _read(ctx, lambda form: form.state_bytes)
    return made if made is not None else Top("mamba_cache_per_req not read")


def pool_kind(ctx: Context) -> tuple[str, str] | None:
    """ "KV for N full-attention layers + mamba state cache", and the predicate's place."""
    if not is_mamba(ctx):
        return None
    full = _read(ctx, lambda form: form.full_layers)
    count = len(full) if isinstance(full, list) else "?"
    form = _form(ctx)
    where = form[1].where if form is not None else ""
    return f"KV for {count} full-attention layers + mamba state cache", where


__all__ = ["HYBRID", "is_mamba", "pool_kind", "register", "state_bytes_per_request"]
