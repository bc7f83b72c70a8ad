"""The attention check where a flag it reads is set when the launch runs.

`bash -c '... --attention-backend $B'`, a pod's `valueFrom`: the engine reads the value as
unknown (`resolution.launch_values`), so the tree's rules that read it stay undecided and none
is an error on a guess. What can still be said is said: the rules left undecided, and each
value the tree lists for the flag (for the backend, those it lists for NVIDIA GPUs; for
`--kv-cache-dtype`, its `choices=`) run through the same resolution and factories in its
place, so the user learns which values of `$B` this SGLang accepts for this model on this GPU
and which it refuses (and where), before a pod is scheduled. Where it refuses every one, the
launch fails whatever the variable holds: that is an error, as the memory check keeps one
(`memory/unknowns.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from eaglebug.checks.args import resolution
from eaglebug.checks.args.flagchoices import flag_choices
from eaglebug.checks.args.resolution import ATTENTION_FIELDS
from eaglebug.checks.args.world import Models
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding, resting_on
from eaglebug.checks.contract.fixes import AdviceFix
from eaglebug.checks.contract.limits import MATRIX_SOURCE_BYTES, RUN_TIME_TRIES
from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.launch.gpuarch import GpuArch
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import OneOf, Raised, Top
from eaglebug.checks.source.index import TreeIndex

# What the verdict of an accepted launch reads besides the attention fields: whether it is
# speculative (its top-k and its draft's backend are said only then).
VERDICT_READS = ATTENTION_FIELDS | {"speculative_algorithm"}
_SHOWN = 6  # backends named in a message, each list (the evidence has them all)
_ALL_TRIES = 48  # values tried in all, over the launch's run-time flags, the backend's first
_BACKEND_FLAGS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")


def where(raised: Raised) -> str:
    return f"{raised.rel.rsplit('/', 1)[-1]}:{raised.line}"


@dataclass
class Tried:
    """Each listed value of one flag as the tree's rules take it for this launch."""

    accepted: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # value -> where, and when
    open: list[str] = field(default_factory=list)  # what decides it is not known here

    @property
    def all_refused(self) -> bool:
        return bool(self.refused) and not self.accepted and not self.open


def listed(index: TreeIndex, dest: str) -> tuple[str, ...]:
    """The values to try in place of an unknown flag: for a backend, those the tree lists for
    NVIDIA GPUs and registers a factory for (`choices=` lists AMD's and Intel's too, which no
    factory here would refuse); else the flag's `choices=` (none for a free text, nor past
    `RUN_TIME_TRIES`)."""
    if dest in _BACKEND_FLAGS:
        factories = resolution.registry(index)
        return tuple(b for b in resolution.nvidia_backends(index) if b in factories)
    spec = next((s for s in server_flags(index) if s.dest == dest), None)
    choices = flag_choices(index, spec) if spec is not None else ()
    return choices if len(choices) <= RUN_TIME_TRIES else ()


def each_value(
    index: TreeIndex,
    launch: LaunchSpec,
    dest: str,
    candidates: tuple[str, ...],
    gpu: GpuArch,
    models: Models,
) -> Tried:
    """Each of `candidates` (`listed`) in place of the unknown `dest`, the launch's other flags
    set when it runs left unknown: refused before the load (a definite raise reading an
    attention field or the flag), after it (the target's or the draft's factory), else
    accepted, as the check takes a launch that names it (a rule left undecided by what is
    read at load time refuses nothing); open where the run is cut short or leaves the
    backend unknown."""
    out = Tried()
    reads = ATTENTION_FIELDS | {dest}
    at_run_time = {k: v for k, v in launch.at_run_time.items() if k != dest}
    for value in candidates:
        given = replace(launch, values={**launch.values, dest: value}, at_run_time=at_run_time)
        values = resolution.launch_values(index, given)
        run = resolution.resolve(index, values, gpu.capability, models, keep=False)
        # Each value's run reads other factories' files: what their trees' tables hold goes
        # as the trees go (the matrix's way); else `$B` alone peaked at 225 MB.
        Source.of(index).let_go()
        if run is None or run.incomplete:
            out.open.append(value)
            continue
        before = [r for r in run.raised if r.definite and r.reads & reads]
        if before:
            out.refused[value] = f"before the load, {where(before[0])}"
        elif run.after_load:
            role, _, raised = run.after_load[0]
            out.refused[value] = f"the {role}'s factory, {where(raised)}"
        elif isinstance(run.values.get("attention_backend"), Top):
            out.open.append(value)
        else:
            out.accepted.append(value)
    return out


def undecided(
    index: TreeIndex,
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
    them too: 0.5.23's NVFP4 KV dtype picks trtllm_mha), and what each value the tree lists
    for such a flag would meet: an error where every one is refused."""
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
    tried: dict[str, Tried] = {}
    budget = _ALL_TRIES
    files, kept = index.files, index.files.kept_bytes
    try:
        for dest in sorted(dests, key=lambda d: d != "attention_backend"):
            candidates = listed(index, dest)
            if not candidates or len(candidates) > budget:  # seconds at most, bounded memory
                continue
            # Each backend's run reads its own factory's files: fewer trees kept meanwhile, as
            # the matrix does.
            if dest in _BACKEND_FLAGS:
                files.kept_bytes = min(kept, MATRIX_SOURCE_BYTES)
            tried[dest] = each_value(index, launch, dest, candidates, gpu, models)
            files.kept_bytes = kept
            budget -= len(candidates)
    finally:
        files.kept_bytes = kept
    if "attention_backend" in tried:  # the backend's own keys, as the first version gave them
        found = tried["attention_backend"]
        details.update(accepted=found.accepted, refused=found.refused, open=found.open)
    details["tried"] = {launch.spelled.get(d, d): vars(found) for d, found in tried.items()}
    for dest, found in tried.items():
        option = launch.spelled.get(dest, dest)
        message += f"; {option}: {_said(found, gpu)}"
        if found.accepted and fix.text().startswith("preflight"):
            fix = AdviceFix(
                f"set {option} to one this SGLang accepts here: {_names(found.accepted)}"
            )
    if "attention_backend" not in dests:
        message += _chosen(run, dests, options)
        if rules:
            many = len(rules) != 1
            message += f"; {len(rules)} rule{'s' if many else ''} of the tree left undecided: "
            message += ", ".join(rules)
    # Whatever the variable holds, the launch fails: not a guess. Unless the check refused it
    # already, decided without the variable (before the load, or a factory after it): the
    # launch is refused whatever it holds, and said once.
    refusing = [d for d, found in tried.items() if found.all_refused]
    if refusing and not seen and not run.after_load:
        return [_every_value_refused(launch, refusing, tried, gpu, version, details, unknowns, run)]
    finding = Finding(
        id="config.attention_backend",
        severity="info",
        message=message,
        attribute="+".join(dests),
        fix=fix,
        evidence=ConfigEvidence.of(details, read_from=run.entry),
    )
    return [resting_on(finding, unknowns)]


def _every_value_refused(
    launch: LaunchSpec,
    refusing: list[str],
    tried: dict[str, Tried],
    gpu: GpuArch,
    version: str,
    details: dict[str, Any],
    unknowns: list[str],
    run: resolution.Resolution,
) -> Finding:
    dest = refusing[0]
    option, found = launch.spelled.get(dest, dest), tried[dest]
    where_refused = sorted({why.rsplit(", ", 1)[-1] for why in found.refused.values()})
    said = f"{option}: refused for each of its values ({', '.join(found.refused)})"
    evidence = ConfigEvidence.of(details, read_from=run.entry)
    # As a refusal of one value is: a warning where SGLang refuses it before anything loads,
    # an error where some value loads the weights first and then fails.
    loads_first = any(not why.startswith("before the load") for why in found.refused.values())
    return Finding(
        id="config.attention_backend",
        severity="error" if loads_first else "warning",
        message=f"{version} refuses this launch on {gpu.name} whatever {option} "
        f"{launch.at_run_time.get(dest, '')} holds: each value it lists is refused "
        f"({_names([f'{b} ({why})' for b, why in found.refused.items()])})",
        attribute="+".join(refusing),
        fix=AdviceFix(
            "change what the refusals read besides "
            f"{option} (see {', '.join(where_refused[:_SHOWN])}), then preflight again"
        ),
        evidence=replace(evidence, assumed=(*evidence.assumed, *unknowns, said)),
    )


def _chosen(run: resolution.Resolution, dests: list[str], options: str) -> str:
    """The backend the tree picks, where the flags set at run time choose among a few
    (`--device $D`: ascend on NPUs, flashinfer on CUDA, ...): which, and what chooses."""
    backend = run.values.get("attention_backend")
    if not isinstance(backend, OneOf) or not backend.reads & set(dests):
        return ""
    names = sorted(str(v) for v in backend.values if v is not None)
    if None in backend.values:  # not set by the resolution on some path: auto's, later
        names.append("none set here")
    said = " or ".join(names) if len(names) <= 3 else f"one of {_names(names)}"
    return f"; its backend is {said}, as {options} goes"


def _said(found: Tried, gpu: GpuArch) -> str:
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
