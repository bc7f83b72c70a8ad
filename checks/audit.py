"""The interface audit: what the runtime needs from a model class, and what the class lacks.

Required attributes are derived from the consumers found in the tree being audited (see
`consumers.py`), filtered per algorithm and role by their guards (`guards.py`) and by which
worker modules serve the algorithm (`algorithms.py`).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from eaglebug.checks.algorithms import AlgorithmFacts, algorithm_facts
from eaglebug.checks.consumers import REQUIRED_KINDS, Cond
from eaglebug.checks.delegation import DelegationPlanner
from eaglebug.checks.errors import InputError
from eaglebug.checks.evidence import InterfaceEvidence, Site
from eaglebug.checks.findings import CallSite, Finding, sort_findings
from eaglebug.checks.fixes import PatchFix
from eaglebug.checks.guards import GuardContext, possible
from eaglebug.checks.index import ClassRef, Provider, ResolvedUse, TreeIndex
from eaglebug.checks.workers import WorkerScopes

# Inner attributes wrappers conventionally hold their language model in, best first.
_PREFERRED_DELEGATES = ("language_model", "model", "llm", "text_model", "lm")
_SPECULATIVE = "sglang/srt/speculative/"
_NO_SPECULATION = "NONE"
_ROLE_FLAG = "is_draft_worker"  # decided by the role, never looked up


@dataclass(frozen=True)
class Delegate:
    attribute: str  # the inner attribute on self, e.g. language_model
    classes: tuple[str, ...]  # qualified inner classes that provide the missing attribute
    lacking: tuple[str, ...]  # inner choices (picked by config) that do not
    lacking_when: tuple[str | None, ...]  # the condition that picks each lacking class
    provider: Provider  # where the inner class gets it from


@dataclass
class ClassReport:
    ref: ClassRef
    role: str
    algorithm: str
    findings: list[Finding] = field(default_factory=list)
    provided: list[tuple[str, Provider]] = field(default_factory=list)
    external_bases: list[str] = field(default_factory=list)


@dataclass
class AuditResult:
    version: str | None
    package_dir: str
    algorithm: str
    reports: list[ClassReport]
    warnings: list[str]

    @property
    def findings(self) -> list[Finding]:
        return sort_findings([f for r in self.reports for f in r.findings])


def find_class(index: TreeIndex, name: str) -> ClassRef:
    """A class by short or qualified name; a registered (EntryClass) one wins ties."""
    if "." in name:
        ref = index.cls(name)
        if ref is not None:
            return ref
        short = name.rsplit(".", 1)[-1]
    else:
        short = name
    candidates = index.classes_named(short)
    if not candidates:
        broken = index.unparsed_files_defining(short)
        if broken:
            rel, why = broken[0]
            raise InputError(
                f"{rel}: {why}; class {short!r} is defined there, so it cannot be audited",
                f"fix the file (python -m py_compile {index.tree.root / rel} shows where)",
            )
        close = difflib.get_close_matches(short, sorted(index.all_class_names()), n=3, cutoff=0.6)
        hint = (
            f"did you mean {', '.join(close)}?"
            if close
            else "check the spelling; class names are case-sensitive"
        )
        raise InputError(
            f"class {name!r} not found in the SGLang tree at {index.tree.package_dir}", hint
        )
    if len(candidates) == 1:
        return candidates[0]
    exported = {r.qualname for r in index.exporters_of(short)}  # registered wins a tie
    candidates.sort(key=lambda r: (r.qualname not in exported, "/models/" not in r.file, r.file))
    return candidates[0]


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


def _flag_names(conds: Iterable[Cond]) -> set[str]:
    names: set[str] = set()
    for cond in conds:
        if cond[0] == "flag":
            names.add(str(cond[1]))
        elif cond[0] == "not":
            names |= _flag_names([cast(Cond, cond[1])])
        elif cond[0] in {"and", "or"}:
            names |= _flag_names(cast(tuple[Cond, ...], cond[1]))
    return names


def _sites(uses: Iterable[ResolvedUse]) -> tuple[CallSite, ...]:
    seen: dict[tuple[str, int], CallSite] = {}
    for u in uses:
        seen.setdefault((u.file, u.use.line), CallSite(u.file, u.use.line, u.use.code))
    return tuple(sorted(seen.values(), key=lambda s: (s.file, s.line)))


def _site_evidence(uses: Iterable[ResolvedUse]) -> tuple[Site, ...]:
    out: dict[tuple[str, int], Site] = {}
    for u in uses:
        out.setdefault(
            (u.file, u.use.line),
            Site(u.file, u.use.line, u.use.kind, u.role, tuple(u.guards), tuple(u.via)),
        )
    return tuple(out[k] for k in sorted(out))


class _ClassAudit:
    def __init__(
        self,
        index: TreeIndex,
        ref: ClassRef,
        algorithm: str,
        role: str,
        algo: AlgorithmFacts,
        scopes: WorkerScopes,
    ) -> None:
        self.index = index
        self.scopes = scopes
        self.ref = ref
        self.algorithm = algorithm
        self.role = role
        self.algo = algo
        self._lookups: dict[str, Provider | None] = {}
        self.flag_table: dict[str, list[tuple[Cond, ...]]] = {}
        _, self.externals, self.nn_module = index.mro(ref)
        self.report = ClassReport(ref, role, algorithm, external_bases=list(self.externals))
        self.planner = DelegationPlanner(index, ref)

    def provider(self, attribute: str) -> Provider | None:
        if attribute not in self._lookups:
            self._lookups[attribute] = self.index.lookup(self.ref, attribute)
        return self._lookups[attribute]

    def context(self, use_role: str, algorithm: str | None = None) -> GuardContext:
        return GuardContext(
            algorithm=algorithm or self.algorithm,
            role=self.role,
            predicates=self.algo.predicates,
            flags=self.flag_table,
            provides=lambda a: self.provider(a) is not None,
            origin_role=lambda o: self.index.origin_role(o, use_role),
            class_name=self.ref.facts.name,
        )

    def speculative(self, u: ResolvedUse) -> bool:
        """Does this use run only because speculative decoding is on?

        True for draft-side uses, code in the speculative package or in worker modules, and
        uses whose guards cannot hold in a launch without speculative decoding.
        """
        if u.role == "draft" or u.file.startswith(_SPECULATIVE):
            return True
        if any(v.startswith(_SPECULATIVE) for v in u.via):
            return True
        for scope in {u.use.scope, u.origin_scope or u.use.scope}:
            if self.scopes.is_worker_module(_module_of(scope, self.index)):
                return True
        # Algorithm-sensitive guards: some algorithm (or none at all) can never run this use.
        return any(not possible(u.conds, self.context(u.role, m)) for m in self.algo.members)

    def load_flags(self, uses: list[ResolvedUse]) -> None:
        """Fetch the assignments of every flag these uses' guards name, and of flags in those."""
        pending = {n for u in uses for n in _flag_names(u.conds)} - {_ROLE_FLAG}
        for _ in range(3):
            pending -= set(self.flag_table)
            if not pending:
                return
            fetched = self.index.flags(pending)
            self.flag_table.update(fetched)
            pending = {
                n
                for conds_list in fetched.values()
                for conds in conds_list
                for n in _flag_names(conds)
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
            u.use.kind == "call"
            and not method.signature.accepts(u.use.n_args, u.use.keywords, u.use.star)
            for u in uses
        )

    def run(self, uses: list[ResolvedUse]) -> ClassReport:
        candidates: dict[str, list[ResolvedUse]] = {}
        for u in uses:
            if (
                u.role in {self.role, "any"}
                and u.use.kind in REQUIRED_KINDS
                and _in_scope(u, self.scopes, self.algorithm)
            ):
                candidates.setdefault(u.use.attribute, []).append(u)
        self.load_flags([u for a, us in candidates.items() if self.needs_guards(a, us) for u in us])
        missing_required: list[str] = []
        for attribute in sorted(candidates):
            required = [u for u in candidates[attribute] if possible(u.conds, self.context(u.role))]
            if not required:
                continue
            provider = self.provider(attribute)
            speculative = [u for u in required if self.speculative(u)]
            if provider is None and not speculative:
                self.general_missing(attribute, required)
            elif provider is None:
                missing_required.append(attribute)
                self.missing(attribute, speculative)
            else:
                self.report.provided.append((attribute, provider))
                self.present(attribute, provider, required)
        self.family(missing_required, uses)
        return self.report

    # -- findings ---------------------------------------------------------------------------
    def _evidence(self, uses: list[ResolvedUse], **extra: Any) -> InterfaceEvidence:
        assumed = tuple(
            f"{e} is outside the SGLang tree; assumed to provide no SGLang names"
            for e in self.externals
        )
        return InterfaceEvidence(self.algorithm, _site_evidence(uses), assumed, **extra)

    def _delegation(self, attribute: str, delegate: Delegate) -> PatchFix:
        return self.planner.plan(
            attribute, delegate.attribute, delegate.classes[0], delegate.provider
        )

    def missing(self, attribute: str, uses: list[ResolvedUse]) -> None:
        cls = self.ref.facts.name
        dynamic = self.index.dynamic_getattr(self.ref)
        delegate = self.find_delegate(attribute)
        if dynamic:
            self.report.findings.append(
                Finding(
                    id="interface.missing",
                    severity="warning",
                    message=(
                        f"{cls} does not define {attribute}; {dynamic}.__getattr__ is dynamic, "
                        "so eaglebug cannot prove it is there"
                    ),
                    role=self.role,
                    class_=self.ref.qualname,
                    attribute=attribute,
                    call_sites=_sites(uses),
                    delegate=delegate.attribute if delegate else None,
                    evidence=self._evidence(uses, dynamic_getattr=dynamic),
                )
            )
            return
        message = (
            f"{cls} has no {attribute}, which the {self.role} model needs for {self.algorithm}"
        )
        fix = None
        evidence = self._evidence(uses)
        if delegate is not None:
            evidence = self._evidence(
                uses,
                delegate_classes=delegate.classes,
                delegate_provider=delegate.provider.owner,
                delegate_lacking=delegate.lacking,
                chosen_by=delegate.lacking_when if delegate.lacking else (),
            )
            inner_names = ", ".join(c.rsplit(".", 1)[-1] for c in delegate.classes)
            message += f"; self.{delegate.attribute} ({inner_names}) provides it"
            for lacking, when in zip(delegate.lacking, delegate.lacking_when, strict=True):
                picked = f"when {when}" if when else "in some configurations"
                message += f", but not {lacking.rsplit('.', 1)[-1]}, picked {picked}"
            fix = self._delegation(attribute, delegate)
        self.report.findings.append(
            Finding(
                id="interface.missing",
                severity="error",
                message=message,
                role=self.role,
                class_=self.ref.qualname,
                attribute=attribute,
                call_sites=_sites(uses),
                delegate=delegate.attribute if delegate else None,
                fix=fix,
                evidence=evidence,
            )
        )

    def general_missing(self, attribute: str, uses: list[ResolvedUse]) -> None:
        """Missing, but only needed by runtime features other than speculative decoding."""
        guards = sorted({g for u in uses for g in u.guards})
        when = f" when {' and '.join(guards[:3])}" if guards else ""
        self.report.findings.append(
            Finding(
                id="interface.missing",
                severity="info",
                message=(
                    f"{self.ref.facts.name} has no {attribute}; the runtime uses it outside "
                    f"speculative decoding{when}, not for {self.algorithm}"
                ),
                role=self.role,
                class_=self.ref.qualname,
                attribute=attribute,
                call_sites=_sites(uses),
                delegate=(d.attribute if (d := self.find_delegate(attribute)) else None),
                evidence=self._evidence(uses),
            )
        )

    def present(self, attribute: str, provider: Provider, uses: list[ResolvedUse]) -> None:
        method = provider.method
        cls = self.ref.facts.name
        if method is None:
            return
        evidence = self._evidence(uses, provided_by=provider.owner, chain=provider.chain)
        if method.stub:
            self.report.findings.append(
                Finding(
                    id="interface.stub",
                    severity="error",
                    message=f"{cls}.{attribute} only raises NotImplementedError ({provider.owner})",
                    role=self.role,
                    class_=self.ref.qualname,
                    attribute=attribute,
                    call_sites=_sites(uses),
                    evidence=evidence,
                )
            )
            return
        if method.guarded_delegate is not None:
            inner_attr, inner_method = method.guarded_delegate
            inner_classes = self.index.inner_classes(self.ref, inner_attr)
            lacking = [
                c.qualname for c in inner_classes if self.index.lookup(c, inner_method) is None
            ]
            if lacking:
                names = ", ".join(x.rsplit(".", 1)[-1] for x in lacking)
                self.report.findings.append(
                    Finding(
                        id="interface.stub",
                        severity="warning",
                        message=(
                            f"{cls}.{attribute} delegates to self.{inner_attr} only if it has "
                            f"{inner_method}; {names} does not, so the call silently does nothing"
                        ),
                        role=self.role,
                        class_=self.ref.qualname,
                        attribute=attribute,
                        call_sites=_sites(uses),
                        delegate=inner_attr,
                        evidence=dataclasses.replace(evidence, delegate_lacking=tuple(lacking)),
                    )
                )
        if method.kind in {"method", "classmethod", "staticmethod"}:
            bad = [
                u
                for u in uses
                if u.use.kind == "call"
                and not method.signature.accepts(u.use.n_args, u.use.keywords, u.use.star)
            ]
            if bad:
                signature = f"{attribute}({method.signature.text})"
                speculative = [u for u in bad if self.speculative(u)]
                bad = speculative or bad
                self.report.findings.append(
                    Finding(
                        id="interface.signature",
                        # Outside speculative decoding it is another feature's problem: info.
                        severity="error" if speculative else "info",
                        message=(
                            f"{provider.owner.rsplit('.', 1)[-1]}.{attribute}({method.signature.text}) "
                            f"cannot accept the call shape used at {len(_sites(bad))} call site(s)"
                        ),
                        role=self.role,
                        class_=self.ref.qualname,
                        attribute=attribute,
                        call_sites=_sites(bad),
                        evidence=dataclasses.replace(evidence, signature=signature),
                    )
                )

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
            self.report.findings.append(
                Finding(
                    id="interface.missing",
                    severity="warning",
                    message=(
                        f"{self.ref.facts.name} has no {sibling}: part of the {attribute} family "
                        f"(the fix delegates it too), though this tree calls it only on the "
                        f"{' and '.join(roles)} model"
                    ),
                    role=self.role,
                    class_=self.ref.qualname,
                    attribute=sibling,
                    call_sites=_sites(sibling_uses),
                    delegate=delegate.attribute if delegate else None,
                    fix=self._delegation(sibling, delegate) if delegate else None,
                    evidence=evidence,
                )
            )

    def find_delegate(self, attribute: str) -> Delegate | None:
        order, _, _ = self.index.mro(self.ref)
        options: list[Delegate] = []
        for current in order:
            for inner_attr, inner in current.facts.inner.items():
                providing: list[tuple[ClassRef, Provider]] = []
                lacking: list[str] = []
                lacking_when: list[str | None] = []
                for written in inner.classes:
                    r = self.index.resolve_class(current, written)
                    if r is None:
                        continue
                    p = self.index.lookup(r, attribute)
                    if p is not None:
                        providing.append((r, p))
                    else:
                        lacking.append(r.qualname)
                        lacking_when.append(inner.condition_of(written))
                if providing:
                    options.append(
                        Delegate(
                            inner_attr,
                            tuple(r.qualname for r, _ in providing),
                            tuple(lacking),
                            tuple(lacking_when),
                            providing[0][1],
                        )
                    )
        if not options:
            return None

        def rank(d: Delegate) -> tuple[int, int]:
            preferred = (
                _PREFERRED_DELEGATES.index(d.attribute)
                if d.attribute in _PREFERRED_DELEGATES
                else 99
            )
            return (len(d.lacking) > 0, preferred)

        return min(options, key=rank)


def audit(
    index: TreeIndex,
    class_name: str | None,
    algorithm: str = "EAGLE3",
    draft_class: str | None = None,
) -> AuditResult:
    """Audit the target class (role target) and, if given, the draft class (role draft)."""
    algo = algorithm_facts(index)
    canonical = algo.canonical(algorithm)
    uses = index.consumers()
    scopes = WorkerScopes(index, algo)
    reports = []
    for name, role in ((class_name, "target"), (draft_class, "draft")):
        if name:
            ref = find_class(index, name)
            reports.append(_ClassAudit(index, ref, canonical, role, algo, scopes).run(uses))
    index.save()
    return AuditResult(
        version=index.tree.version,
        package_dir=str(index.tree.package_dir),
        algorithm=canonical,
        reports=reports,
        warnings=list(dict.fromkeys(index.warnings)),
    )
