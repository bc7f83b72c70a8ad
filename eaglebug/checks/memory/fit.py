"""Will it fit: SGLang's own memory arithmetic for one launch, evaluated from the audited tree.

The tree's functions (found by `memory/rules.py`) run in the one evaluator (`memory/reading.py`)
on the launch's numbers: the GPU's total memory (what `get_device_memory_capacity` would report) gives the default
`--mem-fraction-static` with its reserve terms; the free memory before the load (the minimum
across ranks, as SGLang measures it) less the weights per rank gives what
`get_available_gpu_memory` reports after the load; the KV budget, the raise when there is none,
the cell size (target and, where the tree adds them, the draft's layers), the page rounding
and the request limit follow from the tree. What is this module's own is only the stand-ins
for what a live process would answer (free memory, dtype sizes, the model config's fields).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eaglebug.checks.memory import hooks as memhooks
from eaglebug.checks.memory import hybrid as memhybrid
from eaglebug.checks.memory import parallel, specmember
from eaglebug.checks.memory.envflags import flag_env
from eaglebug.checks.memory.layout import Layout, parallel_layout
from eaglebug.checks.memory.model import (
    ModelFacts,
    config_values,
    constructed_config,
    model_facts,
    runner_rewrites,
    runner_values,
)
from eaglebug.checks.memory.reading import Flat, Reading, World
from eaglebug.checks.memory.reading import run as run_reading
from eaglebug.checks.memory.rules import FunctionSource, MemorySources

# Re-exported: the model's shape is part of what a caller hands the arithmetic.
from eaglebug.checks.memory.shape import TORCH_NAMES
from eaglebug.checks.memory.shape import ModelShape as ModelShape
from eaglebug.checks.memory.shape import model_shape as model_shape
from eaglebug.checks.pyeval import brains
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import UNSET, EnumMember, FunctionSite, Instance, Top
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import ALIASES, algorithm_facts

_ATTENTION_ARCH = "sglang.srt.configs.model_config.AttentionArch"
GIB = 1 << 30  # SGLang's "GB" in its memory arithmetic and log lines
MIB = 1 << 20
_WATCH = frozenset(
    {
        "reserved_mem",
        "mem_fraction_static",
        "chunked_prefill_size",
        "max_bs",
        "cuda_graph_max_bs",
        "rest_memory",
        "cell_size",
        "_cell_size",
        "full_max_total_num_tokens",
        "swa_max_total_num_tokens",
        "max_num_reqs",
        "max_total_num_tokens",
        "estimated",
        "max_mamba_cache_size",
    }
)


@dataclass(frozen=True)
class MemoryLaunch:
    """The launch's flags that the arithmetic reads (None: SGLang picks)."""

    model_path: str
    tp: int = 1
    pp: int = 1
    dp: int = 1  # --dp-size
    enable_dp_attention: bool = False
    ep: int = 1  # --ep-size (--expert-parallel-size)
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    kv_cache_dtype: str = "auto"
    page_size: int = 1
    algorithm: str | None = None
    disable_cuda_graph: bool = False
    speculative_num_draft_tokens: int | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    swa_full_tokens_ratio: float | None = None  # hybrid SWA: SWA tokens per full token
    max_mamba_cache_size: int | None = None  # --max-mamba-cache-size
    mamba_full_memory_ratio: float | None = None  # --mamba-full-memory-ratio
    mamba_ssm_dtype: str | None = None  # --mamba-ssm-dtype (the tree hands it to an env var)
    env: tuple[tuple[str, str], ...] = ()  # the server's environment (for `envs.X.get()`)
    quantization: str | None = None  # --quantization (online FP8: memory/unmodelled.py)
    piecewise_cuda_graph: bool | None = None  # the launch's own choice; None: the tree's default


@dataclass(frozen=True)
class Gpu:
    total_bytes: int
    free_bytes: int  # before the load, the minimum across the launch's GPUs


@dataclass
class Context:
    """The world of one launch's memory readings: the tree, its memory functions, the values."""

    index: TreeIndex
    sources: MemorySources
    launch: MemoryLaunch
    target: ModelShape
    draft: ModelShape | None
    gpu: Gpu
    config_class: str | None = None  # the config class the tree registers (memory/classes.py)
    layout: Layout = field(init=False)
    table: dict[str, FunctionSource] = field(init=False)
    _facts: dict[int, ModelFacts] = field(init=False, default_factory=dict)
    cache: dict[str, object] = field(init=False, default_factory=dict)  # memory/hybrid.py

    def constructed(self, shape: ModelShape) -> dict[str, object]:
        """The tree's ModelConfig built for this model (`memory/model.py`), its known fields
        as `model_config.<name>`."""
        key = f"constructed:{id(shape)}"
        if key not in self.cache:
            self.cache[key] = {}  # while its own construction runs
            self.cache[key] = constructed_config(self, shape)
        return self.cache[key]  # type: ignore[return-value]

    def facts(self, shape: ModelShape) -> ModelFacts:
        """ModelConfig's derived fields for this model, evaluated once."""
        if id(shape) not in self._facts:
            self._facts[id(shape)] = ModelFacts()  # while its own derivation runs
            self._facts[id(shape)] = model_facts(self, shape)
        return self._facts[id(shape)]

    def __post_init__(self) -> None:
        self.table = {}
        for source in self.sources.functions:  # by qualified and by plain name (first wins)
            self.table.setdefault(source.qualname, source)
            self.table.setdefault(source.qualname.rsplit(".", 1)[-1], source)
        self.layout = Layout(self.launch.tp, 1, None)  # until the tree's own is read
        self.layout = parallel_layout(self)

    def has(self, name: str) -> bool:
        return name in self.table

    def site(self, name: str) -> tuple[FunctionSite, str | None] | None:
        """A memory function of the tree by name, and the class it is a method of."""
        source = self.table.get(name)
        if source is None or source.qualname.startswith("="):
            return None
        module, _ = module_name(source.file)
        found = Source.of(self.index).function(module, source.qualname)
        if found is None:
            return None
        owner, _, _ = source.qualname.rpartition(".")
        return found, f"{module}.{owner}" if owner else None

    def pool_kind(self, shape: ModelShape) -> tuple[str, str | None]:
        """The kind of KV pool the tree sizes for this model, and the predicate that said
        so: the tree's own `is_deepseek_dsa` (0.5.23) / `is_deepseek_nsa` (0.5.9) on the
        config for the sparse-attention indexer."""
        for name in ("is_deepseek_dsa", "is_deepseek_nsa"):
            if self.has(name):
                reading, _ = self.run(name, [Flat("model_config.hf_config")], shape)
                if reading.value is True:
                    return "MLA + DSA indexer K cache", reading.anchor
                break
        hybrid = memhybrid.pool_kind(self) if shape is self.target else None
        if hybrid is not None:
            return hybrid
        facts = self.facts(shape)
        if facts.hybrid_swa:
            full, swa = len(facts.layers("full")), len(facts.layers("swa"))
            kind = f"hybrid SWA: {full} full + {swa} sliding-window layers"
            window = facts.sliding_window
            kind += f" (window {window})" if isinstance(window, int) else ""
            return kind, facts.derived_from[-2] if len(facts.derived_from) > 1 else None
        return ("MLA" if shape.mla else "MHA"), None

    def values(
        self, shape: ModelShape, draft_worker: bool = False, runner: bool = False
    ) -> dict[str, object]:
        """The flat values the tree's functions read; `runner`: as the model runner sees them
        (its own DP width where the release keeps one, not the server's `--dp-size`)."""
        launch = self.launch
        algorithm = launch.algorithm
        draft_layers = None
        family = self.draft_family()
        if self.draft is not None and algorithm in family:
            draft_layers = self.draft.nextn_layers or self.draft.layers
        elif algorithm in family and shape.nextn_layers:  # an MTP draft in the target's file
            draft_layers = shape.nextn_layers
        backends = self.sources.graph_backends
        member = "DISABLED" if launch.disable_cuda_graph else "FULL"
        decode_backend = backends.get(member, f"Backend.{member}")
        # The KV dtype as the torch dtype the tree compares with (`== torch.float8_e4m3fn`);
        # `_element_size` and `.itemsize` give its size.
        named = TORCH_NAMES.get(launch.kv_cache_dtype)
        dtype: object = brains.dtype(named or shape.dtype)
        if launch.kv_cache_dtype not in {"auto", ""} and named is None:
            dtype = Top(f"--kv-cache-dtype {launch.kv_cache_dtype}")
        return {
            **self.constructed(shape),  # what the tree's ModelConfig sets and nothing below says
            **{f"model_config.hf_config.{k}": v for k, v in shape.hf},
            **{f"model_config.{k}": v for k, v in config_values(shape).items()},
            **config_values(shape),  # ModelConfig's own methods read self.hf_text_config
            **self.sources.defaults,  # what the launch does not say, as the tree defaults it
            # server args (flat: self.x, cfg.x, server_args.x, get_schedule().x)
            "tp_size": launch.tp,
            "pp_size": launch.pp,
            "attn_tp_size": self.layout.attn_tp_size,
            "attn_dcp_size": 1,
            "attn_cp_size": 1,
            "attn_dp_size": self.layout.attn_dp_size,
            "dp_size": launch.dp,
            "ep_size": launch.ep,
            "launch_world_size": launch.tp * launch.pp,
            "mem_fraction_static": launch.mem_fraction_static,
            "chunked_prefill_size": launch.chunked_prefill_size,
            "cuda_graph_max_bs": launch.cuda_graph_max_bs,
            "cuda_graph_bs": None,
            "cuda_graph_config.decode.max_bs": launch.cuda_graph_max_bs,
            "cuda_graph_config.decode.bs": None,
            "cuda_graph_config.decode.backend": decode_backend,
            "cuda_graph_config.prefill.max_bs": None,
            "cuda_graph_config.prefill.bs": None,
            "cuda_graph_config.prefill.backend": backends.get("DISABLED", "Backend.DISABLED"),
            "_cuda_graph_config_locked": [],
            "disable_cuda_graph": launch.disable_cuda_graph,
            "piecewise_cuda_graph_max_tokens": None,
            "piecewise_cuda_graph_tokens": None,
            "max_running_requests": launch.max_running_requests,
            "max_total_tokens": launch.max_total_tokens,
            "page_size": launch.page_size,
            "device": "cuda",
            "disaggregation_mode": "null",
            "enable_dp_attention": launch.enable_dp_attention,
            "enable_hisparse": False,
            "enable_hierarchical_cache": False,
            "enable_unified_memory": False,
            "speculative_algorithm": algorithm,
            "spec_algorithm": self.spec_member(),
            **{  # given or resolved; else the tree's default stands
                name: value
                for name in (
                    "speculative_num_steps",
                    "speculative_eagle_topk",
                    "speculative_num_draft_tokens",
                )
                if (value := getattr(launch, name)) is not None
            },
            "model_path": launch.model_path,
            "moe_a2a_backend": "none",
            "max_mamba_cache_size": launch.max_mamba_cache_size,
            **(
                {"mamba_full_memory_ratio": launch.mamba_full_memory_ratio}
                if launch.mamba_full_memory_ratio is not None
                else {}
            ),
            "start_layer": 0,  # the runner's layer slice (0.5.9), the whole model at --pp 1
            "end_layer": shape.layers,
            **(
                {"swa_full_tokens_ratio": launch.swa_full_tokens_ratio}
                if launch.swa_full_tokens_ratio is not None
                else {}
            ),
            "mm_feature_transport": None,
            "prefill_max_requests": None,
            # the configurator / model runner
            "mambaish_config": None,
            "is_hybrid_swa": False,
            "model_config.attention_arch": self.attention_arch(shape.mla),
            "is_draft_worker": draft_worker,
            **({"model_config.is_draft_model": True} if draft_worker else {}),
            "is_draft_model": draft_worker,
            "use_mla_backend": shape.mla,
            "kv_cache_dtype": dtype,
            "kv_cache_dtype_str": launch.kv_cache_dtype,
            "num_effective_layers": shape.layers,
            "layer_info.num_effective_layers": shape.layers,
            "layer_info.start_layer": 0,
            "layer_info.end_layer": shape.layers,
            "spec_aux_config.eagle_draft_num_layers": draft_layers,
            **self.draft_swa_layers(draft_layers),
            "eagle_draft_num_layers": draft_layers,  # 0.5.14: on the model runner
            "spec_aux_config.dflash_draft_num_layers": None,
            "post_capture_kv_active": False,
            "model_config.is_multimodal": shape.multimodal,
            "model_config.context_len": (
                shape.context_len if shape.context_len is not None else Top(shape.context_unknown)
            ),
            "model_config.head_dim": shape.head_dim,
            "model_config.v_head_dim": shape.v_head_dim,
            "model_config.kv_lora_rank": shape.kv_lora_rank,
            "model_config.qk_rope_head_dim": shape.rope_dim,
            "model_config.num_hidden_layers": shape.layers,
            "model_config.quantization": None,
            "model_config.dtype": brains.dtype(shape.dtype),  # ModelConfig's torch dtype
            # a config without the key has no such attribute (`getattr(..., default)`)
            **(
                {"model_config.hf_config.num_nextn_predict_layers": shape.nextn_layers}
                if shape.nextn_layers is not None
                else {}
            ),
            **runner_values(self.facts(shape)),  # ModelConfig's derived fields (hybrid SWA)
            **self.layout.resolved,  # the tree's rewrite of the DP flags (0.5.22 on)
            **(
                {"dp_size": self.layout.runner_dp_size}
                if runner and self.layout.runner_dp_size is not None
                else {}
            ),
            **(self.runner_view(shape, dtype) if runner else {}),
        }

    def runner_view(self, shape: ModelShape, kv_dtype: object) -> dict[str, object]:
        """The fields the model runner holds under the same names as server arguments: its
        copies of the model config (`self.dtype = self.model_config.dtype`: torch's dtype where
        the server args hold "auto"), and the KV dtype as the
        flag's string where the functions read here derive the runner's own from it (before
        0.5.7, `init_memory_pool` does); the loaded model's quantization config, as the
        checkpoint's config.json declares it (`getattr(self.model, "quant_config", None)`)."""
        config = {**self.constructed(shape), **self.facts(shape).values}
        config["model_config.dtype"] = brains.dtype(shape.dtype)
        out: dict[str, object] = {}
        for field_name, source in self.sources.runner_copies.items():
            value = config.get(f"model_config.{source}", UNSET)
            if value is not UNSET:
                out[field_name] = value
        out.update(runner_rewrites(self, shape, config))
        if self.sources.derives_kv_dtype:
            out["kv_cache_dtype"] = self.launch.kv_cache_dtype
        quant = dict(shape.hf).get("quantization_config.quant_method")
        if quant is None:
            out["model.quant_config"] = None  # a checkpoint without quantization
        else:
            algo = dict(shape.hf).get("quantization_config.kv_cache_quant_algo")
            out["model.quant_config.kv_cache_quant_algo"] = algo
        return out

    def draft_family(self) -> frozenset[str]:
        """The algorithms whose draft layers the runner counts (`eagle_draft_num_layers`):
        those the tree's own `is_eagle()` / `is_standalone()` hold for, by launch spelling."""
        facts = algorithm_facts(self.index)
        members = set(facts.predicates.get("is_eagle", ())) | set(
            facts.predicates.get("is_standalone", ())
        )
        spellings = {alias for alias, member in ALIASES.items() if member in members}
        return frozenset(members | spellings)

    def attention_arch(self, mla: bool) -> object:
        """`AttentionArch.MLA` / `.MHA` of the tree's model config, the member itself."""
        cls = Source.of(self.index).class_val(_ATTENTION_ARCH)
        if cls.ref is None:
            return Top("this tree has no AttentionArch")
        return EnumMember(cls, "MLA" if mla else "MHA", None)

    def spec_member(self) -> object:
        """The launch's algorithm as the tree's own member (`specmember.member`)."""
        if "spec_member" not in self.cache:
            self.cache["spec_member"] = specmember.member(self.index, self.launch.algorithm)
        return self.cache["spec_member"]

    def parallel(self) -> parallel.Layout:
        """The layout the distributed state answers with (the attention TP width as read)."""
        launch = self.launch
        return parallel.Layout(
            launch.tp,
            self.layout.attn_tp_size,
            launch.dp,
            launch.ep,
            launch.pp,
            launch.enable_dp_attention,
        )

    def world(self, avail_gb: float | None = None, extra: World | None = None) -> World:
        """The plug-ins of a reading: what the box answers, and the launch's environment
        (with the flags the tree hands on as variables: `--mamba-ssm-dtype`)."""
        environ = dict(self.launch.env)
        for name, (variable, _) in flag_env(self.index).items():
            given = getattr(self.launch, name, None)  # else the field's default goes on
            value = given if given is not None else self.sources.defaults.get(name)
            if isinstance(value, str):  # a flag the tree hands on as a variable
                environ[variable] = value

        def fill(m: Machine, obj: Instance) -> None:
            memhooks.register(
                m,
                self.index,
                obj,
                total_bytes=self.gpu.total_bytes,
                avail_gb=avail_gb,
                environ=environ,
                layout=self.parallel(),
                env_read=self.sources.env_read,
            )
            memhybrid.register(self, m, obj)
            specmember.register(m, algorithm_facts(self.index).predicates)
            if extra is not None:
                extra(m, obj)

        return fill

    def run(
        self,
        name: str,
        args: list[object],
        shape: ModelShape,
        values: dict[str, object] | None = None,
        avail_gb: float | None = None,
        extra: World | None = None,
        kwargs: dict[str, object] | None = None,
    ) -> tuple[Reading, dict[str, object]]:
        """Evaluate one of the tree's memory functions; the values it leaves come back too."""
        found = self.site(name)
        if found is None:
            return Reading(None, unknown=f"this tree has no {name}"), {}
        site, owner = found
        env = values if values is not None else self.values(shape)
        return run_reading(
            self.index,
            site,
            owner,
            args,
            env,
            self.world(avail_gb, extra),
            _WATCH,
            self.path_classes(),
            kwargs,
            self.roles(),
        )

    def draft_swa_layers(self, draft_layers: int | None) -> dict[str, object]:
        """`spec_aux_config.eagle_draft_swa_num_layers`: the draft layers whose KV sits in the
        target's SWA pool, which 0.5.19+'s `resolve_spec_aux_hidden_state_config` sets from the
        draft's own config (its sliding-window layers, where the tree's ModelConfig derives it
        hybrid SWA) and leaves None otherwise. A draft of its own only: a draft in the
        target's file (MTP) is not decided here and stays unknown."""
        if draft_layers is None or self.draft is None:
            return {}
        facts = self.facts(self.draft)
        swa = len(facts.layers("swa")) if facts.hybrid_swa else None
        return {"spec_aux_config.eagle_draft_swa_num_layers": swa}

    def roles(self) -> tuple[str, ...]:
        """The runtime classes the flat store stands for: the owners of the memory functions
        (ServerArgs, ModelRunner, the KV configurator, the pool configurators)."""
        if "roles" not in self.cache:
            owners = {
                f"{module_name(f.file)[0]}.{f.qualname.rsplit('.', 1)[0]}"
                for f in self.sources.functions
                if "." in f.qualname and not f.qualname.startswith("=")
            }
            self.cache["roles"] = tuple(sorted(owners))
        return self.cache["roles"]  # type: ignore[return-value]

    def path_classes(self) -> dict[str, str]:
        """The classes of the objects at paths of the flat store: `model_config` is the tree's
        ModelConfig (its methods run), its `hf_config` a transformers config."""
        model_config = self.sources.model_config_class
        out = {"model_config.hf_config": "transformers.PretrainedConfig"}
        if model_config:
            out["model_config"] = model_config
        return out
