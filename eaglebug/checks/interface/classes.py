"""The audit of one class in one role: the runtime's uses that reach it, and what it lacks.

The uses come from the tree (`reach/resolve.py`); those the role, the algorithm and the worker
code in play can run are required (`reach/guards.py`, `workers.py`; for a missing attribute, the
role's own runner must reach them: `roles.py`); each required attribute the class does not
provide is a finding, with the inner object that could provide it (`delegates.py`) and the
delegation that fixes it (`delegation.py`). Present attributes are checked too (`present.py`):
stubs, guarded delegations that silently do nothing, and signatures the calls cannot bind to.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.contract.evidence import InterfaceEvidence, Site
from eaglebug.checks.contract.findings import Finding, Severity
from eaglebug.checks.contract.fixes import PatchFix
from eaglebug.checks.interface.delegates import Delegate, find_delegate, picked_by, summary
from eaglebug.checks.interface.delegation import DelegationPlanner
from eaglebug.checks.interface.made import made_by
from eaglebug.checks.interface.present import present, sites
from eaglebug.checks.interface.roles import by_role
from eaglebug.checks.interface.workers import WorkerScopes
from eaglebug.checks.reach.conditions import Cond, Not, flag_names
from eaglebug.checks.reach.flags import flags
from eaglebug.checks.reach.guards import GuardContext, GuardMemo, evaluate
from eaglebug.checks.reach.protocols import protocol_members
from eaglebug.checks.reach.resolve import ResolvedUse, origin_role
from eaglebug.checks.source.classes import ClassRef, Provider
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import AlgorithmFacts

_SPECULATIVE = "sglang/srt/speculative/"
_ROLE_FLAG = "is_draft_worker"  # decided by the role, never looked up


@dataclass
class ClassReport:
    ref: ClassRef
    role: str
    algorithm: str
    findings: list[Finding] = field(default_factory=list)
    provided: list[tuple[str, Provider]] = field(default_factory=list)
    external_bases: list[str] = field(default_factory=list)


def _module_of(scope: str, index: TreeIndex) -> str:
    split = index.split_qualified(scope)
    return split[0] if split else scope


def _in_scope(use: ResolvedUse, scopes: WorkerScopes, algorithm: str) -> bool:
    """Drop uses in worker code that only other algorithms run (where the reference is taken,
    and where it is used)."""
    for scope in {use.use.scope, use.origin_scope or use.use.scope}:
        served = scopes.algorithms(scope)
        if served is not None and algorithm not in served:
            return False
    return True


def _site_evidence(uses: Iterable[ResolvedUse]) -> tuple[Site, ...]:
    out: dict[tuple[str, int], Site] = {}
    for u in uses:
        out.setdefault(
            (u.file, u.use.line),
            Site(u.file, u.use.line, u.use.label, u.role, tuple(u.guards), tuple(u.via)),
        )
    return tuple(out[k] for k in sorted(out))


@dataclass(eq=False)
class ClassAudit:
    """One class audited in one role under one algorithm (`run` over the tree's uses)."""

    index: TreeIndex
    ref: ClassRef
    algorithm: str
    role: str
    algo: AlgorithmFacts
    scopes: WorkerScopes
    _lookups: dict[str, Provider | None] = field(init=False, default_factory=dict)
    flag_table: dict[str, list[tuple[Cond, ...]]] = field(init=False, default_factory=dict)
    # What does not depend on the algorithm, shared by `for_algorithm`'s copies.
    _contexts: dict[tuple[str, str], GuardContext] = field(init=False, default_factory=dict)
    # id of a use -> needs speculative decoding
    _speculative: dict[int, bool] = field(init=False, default_factory=dict)
    _delegates: dict[str, Delegate | None] = field(init=False, default_factory=dict)
    _plans: dict[tuple[str, str, str], PatchFix] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.classes = self.index.classes
        _, self.externals, self.nn_module = self.classes.mro(self.ref)
        self.report = ClassReport(
            self.ref, self.role, self.algorithm, external_bases=list(self.externals)
        )
        self.planner = DelegationPlanner(self.index, self.ref)
        self.guards = self.index.kept("reach.guard_memo", GuardMemo)

    def for_algorithm(self, algorithm: str) -> ClassAudit:
        """The same class and role audited under another algorithm. Attribute lookups, the
        flag table, delegates, planned fixes and which uses only speculative decoding runs do
        not depend on the algorithm: the copy shares them, so a support matrix (every
        algorithm of a release) pays for them once per class, not once per algorithm. Run it
        over the same list of uses as this audit."""
        other = copy.copy(self)
        other.algorithm = algorithm
        other.report = ClassReport(
            self.ref, self.role, algorithm, external_bases=list(self.externals)
        )
        return other

    def provider(self, attribute: str) -> Provider | None:
        if attribute not in self._lookups:
            self._lookups[attribute] = self.classes.lookup(self.ref, attribute)
        return self._lookups[attribute]

    def context(self, use_role: str, algorithm: str | None = None) -> GuardContext:
        key = (use_role, algorithm or self.algorithm)
        found = self._contexts.get(key)
        if found is None:
            found = self._contexts[key] = self._new_context(*key)
        return found

    def _new_context(self, use_role: str, algorithm: str) -> GuardContext:
        return GuardContext(
            algorithm=algorithm,
            role=self.role,
            predicates=self.algo.predicates,
            flags=self.flag_table,
            provides=lambda a: self.provider(a) is not None,
            origin_role=lambda o: origin_role(o, use_role),
            class_name=self.ref.facts.name,
            protocol_members=lambda cls: protocol_members(self.index, cls),
        )

    def speculative(self, u: ResolvedUse) -> bool:
        """Does this use run only because speculative decoding is on?

        True for draft-side uses, code in the speculative package or in worker modules, and
        uses whose guards cannot hold in a launch without speculative decoding. Never for an
        algorithm the tree's `create_worker` gives no worker (`NONE`): such a launch runs no
        speculative decoding, so nothing it needs is a speculative requirement.
        """
        if self.algo.workers and not any(
            self.algorithm in served for served in self.algo.workers.values()
        ):
            return False
        found = self._speculative.get(id(u))
        if found is None:
            found = self._speculative[id(u)] = self._speculative_use(u)
        return found

    def _speculative_use(self, u: ResolvedUse) -> bool:
        """`speculative` apart from the algorithm at hand: it asks every algorithm."""
        if u.role == "draft" or u.file.startswith(_SPECULATIVE):
            return True
        if any(v.startswith(_SPECULATIVE) for v in u.via):
            return True
        for scope in {u.use.scope, u.origin_scope or u.use.scope}:
            if self.scopes.is_worker_module(_module_of(scope, self.index)):
                return True
        # Algorithm-sensitive guards: some algorithm (or none at all) can never run this use.
        return any(
            not self.guards.possible(u.conds, self.context(u.role, m)) for m in self.algo.members
        )

    def load_flags(self, uses: list[ResolvedUse]) -> None:
        """Fetch the assignments of every flag these uses' guards name, and of flags in those."""
        pending = {
            n for u in uses for n in flag_names((*u.conds, *(c for _, c in u.use.one_of)))
        } - {_ROLE_FLAG}
        for _ in range(3):
            pending -= set(self.flag_table)
            if not pending:
                return
            fetched = flags(self.index, pending)
            self.flag_table.update(fetched)
            pending = {
                n
                for conds_list in fetched.values()
                for conds in conds_list
                for n in flag_names(conds)
            } - {_ROLE_FLAG}

    def needs_guards(self, attribute: str, uses: list[ResolvedUse]) -> bool:
        """Only attributes that could yield a finding are worth evaluating guards for."""
        provider = self.provider(attribute)
        if provider is None or provider.method is None:
            return provider is None
        method = provider.method
        if method.stub or method.guarded_delegate is not None:
            return True
        return any(
            u.use.is_call and not method.signature.accepts(u.use.n_args, u.use.keywords, u.use.star)
            for u in uses
        )

    def run(self, uses: list[ResolvedUse]) -> ClassReport:
        candidates: dict[str, list[ResolvedUse]] = {}
        chains: dict[str, list[ResolvedUse]] = {}
        for u in uses:
            if (
                u.role in {self.role, "any"}
                and u.use.required
                and _in_scope(u, self.scopes, self.algorithm)
            ):
                by_name = chains if u.use.one_of else candidates
                by_name.setdefault(u.use.attribute, []).append(u)
        self.load_flags(
            [u for a, us in candidates.items() if self.needs_guards(a, us) for u in us]
            + [u for us in chains.values() for u in us]
        )
        for chain in chains.values():
            self.one_of(chain)
        missing_required: list[str] = []
        for attribute in sorted(candidates):
            required = [
                u
                for u in candidates[attribute]
                if self.guards.possible(u.conds, self.context(u.role))
            ]
            provider = self.provider(attribute)
            undecided: tuple[str, ...] = ()
            if provider is None:  # only a missing attribute's verdict rests on the role's path
                required, undecided = by_role(self.index, required, self.role, self.algorithm,
                                              self.algo, frozenset(self.scopes.own),
                                              self.serves)  # fmt: skip
            if not required:
                continue
            if provider is not None:  # `present` asks which uses are speculative, if any fail
                self.report.provided.append((attribute, provider))
                self.present(attribute, provider, required)
                continue
            speculative = [u for u in required if self.speculative(u)]
            if not speculative:
                self.general_missing(attribute, required)
            else:
                missing_required.append(attribute)
                self.missing(attribute, speculative, undecided)
        self.family(missing_required, uses)
        return self.report

    # -- findings ---------------------------------------------------------------------------
    def _report(
        self,
        attribute: str,
        uses: list[ResolvedUse],
        *,
        id: str,
        severity: Severity,
        message: str,
        evidence: InterfaceEvidence,
        delegate: str | None = None,
        fix: PatchFix | None = None,
    ) -> None:
        """Report a finding about `attribute` of the audited class, with the sites of `uses`."""
        finding = Finding(
            id=id,
            severity=severity,
            message=message,
            role=self.role,
            class_=self.ref.qualname,
            attribute=attribute,
            call_sites=sites(uses),
            delegate=delegate,
            fix=fix,
            evidence=evidence,
        )
        self.report.findings.append(finding)

    def serves(self, scope: str) -> bool:
        """Does worker code `scope` run for the algorithm at hand (None: not worker code)?"""
        served = self.scopes.algorithms(scope)
        return served is None or self.algorithm in served

    def _evidence(
        self, uses: list[ResolvedUse], assumed: tuple[str, ...] = (), **extra: Any
    ) -> InterfaceEvidence:
        assumed = assumed + tuple(
            f"{e} is outside the SGLang tree; assumed to provide no SGLang names"
            for e in self.externals
        )
        return InterfaceEvidence(self.algorithm, _site_evidence(uses), assumed, **extra)

    def _delegation(self, attribute: str, delegate: Delegate) -> PatchFix:
        key = (attribute, delegate.attribute, delegate.classes[0])
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self.planner.plan(
                attribute, delegate.attribute, delegate.classes[0], delegate.provider
            )
        return plan

    def find_delegate(self, attribute: str) -> Delegate | None:
        if attribute not in self._delegates:
            self._delegates[attribute] = find_delegate(
                self.classes, self.ref, attribute, made_by(self.index).classes
            )
        return self._delegates[attribute]

    def missing(
        self, attribute: str, uses: list[ResolvedUse], undecided: tuple[str, ...] = ()
    ) -> None:
        """`undecided`: every use rests on a test the draft's own values enter (`roles.py`);
        then a warning that says so, not an error on a guess."""
        cls = self.ref.facts.name
        dynamic = self.classes.dynamic_getattr(self.ref)
        delegate = self.find_delegate(attribute)
        if dynamic:
            message = (
                f"{cls} does not define {attribute}; {dynamic}.__getattr__ is dynamic, "
                "so eaglebug cannot prove it is there"
            )
            self._report(
                attribute,
                uses,
                id="interface.missing",
                severity="warning",
                message=message,
                delegate=delegate.attribute if delegate else None,
                evidence=self._evidence(uses, dynamic_getattr=dynamic),
            )
            return
        message = (
            f"{cls} has no {attribute}, which the {self.role} model needs for {self.algorithm}"
        )
        fix = None
        evidence = self._evidence(uses, undecided)
        if delegate is not None:
            evidence = self._evidence(
                uses,
                undecided,
                delegate_classes=delegate.classes,
                delegate_provider=delegate.provider.owner,
                delegate_lacking=delegate.lacking,
                chosen_by=delegate.lacking_when if delegate.lacking else (),
                picked_by=picked_by(delegate.pick) if delegate.pick else None,
            )
            message += "; " + summary(delegate)
            fix = self._delegation(attribute, delegate)
        if undecided:
            message += "; only if the draft's runner reaches the call (see assumed)"
        self._report(
            attribute,
            uses,
            id="interface.missing",
            severity="warning" if undecided else "error",
            message=message,
            delegate=delegate.attribute if delegate else None,
            fix=fix,
            evidence=evidence,
        )

    def one_of(self, uses: list[ResolvedUse]) -> None:
        """An if/elif chain of hasattr tests ending in a raise (`chains.py`): an error when
        every branch's test is false for this class and algorithm, naming the names that would
        take a branch here (a branch whose other tests cannot hold does not count); a warning
        when a name the class has is tried under a test the audit cannot decide."""
        raising = [
            u
            for u in uses
            if self.guards.possible(
                (*u.conds, *(Not(c) for _, c in u.use.one_of)), self.context(u.role)
            )
        ]
        if not raising:
            return
        first = raising[0]
        ctx = self.context(first.role)
        names = [n for n, _ in first.use.one_of]
        accepted = []
        undecided = []
        for name, test in first.use.one_of:
            assumed = dataclasses.replace(ctx, provides=functools.partial(self.provided, name))
            if evaluate(test, assumed) is not False:
                accepted.append(name)
            if evaluate(test, ctx) is None:
                undecided.append(name)
        accepted = accepted or names
        speculative = [u for u in raising if self.speculative(u)]
        cls = self.ref.facts.name
        found = [(n, d) for n in accepted if (d := self.find_delegate(n)) is not None]
        others = [n for n in names if n not in accepted]
        lacking = [n for n in accepted if not self.provided("", n)]
        if undecided:
            message = (
                f"{cls} has {', '.join(undecided)}, but SGLang tries it only under a test "
                f"eaglebug cannot decide for {self.algorithm}; where it fails, the {self.role} "
                f"model needs {' or '.join(lacking) or 'another branch'}"
            )
        elif len(accepted) > 1:
            message = f"{cls} has none of {', '.join(accepted)}, one of which"
        else:
            message = f"{cls} has no {accepted[0]}, which"
        if not undecided:
            message += f" the {self.role} model needs for {self.algorithm}"
        if others:
            message += f" (the branch for {', '.join(others)} cannot be taken for {self.algorithm})"
        if first.use.message:
            message += f'; SGLang raises "{first.use.message}"'
        evidence = self._evidence(
            speculative or raising,
            one_of=tuple(accepted),
            read_from=f"{first.file}:{first.use.line}",
            sglang_message=first.use.message,
            delegate_classes=found[0][1].classes if found else (),
            delegate_provider=found[0][1].provider.owner if found else None,
        )
        severity: Severity = "info"
        if speculative:
            severity = "warning" if undecided else "error"
        self._report(
            " or ".join(accepted),
            speculative or raising,
            id="interface.missing",
            severity=severity,
            message=message,
            delegate=found[0][1].attribute if found else None,
            fix=self._delegation(*found[0]) if found else None,  # the first the inner has
            evidence=evidence,
        )

    def provided(self, assumed: str, attribute: str) -> bool:
        """Does the class provide `attribute`, were it to provide `assumed` too?"""
        return attribute == assumed or self.provider(attribute) is not None

    def general_missing(self, attribute: str, uses: list[ResolvedUse]) -> None:
        """Missing, but only needed by runtime features other than speculative decoding."""
        guards = sorted({g for u in uses for g in u.guards})
        when = f" when {' and '.join(guards[:3])}" if guards else ""
        self._report(
            attribute,
            uses,
            id="interface.missing",
            severity="info",
            message=(
                f"{self.ref.facts.name} has no {attribute}; the runtime uses it outside "
                f"speculative decoding{when}, not for {self.algorithm}"
            ),
            delegate=(d.attribute if (d := self.find_delegate(attribute)) else None),
            evidence=self._evidence(uses),
        )

    def present(self, attribute: str, provider: Provider, uses: list[ResolvedUse]) -> None:
        present(self, attribute, provider, uses)

    def family(self, missing_required: list[str], all_uses: list[ResolvedUse]) -> None:
        """get_X/set_X come in pairs: upstream delegates both even where one is draft-only."""
        reported = set(missing_required)
        for attribute in missing_required:
            prefix, _, stem = attribute.partition("_")
            if prefix not in {"get", "set"} or not stem:
                continue
            sibling = ("set_" if prefix == "get" else "get_") + stem
            if sibling in reported or self.provider(sibling) is not None:
                continue
            sibling_uses = [u for u in all_uses if u.use.attribute == sibling]
            if not sibling_uses:
                continue
            reported.add(sibling)
            roles = sorted({u.role for u in sibling_uses})
            delegate = self.find_delegate(sibling)
            evidence = self._evidence(
                sibling_uses,
                family_of=attribute,
                delegate_classes=delegate.classes if delegate else (),
                delegate_provider=delegate.provider.owner if delegate else None,
            )
            self._report(
                sibling,
                sibling_uses,
                id="interface.missing",
                severity="warning",
                message=(
                    f"{self.ref.facts.name} has no {sibling}: part of the {attribute} family "
                    f"(the fix delegates it too), though this tree calls it only on the "
                    f"{' and '.join(roles)} model"
                ),
                delegate=delegate.attribute if delegate else None,
                fix=self._delegation(sibling, delegate) if delegate else None,
                evidence=evidence,
            )
