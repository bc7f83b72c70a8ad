"""At which step of the start-up each finding would stop SGLang, and what it costs by then.

A finding points into the tree: an interface finding at the call sites that touch the model,
a config finding at the line where the tree performs its check (`read_from`). Each such place
is looked up in the tree's start-up trace (`startup.py`): the milestone it runs in, or the one
it runs just before, and which weight loads have finished by then. The front ends list the
findings in that order, so the first thing SGLang would hit comes first, and say what a crash
there costs: the weights it would have loaded for nothing.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding, Step
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import algorithm_facts
from eaglebug.checks.startup.trace import LABELS, Span, StartupTrace
from eaglebug.checks.startup.walk import startup_trace

_GIB = 1024**3


@dataclass(frozen=True)
class Place:
    """A line of the tree a finding points at, with the role it runs in."""

    file: str
    line: int
    role: str | None


def trace_for(index: TreeIndex, algorithm: str | None) -> StartupTrace | None:
    if algorithm is None:
        algorithm = "NONE"
    facts = algorithm_facts(index)
    workers = tuple(sorted(k for k, members in facts.workers.items() if algorithm in members))
    trace = startup_trace(index, algorithm, workers)
    return trace if trace.spans else None


def trace_ahead(index: TreeIndex, algorithm: str | None) -> None:
    """Start the start-up walk now, in a helper where the index has one (`TreeIndex.ahead`):
    it needs nothing the other checks compute, and is the longest single part of an audit."""
    key = f"startup:{algorithm or 'NONE'}"
    index.answers_ahead((key,), lambda: trace_for(index, algorithm))


def places(finding: Finding) -> list[Place]:
    """Where in the tree the finding's failure happens."""
    found: list[Place] = []
    if finding.interface is not None:
        found += [Place(s.file, s.line, s.role) for s in finding.interface.sites]
    if not found:
        found += [Place(s.file, s.line, finding.role) for s in finding.call_sites]
    if isinstance(finding.evidence, ConfigEvidence) and finding.evidence.read_from:
        file, _, line = finding.evidence.read_from.rpartition(":")
        if line.isdigit():
            found.append(Place(file, int(line), finding.role))
    return found


def step_at(index: TreeIndex, trace: StartupTrace, place: Place) -> Step | None:
    """The step a line runs in: as the walk ran it in the place's role, else where that role
    first names its function; then the same in any role."""
    role = place.role if place.role in ("target", "draft") else None
    tries = [role, None] if role else [None]
    for wanted in tries:
        counter = trace.counter_at(place.file, place.line, wanted)
        if counter is None:
            counter = _first_named(index, trace, place, wanted)
        if counter is not None:
            return _step(trace, counter, place)
    return None


def _first_named(
    index: TreeIndex, trace: StartupTrace, place: Place, role: str | None
) -> int | None:
    """Where a line the walk did not run first runs. In a file the walk went through, a
    function it did not enter runs once something calls it by name (else not at start-up);
    in a file it never entered (a model config, a hook), the code runs once its class or
    function is first named: constructed, called, or handed on."""
    names = [n for n in _enclosing(index, place.file, place.line)[:2] if n != "__init__"]
    if not names:
        return None
    found = {n: c for n in names if (c := trace.named(n, role)) is not None}
    walked = any(role in (None, v.role) for v in trace.visits.get(place.file, ()))
    if walked and names[-1] not in found:
        return None
    return max(found.values()) if found else None


def _cached_step(index: TreeIndex, trace: StartupTrace, place: Place) -> Step | None:
    """A tree answer: a warm run finds the step without parsing the file of the place."""
    key = f"step:{trace.algorithm}:{place.file}:{place.line}:{place.role}"
    return index.answer(key, Step | None, lambda: step_at(index, trace, place))


def _step(trace: StartupTrace, counter: int, place: Place) -> Step:
    spans = trace.spans
    within = next((s for s in spans if s.start <= counter <= s.end), None)
    span: Span | None = within or min(
        (s for s in spans if s.start > counter), key=lambda s: s.start, default=None
    )
    loads = tuple(
        dict.fromkeys(
            s.name.removesuffix("_load")
            for s in spans
            if s.name.endswith("_load") and s.end < counter
        )
    )
    if span is None:  # after every milestone: the server is up
        return Step("serving", LABELS["serving"], place.role or "target", counter, True,
                    f"{place.file}:{place.line}", loads)  # fmt: skip
    return Step(span.name, span.label, span.role, counter, within is not None, span.site, loads)


def _enclosing(index: TreeIndex, file: str, line: int) -> list[str]:
    """The names that lead to `line`, outermost first: its class, then its method (or its
    function)."""
    parsed = index.parse_file(file)
    if parsed is None:
        return []
    names: list[str] = []
    node: ast.AST = parsed.tree
    while True:
        inner = next(
            (
                child
                for child in ast.iter_child_nodes(node)
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and child.lineno <= line <= (child.end_lineno or child.lineno)
            ),
            None,
        )
        if inner is None:
            return names
        names.append(inner.name)
        node = inner


def assign(
    index: TreeIndex,
    algorithm: str | None,
    findings: Sequence[Finding],
    loaded_bytes: Mapping[str, int | None] | None = None,
) -> list[Finding]:
    """The findings with their start-up step (the earliest of their places), and the weight
    bytes per GPU loaded by then where `loaded_bytes` (per role) knows them."""
    trace = trace_for(index, algorithm)
    if trace is None:
        return list(findings)
    out = []
    for finding in findings:
        step = finding.step
        if step is None:
            steps = [s for p in places(finding) if (s := _cached_step(index, trace, p)) is not None]
            step = min(steps, key=lambda s: s.order, default=None)
        if step is not None and loaded_bytes:
            sizes = [loaded_bytes.get(role) for role in step.after]
            if step.after and all(size is not None for size in sizes):
                step = dataclasses.replace(step, loaded_bytes_per_gpu=sum(s or 0 for s in sizes))
        out.append(dataclasses.replace(finding, step=step) if step else finding)
    return out


def cost_text(step: Step) -> str:
    """`after the target and draft loads (152.3 GiB per GPU)`, or what comes before any."""
    if not step.after:
        return "before any weights are loaded"
    loads = " and ".join(step.after)
    text = f"after the {loads} weight load{'s' if len(step.after) > 1 else ''}"
    if step.loaded_bytes_per_gpu:
        text += f" ({step.loaded_bytes_per_gpu / _GIB:.1f} GiB per GPU)"
    return text


def step_text(step: Step) -> str:
    where = step.label if step.within else f"before {step.label}"
    role = f" ({step.role})" if step.role == "draft" else ""
    return f"{where}{role}, {cost_text(step)}"


def steps_json(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    return [f.step.to_json() for f in findings if f.step is not None]
