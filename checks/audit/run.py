"""The interface audit: what the runtime needs from a model class, and what the class lacks.

Required attributes are derived from the consumers found in the tree being audited (see
`reach.py`), filtered per algorithm and role by their guards (`guards.py`) and by which
worker modules serve the algorithm (`algorithms.py`, `workers.py`); `audit/classes.py` audits
each class. A whole audit is kept as a tree answer, so asking again costs nothing.
"""

from __future__ import annotations

import difflib
import weakref
from dataclasses import dataclass

from eaglebug.checks.audit.algorithms import AlgorithmFacts, algorithm_facts
from eaglebug.checks.audit.classes import ClassAudit, ClassReport
from eaglebug.checks.audit.promotion import promoted
from eaglebug.checks.audit.workers import WorkerScopes
from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.findings import Finding, sort_findings
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.external import ExternalPackage
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.startup import steps

__all__ = ["AuditResult", "ClassReport", "audit", "find_class"]

_SCOPES: weakref.WeakKeyDictionary[TreeIndex, WorkerScopes] = weakref.WeakKeyDictionary()


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


def find_class(index: TreeIndex, name: str) -> ClassRef:
    """A class by short or qualified name; a registered (EntryClass) one wins ties."""
    classes = index.classes
    if "." in name:
        ref = classes.cls(name)
        if ref is not None:
            return ref
        short = name.rsplit(".", 1)[-1]
    else:
        short = name
    candidates = classes.classes_named(short)
    if not candidates:
        broken = classes.unparsed_files_defining(short)
        if broken:
            rel, why = broken[0]
            raise InputError(
                f"{rel}: {why}; class {short!r} is defined there, so it cannot be audited",
                f"fix the file (python -m py_compile {index.path_of(rel)} shows where)",
            )
        close = difflib.get_close_matches(short, sorted(classes.all_class_names()), n=3, cutoff=0.6)
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
    exported = set(classes.exporter_names(short))  # registered wins a tie
    candidates.sort(key=lambda r: (r.qualname not in exported, "/models/" not in r.file, r.file))
    return candidates[0]


def audit(
    index: TreeIndex,
    class_name: str | None,
    algorithm: str = "EAGLE3",
    draft_class: str | None = None,
) -> AuditResult:
    """Audit the target class (role target) and, if given, the draft class (role draft),
    under the algorithm the server will run: the tree may rewrite the launch's spelling for
    the draft's architecture (`audit/promotion.py`).

    The reports are a tree answer: asked again of an unchanged tree, they are read back."""
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
        lambda: _reports(index, class_name, canonical, draft_class, algo),
    )
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


def _reports(
    index: TreeIndex,
    class_name: str | None,
    algorithm: str,
    draft_class: str | None,
    algo: AlgorithmFacts,
) -> list[ClassReport]:
    uses = index.consumers()
    scopes = _SCOPES.get(index)
    if scopes is None:  # one per index: what it learns of the workers holds for every audit
        scopes = _SCOPES[index] = WorkerScopes(index, algo)
    reports = []
    for name, role in ((class_name, "target"), (draft_class, "draft")):
        if name:
            ref = find_class(index, name)
            report = ClassAudit(index, ref, algorithm, role, algo, scopes).run(uses)
            report.findings = steps.assign(index, algorithm, report.findings)
            reports.append(report)
    return reports
