"""Every use of a runner's model that the runtime reaches, across calls and modules.

A module scan (`reach/consumers.py`) finds the uses of seeds (a runner's model) where they are
taken, and the calls that pass a reference on. Here those calls are followed: each callee's
parameter gets a summary (its uses, and the calls it passes the reference on to), up to a few
calls deep, and every use is resolved with the role it was reached in and the conditions of
the call sites on the way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from eaglebug.checks.reach.conditions import ArgConds, Cond, Const, Origin, Seed, substitute
from eaglebug.checks.reach.consumers import (
    CONSUMERS,
    EXTRACTOR_NAME,
    MAX_CALL_DEPTH,
    Entry,
    bound_parameter,
    param_fact,
    scan_parameter,
)
from eaglebug.checks.reach.uses import CallEdge, ConsumerFacts, Use
from eaglebug.checks.source.facts import MISSING
from eaglebug.checks.source.files import Asked, SourceFiles
from eaglebug.checks.source.index import TreeIndex


@dataclass(frozen=True)
class ResolvedUse:
    """A use of a model reference with the role it was reached in and the call context."""

    use: Use
    file: str
    role: str  # target | draft | any
    context_conds: tuple[Cond, ...] = ()
    context_guards: tuple[str, ...] = ()
    via: tuple[str, ...] = ()  # call sites (file:line) through which the reference arrived
    origin_scope: str | None = None  # the function that took the reference, when passed on

    @property
    def conds(self) -> tuple[Cond, ...]:
        return self.context_conds + self.use.conds

    @property
    def guards(self) -> tuple[str, ...]:
        return self.context_guards + self.use.guards


@dataclass(frozen=True)
class _Pending:
    """A model reference passed into a call, waiting for its callee's parameter summary."""

    edge: CallEdge
    binding: int | str  # positional index or keyword
    role: str
    conds: tuple[Cond, ...]
    guards: tuple[str, ...]
    via: tuple[str, ...]
    origin_scope: str
    outer: ArgConds = dataclasses.field(default_factory=dict)  # the caller's own arguments


def origin_role(origin: Origin, context_role: str) -> str:
    """The role of a reference: a seed's own, or (for a parameter) the caller's."""
    return origin.role if isinstance(origin, Seed) else context_role


def consumers(index: TreeIndex) -> list[ResolvedUse]:
    """Every use of a runner's model that the runtime reaches (a tree answer)."""
    return index.answer("consumers", list[ResolvedUse], lambda: resolve_consumers(index.files))


def resolve_consumers(files: SourceFiles) -> list[ResolvedUse]:
    """Every use reached from a seed, in a stable order (candidate files in walk order)."""
    candidates = files.wanted_by(EXTRACTOR_NAME)
    files.parse_all(candidates)
    resolved: list[ResolvedUse] = []
    queue: list[_Pending] = []
    for rel in candidates:
        files.ensure_parsed(rel)
        facts = files.recall(rel, CONSUMERS)
        if facts is MISSING:
            continue
        for use in facts.uses:
            if isinstance(use.origin, Seed):
                resolved.append(ResolvedUse(use, rel, use.origin.role))
        for edge in facts.calls:
            for binding, origin in edge.bindings:
                if isinstance(origin, Seed):
                    where = (f"{rel}:{edge.line}",)
                    queue.append(
                        _Pending(
                            edge, binding, origin.role, edge.conds, edge.guards, where, edge.scope
                        )
                    )
    files.parse_all(*_calls_into(files, queue))  # parsed together, not one by one below
    seen: set[tuple[str, str, str, tuple[Cond, ...], frozenset[object]]] = set()
    while queue:
        item = queue.pop()
        target = _callee(files, item.edge.callee, item.binding)
        if target is None:
            continue
        callee_rel, qualname, param = target
        args = _arguments(files, callee_rel, qualname, item)
        key = (callee_rel, f"{qualname}:{param}", item.role, item.conds, frozenset(args.items()))
        if key in seen:
            continue
        seen.add(key)
        summary = _param_summary(files, callee_rel, qualname, param)
        if summary is None:
            continue
        for use in summary.uses:
            if args:
                use = dataclasses.replace(
                    use,
                    conds=tuple(substitute(c, args) for c in use.conds),
                    one_of=tuple((n, substitute(c, args)) for n, c in use.one_of),
                )
            resolved.append(
                ResolvedUse(
                    use, callee_rel, item.role, item.conds, item.guards, item.via, item.origin_scope
                )
            )
        if len(item.via) >= MAX_CALL_DEPTH:
            continue
        for nxt in summary.calls:
            for binding, _origin in nxt.bindings:
                queue.append(
                    _Pending(
                        nxt,
                        binding,
                        item.role,
                        item.conds + tuple(substitute(c, args) for c in nxt.conds),
                        item.guards + nxt.guards,
                        (*item.via, f"{callee_rel}:{nxt.line}"),
                        item.origin_scope,
                        args,
                    )
                )
    return resolved


def _arguments(files: SourceFiles, rel: str, qualname: str, item: _Pending) -> ArgConds:
    """What the call passes into the callee's other parameters, by name, decided as far as the
    caller's own arguments go: a model reference is truthy and never None."""
    facts = files.module_of(rel)[0]
    module = files.module(facts)
    if module is None:
        return {}
    params = files.entries[rel].param_names
    passed: list[tuple[int | str, Cond, Cond]] = [
        (b, Const(True), Const(False)) for b, _origin in item.edge.bindings if b != item.binding
    ]
    passed += [
        (b, substitute(t, item.outer), substitute(n, item.outer)) for b, t, n in item.edge.args
    ]
    out: ArgConds = {}
    for binding, truth, none in passed:
        bound = bound_parameter(qualname, binding, module.classes, params)
        if bound is not None and bound[0] == qualname:
            out[bound[1]] = (truth, none)
    return out


def _calls_into(files: SourceFiles, queue: list[_Pending]) -> tuple[list[str], Asked]:
    """The files the first calls go to (each is parsed by `_callee`), and the calls into each
    (whose parameter summaries `_param_summary` will ask for)."""
    found: dict[str, list[Entry]] = {}
    for item in queue:
        split = files.split_qualified(item.edge.callee)
        if split is not None:
            module, qualname = split
            entry = (qualname, item.binding, len(item.via))
            found.setdefault(files.module_files[module], []).append(entry)
    return list(found), {rel: {EXTRACTOR_NAME: calls} for rel, calls in found.items()}


def _callee(files: SourceFiles, callee: str, binding: int | str) -> tuple[str, str, str] | None:
    """(file, qualname in module, parameter name) that a call edge binds a reference to."""
    split = files.split_qualified(callee)
    if split is None:
        return None
    module_name, qualname = split
    facts = files.module(module_name)
    if facts is None:
        return None
    head = qualname.split(".", 1)[0]
    if head not in facts.functions and head not in facts.classes:
        target = facts.imports.get(head)
        if target and "." not in qualname:
            return _callee(files, target, binding)
        return None
    rel = files.module_files[module_name]
    bound = bound_parameter(qualname, binding, facts.classes, files.entries[rel].param_names)
    return (rel, *bound) if bound is not None else None


def _param_summary(files: SourceFiles, rel: str, qualname: str, param: str) -> ConsumerFacts | None:
    """The uses of one parameter (as if a model reference came in), kept on the file's entry."""
    entry = files.ensure_parsed(rel)
    fact = param_fact(qualname, param)
    known = files.recall(rel, fact)
    if known is not MISSING:
        return known
    summary = None
    parsed = files.parse(rel)
    if parsed is not None and entry.facts is not None:
        summary = scan_parameter(
            parsed.tree,
            entry.facts.module,
            entry.facts.imports,
            entry.facts.functions,
            parsed.text,
            qualname,
            param,
        )
    files.remember(rel, fact, summary)
    return summary
