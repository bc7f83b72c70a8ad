"""The memory check's inputs, from a parsed launch: flags, model folders, the GPU, the log.

Kept apart from the arithmetic so preflight only hands over what it has: the launch's flag
values (by option name, whatever `dest` the release gives them), the two models, and the GPU
as NVML (or `--gpu-mem-gib` / `--gpu-free-gib`) reports it; a first launch's measurements
replace the estimates they measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from eaglebug.checks.args.resolved import Resolved
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.logs.memory import MemoryLog
from eaglebug.checks.memory.check import MemoryInputs, check_memory
from eaglebug.checks.memory.classes import model_objects
from eaglebug.checks.memory.fit import Gpu, MemoryLaunch, model_shape
from eaglebug.checks.memory.parallel import Layout
from eaglebug.checks.memory.plan import Weights
from eaglebug.checks.memory.rules import memory_sources
from eaglebug.checks.memory.unknowns import Asked, Given, LaunchFlags, settled
from eaglebug.checks.memory.weights import RankShare, per_rank_bytes
from eaglebug.checks.models import checks as configchecks
from eaglebug.checks.models.context import context_rules, derived_context_length
from eaglebug.checks.models.source import ModelSource
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import algorithm_facts


@dataclass(frozen=True)
class GpuFigures:
    total_bytes: int
    source: str
    free_bytes: int | None = None
    free_source: str | None = None


_ANSWER = "memory:"
_KEEP_ANSWERS = 16


def _skip(message: str) -> list[Finding]:
    return [Finding(id="config.memory", severity="info", message=message)]


def memory_findings(
    index: TreeIndex,
    target: ModelSource,
    draft: ModelSource | None,
    algorithm: str | None,
    flags: LaunchFlags,
    gpu: GpuFigures | None,
    env: Mapping[str, str],
    measured: MemoryLog | None = None,
    resolved: Mapping[str, Resolved] | None = None,
) -> list[Finding]:
    """`config.memory` for one launch; `resolved`: the fields the tree's own argument
    resolution sets where the launch leaves them (`memresolved`). Where a flag it reads is set
    when the launch runs, what rests on it says so (`unknowns.settled`)."""
    asked = Asked(flags)
    reading = _Reading(index, target, draft, algorithm, gpu, env, measured, resolved)

    def again(given: Mapping[str, str | None]) -> list[Finding]:
        """The same reading with values in place of the unknown flags (None: not given)."""
        other = reading
        if "--speculative-algorithm" in given:  # not speculative: no draft is loaded
            named = given["--speculative-algorithm"]
            speculative = algorithm_facts(index).canonical(named) if named else None
            other = replace(reading, algorithm=speculative, draft=draft if speculative else None)
        return _memory_findings(other, Given(flags, given))

    findings = _memory_findings(reading, asked)
    return settled(index, findings, flags, [*asked.asked, "--speculative-algorithm"], again)


@dataclass(frozen=True)
class _Reading:
    """What one memory reading reads besides the flags (which `again` gives other values)."""

    index: TreeIndex
    target: ModelSource
    draft: ModelSource | None
    algorithm: str | None
    gpu: GpuFigures | None
    env: Mapping[str, str]
    measured: MemoryLog | None
    resolved: Mapping[str, Resolved] | None


def _memory_findings(reading: _Reading, flags: LaunchFlags) -> list[Finding]:
    index, target, draft, algorithm = (
        reading.index,
        reading.target,
        reading.draft,
        reading.algorithm,
    )
    gpu, env, measured, resolved = reading.gpu, reading.env, reading.measured, reading.resolved
    text, number = flags.text, flags.number
    target_bytes, how = configchecks.weights_bytes(target.path)
    if target_bytes is None:
        return _skip(f"memory check skipped: the target's weight size is unknown ({how})")
    if gpu is None:
        return _skip(
            "memory check skipped: no GPU found through NVML on this host; pass --gpu-mem-gib N "
            "(and --gpu-free-gib N)"
        )
    assert target.config is not None
    context = number("--context-length")
    rules = context_rules(index)
    length = int(context) if context else derived_context_length(index, target.config, rules)
    shape = model_shape(target.config, length)
    if isinstance(shape, str):
        return _skip(f"memory check skipped: the target's {shape}")
    draft_shape = None
    draft_bytes = 0
    if draft is not None and draft.config is not None:
        made = model_shape(draft.config, derived_context_length(index, draft.config, rules))
        draft_shape = made if not isinstance(made, str) else None
        draft_bytes = configchecks.weights_bytes(draft.path)[0] or 0

    def whole(*options: str) -> int | None:
        value = number(*options)
        return int(value) if value is not None else None

    settled = dict(resolved or {})

    def given_or_resolved(field: str, *options: str) -> int | None:
        value = whole(*options)
        return value if value is not None or field not in settled else settled[field].value

    tp = whole("--tp-size", "--tensor-parallel-size") or 1
    pp = whole("--pp-size", "--pipeline-parallel-size") or 1
    dp = whole("--dp-size", "--data-parallel-size") or 1
    ep = whole("--ep-size", "--expert-parallel-size", "--ep") or 1
    dp_attention = flags.given("--enable-dp-attention")
    layout = Layout(tp, tp, dp, ep, pp, dp_attention, flags.given("--enable-dp-lm-head"))
    target_rank = per_rank_bytes(index, target, layout, target_bytes, how, tp * pp, env)
    draft_rank = RankShare(0, 0, "")
    if target_rank.not_built_bytes and _draft_in_target(target, draft, algorithm):
        draft_rank = _nextn_share(target_rank, tp)
    elif draft is not None and draft_bytes:
        draft_how = configchecks.weights_bytes(draft.path)[1]
        draft_rank = per_rank_bytes(
            index, draft, replace(layout, pp=1), draft_bytes, draft_how, tp, env
        )
    launch = MemoryLaunch(
        model_path=text("--model-path") or "",
        tp=tp,
        pp=pp,
        dp=dp,
        enable_dp_attention=dp_attention,
        ep=ep,
        mem_fraction_static=number("--mem-fraction-static"),
        chunked_prefill_size=whole("--chunked-prefill-size"),
        cuda_graph_max_bs=whole("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
        max_running_requests=given_or_resolved("max_running_requests", "--max-running-requests"),
        max_total_tokens=whole("--max-total-tokens"),
        kv_cache_dtype=text("--kv-cache-dtype") or "auto",
        page_size=given_or_resolved("page_size", "--page-size") or 1,
        algorithm=algorithm,
        disable_cuda_graph=flags.given("--disable-cuda-graph")
        or text("--cuda-graph-backend-decode") == "disabled",
        speculative_num_draft_tokens=given_or_resolved(
            "speculative_num_draft_tokens", "--speculative-num-draft-tokens"
        ),
        speculative_num_steps=given_or_resolved("speculative_num_steps", "--speculative-num-steps"),
        speculative_eagle_topk=given_or_resolved(
            "speculative_eagle_topk", "--speculative-eagle-topk"
        ),
        swa_full_tokens_ratio=number("--swa-full-tokens-ratio"),
        max_mamba_cache_size=whole("--max-mamba-cache-size"),
        mamba_full_memory_ratio=number("--mamba-full-memory-ratio"),
        mamba_ssm_dtype=text("--mamba-ssm-dtype"),
        env=tuple(sorted((k, v) for k, v in env.items() if k.startswith("SGLANG_"))),
        quantization=text("--quantization"),
        piecewise_cuda_graph=False
        if flags.given("--disable-piecewise-cuda-graph")
        else (
            True
            if flags.given("--enable-piecewise-cuda-graph", "--enforce-piecewise-cuda-graph")
            else None
        ),
    )
    free = gpu.free_bytes if gpu.free_bytes is not None else gpu.total_bytes
    free_from = gpu.free_source or "not known: the whole GPU assumed free (pass --gpu-free-gib)"
    if measured is not None and measured.free_before_load_gib is not None:
        free_from = "measured by the last launch (Load weight begin)"
    inputs = MemoryInputs(
        index=index,
        sources=memory_sources(index),
        launch=launch,
        target=shape,
        draft=draft_shape,
        gpu=Gpu(gpu.total_bytes, free),
        gpu_from=gpu.source,
        free_from=free_from,
        weights=Weights(
            target_rank.bytes, draft_rank.bytes, target_rank.whole_bytes, draft_rank.whole_bytes
        ),
        weights_from=f"target: {target_rank.how}"
        + (f"; draft: {draft_rank.how}" if draft_rank.how else ""),
        measured=measured,
        quantization_flag=not flags.given("--quantization")
        and bool(_flag(index, "--quantization")),
        graph_bs_flag=_flag(index, "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
        config_class=_own_class(index, target.config),
    )
    findings = index.answer_for(
        _ANSWER, _subject(inputs), list[Finding], lambda: check_memory(inputs), _KEEP_ANSWERS
    )
    if not settled:
        return findings
    # Where the fields the launch left to SGLang were set by its own argument resolution.
    said = {f"{name}_from": found.read_from for name, found in settled.items()}
    return [_with_values(f, said) for f in findings]


def _subject(inputs: MemoryInputs) -> list[object]:
    """All a memory check reads besides the tree: its inputs are plain values whose reprs say
    them whole (the launch with its SGLANG_ variables, the model shapes with their configs'
    fields, the GPU, the weights, the last launch's log). A kept answer serves a preflight
    whose other inputs changed (a variable no check reads, new in the shell)."""
    return [
        repr(value)
        for name, value in vars(inputs).items()
        if name not in ("index", "sources")  # the tree's: its answers go with it
    ]


def _with_values(finding: Finding, more: Mapping[str, str]) -> Finding:
    evidence = finding.evidence
    if not isinstance(evidence, ConfigEvidence):
        return finding
    values = (*evidence.values, *((k, v) for k, v in more.items()))
    return replace(finding, evidence=replace(evidence, values=values))


def _draft_in_target(target: ModelSource, draft: ModelSource | None, algorithm: str | None) -> bool:
    """The draft is the target checkpoint's own extra layers: an MTP draft (NEXTN / EAGLE with
    no separate folder, or the target's own folder named as the draft)."""
    if draft is None:
        return algorithm in {"EAGLE", "NEXTN"}
    if draft.path is None or target.path is None:
        return False
    return draft.path.resolve() == target.path.resolve()


def _nextn_share(target: RankShare, tp: int) -> RankShare:
    """The draft's weights when they are the layers of the target's checkpoint that the target
    does not build (past num_hidden_layers): those bytes, split by tp."""
    per_rank = -(-target.not_built_bytes // tp)
    return RankShare(
        per_rank,
        0,
        f"the target's checkpoint: its {target.not_built_bytes / (1 << 30):.1f} GiB of layers "
        f"past num_hidden_layers (the draft's NextN layers), split by tp {tp}",
    )


def _flag(index: TreeIndex, *options: str) -> str | None:
    """The first of these spellings that this tree accepts."""
    from eaglebug.checks.launch.flags import server_flags

    known = {o for spec in server_flags(index) for o in spec.options}
    return next((o for o in options if o in known), None)


def _own_class(index: TreeIndex, config: Mapping[str, object] | None) -> str | None:
    """The config class the tree builds this config with, if the tree holds its body: one
    that is transformers' own under another name (`_KimiK2ConfigAlias(DeepseekV3Config)`)
    has all of it outside the tree, so the readings take the config as plain, as for a type
    the tree registers nothing for (the tree's hybrid predicates test for classes of its own,
    which such an alias is not)."""
    found = model_objects(index, config or {})
    return found.qualname if found.qualname and not found.reuses else None
