"""The attention check where a flag it reads is set when the launch runs.

`bash -c '... --attention-backend $B'`, a pod's `valueFrom`: the engine reads the value as
unknown (`resolution.launch_values`), so the tree's rules that read it stay undecided and none
is an error on a guess. What can still be said is said: the rules left undecided, and, where
the backend itself is the unknown, each backend the tree lists for NVIDIA GPUs run through the
same resolution and factories, so the user learns which values of `$B` this SGLang accepts for
this model on this GPU and which it refuses (and where), before a pod is scheduled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.args import resolution
from eaglebug.checks.args.resolution import ATTENTION_FIELDS
from eaglebug.checks.args.world import Models
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding, resting_on
from eaglebug.checks.contract.fixes import AdviceFix
from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.launch.gpuarch import GpuArch
from eaglebug.checks.pyeval.values import OneOf, Raised, Top
from eaglebug.checks.source.index import TreeIndex

# What the verdict of an accepted launch reads besides the attention fields: whether it is
# speculative (its top-k and its draft's backend are said only then).
VERDICT_READS = ATTENTION_FIELDS | {"speculative_algorithm"}
_SHOWN = 6  # backends named in a message, each list (the evidence has them all)


def where(raised: Raised) -> str:
    return f"{raised.rel.rsplit('/', 1)[-1]}:{raised.line}"


@dataclass
class Backends:
    """Each listed backend as the tree's rules take it for this launch."""

    accepted: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # backend -> where, and when
    open: list[str] = field(default_factory=list)  # what decides it is not known here


def each_backend(
    index: TreeIndex, values: dict[str, Any], gpu: GpuArch, models: Models
) -> Backends:
    """Every backend the tree lists for NVIDIA GPUs (and registers a factory for) in place of
    the unknown `--attention-backend`: refused before the load (a definite raise reading an
    attention field), after it (the target's or the draft's factory), else accepted, as the
    check takes a launch that names it (a rule left undecided by what is read at load time
    refuses nothing); open where the run is cut short or leaves the backend unknown."""
    out = Backends()
    factories = resolution.registry(index)
    for backend in resolution.nvidia_backends(index):
        if backend not in factories:
            continue
        run = resolution.resolve(
            index, {**values, "attention_backend": backend}, gpu.capability, models
        )
        if run is None or run.incomplete:
            out.open.append(backend)
            continue
        before = [r for r in run.raised if r.definite and r.reads & ATTENTION_FIELDS]
        if before:
            out.refused[backend] = f"before the load, {where(before[0])}"
        elif run.after_load:
            role, _, raised = run.after_load[0]
            out.refused[backend] = f"the {role}'s factory, {where(raised)}"
        elif isinstance(run.values.get("attention_backend"), Top):
            out.open.append(backend)
        else:
            out.accepted.append(backend)
    return out


def undecided(
    index: TreeIndex,
    values: dict[str, Any],
    models: Models,
    gpu: GpuArch,
    run: resolution.Resolution,
    version: str,
    dests: list[str],
    launch: LaunchSpec,
    common: dict[str, Any],
    seen: set[tuple[str, int]],
) -> list[Finding]:
    """The one finding for attention rules that flags set when the launch runs leave
    undecided: each rule left undecided that reads a backend field (one the tree derives from
    them too: 0.5.23's NVFP4 KV dtype picks trtllm_mha), and, for `--attention-backend $B`,
    what each backend the tree lists would meet."""
    unknowns = [note for dest in dests if (note := launch.unknown(dest))]
    rules = {
        where(r): r
        for r in run.raised
        if not r.definite and r.reads & ATTENTION_FIELDS and (r.rel, r.line) not in seen
    }
    options = ", ".join(launch.spelled.get(d, d) for d in dests)
    message = (
        f"{version}'s attention rules were not decided for {options}, set when the launch runs"
    )
    details: dict[str, Any] = {**common, "undecided": sorted(rules)}
    fix = AdviceFix(f"preflight the launch with the value of {options} written in it")
    if "attention_backend" in dests:
        found = each_backend(index, values, gpu, models)
        details.update(accepted=found.accepted, refused=found.refused, open=found.open)
        message += "; " + _said(found, gpu)
        if found.accepted:
            option = launch.spelled.get("attention_backend", "--attention-backend")
            fix = AdviceFix(
                f"set {option} to one this SGLang accepts here: {_names(found.accepted)}"
            )
    else:
        message += _chosen(run, dests, options)
    if "attention_backend" not in dests and rules:
        many = len(rules) != 1
        message += f"; {len(rules)} rule{'s' if many else ''} of the tree left undecided: "
        message += ", ".join(rules)
    finding = Finding(
        id="config.attention_backend",
        severity="info",
        message=message,
        attribute="+".join(dests),
        fix=fix,
        evidence=ConfigEvidence.of(details, read_from=run.entry),
    )
    return [resting_on(finding, unknowns)]


def _chosen(run: resolution.Resolution, dests: list[str], options: str) -> str:
    """The backend the tree picks, where the flags set at run time choose among a few
    (`--device $D`: ascend on NPUs, flashinfer on CUDA, ...): which, and what chooses."""
    backend = run.values.get("attention_backend")
    if not isinstance(backend, OneOf) or not backend.reads & set(dests):
        return ""
    names = sorted(str(v) for v in backend.values if v is not None)
    return f"; its backend is one of {_names(names)}, as {options} goes"


def _said(found: Backends, gpu: GpuArch) -> str:
    parts = []
    if found.accepted:
        parts.append(f"accepted on {gpu.name}: {_names(found.accepted)}")
    if found.refused:
        refused = [f"{b} ({why})" for b, why in found.refused.items()]
        parts.append("refused: " + _names(refused))
    if found.open:
        parts.append(f"not decided here: {_names(found.open)}")
    return "; ".join(parts) if parts else "this tree lists no NVIDIA backend to try"


def _names(names: list[str]) -> str:
    more = len(names) - _SHOWN
    return ", ".join(names[:_SHOWN]) + (f" and {more} more (--json lists them)" if more > 0 else "")
