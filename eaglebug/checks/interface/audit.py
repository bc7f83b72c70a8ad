"""The interface audit: what the runtime needs from a model class, and what the class lacks.

Required attributes are derived from the consumers found in the tree being audited (see
`reach.py`), filtered per algorithm and role by their guards (`guards.py`) and by which
worker modules serve the algorithm (`algorithms.py`, `workers.py`); `audit/classes.py` audits
each class. A whole audit is kept as a tree answer, so asking again costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglebug.checks.contract.findings import Finding, sort_findings
from eaglebug.checks.interface.classes import ClassAudit, ClassReport
from eaglebug.checks.interface.promotion import promoted
from eaglebug.checks.interface.workers import WorkerScopes
from eaglebug.checks.reach.resolve import consumers
from eaglebug.checks.source.external import ExternalPackage
from eaglebug.checks.source.index import TreeIndex, find_class
from eaglebug.checks.speculative.algorithms import AlgorithmFacts, algorithm_facts
from eaglebug.checks.startup import steps

__all__ = ["AuditResult", "ClassReport", "audit", "find_class", "worker_scopes"]


@dataclass
class AuditResult:
    version: str | None
    package_dir: str
    algorithm: str
    reports: list[ClassReport]
    warnings: list[str]
    external: ExternalPackage | None = None  # an out-of-tree model package in the index
    promoted_from: str | None = None  # the launch's spelling, when the tree rewrites it

    @property
    def findings(self) -> list[Finding]:
        return sort_findings([f for r in self.reports for f in r.findings])


def audit(
    index: TreeIndex,
    class_name: str | None,
    algorithm: str = "EAGLE3",
    draft_class: str | None = None,
    *,
    save: bool = True,
) -> AuditResult:
    """Audit the target class (role target) and, if given, the draft class (role draft),
    under the algorithm the server will run: the tree may rewrite the launch's spelling for
    the draft's architecture (`audit/promotion.py`).

    The reports are a tree answer: asked again of an unchanged tree, they are read back.
    `save=False`: the caller saves the index once its own checks are done (preflight: the
    cache is written whole at each save, 50-60 ms on 0.5.23, and once is enough)."""
    algo = algorithm_facts(index)
    notes: list[str] = []
    rewrite = promoted(index, algorithm, draft_class)
    promoted_from = None
    if rewrite is not None and rewrite.to is not None and rewrite.to.upper() in algo.members:
        draft = (draft_class or "").rsplit(".", 1)[-1]
        notes.append(
            f"--speculative-algorithm {algorithm.upper()} with a {draft} draft: SGLang promotes "
            f"it to {rewrite.to} ({rewrite.read_from}); audited as {rewrite.to}"
        )
        promoted_from, algorithm = algorithm.upper(), rewrite.to
    elif rewrite is not None and rewrite.to is None:
        notes.append(
            f"--speculative-algorithm {algorithm.upper()} is refused for this draft "
            f"({rewrite.read_from}): {rewrite.message}"
        )
    canonical = algo.canonical(algorithm)
    reports = index.answer(
        f"audit:{class_name}:{canonical}:{draft_class}{index.classes.choice_key}",
        list[ClassReport],
        lambda: _reports(index, class_name, canonical, draft_class, algo),
    )
    if save:
        index.save()
    return AuditResult(
        version=index.tree.version,
        package_dir=str(index.tree.package_dir),
        algorithm=canonical,
        reports=reports,
        warnings=list(dict.fromkeys([*notes, *index.warnings])),
        external=index.external,
        promoted_from=promoted_from,
    )


def worker_scopes(index: TreeIndex, algo: AlgorithmFacts) -> WorkerScopes:
    """Which algorithms run each worker function: one per index, since what it learns of
    the workers holds for every audit of the tree."""
    return index.kept("interface.worker_scopes", lambda: WorkerScopes(index, algo))


def _reports(
    index: TreeIndex,
    class_name: str | None,
    algorithm: str,
    draft_class: str | None,
    algo: AlgorithmFacts,
) -> list[ClassReport]:
    if class_name or draft_class:
        steps.trace_ahead(index, algorithm)  # walked meanwhile, for `steps.assign` below
    uses = consumers(index)
    scopes = worker_scopes(index, algo)
    reports = [
        ClassAudit(index, find_class(index, name), algorithm, role, algo, scopes).run(uses)
        for name, role in ((class_name, "target"), (draft_class, "draft"))
        if name
    ]
    for report in reports:  # after both audits: the walk goes on in its helper meanwhile
        report.findings = steps.assign(index, algorithm, report.findings)
    return reports
