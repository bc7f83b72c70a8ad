"""What SGLang's `ModelConfig` derives from a config.json, by the tree's own code.

The pools branch on fields `ModelConfig` computes rather than on config.json keys: whether a
model is hybrid sliding-window (`is_hybrid_swa`, from `is_hybrid_swa_model(architectures,
hf_text_config)` and the model's `layer_types`), which layers are full and which are SWA
(`get_hybrid_layer_ids`), the SWA head widths (`_derive_model_shapes`: `swa_head_dim`
defaults to `head_dim`) and the window (`_get_sliding_window_size`). Those methods are
evaluated here on the config's fields as `hf_config` / `hf_text_config` attributes; what they
leave becomes `model_config.<name>` (and, as the runner and the configurator copy them,
`is_hybrid_swa`, `sliding_window_size`, `layer_info.*_attention_layer_ids`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING

from eaglebug.checks.memory.reading import Flat, evaluate
from eaglebug.checks.memory.reading import run as run_reading
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import EnumMember, Instance, Intrinsic, is_known

if TYPE_CHECKING:
    from eaglebug.checks.memory.fit import Context
    from eaglebug.checks.memory.shape import ModelShape

# ModelConfig's methods that derive the fields the pools read, in the order __init__ calls
# them (shapes first: the SWA widths default to the head widths).
_DERIVE = (
    "ModelConfig._derive_model_shapes",
    "ModelConfig._derive_hybrid_model",
)
_CONFIG = "model_config.hf_config"
_HARVEST = (
    "is_hybrid_swa",
    "swa_attention_layer_ids",
    "full_attention_layer_ids",
    "swa_head_dim",
    "swa_v_head_dim",
    "is_hybrid_swa_compress",
)


@dataclass(frozen=True)
class ModelFacts:
    values: dict[str, object] = field(default_factory=dict)  # model_config.<name> -> value
    derived_from: tuple[str, ...] = ()  # file:line of each method evaluated

    @property
    def hybrid_swa(self) -> bool:
        return self.values.get("model_config.is_hybrid_swa") is True

    def layers(self, kind: str) -> list[int]:
        found = self.values.get(f"model_config.{kind}_attention_layer_ids")
        return [i for i in found if isinstance(i, int)] if isinstance(found, list) else []

    @property
    def sliding_window(self) -> object:
        return self.values.get("model_config.sliding_window_size")


def config_values(shape: ModelShape) -> dict[str, object]:
    """config.json's fields as the attributes `hf_config` / `hf_text_config` have them."""
    out: dict[str, object] = {f"hf_config.{k}": v for k, v in shape.hf}
    out.update({f"hf_text_config.{k}": v for k, v in shape.hf_text or shape.hf})
    return out


def model_facts(ctx: Context, shape: ModelShape) -> ModelFacts:
    """Evaluate ModelConfig's derivations for this model (each reads `self.hf_config`...)."""
    world: dict[str, object] = {
        **config_values(shape),
        "head_dim": shape.head_dim,
        "v_head_dim": shape.v_head_dim,
        "disable_hybrid_swa_memory": ctx.sources.defaults.get("disable_hybrid_swa_memory", False),
        "is_draft_model": False,
    }
    where: list[str] = []
    for name in _DERIVE:
        if not ctx.has(name):
            continue
        reading, world = ctx.run(name, [], shape, world)
        where.append(reading.anchor)
    values = {f"model_config.{k}": world[k] for k in _HARVEST if k in world}
    if ctx.has("ModelConfig._get_sliding_window_size"):
        window, _ = ctx.run("ModelConfig._get_sliding_window_size", [], shape, dict(world))
        values["model_config.sliding_window_size"] = window.value
        where.append(window.anchor)
    return ModelFacts(values, tuple(where))


_MODEL_CONFIG_OF = "ModelConfig.from_server_args"


def constructed_config(ctx: Context, shape: ModelShape) -> dict[str, object]:
    """The tree's own `ModelConfig.from_server_args(server_args)` run on the launch: the
    fields its constructor sets (`is_hybrid` in 0.4.10, `attention_arch`, `num_attention_layers`)
    where they come out known, as `model_config.<name>`. The checkpoint's config.json is the
    store's (`get_config`), the generation config none; a field the run leaves unknown is not
    kept (the store's own, where it has one, stands)."""
    owner = ctx.sources.model_config_class
    if not owner:
        return {}
    launch = ctx.launch
    key = (repr(shape), launch.model_path, launch.tp, launch.kv_cache_dtype, launch.algorithm)
    # The constructions already run on this tree (in memory: the values are the run's own objects).
    memo: dict[tuple[object, ...], dict[str, object]] = ctx.index.kept("memory.built", dict)
    if key not in memo:
        memo[key] = _construct(ctx, shape, owner)
    return memo[key]


def _construct(ctx: Context, shape: ModelShape, owner: str) -> dict[str, object]:
    module = owner.rpartition(".")[0]
    site = Source.of(ctx.index).function(module, _MODEL_CONFIG_OF)
    if site is None:
        return {}

    def real_config(m: Machine, obj: Instance) -> None:
        hf = Instance(obj.oid, None, _CONFIG)
        m.intrinsics.call_in("sglang.srt*", "get_config", lambda call: hf)
        m.intrinsics.call_in("sglang.srt*", "get_generation_config", lambda call: None)
        m.intrinsics.calls.pop(f"{owner}.{_MODEL_CONFIG_OF.rpartition('.')[2]}", None)

    values = ctx.values(shape)
    reading, _ = run_reading(
        ctx.index,
        site,
        None,
        [Flat()],
        values,
        ctx.world(extra=real_config),
        frozenset(),
        ctx.path_classes(),
        None,
        ctx.roles(),
    )
    made = reading.value
    if not isinstance(made, SimpleNamespace):
        return {}
    return {
        f"model_config.{name}": value
        for name, value in vars(made).items()
        if not name.startswith("hf_") and _plain(value) and is_known(value)
    }


def _plain(value: object) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, EnumMember, Intrinsic))


def runner_rewrites(
    ctx: Context, shape: ModelShape, config: dict[str, object]
) -> dict[str, object]:
    """The fields the runner writes back into its model config after the load (0.5.7:
    `full_attention_layer_ids`, the config's own list cut to the runner's layers, or empty
    where `hasattr(self.model_config, ...)` is false), each the tree's expression evaluated on
    the model config the construction and the derivations left: a field they did not set, the
    config does not have."""
    from eaglebug.checks.memory.rules import CONFIG_REWRITE

    def closed(m: Machine, obj: Instance) -> None:
        m.heap.closed_paths.add((obj.oid, "model_config"))

    out: dict[str, object] = {}
    for source in ctx.sources.functions:
        if not source.qualname.startswith(CONFIG_REWRITE):
            continue
        try:
            node = ast.parse(source.text.strip(), mode="eval").body
        except SyntaxError:
            continue
        ast.increment_lineno(node, source.line - 1)
        values = {**config, "start_layer": 0, "end_layer": shape.layers}
        made = evaluate(ctx.index, source.file, node, values, closed)
        if made is not None:
            out[source.qualname.lstrip("=")] = made
    return out


def runner_values(facts: ModelFacts) -> dict[str, object]:
    """The copies the runner and the configurator keep (`self.is_hybrid_swa =
    model_config.is_hybrid_swa`; 0.5.23's `layer_info` slices, the whole model at --pp 1)."""
    if not facts.hybrid_swa:
        return dict(facts.values)
    return {
        **facts.values,
        "is_hybrid_swa": True,
        "is_hybrid_swa_compress": facts.values.get("model_config.is_hybrid_swa_compress"),
        "sliding_window_size": facts.sliding_window,
        "layer_info.full_attention_layer_ids": facts.layers("full"),
        "layer_info.swa_attention_layer_ids": facts.layers("swa"),
    }
