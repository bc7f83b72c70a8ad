"""Findings on an attribute the audited class has (`classes.py` finds the ones it lacks).

A method the runtime needs may be there and still fail the launch: its body only raises
`NotImplementedError` (a stub), it delegates under `hasattr` to an inner object whose class
lacks the method (the call silently does nothing), or its signature cannot bind the call shapes
the runtime uses. Outside speculative decoding a bad signature is another feature's problem.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from eaglebug.checks.contract.findings import CallSite
from eaglebug.checks.reach.resolve import ResolvedUse
from eaglebug.checks.source.classes import Provider

if TYPE_CHECKING:
    from eaglebug.checks.interface.classes import ClassAudit


def sites(uses: Iterable[ResolvedUse]) -> tuple[CallSite, ...]:
    """The call sites of `uses`, once each, in file and line order."""
    seen: dict[tuple[str, int], CallSite] = {}
    for u in uses:
        seen.setdefault((u.file, u.use.line), CallSite(u.file, u.use.line, u.use.code))
    return tuple(sorted(seen.values(), key=lambda s: (s.file, s.line)))


def present(audit: ClassAudit, attribute: str, provider: Provider, uses: list[ResolvedUse]) -> None:
    """Findings on an attribute the class has: only a stub, a delegation guarded by `hasattr`
    whose inner class lacks the method, or a signature the calls cannot bind to."""
    method = provider.method
    cls = audit.ref.facts.name
    if method is None:
        return
    evidence = audit._evidence(uses, provided_by=provider.owner, chain=provider.chain)
    if method.stub:
        audit._report(
            attribute,
            uses,
            id="interface.stub",
            severity="error",
            message=f"{cls}.{attribute} only raises NotImplementedError ({provider.owner})",
            evidence=evidence,
        )
        return
    if method.guarded_delegate is not None:
        inner_attr, inner_method = method.guarded_delegate
        inner_classes = audit.classes.inner_classes(audit.ref, inner_attr)
        lacking = [
            c.qualname for c in inner_classes if audit.classes.lookup(c, inner_method) is None
        ]
        if lacking:
            names = ", ".join(x.rsplit(".", 1)[-1] for x in lacking)
            audit._report(
                attribute,
                uses,
                id="interface.stub",
                severity="warning",
                message=(
                    f"{cls}.{attribute} delegates to audit.{inner_attr} only if it has "
                    f"{inner_method}; {names} does not, so the call silently does nothing"
                ),
                delegate=inner_attr,
                evidence=dataclasses.replace(evidence, delegate_lacking=tuple(lacking)),
            )
    if method.kind in {"method", "classmethod", "staticmethod"}:
        bad = [
            u
            for u in uses
            if u.use.is_call
            and not method.signature.accepts(u.use.n_args, u.use.keywords, u.use.star)
        ]
        if bad:
            signature = f"{attribute}({method.signature.text})"
            speculative = [u for u in bad if audit.speculative(u)]
            bad = speculative or bad
            owner = provider.owner.rsplit(".", 1)[-1]
            audit._report(
                attribute,
                bad,
                id="interface.signature",
                # Outside speculative decoding it is another feature's problem: info.
                severity="error" if speculative else "info",
                message=(
                    f"{owner}.{attribute}({method.signature.text}) cannot accept the "
                    f"call shape used at {len(sites(bad))} call site(s)"
                ),
                evidence=dataclasses.replace(evidence, signature=signature),
            )
