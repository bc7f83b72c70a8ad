"""`config.attention_backend`: what the audited tree's attention rules say of one launch.

`resolution.resolve` runs the tree's argument resolution and backend factories; this turns what
they refused into findings. A refusal during argument resolution costs seconds at launch, so it
is a warning; a backend factory that fails runs after the model is loaded, so it is an error.
Each fix is the launch change that the same tree accepts: the candidates (backends the tree's
own message names, top-k 1, page size 1, each registered backend) are run through the tree again
and the first that clears the refusal is offered.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from eaglebug.checks.args import resolution
from eaglebug.checks.args.resolution import ATTENTION_FIELDS
from eaglebug.checks.args.undecided import VERDICT_READS, undecided, where
from eaglebug.checks.args.world import Models, declared_env, probes
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import AdviceFix, Choice, FlagFix
from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.launch.gpuarch import GpuArch, parse_gpu_arch
from eaglebug.checks.pyeval.values import OneOf, Raised, Top, reads_of
from eaglebug.checks.source.index import TreeIndex

_FLAG_OF = {
    "attention_backend": "--attention-backend",
    "speculative_eagle_topk": "--speculative-eagle-topk",
    "page_size": "--page-size",
    "speculative_draft_attention_backend": "--speculative-draft-attention-backend",
}
# The findings for one launch on one GPU are a tree answer (the launch, configs, GPU and the
# environment variables the tree declares are the key); the newest few launches are kept.
__all__ = ["ATTENTION_FIELDS", "GpuArch", "check_attention", "parse_gpu_arch"]
_ANSWER = "attention:"
_KEEP_ANSWERS = 16
# What a finding adds where no GPU is in sight (the rules that read the architecture are open).
_UNKNOWN_GPU = (
    "(the GPU's architecture is unknown: no GPU through NVML here and no --gpu-arch; pass "
    "--gpu-arch sm90|sm100|... to decide what reads it)"
)
# Each candidate is a run of the tree's resolution (~0.1-0.5 s): how many backends to try.
_MAX_BACKEND_TRIES = 4


def check_attention(
    index: TreeIndex,
    launch: LaunchSpec,
    target_config: Mapping[str, Any] | None,
    draft_config: Mapping[str, Any] | None,
    gpu: GpuArch | None,
    environ: Mapping[str, str] | None = None,
) -> list[Finding]:
    """The attention findings of one launch on one GPU architecture (`environ`: what the
    server's process would see). Kept as a tree answer: a warm run reads it without running
    the tree again."""
    if target_config is None or not resolution.has_resolution(index):
        return []  # no argument resolution in this tree: no rules to run
    if gpu is None:
        # No GPU in sight: the rules still run, the capability unknown. A refusal on a path
        # that does not read it is as definite as on any GPU; those that do are named.
        gpu = GpuArch(None, "no GPU through NVML here and no --gpu-arch")
    env = declared_env(index, environ)
    subject = [launch.values, launch.at_run_time, target_config, draft_config, gpu.capability]
    subject += [gpu.source, env]
    return index.answer_for(
        _ANSWER,
        subject,
        list[Finding],
        lambda: _check(index, launch, target_config, draft_config, gpu, env),
        _KEEP_ANSWERS,
    )


def _check(
    index: TreeIndex,
    launch: LaunchSpec,
    target_config: Mapping[str, Any],
    draft_config: Mapping[str, Any] | None,
    gpu: GpuArch,
    environ: Mapping[str, str],
) -> list[Finding]:
    values = resolution.launch_values(index, launch)
    models = Models.of_launch(target_config, draft_config, environ)
    run = resolution.resolve(index, values, gpu.capability, models)
    if run is None:
        return []
    if run.incomplete:  # what was read is partial: no verdict rests on it
        return [
            Finding(
                id="config.attention_backend",
                severity="info",
                message="attention-backend check incomplete: the tree's argument resolution "
                f"was not read to its end ({run.incomplete}); nothing is decided from it",
                evidence=ConfigEvidence.of({"incomplete": run.incomplete}, read_from=run.entry),
            )
        ]
    version = f"SGLang {index.tree.version}" if index.tree.version else "this SGLang tree"
    findings: list[Finding] = []
    common = _common(run, gpu)
    seen: set[tuple[str, int]] = set()
    for raised in run.raised:
        if (
            not raised.definite
            or not raised.reads & ATTENTION_FIELDS
            or (raised.rel, raised.line) in seen
        ):
            continue
        seen.add((raised.rel, raised.line))
        fix = _fix_before_load(index, values, gpu, models, raised)
        findings.append(
            Finding(
                id="config.attention_backend",
                severity="warning",
                message=f"{version} refuses this launch while checking its arguments, before "
                f"anything loads ({where(raised)})"
                + ("" if raised.message else f": {raised.condition}")
                + _auto_note(launch, run, raised),
                attribute="+".join(sorted(raised.reads & ATTENTION_FIELDS)),
                fix=fix,
                evidence=_evidence(raised, common),
            )
        )
    target_failing = {(b, r.rel, r.line) for role, b, r in run.after_load if role == "target"}
    for role, backend, raised in run.after_load:
        inherited = launch.get("speculative_draft_attention_backend") is None
        if role == "draft" and inherited and (backend, raised.rel, raised.line) in target_failing:
            continue  # the draft inherits the target's backend: the target's fix is the draft's
        flag = (
            "--attention-backend" if role == "target" else "--speculative-draft-attention-backend"
        )
        found = _fix_after_load(index, run, gpu, models, role, backend, raised.message)
        evidence = _evidence(
            raised, {**common, "backend": backend, "draft_backend_from": run.draft_backend_from}
        )
        findings.append(
            Finding(
                id="config.attention_backend",
                severity="error",
                message=f"the {role}'s attention backend {backend} fails after the {role} is "
                f"loaded ({where(raised)})" + ("" if raised.message else f": {raised.condition}"),
                role=role,
                attribute="speculative_draft_attention_backend"
                if role == "draft"
                else "attention_backend",
                fix=found or AdviceFix(f"pick {flag} from the backends this SGLang registers"),
                evidence=evidence,
            )
        )
    needs = _needs_gpu(index, values, models, run, seen) if gpu.capability is None else []
    # The flags set when the launch runs that the rules read, or that chose the backend or
    # page size (`--device $D`; the engine read them as unknown): what was decided holds
    # whatever they are; the rest is said undecided.
    read = set().union(
        *(r.reads for r in run.raised if not r.definite and r.reads & ATTENTION_FIELDS)
    )
    read |= reads_of(*(run.values.get(k) for k in ATTENTION_FIELDS), run.draft_backend)
    dests = sorted(d for d in launch.at_run_time if d in VERDICT_READS or d in read)
    if dests:
        said = undecided(index, models, gpu, run, version, dests, launch, common, seen)
        return findings + needs + said
    if not findings and not needs:
        findings.extend(_accepted(launch, run, gpu, common))
        if gpu.capability is None and not findings:
            findings.append(
                Finding(
                    id="config.attention_backend",
                    severity="info",
                    message=f"{version}'s attention rules refuse nothing here {_UNKNOWN_GPU}",
                    evidence=ConfigEvidence.of(common, read_from=run.entry),
                )
            )
    return findings + needs


def _needs_gpu(
    index: TreeIndex,
    values: dict[str, Any],
    models: Models,
    run: resolution.Resolution,
    seen: set[tuple[str, int]],
) -> list[Finding]:
    """The refusals left undecided with the GPU unknown, run again on each architecture the
    tree's own probes name (`device_capability_majors`): those that refuse on some and not on
    others are the rules that need the architecture, each named with where it refuses. None is
    raised to a warning on a guess."""
    open_rules = {
        (r.rel, r.line): r
        for r in run.raised
        if not r.definite and r.reads & ATTENTION_FIELDS and (r.rel, r.line) not in seen
    }
    if not open_rules:
        return []
    majors = sorted({major for probe in probes(index) for major in probe.majors})
    refused_on: dict[tuple[str, int], list[str]] = {where: [] for where in open_rules}
    for major in majors:
        again = resolution.resolve(index, values, (major, 0), models)
        if again is None:
            continue
        for r in again.raised:
            if r.definite and (r.rel, r.line) in refused_on:
                refused_on[(r.rel, r.line)].append(GpuArch((major, 0), "").name)
    needs = {where: archs for where, archs in refused_on.items() if archs}
    if not needs:
        return []
    said = [f"{where(open_rules[w])} refuses it on {', '.join(a)}" for w, a in needs.items()]
    return [
        Finding(
            id="config.attention_backend",
            severity="info",
            message=f"{len(needs)} attention rule(s) of this tree depend on the GPU's "
            "architecture, unknown here (no GPU through NVML, no --gpu-arch): "
            + "; ".join(said)
            + ". The rules that do not read it were checked; pass --gpu-arch sm90|sm100|... "
            "to decide these",
            attribute="+".join(
                sorted(set().union(*(open_rules[w].reads for w in needs)) & ATTENTION_FIELDS)
            ),
            evidence=ConfigEvidence.of(
                {
                    "gpu_arch": None,
                    "needs_gpu_arch": {f"{w[0]}:{w[1]}": a for w, a in needs.items()},
                },
                read_from=f"{next(iter(needs))[0]}:{next(iter(needs))[1]}",
            ),
        )
    ]


def _accepted(
    launch: LaunchSpec, run: resolution.Resolution, gpu: GpuArch, common: dict[str, Any]
) -> list[Finding]:
    """Nothing refused: the backend the launch will run (auto's pick, and where the tree made
    it) and the draft's (and where it comes from), the figures to check a log against."""
    backend = run.values.get("attention_backend")
    given = launch.get("attention_backend") is not None
    where = run.writes.get("attention_backend")
    if isinstance(backend, Top) or (where is None and not given):
        return []
    picked = (
        " or ".join(sorted(str(v) for v in backend.values)) + " (the tree's choice depends on "
        "model facts read at load time)"
        if isinstance(backend, OneOf)
        else str(backend)
    )
    spec = run.values.get("speculative_algorithm") is not None
    said = f"auto picks the {picked}" if not given else f"the {picked}"
    said += f" attention backend on {gpu.name} (page size {_or(common['page_size'])}"
    said += f", speculative top-k {_or(common['speculative_eagle_topk'])})" if spec else ")"
    draft = common.get("draft_backend")
    if spec and draft is not None:
        said += f"; the draft runs {_or(draft)}"
        if run.draft_backend_from:
            said += f" ({run.draft_backend_from.rsplit('/', 1)[-1]})"
    read_from = f"{where.rel}:{where.line}" if where is not None else run.draft_backend_from
    return [
        Finding(
            id="config.attention_backend",
            severity="info",
            message=f"{said}; SGLang's attention rules accept the launch"
            + (f" {_UNKNOWN_GPU}" if gpu.capability is None else ""),
            attribute="attention_backend",
            evidence=ConfigEvidence.of(common, read_from=read_from),
        )
    ]


def _auto_note(launch: LaunchSpec, run: resolution.Resolution, raised: Raised) -> str:
    """When the refused backend is one the launch did not ask for: where the tree chose it."""
    if launch.get("attention_backend") is not None or "attention_backend" not in raised.reads:
        return ""
    where = run.writes.get("attention_backend")
    backend = run.values.get("attention_backend")
    if where is None or not isinstance(backend, str):
        return ""
    return f"; {backend} is auto's own pick for this model and GPU ({where.rel.rsplit('/', 1)[-1]}:{where.line})"


def _or(value: Any) -> str:
    """A value as a message says it: alternatives joined with `or`."""
    return " or ".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _shown(value: Any) -> Any:
    if isinstance(value, Top):
        return None
    if isinstance(value, OneOf):  # as JSON holds each (None is null, not "None"), in one order
        shown = [
            v if v is None or isinstance(v, (bool, int, float, str)) else str(v)
            for v in value.values
        ]
        return sorted(shown, key=_order)
    return value


def _order(value: Any) -> tuple[int, float, str]:
    """None first, then numbers by size, then text: page sizes read 1, 64, 128."""
    if value is None:
        return (0, 0.0, "")
    if isinstance(value, (int, float)):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def _common(run: resolution.Resolution, gpu: GpuArch) -> dict[str, Any]:
    out: dict[str, Any] = {k: _shown(run.values.get(k)) for k in sorted(ATTENTION_FIELDS)}
    out["gpu_arch"] = gpu.name
    out["gpu_arch_from"] = gpu.source
    out["draft_backend"] = _shown(run.draft_backend)
    return out


def _evidence(raised: Raised, values: dict[str, Any]) -> ConfigEvidence:
    return ConfigEvidence.of(
        {**values, "condition": raised.condition, "raises": raised.kind},
        read_from=f"{raised.rel}:{raised.line}",
        sglang=raised.message,
    )


def _still(run: resolution.Resolution | None, raised: Raised) -> bool:
    """Does the changed launch still fail (there, or anywhere else in these rules)?"""
    if run is None:
        return True
    before = any(
        r.definite and r.reads & ATTENTION_FIELDS
        for r in run.raised
        if (r.rel, r.line) != (raised.rel, raised.line)
    )
    again = any(r.definite and (r.rel, r.line) == (raised.rel, raised.line) for r in run.raised)
    return again or before or bool(run.after_load)


def _named(message: str | None, backends: list[str]) -> list[str]:
    """The backends SGLang's message names, in the order it names them."""
    if not message:
        return []
    places = {b: re.search(rf"(?<![\w-]){re.escape(b)}(?![\w-])", message) for b in backends}
    return sorted((b for b, m in places.items() if m), key=lambda b: places[b].start())  # type: ignore[union-attr]


def _fix_before_load(
    index: TreeIndex, values: dict[str, Any], gpu: GpuArch, models: Models, raised: Raised
) -> Choice | FlagFix | AdviceFix:
    registered = [b for b in resolution.nvidia_backends(index) if b in resolution.registry(index)]
    named = _named(raised.message, registered)
    candidates: list[tuple[str, Any]] = [("attention_backend", b) for b in named]
    if "speculative_eagle_topk" in raised.reads:
        candidates.append(("speculative_eagle_topk", 1))
    if "page_size" in raised.reads:
        candidates.append(("page_size", 1))
    if not named and "attention_backend" in raised.reads:  # a gate that names no way out
        auto = resolution.auto_backend(index, values, gpu.capability, models, "target")
        tried = {values.get("attention_backend")}
        ordered = dict.fromkeys([*([auto] if auto else []), *registered])
        candidates += [("attention_backend", b) for b in ordered if b not in tried][
            :_MAX_BACKEND_TRIES
        ]
    options: list[FlagFix] = []
    for field, value in candidates:
        if field not in _FLAG_OF or values.get(field) == value:
            continue
        changed = dict(values)
        changed[field] = value
        if field == "speculative_eagle_topk" and changed.get("speculative_num_steps") is None:
            continue  # SGLang picks steps, top-k and draft tokens together; advice below
        if not _still(resolution.resolve(index, changed, gpu.capability, models), raised):
            options.append(
                FlagFix(
                    _FLAG_OF[field],
                    str(value),
                    f"the same SGLang accepts {_FLAG_OF[field]} {value} here",
                )
            )
        if len(options) == 3:
            break
    if not options:
        return AdviceFix(f"change what the rule tests: {raised.condition}")
    return options[0] if len(options) == 1 else Choice(tuple(options))


def _fix_after_load(
    index: TreeIndex,
    run: resolution.Resolution,
    gpu: GpuArch,
    models: Models,
    role: str,
    failing: str,
    message: str | None,
) -> FlagFix | None:
    """The first backend whose factory accepts this role's model on this GPU: those SGLang's
    message names first, then what `auto` picks for the role's model, then the tree's list."""
    if resolution.entry(index) is None:
        return None
    flag = "--speculative-draft-attention-backend" if role == "draft" else "--attention-backend"
    if not any(flag in spec.options for spec in server_flags(index)):
        return None  # this release has no such flag: the advice says what to pick instead
    factories = resolution.registry(index)
    auto = resolution.auto_backend(index, dict(run.values), gpu.capability, models, role)
    listed = resolution.nvidia_backends(index)
    named = _named(message, list(listed))
    for name in dict.fromkeys([*named, *([auto] if auto else []), *listed]):
        ref = factories.get(name)
        if name == failing or ref is None:
            continue
        refused = resolution.factory_raises(index, run.values, gpu.capability, models, ref, role)
        node = ref.node
        if not refused and node is not None and not isinstance(node, ast.Lambda) and node.body:
            why = (
                "what SGLang's own message suggests"
                if name in named
                else f"what auto picks for the {role}'s model on {gpu.name}"
                if name == auto
                else f"its factory in {ref.rel.rsplit('/', 1)[-1]} accepts the {role} on {gpu.name}"
            )
            if role == "draft":  # what the flag does, where the tree reads it
                why += f"; the draft runner builds it instead of the target's {failing}" + (
                    f" ({run.draft_backend_from})" if run.draft_backend_from else ""
                )
            return FlagFix(flag, name, why)
    return None
