"""`config.memory`: what SGLang will do with this launch's memory, said before the load.

From the tree's own arithmetic (`memplan`): an error when the weights leave no KV budget (the
tree's own raise, with the smallest `--mem-fraction-static` that gives a pool and the `--tp`
or FP8 alternative), an error or warning when the fraction leaves less outside the static
pool than the tree reserves for CUDA graphs and activations (with the fraction or
`--cuda-graph-max-bs` that fits), a warning when the pool holds less than one request of the
context length, and otherwise an info line with the predicted pool. The numbers are in the
finding's details; the fixes are flags the TUI sets for the next launch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import Choice, FlagFix, Option
from eaglebug.checks.logs.memory import MemoryLog, Overheads
from eaglebug.checks.memory.fit import GIB, MIB, Gpu, MemoryLaunch, ModelShape
from eaglebug.checks.memory.plan import Prediction, Weights, minimum_fraction, predict
from eaglebug.checks.memory.rules import MemorySources
from eaglebug.checks.pyeval.values import Top
from eaglebug.checks.source.index import TreeIndex

# Decode batch sizes tried for a --cuda-graph-max-bs that fits, largest first.
_GRAPH_BS = (384, 320, 256, 192, 160, 128, 96, 64, 48, 32, 24, 16, 8, 4, 2, 1)


@dataclass(frozen=True)
class MemoryInputs:
    index: TreeIndex
    sources: MemorySources
    launch: MemoryLaunch
    target: ModelShape
    draft: ModelShape | None
    gpu: Gpu
    gpu_from: str  # "NVML (8 x NVIDIA H200)", "--gpu-mem-gib"
    free_from: str  # "NVML", "--gpu-free-gib", or why it is assumed
    weights: Weights
    weights_from: str
    measured: MemoryLog | None = None  # the last launch of this command, from its log
    quantization_flag: bool = False  # does the tree accept --quantization
    graph_bs_flag: str | None = None  # --cuda-graph-max-bs (0.5.9), -decode (0.5.23)
    config_class: str | None = None  # the config class the tree registers (memory/classes.py)


def _gib(value: float) -> str:
    return f"{value:.1f} GiB"


def _details(inputs: MemoryInputs, p: Prediction) -> dict[str, object]:
    measured = inputs.measured.to_json() if inputs.measured else {}
    return {
        **{f"measured_{key}": value for key, value in measured.items()},
        "max_total_num_tokens": p.max_total_num_tokens,
        "max_running_requests": p.max_running_requests,
        "mem_fraction_static": p.fraction,
        "mem_fraction_static_from": p.fraction_from,
        "default_mem_fraction_static": p.default_fraction,
        "default_mem_fraction_static_from": p.default_from,
        "kv_cell_bytes": p.kv_cell_bytes,
        "kv_cell_from": p.cell_from,
        "draft_kv_cell_bytes": p.draft_cell_bytes or None,
        "weights_gib_per_gpu": round(p.weights_gib, 3),
        "draft_weights_counted": p.draft_counted,
        "draft_weights_counted_from": p.draft_counted_from,
        "kv_gib_per_gpu": round(p.kv_gib, 3) if p.kv_gib is not None else None,
        # the pool allocates more than the cell its budget divides by (FP8 DSA scales)
        **(
            {
                "kv_allocated_bytes_per_token": p.kv_allocated_cell_bytes,
                "kv_allocated_from": p.kv_allocated_from,
            }
            if p.kv_allocated_cell_bytes is not None
            else {}
        ),
        "reserved_gib": round(p.reserved_mb / 1024, 3) if p.reserved_mb is not None else None,
        "graph_reserve_gib": (
            round(p.graph_reserve_mb / 1024, 3) if p.graph_reserve_mb is not None else None
        ),
        "cuda_graph_max_bs": p.cuda_graph_max_bs,
        "chunked_prefill_size": p.chunked_prefill_size,
        "free_before_load_gib": round(p.pre_load_gib, 3),
        "free_before_load_from": inputs.free_from,
        "gpu_memory_gib": round(inputs.gpu.total_bytes / GIB, 3),
        "gpu_memory_from": inputs.gpu_from,
        "weights_from": inputs.weights_from,
        "calibrated": inputs.measured is not None,
        "tp": inputs.launch.tp,
        **_layout_details(p),
        "assumed": tuple(dict.fromkeys(p.assumed)),  # each once, however many readings said it
        **({"not_read": tuple(p.unknown)} if p.unknown else {}),
    }


def _layout_details(p: Prediction) -> dict[str, object]:
    layout = p.layout
    if layout is None:
        return {}
    return {
        "pool_kind": p.pool_kind,
        "pool_kind_from": p.pool_kind_from,
        "pool_configurator": p.configurator,
        "pool_configurator_from": p.configurator_from,
        "full_max_total_num_tokens": p.full_tokens,
        "swa_max_total_num_tokens": p.swa_tokens,
        "mamba_cache_requests": p.mamba_cache_requests,
        "mamba_state_bytes_per_request": p.mamba_state_bytes_per_request,
        "mamba_gib_per_gpu": round(p.mamba_gib, 3) if p.mamba_gib is not None else None,
        "mamba_from": p.mamba_from,
        "attention_tp_size": layout.attn_tp_size,
        "attention_dp_size": layout.attn_dp_size,
        "attention_layout_from": layout.attn_tp_from,
        "dp_flags_resolved": {k: _shown(v) for k, v in layout.resolved.items()} or None,
        "dp_flags_resolved_from": layout.resolved_from if layout.resolved else None,
    }


def _shown(value: object) -> object:
    """A value as the report's JSON can hold it: a scalar, or a list or dict of them, as it
    is; one the reading does not know, as why (the readings that used it said so)."""
    if isinstance(value, (list, tuple)):
        return [_shown(v) for v in value]
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"not known: {value.why}" if isinstance(value, Top) else f"a {type(value).__name__}"


def _requests(p: Prediction) -> str:
    """The request limit, or that it was not read (why: `not_read` in the details)."""
    if p.max_running_requests is None:
        return "max_running_requests not read"
    return f"max_running_requests={p.max_running_requests}"


def _pools(p: Prediction) -> str:
    """A hybrid SWA model's two pools, or a hybrid linear-attention model's state cache, as
    the tree splits the budget."""
    if p.mamba_cache_requests is not None:
        state = p.mamba_state_bytes_per_request or 0
        return (
            f" (mamba state cache of {p.mamba_cache_requests} requests, "
            f"{state / (1 << 20):.2f} MiB each, {_gib(p.mamba_gib or 0)})"
        )
    if p.full_tokens is None or p.swa_tokens is None:
        return ""
    return f" (full-attention pool {p.full_tokens} tokens, sliding-window pool {p.swa_tokens})"


def _per_rank(p: Prediction) -> str:
    """What the pool figures are per: each attention-DP rank holds its own pool."""
    if p.layout is None or not p.layout.dp_attention:
        return ""
    return f" per attention-DP rank ({p.layout.describe()})"


def _finding(
    inputs: MemoryInputs,
    p: Prediction,
    severity: str,
    message: str,
    fix: Option | Choice | None = None,
    read_from: str | None = None,
    sglang: str | None = None,
) -> Finding:
    return Finding(
        id="config.memory",
        severity=severity,  # type: ignore[arg-type]
        message=message,
        role="target",
        attribute="mem_fraction_static",
        fix=fix,
        evidence=ConfigEvidence.of(
            _details(inputs, p), read_from=read_from or p.budget_from, sglang=sglang
        ),
    )


def _predict(inputs: MemoryInputs, launch: MemoryLaunch) -> Prediction:
    weights = inputs.weights
    if launch.tp != inputs.launch.tp:  # the per-rank share of the same checkpoint
        scale = inputs.launch.tp / launch.tp
        weights = weights.at_tp(scale)
    log = inputs.measured if launch.tp == inputs.launch.tp else None
    measured: Overheads | None = log.overheads() if log is not None else None
    return predict(
        inputs.index,
        inputs.sources,
        launch,
        inputs.target,
        inputs.draft,
        inputs.gpu,
        weights,
        measured,
        inputs.config_class,
    )


def _fits(p: Prediction, tokens: int) -> bool:
    return p.raised is None and (p.max_total_num_tokens or 0) >= tokens


def _larger_tp(inputs: MemoryInputs, tokens: int) -> int | None:
    heads = inputs.target.kv_heads
    for tp in (2, 4, 8, 16):
        if tp <= inputs.launch.tp or (not inputs.target.mla and heads % tp and tp % heads):
            continue
        if _fits(_predict(inputs, replace(inputs.launch, tp=tp)), tokens):
            return tp
    return None


def _fraction_for(inputs: MemoryInputs, tokens: int) -> float | None:
    def tokens_at(fraction: float) -> int:
        trial = replace(inputs.launch, mem_fraction_static=fraction)
        return _predict(inputs, trial).max_total_num_tokens or 0

    return minimum_fraction(tokens_at, tokens)


def _actual(inputs: MemoryInputs) -> str:
    """What the last launch of this command logged, to read beside the prediction."""
    log = inputs.measured
    if log is None:
        return ""
    tokens = log.max_total_num_tokens or log.kv_tokens
    return f" [calibrated by the last launch, which logged max_total_num_tokens={tokens}]"


def _graph_bs_that_fits(inputs: MemoryInputs, p: Prediction, slack_mb: float) -> int | None:
    current = p.cuda_graph_max_bs or 0
    for bs in (b for b in _GRAPH_BS if b < current):
        trial = _predict(inputs, replace(inputs.launch, cuda_graph_max_bs=bs))
        if trial.reserved_mb is not None and trial.reserved_mb <= slack_mb:
            return bs
    return None


def check_memory(inputs: MemoryInputs) -> list[Finding]:
    p = _predict(inputs, inputs.launch)
    if p.unknown and p.raised is None and p.max_total_num_tokens is None:
        return [
            _finding(
                inputs,
                p,
                "info",
                "memory check incomplete: this tree's arithmetic could not be read: "
                + "; ".join(p.unknown),
            )
        ]
    context = inputs.target.context_len
    numbers = (
        f"{_gib(p.weights_gib)} of weights per GPU (target"
        + (" + draft" if inputs.draft is not None else "")
        + f", --tp {inputs.launch.tp}), {_gib(p.pre_load_gib)} free before the load, "
        f"--mem-fraction-static {p.fraction:g} ({p.fraction_from})"
    )
    if p.raised is not None or not p.max_total_num_tokens:
        return [_no_budget(inputs, p, numbers, context)]
    findings: list[Finding] = []
    graph = _graph_slack(inputs, p)
    if graph is not None:
        findings.append(graph)
    tokens = p.max_total_num_tokens
    if context and tokens < context:
        options: list[Option] = []
        fraction = _fraction_for(inputs, context)
        if fraction is not None and (p.fraction is None or fraction > p.fraction):
            options.append(
                FlagFix(
                    "--mem-fraction-static",
                    f"{fraction:.3f}",
                    f"a pool of one full {context}-token request; less room for CUDA graphs",
                )
            )
        page = max(inputs.launch.page_size, 1)
        options.append(
            FlagFix(
                "--context-length",
                str(tokens // page * page),
                f"requests longer than {tokens} tokens are refused",
            )
        )
        findings.append(
            _finding(
                inputs,
                p,
                "warning",
                f"the KV pool holds {tokens} tokens, fewer than one request of the "
                f"{context}-token context length: {numbers}",
                Choice(tuple(options)) if len(options) > 1 else options[0],
            )
        )
    if not findings:
        graphs = (
            f", {_gib(p.graph_reserve_mb / 1024)} reserved for CUDA graphs"
            if p.graph_reserve_mb
            else ""
        )
        findings.append(
            _finding(
                inputs,
                p,
                "info",
                f"predicted max_total_num_tokens={tokens}{_pools(p)}, {_requests(p)}"
                f"{_per_rank(p)}; per GPU: {_gib(p.weights_gib)} weights, "
                f"{_gib(p.kv_gib or 0)} KV ({p.kv_cell_bytes} bytes a token, {p.pool_kind}){graphs}; "
                f"--mem-fraction-static {p.fraction:g} ({p.fraction_from})" + _actual(inputs),
            )
        )
    return findings


def _no_budget(inputs: MemoryInputs, p: Prediction, numbers: str, context: int | None) -> Finding:
    options: list[Option] = []
    fraction = _fraction_for(inputs, max(context or 1, 1))
    viable = _fraction_for(inputs, 1)
    if fraction is not None or viable is not None:
        value = fraction if fraction is not None else viable
        full = f"one full {context}-token request" if context else "one request"
        room = (
            f"room for {full}" if fraction is not None else f"some KV cache, but less than {full}"
        )
        slack_gib = inputs.gpu.total_bytes / GIB * (1 - (value or 0))
        options.append(
            FlagFix(
                "--mem-fraction-static",
                f"{value:.3f}",
                f"{room}; {slack_gib:.1f} GiB per GPU left for CUDA graphs and activations",
            )
        )
    tp = _larger_tp(inputs, max(context or 1, 1))
    if tp is not None:
        split = FlagFix("--tp", str(tp), f"the weights split over {tp} GPUs")
        # A fraction that leaves less than the tree's own reserve trades this error for an
        # out-of-memory in the graph capture: the larger --tp comes first then.
        cramped = (
            options
            and p.reserved_mb is not None
            and (inputs.gpu.total_bytes / MIB * (1 - float(options[0].value or 0)) < p.reserved_mb)
        )
        options.insert(0 if cramped else len(options), split)
    if inputs.quantization_flag:
        options.append(
            FlagFix("--quantization", "fp8", "about half the weights; accuracy may drop")
        )
    raised = p.raised
    where = f"{raised.rel}:{raised.line}" if raised else p.budget_from
    minimum = f"; the smallest fraction that leaves any KV cache is {viable:.3f}" if viable else ""
    return _finding(
        inputs,
        p,
        "error",
        f"the weights leave no GPU memory for the KV cache: {numbers}; SGLang raises "
        f"{raised.kind if raised else 'an error'} after the load{minimum}",
        Choice(tuple(options)) if len(options) > 1 else (options[0] if options else None),
        read_from=where,
        sglang=raised.message if raised else None,
    )


def _graph_slack(inputs: MemoryInputs, p: Prediction) -> Finding | None:
    """The fraction leaves less than the tree reserves outside the static pool."""
    if p.reserved_mb is None or p.fraction is None or inputs.launch.disable_cuda_graph:
        return None
    total_mb = inputs.gpu.total_bytes / MIB
    slack_mb = total_mb * (1 - p.fraction)
    draft_mb = p.draft_slack_gib * 1024
    graph_mb = (p.graph_reserve_mb or 0) + draft_mb
    if inputs.measured is not None and inputs.measured.graph_gib is not None:
        graph_mb = inputs.measured.graph_gib * 1024 + draft_mb
    # The tree's default leaves exactly its reserve (rounded to 0.001 of the GPU): only a
    # fraction given on the command line can leave less than the reserve; any can leave less
    # than the graphs (and, in 0.5.9, the draft) need.
    chosen = p.fraction_from == "--mem-fraction-static"
    needed_mb = max(p.reserved_mb, graph_mb) if chosen else graph_mb
    if slack_mb >= needed_mb - total_mb * 0.0005:
        return None
    severity = "error" if slack_mb < graph_mb else "warning"
    fits = math.floor((total_mb - needed_mb) / total_mb * 1000) / 1000
    options: list[Option] = []
    if fits > 0:
        options.append(
            FlagFix(
                "--mem-fraction-static",
                f"{fits:.3f}",
                "leaves SGLang's own reserve for CUDA graphs and activations; a smaller KV pool",
            )
        )
    bs = _graph_bs_that_fits(inputs, p, slack_mb) if inputs.graph_bs_flag else None
    if bs is not None and inputs.graph_bs_flag:
        options.append(
            FlagFix(inputs.graph_bs_flag, str(bs), f"decode batches above {bs} run without graphs")
        )
    what = "the CUDA graphs" if severity == "error" else "CUDA graphs and prefill activations"
    drafted = (
        f" (the draft's {_gib(draft_mb / 1024)} of weights and pool come out of it too)"
        if draft_mb
        else ""
    )
    return _finding(
        inputs,
        p,
        severity,
        f"--mem-fraction-static {p.fraction:g} leaves {_gib(slack_mb / 1024)} per GPU outside "
        f"the static pool; the tree reserves {_gib(needed_mb / 1024)} for {what}{drafted}: "
        "the capture (or the first large prefill) is likely to run out of memory",
        Choice(tuple(options)) if len(options) > 1 else (options[0] if options else None),
        read_from=p.default_from,
    )
