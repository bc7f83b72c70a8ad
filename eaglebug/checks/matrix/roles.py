"""Which roles a registered class can take under each algorithm, and the tree's reason where not.

Every reason is read from the audited tree, with its file:line:
- a class the tree loads only as a draft (`ModelConfig._config_draft_model` renames the target's
  architecture to it in draft mode, `models/draft_arch.py`) has no target role;
- a class can be a draft where the tree renames an architecture to it, or where its module reads
  the target's hidden states from `forward_batch.spec_info.hidden_states` (what an EAGLE-style
  draft runs on);
- an algorithm has a draft role only where the code of its workers (`create_worker`'s dispatch,
  `interface/workers.py`) touches a draft model, or the argument handling asks it for a draft
  path (`models/draft_path.py`): NGRAM does neither;
- the tree may rewrite or refuse an algorithm for a draft's architecture (`interface/promotion.py`),
  and an EAGLE-3 draft under plain EAGLE (or the reverse) is the wrong kind of draft
  (`models/draft_checks.check_algorithm_mismatch`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.interface.audit import worker_scopes
from eaglebug.checks.interface.promotion import promoted
from eaglebug.checks.models.draft_arch import draft_renames
from eaglebug.checks.models.draft_checks import check_algorithm_mismatch
from eaglebug.checks.models.draft_path import draft_path_rules
from eaglebug.checks.reach.resolve import consumers
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.index import TreeIndex, parsed_with
from eaglebug.checks.speculative.algorithms import AlgorithmFacts

_SPEC_INFO = "spec_info"
_HIDDEN = "hidden_states"


@dataclass(frozen=True)
class Roles:
    """What the tree says about roles, read once per tree."""

    algorithms: tuple[str, ...]  # the speculative algorithms, in the enum's order
    draft_only: dict[str, str]  # class name -> why it is only ever a draft
    draft_algorithms: frozenset[str]  # algorithms whose workers touch a draft model
    workers: dict[str, tuple[str, ...]]  # algorithm -> its worker classes (short names)


def speculative_algorithms(algo: AlgorithmFacts) -> tuple[str, ...]:
    """The members some worker of `create_worker` serves (NONE gets none); every member but
    NONE where the dispatch could not be read."""
    if algo.workers:
        served = {m for members in algo.workers.values() for m in members}
        return tuple(m for m in algo.members if m in served)
    return tuple(m for m in algo.members if m != "NONE")


def read_roles(index: TreeIndex, algo: AlgorithmFacts) -> Roles:
    algorithms = speculative_algorithms(algo)
    draft_only: dict[str, str] = {}
    for old, new, where in draft_renames(index).renames:
        if new not in draft_only:
            draft_only[new] = f"SGLang loads it only as a draft: {where} renames {old} to it"
    scopes = worker_scopes(index, algo)
    with_draft: set[str] = set()
    for use in consumers(index):
        if use.role != "draft":
            continue
        for scope in {use.use.scope, use.origin_scope or use.use.scope}:
            with_draft |= scopes.algorithms(scope) or frozenset()
    workers: dict[str, list[str]] = {}
    for worker, served in sorted(algo.workers.items()):
        for member in served:
            workers.setdefault(member, []).append(worker.rsplit(".", 1)[-1])
    # A draft path the argument handling asks for (or defaults) loads a draft model too, even
    # where the worker never calls the draft's model itself (0.5.9's STANDALONE).
    with_draft |= {a for rule in draft_path_rules(index).rules for a in rule.algorithms}
    if not algo.workers:  # no dispatch read: every algorithm may have a draft
        with_draft = set(algorithms)
    return Roles(
        algorithms,
        draft_only,
        frozenset(with_draft),
        {k: tuple(v) for k, v in workers.items()},
    )


def draft_reason(index: TreeIndex, ref: ClassRef, roles: Roles) -> str | None:
    """Why the class can be a draft (None: nothing in the tree says it can)."""
    if ref.facts.name in roles.draft_only:
        return roles.draft_only[ref.facts.name]
    parsed = parsed_with(index, ref.file, _SPEC_INFO)
    if parsed is None:
        return None
    for node in syntax.walk(parsed.tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == _HIDDEN
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == _SPEC_INFO
        ):
            return (
                f"its module reads the target's hidden states from spec_info.hidden_states "
                f"({ref.file}:{node.lineno})"
            )
    return None


def not_applicable(
    index: TreeIndex, ref: ClassRef, algorithm: str, role: str, roles: Roles
) -> str | None:
    """The tree's reason this class cannot take `role` under `algorithm`; None if it can."""
    name = ref.facts.name
    if role == "target":
        return roles.draft_only.get(name)
    if algorithm not in roles.draft_algorithms:
        workers = ", ".join(roles.workers.get(algorithm, ())) or "its worker"
        return (
            f"{algorithm} runs no draft model: no code of {workers} touches one, and the "
            "argument handling never asks it for --speculative-draft-model-path"
        )
    rewrite = promoted(index, algorithm, ref.qualname)
    if rewrite is not None and rewrite.to is None:
        return (
            f"SGLang refuses {algorithm} with this draft ({rewrite.read_from}): {rewrite.message}"
        )
    if rewrite is not None:
        return f"SGLang runs {algorithm} with this draft as {rewrite.to} ({rewrite.read_from})"
    for finding in check_algorithm_mismatch(index, algorithm, ref.qualname):
        evidence = finding.evidence
        where = evidence.read_from if isinstance(evidence, ConfigEvidence) else None
        return finding.message + (f" ({where})" if where else "")
    return None
