"""Will it fit: SGLang's own memory arithmetic for one launch, evaluated from the audited tree.

The tree's functions (found by `memrules`) run in `memeval` on the launch's numbers: the GPU's
total memory (what `get_device_memory_capacity` would report) gives the default
`--mem-fraction-static` with its reserve terms; the free memory before the load (the minimum
across ranks, as SGLang measures it) less the weights per rank gives what
`get_available_gpu_memory` reports after the load; the KV budget, the raise when there is none,
the cell size (target and, where the tree adds them, the draft's layers), the page rounding
and the request limit follow from the tree. What is this module's own is only the stand-ins
for what a live process would answer (free memory, dtype sizes, the model config's fields).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.memory import hybrid as memhybrid
from eaglebug.checks.memory.layout import Layout, parallel_layout
from eaglebug.checks.memory.model import ModelFacts, config_values, model_facts, runner_values
from eaglebug.checks.memory.rules import MemorySources, function_table

# Re-exported: the model's shape is part of what a caller hands the arithmetic.
from eaglebug.checks.memory.shape import DTYPE_BYTES, TORCH_NAMES
from eaglebug.checks.memory.shape import ModelShape as ModelShape
from eaglebug.checks.memory.shape import model_shape as model_shape
from eaglebug.checks.pyeval.memeval import Evaluator, Raised, Ref, Step, Stub, Unknown
from eaglebug.checks.pyeval.memobjects import ClassTable, ObjectSources, class_table

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
    swa_full_tokens_ratio: float | None = None  # hybrid SWA: SWA tokens per full token
    max_mamba_cache_size: int | None = None  # --max-mamba-cache-size
    mamba_full_memory_ratio: float | None = None  # --mamba-full-memory-ratio
    mamba_ssm_dtype: str | None = None  # --mamba-ssm-dtype (the tree hands it to an env var)
    env: tuple[tuple[str, str], ...] = ()  # the server's environment (for `envs.X.get()`)


@dataclass(frozen=True)
class Gpu:
    total_bytes: int
    free_bytes: int  # before the load, the minimum across the launch's GPUs


@dataclass(frozen=True)
class Reading:
    """One rule's outcome: a value, or a raise, or why it could not be read."""

    value: object
    steps: tuple[Step, ...] = ()
    assumed: tuple[str, ...] = ()
    raised: Raised | None = None
    unknown: str | None = None
    anchor: str = ""  # "file:line" of the function read

    @property
    def ok(self) -> bool:
        return self.unknown is None and self.raised is None

    def line_of(self, name: str) -> str | None:
        """Where the tree last assigned `name` in this reading."""
        hits = [s for s in self.steps if s.name.rsplit(".", 1)[-1] == name and s.line > 0]
        return f"{hits[-1].file}:{hits[-1].line}" if hits else None


@dataclass
class Context:
    """The evaluator's world for one launch: the tree's functions, the values, the stubs."""

    sources: MemorySources
    launch: MemoryLaunch
    target: ModelShape
    draft: ModelShape | None
    gpu: Gpu
    objects: ObjectSources | None = None  # the config class the tree registers (memclasses)
    table: dict[str, Any] = field(init=False)
    layout: Layout = field(init=False)
    classes: ClassTable | None = field(init=False, default=None)
    _facts: dict[int, ModelFacts] = field(init=False, default_factory=dict)
    hybrid_cache: dict[str, object] | None = field(init=False, default=None)  # memhybrid

    def facts(self, shape: ModelShape) -> ModelFacts:
        """ModelConfig's derived fields for this model, evaluated once."""
        if id(shape) not in self._facts:
            self._facts[id(shape)] = ModelFacts()  # while its own derivation runs
            self._facts[id(shape)] = model_facts(self, shape)
        return self._facts[id(shape)]

    def __post_init__(self) -> None:
        if self.objects is not None:
            self.classes = class_table(self.objects)
        self.table = function_table(self.sources)
        self.layout = Layout(self.launch.tp, 1, None)  # until the tree's own is read
        self.layout = parallel_layout(self)

    def pool_kind(self, shape: ModelShape) -> tuple[str, str | None]:
        """The kind of KV pool the tree sizes for this model, and the predicate that said
        so: the tree's own `is_deepseek_dsa` (0.5.23) / `is_deepseek_nsa` (0.5.9) on the
        config for the sparse-attention indexer."""
        for name in ("is_deepseek_dsa", "is_deepseek_nsa"):
            if name in self.table:
                reading, _ = self.run(name, [Ref("model_config.hf_config")], shape)
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
        if self.draft is not None and algorithm in {"EAGLE", "EAGLE3", "STANDALONE", "NEXTN"}:
            draft_layers = self.draft.nextn_layers or self.draft.layers
        elif algorithm in {"EAGLE", "NEXTN"} and shape.nextn_layers:
            draft_layers = shape.nextn_layers
        constants = self.sources.constants
        member = "Backend.DISABLED" if launch.disable_cuda_graph else "Backend.FULL"
        decode_backend = constants.get(member, member)
        # The KV dtype as the torch dtype the tree compares with (`== torch.float8_e4m3fn`);
        # `_element_size` and `.itemsize` give its size.
        named = TORCH_NAMES.get(launch.kv_cache_dtype)
        dtype: object = Ref(f"torch.{named or shape.dtype}")
        if launch.kv_cache_dtype not in {"auto", ""} and named is None:
            dtype = Unknown(f"--kv-cache-dtype {launch.kv_cache_dtype}")
        return {
            **{f"torch.{n}.itemsize": DTYPE_BYTES[n] for n in set(TORCH_NAMES.values())},
            **constants,  # class constants the functions read (`DSATokenToKVPool.quant_...`)
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
            "cuda_graph_config.prefill.backend": constants.get(
                "Backend.DISABLED", "Backend.DISABLED"
            ),
            "_cuda_graph_config_locked": [],
            "disable_cuda_graph": launch.disable_cuda_graph,
            "piecewise_cuda_graph_max_tokens": None,
            "piecewise_cuda_graph_tokens": None,
            "max_running_requests": launch.max_running_requests,
            "max_total_tokens": launch.max_total_tokens,
            "page_size": launch.page_size,
            "device": "cuda",
            "_is_hip": False,  # the platform flags a module sets at import: a CUDA box
            "_is_npu": False,
            "disaggregation_mode": "null",
            "enable_dp_attention": launch.enable_dp_attention,
            "enable_hisparse": False,
            "enable_hierarchical_cache": False,
            "enable_unified_memory": False,
            "speculative_algorithm": algorithm,
            "speculative_num_draft_tokens": launch.speculative_num_draft_tokens,
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
            "model_config.attention_arch": Ref(
                "AttentionArch.MLA" if shape.mla else "AttentionArch.MHA"
            ),
            "is_draft_worker": draft_worker,
            "is_draft_model": draft_worker,
            "use_mla_backend": shape.mla,
            "kv_cache_dtype": dtype,
            "kv_cache_dtype_str": launch.kv_cache_dtype,
            "num_effective_layers": shape.layers,
            "layer_info.num_effective_layers": shape.layers,
            "layer_info.start_layer": 0,
            "layer_info.end_layer": shape.layers,
            "spec_aux_config.eagle_draft_num_layers": draft_layers,
            "eagle_draft_num_layers": draft_layers,  # 0.5.14: on the model runner
            "spec_aux_config.dflash_draft_num_layers": None,
            "post_capture_kv_active": False,
            "model_config.is_multimodal": shape.multimodal,
            "model_config.context_len": shape.context_len,
            "model_config.head_dim": shape.head_dim,
            "model_config.v_head_dim": shape.v_head_dim,
            "model_config.kv_lora_rank": shape.kv_lora_rank,
            "model_config.qk_rope_head_dim": shape.rope_dim,
            "model_config.num_hidden_layers": shape.layers,
            "model_config.quantization": None,
            "model_config.hf_config": Ref("model_config.hf_config"),
            "model_config.hf_config.num_nextn_predict_layers": shape.nextn_layers,
            **runner_values(self.facts(shape)),  # ModelConfig's derived fields (hybrid SWA)
            # the registered config class and the tree's hybrid predicates on it
            **(
                {k: v for k, v in memhybrid.hybrid_values(self).items() if ":" not in k}
                if shape is self.target and not draft_worker
                else {}
            ),
            **self.layout.resolved,  # the tree's rewrite of the DP flags (0.5.22 on)
            **(
                {"dp_size": self.layout.runner_dp_size}
                if runner and self.layout.runner_dp_size is not None
                else {}
            ),
        }

    def stubs(self, shape: ModelShape, avail_gb: float | None = None) -> dict[str, Stub]:
        """What a live process would answer, for this launch's numbers."""
        total_mib = self.gpu.total_bytes / MIB

        def const(value: object) -> Stub:
            return lambda ev, args, kwargs: value

        def stand_in(name: str, value: object, last_arg: bool = False) -> Stub:
            """A tree function this launch's shape does not reach (a hybrid model, a fused
            draft pool, DP attention): its plain answer, said in `assumed` when it is asked."""

            def answer(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
                said = args[-1] if last_arg and args else value
                note = f"stand-in: {name}() taken as {said!r}"
                if note not in ev.assumed:
                    ev.assumed.append(note)
                return said

            return answer

        def first_arg(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
            return args[0] if args else Ref("")

        def declare(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
            for key, value in kwargs.items():
                ev.values[key] = value
                ev.steps.append(Step("(resolution)", 0, key, f"{key}={value!r}", value))
            return None

        def declare_override(
            ev: Evaluator, args: list[object], kwargs: dict[str, object]
        ) -> object:
            """`get_context().override("reason", name=value)`: the value set for the run."""
            for key, value in kwargs.items():
                ev.values[key] = value
                ev.steps.append(Step("(override)", 0, key, f"{args[:1]!r}: {key}={value!r}", value))
            return None

        def element_size(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
            """torch's element size: the KV dtype is given as its size; a dtype the tree names
            (`torch.uint8`) has torch's size for it."""
            dtype = args[0] if args else None
            if isinstance(dtype, int):
                return dtype
            if isinstance(dtype, Ref) and dtype.path.startswith("torch."):
                size = DTYPE_BYTES.get(dtype.path.removeprefix("torch."))
                if size is not None:
                    return size
            return Unknown(f"element size of {dtype!r}")

        def is_fp4(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
            return "fp4" in self.launch.kv_cache_dtype

        def dsa(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
            return Unknown("sparse-attention (DSA) indexer cells") if shape.dsa else False

        def namespace(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
            return types.SimpleNamespace(**kwargs)

        def spec(kind: str) -> Stub:
            algorithm = self.launch.algorithm or ""
            table = {
                "is_none": not algorithm,
                "is_eagle": algorithm in {"EAGLE", "EAGLE3", "NEXTN"},
                "is_standalone": algorithm == "STANDALONE",
                "is_dflash_family": algorithm in {"DFLASH", "DSPARK"},
                "is_dflash": algorithm == "DFLASH",
            }
            return const(table[kind])

        environ = dict(self.launch.env)
        for name, variable, _ in self.objects.flag_env if self.objects is not None else ():
            given = getattr(self.launch, name, None)  # the flag the tree copies into envs
            if isinstance(given, str):
                environ[variable] = given

        def env_get(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
            name = str(args[0])
            declared = self.sources.env.get(name)
            if declared is None:
                return Unknown(f"{name} is not declared in sglang/srt/environ.py")
            if name not in environ:
                return declared.default
            raw = environ[name]
            try:
                if declared.kind == "EnvBool":
                    return raw.lower() in {"1", "true", "yes", "y"}
                if declared.kind == "EnvInt":
                    return int(raw)
                if declared.kind == "EnvFloat":
                    return float(raw)
            except ValueError:
                return declared.default
            return raw

        avail = Unknown("free memory after the load") if avail_gb is None else avail_gb
        stubs: dict[str, Stub] = {
            "get_device_memory_capacity": const(total_mib),
            "get_available_gpu_memory": const(avail),
            "get_num_kv_heads": lambda ev, args, kwargs: max(
                1, shape.kv_heads // int(args[0]) if args and isinstance(args[0], int) else 1
            ),
            "_element_size": element_size,
            "is_float4_e2m1fn_x2": is_fp4,
            "is_minimax_sparse": stand_in("is_minimax_sparse", False),
            "uses_minimax_m3_nvfp4_native_stack": stand_in(
                "uses_minimax_m3_nvfp4_native_stack", False
            ),
            "use_mla_backend": const(shape.mla),
            "get_attention_tp_size": const(self.layout.attn_tp_size),
            "get_glm_dsa_layer_split_effective_num_layers": stand_in(
                "get_glm_dsa_layer_split_effective_num_layers", None, last_arg=True
            ),
            "parse_qsa_profile": stand_in("parse_qsa_profile", None),
            "fused_entry_bytes": stand_in("fused_entry_bytes", None),
            "compute_page_shard_scratch_bytes": stand_in("compute_page_shard_scratch_bytes", 0),
            "mambaish_config": stand_in("mambaish_config", None),
            "hybrid_gdn_config": stand_in("hybrid_gdn_config", None),
            "hybrid_kda_config": stand_in("hybrid_kda_config", None),
            "MemoryPoolConfig": namespace,
            "declare_resolution": declare,
            "get_context.override": declare_override,
            "resolving_view": first_arg,
            "resolved_view": first_arg,
            "deepcopy": first_arg,
            "post_capture_kv_sizing_planned": stand_in("post_capture_kv_sizing_planned", False),
            "model_config_of": const(Ref("model_config")),
            "get_model_config": const(Ref("model_config")),
            "expand_multimodal_decode_graph_to_running_limit": stand_in(
                "expand_multimodal_decode_graph_to_running_limit", None
            ),
            "gc.collect": const(0),
            "envs.get": env_get,
            "envs.is_set": lambda ev, args, kwargs: str(args[0]) in environ,
            "spec_algorithm.is_none": spec("is_none"),
            "spec_algorithm.is_eagle": spec("is_eagle"),
            "spec_algorithm.is_standalone": spec("is_standalone"),
            "spec_algorithm.is_dflash_family": spec("is_dflash_family"),
            "spec_algorithm.is_dflash": spec("is_dflash"),
        }
        if self.classes is not None:  # the tree's own predicates, on its own classes
            for name in memhybrid.HYBRID:
                stubs.pop(name, None)
        if "attn_dp_enabled_of" not in self.table:  # a release that has no such predicate
            stubs["attn_dp_enabled_of"] = stand_in("attn_dp_enabled_of", False)
        for predicate in ("is_deepseek_nsa", "is_deepseek_dsa"):
            if predicate not in self.table:  # the tree's own predicate where it has one
                stubs[predicate] = dsa
        # The DSA cell's layer count under GLM's layer split: the tree's own where it has it.
        if "get_glm_dsa_layer_split_effective_num_layers" in self.table:
            del stubs["get_glm_dsa_layer_split_effective_num_layers"]
        for accessor in ("get_schedule", "get_parallel", "get_exec", "get_disagg", "get_memory"):
            stubs[accessor] = const(Ref(""))
        for accessor in ("get_mm", "get_spec", "get_model", "get_world_group"):
            stubs[accessor] = const(Ref(""))
        return stubs

    def run(
        self,
        name: str,
        args: list[object],
        shape: ModelShape,
        values: dict[str, object] | None = None,
        avail_gb: float | None = None,
        extra: Mapping[str, Stub] | None = None,
    ) -> tuple[Reading, dict[str, object]]:
        """Evaluate one of the tree's functions; the values it leaves come back too."""
        function = self.table.get(name)
        if function is None:
            return Reading(None, unknown=f"this tree has no {name}"), {}
        env = values if values is not None else self.values(shape)
        stubs = {**self.stubs(shape, avail_gb), **(extra or {})}
        ev = Evaluator(self.table, env, stubs, _WATCH, objects=self.classes)
        result = ev.call(name, args, {})
        anchor = f"{function.file}:{function.node.lineno}"
        common = {"steps": tuple(ev.steps), "assumed": tuple(ev.assumed), "anchor": anchor}
        if isinstance(result, Raised):
            return Reading(None, raised=result, **common), env  # type: ignore[arg-type]
        if isinstance(result, (Unknown, Ref)):
            why = result.why if isinstance(result, Unknown) else f"{result.path} is not known"
            return Reading(None, unknown=why, **common), env  # type: ignore[arg-type]
        return Reading(result, **common), env  # type: ignore[arg-type]
