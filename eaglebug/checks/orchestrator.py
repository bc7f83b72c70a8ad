"""Preflight: every launch blocker of one launch command, found before the first launch.

Combines the interface audit (target and draft classes, from their `config.json`) with the
model-config checks, all against the SGLang tree the server would run.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from eaglebug.checks.args.attention import GpuArch, check_attention
from eaglebug.checks.args.nodes import check_gpu_count, check_multinode
from eaglebug.checks.args.resolved import resolved_fields
from eaglebug.checks.contract.environ import launch_environ
from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding, resting_on, sort_findings
from eaglebug.checks.contract.fixes import AdviceFix
from eaglebug.checks.interface.audit import AuditResult, ClassReport, audit
from eaglebug.checks.launch import deprecations
from eaglebug.checks.launch.command import LaunchSpec, parse_launch
from eaglebug.checks.launch.compose import Composed, file_launch
from eaglebug.checks.launch.devices import (
    GpuMemory,
    Visible,
    picked_gpus,
    seen_by,
    visible_gpus,
)
from eaglebug.checks.launch.external import for_launch
from eaglebug.checks.launch.flags import FlagSpec, serve_front_end, server_flags
from eaglebug.checks.launch.kubectl import Applied
from eaglebug.checks.launch.sitepaths import package_roots
from eaglebug.checks.launch.types import flag_value
from eaglebug.checks.logs.memory import MemoryLog
from eaglebug.checks.memory.classes import model_objects
from eaglebug.checks.memory.launch import GpuFigures, memory_findings
from eaglebug.checks.models import auxlayers
from eaglebug.checks.models import checks as configchecks
from eaglebug.checks.models import context as contextchecks
from eaglebug.checks.models import draft_checks as draftchecks
from eaglebug.checks.models.classdefaults import with_class_defaults
from eaglebug.checks.models.draft_arch import draft_mode_class, first_architecture
from eaglebug.checks.models.source import ModelSource, is_repo_id, resolve_model
from eaglebug.checks.source.external import ExternalPackage, ignored_package
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import algorithm_facts
from eaglebug.checks.startup import steps


@dataclass
class PreflightResult:
    version: str | None
    package_dir: str
    launch: LaunchSpec
    algorithm: str | None
    target: ModelSource
    draft: ModelSource | None
    reports: list[ClassReport] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    external: ExternalPackage | None = None  # the out-of-tree model package audited with it
    # Where the launch's Python looks for transformers (`launch/sitepaths.py`): a kept answer
    # stamps each, so transformers installed, upgraded or removed there is a new answer.
    package_roots: tuple[str, ...] = ()
    # The files and folders that chose the launch's Python (pyenv's version files, the
    # pyproject.toml `uv run` goes by): stamped too.
    python_chosen_by: tuple[str, ...] = ()
    # A `docker compose up` launch: the service read, and the compose (and env) files, in the
    # order read; the launch above is the `docker run` it amounts to (`launch/compose.py`).
    compose: tuple[str, tuple[str, ...]] | None = None
    # A `kubectl apply -f` launch: the workload and container read, the manifest defining
    # them, and every manifest read; the launch above is the `docker run` its container
    # amounts to (`launch/kubectl.py`).
    kubernetes: tuple[str, str, str, tuple[str, ...]] | None = None
    # The GPUs the launch narrows itself to (`CUDA_VISIBLE_DEVICES`, `--gpus`, a Slurm step, a
    # pod's limit):
    # {"count", "exact", "nvml_indices", "by"}; None where nothing narrows them, or what does
    # is not known here (every GPU of the host is then taken).
    gpus_seen: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sglang": {"version": self.version, "package_dir": self.package_dir},
            "launch": self.launch.to_json(),
            "compose": (
                {"service": self.compose[0], "files": list(self.compose[1])}
                if self.compose
                else None
            ),
            "kubernetes": (
                {
                    "workload": self.kubernetes[0],
                    "container": self.kubernetes[1],
                    "manifest": self.kubernetes[2],
                    "files": list(self.kubernetes[3]),
                }
                if self.kubernetes
                else None
            ),
            "gpus_seen": self.gpus_seen,
            "algorithm": self.algorithm,
            "target": self.target.to_json(),
            "draft": self.draft.to_json() if self.draft else None,
            "external": self.external.to_json() if self.external else None,
            "findings": [f.to_json() for f in sort_findings(self.findings)],
            "warnings": self.warnings,
        }


class _Flags:
    """Look up launch values by option name, whatever `dest` this release gives the flag."""

    def __init__(self, launch: LaunchSpec, specs: list[FlagSpec]) -> None:
        self.launch = launch
        self.dests = {option: spec.dest for spec in specs for option in spec.options}

    def text(self, *options: str) -> str | None:
        for option in options:
            dest = self.dests.get(option)
            if dest is not None and self.launch.text(dest) is not None:
                return self.launch.text(dest)
        return None

    def given(self, *options: str) -> bool:
        return any(
            self.dests.get(o) is not None and self.launch.get(self.dests[o]) is not None
            for o in options
        )

    def number(self, *options: str) -> float | None:
        for option in options:
            dest = self.dests.get(option)
            if dest is not None and self.launch.get(dest) is not None:
                return self.launch.number(dest)
        return None

    def unknown(self, *options: str) -> list[str]:
        """What a check reading `options` must say it assumed (`LaunchSpec.unknown`)."""
        found = (self.launch.unknown(self.dests.get(option, "")) for option in options)
        return list(dict.fromkeys(note for note in found if note is not None))


def _unavailable(source: ModelSource, role: str, skipped: str) -> Finding:
    if is_repo_id(source.given):
        # The JSON files alone (configs, the weight index: a few MB) are all the checks read,
        # so the launch is checked before its weights (hundreds of GB) are fetched.
        revision = f" --revision {source.revision}" if source.revision else ""
        fix = (
            f"fetch its configs first: hf download {source.given}{revision} --include '*.json' "
            "(a few MB; every check runs on them, the weights can follow), or pass a local folder"
        )
        said = f" is not available offline ({source.how})"
    else:
        fix = f"pass the folder that holds the {role} model's config.json"
        said = f": {source.how}"  # a path: no such local folder
    return Finding(
        id="config.model_unavailable",
        severity="warning",
        message=f"{role} model {source.given}{said}; skipped: {skipped}",
        role=role,
        fix=AdviceFix(fix),
        evidence=ConfigEvidence.of({"given": source.given, "how": source.how}),
    )


def _architecture(
    source: ModelSource, role: str, index: TreeIndex
) -> tuple[str | None, Finding | None]:
    """The registered class for a model's `architectures[0]`, or an unregistered finding."""
    assert source.config is not None
    archs = source.config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise InputError(
            f'{source.path}/config.json: no "architectures" list naming the {role} model class',
            'add "architectures": ["YourModelClass"]',
        )
    exported = index.classes.exporter_names(archs[0])
    if exported:
        return exported[0], None
    names = sorted(index.registry())
    close = difflib.get_close_matches(archs[0], names, n=3, cutoff=0.6)
    return None, Finding(
        id="config.unregistered_architecture",
        severity="error",
        message=(
            f"the {role}'s architecture {archs[0]} is not exported by any EntryClass in this "
            "SGLang tree, so SGLang cannot load it"
        ),
        role=role,
        class_=archs[0],
        fix=AdviceFix(
            f"closest registered: {', '.join(close)}"
            if close
            else "add the model to SGLang (EntryClass)"
        ),
        evidence=ConfigEvidence.of({"closest": close}),
    )


# What preflight says it is doing, in order (`progress`): reading the tree's files and its
# server flags, the model configs, the interface audit, the config checks, memory, attention,
# the nodes, and where in the start-up each finding would stop the launch.
STAGES = (
    "reading the tree",
    "models",
    "interface audit",
    "config checks",
    "memory",
    "attention",
    "nodes",
    "start-up order",
)


def preflight(
    index: TreeIndex,
    words: Sequence[str],
    environ: Mapping[str, str],
    gpu: GpuMemory | None = None,
    gpu_arch: GpuArch | None = None,
    *,
    external: ExternalPackage | None = None,
    measured: MemoryLog | None = None,
    progress: Callable[[str], None] | None = None,
) -> PreflightResult:
    """`external`: the out-of-tree model package to audit with (`--external-models`); else the
    one the launch's `SGLANG_EXTERNAL_MODEL_PACKAGE` names, if the index has none yet.
    `measured`: what the last launch of this command logged (memory), if it ran.
    `progress(stage)` hears of each stage as it starts (`STAGES`): a cold run takes seconds,
    and a front end says which part runs (the files done of total come from the index's
    mapper, `InProcess(progress=...)`)."""

    def stage(name: str) -> None:
        if progress is not None:
            progress(name)

    stage(STAGES[0])
    # `docker compose up`, `kubectl apply -f`: the `docker run` it is (read without the
    # session's variables, as the reply is keyed: `session/stamps.question`)
    started = launch_environ(environ)  # no verdict depends on the shell's session
    described = file_launch(words, started)
    composed = described if isinstance(described, Composed) else None
    applied = described if isinstance(described, Applied) else None
    if described is not None:
        words = described.words
    if index.external is None:
        external = external or for_launch(words, environ)
        if external is not None:
            index.use_external(external)
    specs = server_flags(index)
    stage("models")
    version = index.tree.version or "this tree"
    convert = partial(flag_value, index)
    run_time = applied.at_run_time if applied is not None else frozenset()
    launch = parse_launch(words, specs, version, serve_front_end(index), convert, started, run_time)
    flags = _Flags(launch, specs)
    deprecated = deprecations.check_deprecated_flags(index, launch)
    env = launch.env(started)
    tp_value = flags.number("--tp-size", "--tensor-parallel-size")
    tp = int(tp_value) if tp_value is not None else 1
    if tp < 1:
        raise InputError(f"--tp-size {tp}: must be at least 1", "fix --tp in the launch command")
    model_path = flags.text("--model-path")
    if model_path is None and "model_path" in launch.at_run_time:
        model_path = launch.at_run_time["model_path"]  # not found: said as set when it runs
    if model_path is None:
        raise InputError("the launch command has no --model-path", "add --model-path MODEL")
    algorithm_name = flags.text("--speculative-algorithm")
    algorithm = algorithm_facts(index).canonical(algorithm_name) if algorithm_name else None

    chosen_by: list[Path] = []
    roots = package_roots(index.tree.root, words, started, chosen_by=chosen_by)

    def here(path: str) -> str | None:  # a container's paths, where they are on this machine
        return launch.host_path(path, started)

    def model(given: str, revision: str | None, dest: str) -> ModelSource:
        if dest in launch.at_run_time:  # `--model-path $MODEL`: what it names is not known
            return ModelSource(given, None, "set when the launch runs, not known here")
        return _with_class_defaults(index, roots, resolve_model(given, env, revision, here))

    target = model(model_path, flags.text("--revision"), "model_path")
    draft_given = flags.text("--speculative-draft-model-path") or launch.at_run_time.get(
        "speculative_draft_model_path"
    )
    draft_revision = flags.text("--speculative-draft-model-revision")
    draft = (
        model(draft_given, draft_revision, "speculative_draft_model_path") if draft_given else None
    )
    result = PreflightResult(
        index.tree.version, str(index.tree.package_dir), launch, algorithm, target, draft
    )
    result.external = index.external
    if composed is not None:
        result.warnings.extend(composed.warnings)
        result.compose = (composed.service, composed.files)
    if applied is not None:
        result.warnings.extend(applied.warnings)
        result.kubernetes = (applied.workload, applied.container, applied.manifest, applied.files)
    result.warnings += [note for dest in launch.at_run_time if (note := launch.unknown(dest))]
    result.package_roots = tuple(str(r) for r in roots)
    result.python_chosen_by = tuple(dict.fromkeys(str(f) for f in chosen_by))
    findings = result.findings
    findings.extend(deprecated)
    findings.extend(draftchecks.check_algorithm_unknown(launch))
    if external is not None and index.external is None:
        findings.append(ignored_package(external))

    if not target.found:
        findings.append(
            _unavailable(target, "target", "the target's interface audit and every config check")
        )
    if draft is not None and not draft.found:
        findings.append(
            _unavailable(
                draft, "draft", "the draft's interface audit and the target-vs-draft checks"
            )
        )
    target_class = draft_class = None
    if target.found:
        assert target.config is not None
        index.use_model_config(target.config)
        target_class, unregistered = _architecture(target, "target", index)
        if unregistered:
            findings.append(unregistered)
    if algorithm is not None and draft_given is None:
        target_arch = first_architecture(target.config)
        findings.extend(draftchecks.check_draft_missing(index, algorithm, target_arch))
        if target_class and draftchecks.target_is_draft(index, algorithm, target_arch):
            draft_class = draft_mode_class(index, target_arch, target_class)
    if draft is not None and draft.found:
        draft_class, unregistered = _architecture(draft, "draft", index)
        if unregistered:
            findings.append(unregistered)
        elif draft_class:
            draft_class = draft_mode_class(index, first_architecture(draft.config), draft_class)

    # The GPUs the server sees (`CUDA_VISIBLE_DEVICES`, `--gpus`, a Slurm step's, a pod's), not
    # the host's.
    pod = applied.gpus if applied is not None else None
    visible = visible_gpus(launch.program, {**started, **launch.env_additions}, pod)
    if visible is not None:
        result.gpus_seen = _gpus_seen(visible, gpu)
        gpu = seen_by(gpu, visible) if gpu is not None else None
    figures = (
        GpuFigures(gpu.bytes_per_gpu, gpu.source, gpu.free_bytes, gpu.free_source) if gpu else None
    )

    draft_config = draft.config if draft is not None else None

    def memory_and_attention() -> tuple[list[Finding], list[Finding]]:
        """One helper's work: the attention check reuses the memory stage's argument
        resolution (the tree's own defaults for the launch), so they share a process."""
        assert target.config is not None
        capability = gpu_arch.capability if gpu_arch is not None else None
        settled = resolved_fields(index, launch, target.config, env, draft_config, capability)
        memory = memory_findings(
            index, target, draft, algorithm, flags, figures, env, measured, settled
        )
        return memory, check_attention(index, launch, target.config, draft_config, gpu_arch, env)

    # Made meanwhile, in helpers where the index has them: they need nothing the audit and
    # the config checks compute (`TreeIndex.ahead`).
    later = index.ahead(memory_and_attention) if target.config is not None else None
    steps.trace_ahead(index, algorithm)
    if algorithm is not None and (target_class or draft_class):
        stage("interface audit")
        audited: AuditResult = audit(
            index, target_class, algorithm, draft_class, save=False
        )  # saved with the rest, below
        result.reports = audited.reports
        findings.extend(audited.findings)
        result.warnings.extend(audited.warnings)

    if target.config is not None:
        stage("config checks")
        findings.extend(configchecks.check_tp(target.config, tp, "target"))
        context = flags.number("--context-length")
        # A draft's findings rest on the launch being speculative, where that is not known.
        speculative = [n for n in [launch.unknown("speculative_algorithm")] if n is not None]
        findings.extend(
            resting_on(f, speculative, "as a speculative one") if f.role == "draft" else f
            for f in contextchecks.check_context_length(
                index,
                target.config,
                draft_config,
                int(context) if context is not None else None,
                env,
                contextchecks.context_rules(index),
            )
        )
        if draft_config is not None and algorithm is not None:
            findings.extend(
                draftchecks.draft_findings(
                    index,
                    algorithm,
                    draft_class,
                    target.config,
                    draft_config,
                    draft.path if draft else None,
                )
            )
            # The draft reads the target's hidden states where the tree's own `is_eagle()`
            # holds, and its auxiliary layers where `is_eagle3()` does.
            predicates = algorithm_facts(index).predicates
            if algorithm in predicates.get("is_eagle", ()):
                findings.extend(configchecks.check_hidden_size(target.config, draft_config))
            if algorithm in predicates.get("is_eagle3", ()):
                findings.extend(
                    auxlayers.aux_layer_findings(index, target_class, target.config, draft_config)
                )
            findings.extend(configchecks.check_tp(draft_config, tp, "draft"))
        stage("memory")
        assert later is not None
        memory, attention = index.join(later)
        findings.extend(memory)
        stage("attention")
        findings.extend(attention)
        stage("nodes")
        findings.extend(check_multinode(index, launch, specs, target.config, env, algorithm))
        count = gpu.count if gpu else (visible.count if visible else None)
        findings.extend(
            check_gpu_count(
                index, launch, specs, count, algorithm, _seen_as(result.gpus_seen, count)
            )
        )
    pp = int(flags.number("--pp-size", "--pipeline-parallel-size") or 1)
    loaded = _loaded_per_gpu(target, draft, tp * max(pp, 1))
    stage("start-up order")
    findings = steps.assign(index, algorithm, findings, loaded)
    index.save()
    result.findings = sort_findings(findings)
    return result


def _gpus_seen(visible: Visible, host: GpuMemory | None) -> dict[str, Any]:
    """What the report and the JSON say of the GPUs a launch narrows itself to: how many (at
    most, where NVML did not name which), which of this host's (NVML's numbers), and why."""
    picked = picked_gpus(host.gpus, visible) if host is not None else None
    mine = host is None or host.count is None or visible.remote  # a Slurm step's: its own
    bound = visible.count if mine or host is None else min(host.count or 0, visible.count)
    return {
        "count": len(picked) if picked is not None else bound,
        "exact": picked is not None,
        "nvml_indices": [g.index for g in picked] if picked is not None else None,
        "by": visible.describe(),
    }


def _seen_as(seen: dict[str, Any] | None, count: int | None) -> str | None:
    """How the GPU count check names the GPUs it counted where the launch narrows them
    ("it sees 2 GPUs (CUDA_VISIBLE_DEVICES=0,1)"); None: the host's, as NVML counted them."""
    if seen is None or count is None:
        return None
    bound = "" if seen["exact"] else "at most "
    return f"it sees {bound}{count} GPU{'s' if count != 1 else ''} ({seen['by']})"


def _with_class_defaults(
    index: TreeIndex, roots: Sequence[Path], source: ModelSource
) -> ModelSource:
    """The model's config as transformers builds it where it leaves a key to its config
    class (`models/classdefaults.py`); a model type the tree registers a class of its own
    for (`_CONFIG_REGISTRY`) keeps config.json as it is, unless that class is transformers'
    under another name."""
    if source.config is None:
        return source
    supplied = with_class_defaults(
        source.config,
        roots,
        lambda model_type: bool(model_objects(index, {"model_type": model_type}).qualname),
        lambda model_type: model_objects(index, {"model_type": model_type}).reuses or None,
    )
    if not supplied.keys:
        return source
    return replace(
        source,
        config=supplied.config,
        class_defaults=supplied.keys,
        class_defaults_from=supplied.read_from,
    )


def _loaded_per_gpu(
    target: ModelSource, draft: ModelSource | None, gpus: int
) -> dict[str, int | None]:
    """What each weight load puts on one GPU (over --tp x --pp): what a crash after it cost."""
    sizes: dict[str, int | None] = {}
    for role, source in (("target", target), ("draft", draft)):
        total = configchecks.weights_bytes(source.path)[0] if source is not None else None
        sizes[role] = total // gpus if total is not None else None
    return sizes
