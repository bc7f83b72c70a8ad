"""Draft-side config findings: no draft given, the wrong kind of draft, an lm_head never loaded.

Each reads the rule from the audited tree (`models/draft_path.py`, `models/draft_code.py`) and the draft's
checkpoint from its weight index or safetensors headers (`checkpoint.py`); where either
cannot be read, the check says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import AdviceFix, FlagFix
from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.models.checkpoint import Checkpoint, read_checkpoint, shards_stamp
from eaglebug.checks.models.checks import check_vocab
from eaglebug.checks.models.draft_code import flavour, keeps_own_head, lm_head
from eaglebug.checks.models.draft_path import draft_path_rules
from eaglebug.checks.models.weightmap import loader_shape, unplaceable
from eaglebug.checks.source.index import TreeIndex, find_class
from eaglebug.checks.speculative.algorithms import algorithm_facts

_ANSWER = "draftchecks:"
_KEEP_ANSWERS = 8

_EAGLE3 = "is_eagle3"
_EAGLE = "is_eagle"


def check_algorithm_unknown(launch: LaunchSpec) -> list[Finding]:
    """`--speculative-algorithm $ALGO`: which algorithm runs is not known here, so none of the
    checks of a speculative launch ran (the interface audit of the target and the draft, the
    draft's configs); the launch is not "fine" on a guess that it is not speculative."""
    note = launch.unknown("speculative_algorithm")
    if note is None:
        return []
    option = launch.spelled.get("speculative_algorithm", "--speculative-algorithm")
    return [
        Finding(
            id="config.speculative_algorithm",
            severity="warning",
            message=f"{option} {launch.at_run_time['speculative_algorithm']} is set when the "
            "launch runs: the checks of a speculative launch (the interface audit of the target "
            "and the draft, the draft's configs) were not run",
            attribute="speculative_algorithm",
            fix=AdviceFix(f"preflight the launch with {option} written in it (EAGLE3, ...)"),
            evidence=ConfigEvidence((), assumed=(note,)),
        )
    ]


def check_draft_missing(index: TreeIndex, algorithm: str, target_arch: str | None) -> list[Finding]:
    """`--speculative-algorithm X` without `--speculative-draft-model-path`: what SGLang does."""
    rules = draft_path_rules(index)
    add = FlagFix("--speculative-draft-model-path", "DRAFT", "the draft trained for this target")
    for rule in rules.for_algorithm(algorithm):
        if rule.raises is not None:
            return [
                Finding(
                    id="config.draft_missing",
                    severity="error",
                    message=(
                        f"--speculative-algorithm {algorithm} without "
                        "--speculative-draft-model-path: SGLang refuses to start"
                    ),
                    role="draft",
                    attribute="speculative_draft_model_path",
                    fix=add,
                    evidence=ConfigEvidence.of(
                        {"algorithm": algorithm}, read_from=rule.read_from, sglang=rule.raises
                    ),
                )
            ]
        if rule.conditional:
            return [
                Finding(
                    id="config.draft_missing",
                    severity="warning",
                    message=(
                        f"--speculative-algorithm {algorithm} without "
                        "--speculative-draft-model-path: SGLang decides what to load from a "
                        f"condition eaglebug does not read ({rule.read_from})"
                    ),
                    role="draft",
                    attribute="speculative_draft_model_path",
                    fix=add,
                    evidence=ConfigEvidence.of({"algorithm": algorithm}, read_from=rule.read_from),
                )
            ]
        if rule.defaults_for is not None and (
            not rule.defaults_for or (target_arch is not None and target_arch in rule.defaults_for)
        ):
            eagle3 = algorithm in algorithm_facts(index).predicates.get(_EAGLE3, frozenset())
            return [
                Finding(
                    id="config.draft_missing",
                    severity="warning" if eagle3 else "info",
                    message=(
                        f"no --speculative-draft-model-path: SGLang uses the target checkpoint "
                        f"({target_arch or 'this target'}) as the draft, i.e. its own MTP layers"
                        + (
                            f"; {algorithm} expects a separately trained EAGLE-3 draft"
                            if eagle3
                            else ""
                        )
                    ),
                    role="draft",
                    attribute="speculative_draft_model_path",
                    fix=add if eagle3 else AdviceFix("nothing to do: the target carries its draft"),
                    evidence=ConfigEvidence.of(
                        {"algorithm": algorithm, "target_architecture": target_arch},
                        read_from=rule.read_from,
                    ),
                )
            ]
    needs = any(algorithm in r.algorithms for r in rules.rules)
    if not needs:
        return []
    listing = next((r for r in rules.for_algorithm(algorithm) if r.defaults_for), None)
    listed = listing.defaults_for if listing is not None and listing.defaults_for else ()
    where = rules.fallback or rules.for_algorithm(algorithm)[0].read_from
    return [
        Finding(
            id="config.draft_missing",
            severity="error",
            message=(
                f"--speculative-algorithm {algorithm} without --speculative-draft-model-path: "
                f"this SGLang sets a default draft only for {', '.join(listed[:4])}"
                + ("..." if len(listed) > 4 else "")
                + f"; for {target_arch or 'this target'} the draft runner falls back to the "
                "target's own --model-path and loads the target again as its draft"
            ),
            role="draft",
            attribute="speculative_draft_model_path",
            fix=add,
            evidence=ConfigEvidence.of(
                {
                    "algorithm": algorithm,
                    "target_architecture": target_arch,
                    "defaults_for": list(listed),
                    "defaults_read_from": listing.read_from if listing is not None else None,
                },
                read_from=where,
            ),
        )
    ]


def target_is_draft(index: TreeIndex, algorithm: str, target_arch: str | None) -> bool:
    """Without a draft path, does this tree make the target checkpoint the draft (MTP)?"""
    for rule in draft_path_rules(index).for_algorithm(algorithm):
        if rule.raises is not None or rule.conditional:
            return False
        if rule.defaults_for is not None and (
            not rule.defaults_for or (target_arch is not None and target_arch in rule.defaults_for)
        ):
            return True
    return False


def check_algorithm_mismatch(index: TreeIndex, algorithm: str, draft_class: str) -> list[Finding]:
    """EAGLE with an EAGLE-3 draft, or EAGLE3 with an EAGLE(-2) draft."""
    predicates = algorithm_facts(index).predicates
    wants_eagle3 = algorithm in predicates.get(_EAGLE3, frozenset())
    plain_eagle = algorithm in predicates.get(_EAGLE, frozenset()) and not wants_eagle3
    if not (wants_eagle3 or plain_eagle):
        return []
    said = flavour(index, find_class(index, draft_class))
    if said is None or said.eagle3 == wants_eagle3:
        return []
    short = draft_class.rsplit(".", 1)[-1]
    if wants_eagle3:
        message = (
            f"--speculative-algorithm {algorithm} with {short}, an EAGLE draft that does not "
            "take EAGLE-3's captured hidden states (its capture_aux_hidden_states is False)"
        )
        flag = "EAGLE"
    else:
        message = (
            f"--speculative-algorithm {algorithm} with {short}, an EAGLE-3 draft: the target "
            "captures no auxiliary hidden states, so the draft runs on the wrong features and "
            "almost nothing is accepted (acceptance length ~1.0)"
        )
        flag = "EAGLE3"
    return [
        Finding(
            id="config.algorithm_mismatch",
            severity="error",
            message=message,
            role="draft",
            class_=short,
            attribute="speculative_algorithm",
            fix=FlagFix("--speculative-algorithm", flag, f"what a {short} draft is trained for"),
            evidence=ConfigEvidence.of(
                {"algorithm": algorithm, "draft_class": short, "draft_is_eagle3": said.eagle3},
                read_from=said.read_from,
            ),
        )
    ]


def check_draft_lm_head(
    index: TreeIndex,
    algorithm: str,
    draft_class: str,
    draft_config: Mapping[str, Any],
    checkpoint: Checkpoint,
) -> list[Finding]:
    """A draft with an lm_head of its own, not loaded from the target, whose checkpoint lacks it.

    Only where the tree's draft worker keeps the draft's own head for this algorithm (EAGLE3's
    `set_embed` branch); elsewhere the worker gives every draft the target's head."""
    predicates = algorithm_facts(index).predicates
    kept = [k for k in keeps_own_head(index) if algorithm in predicates.get(k.predicate, ())]
    if not kept:
        return []
    if checkpoint.has("lm_head.weight") is not False:
        return []  # asked first: the run of the draft's `__init__` below is a third of a second
    head = lm_head(index, find_class(index, draft_class), draft_config)
    if head is None or head.from_target or not head.fresh:
        return []
    short = draft_class.rsplit(".", 1)[-1]
    return [
        Finding(
            id="config.draft_lm_head",
            severity="error",
            message=(
                f"{short} builds its own lm_head for this config (not loaded from the target), "
                f"but the draft checkpoint ({checkpoint.source}) has no lm_head weight: it stays "
                "at its initial values and nearly no draft token is accepted (acceptance ~1.0)"
            ),
            role="draft",
            class_=short,
            attribute="lm_head",
            fix=AdviceFix(
                "use the draft checkpoint that ships lm_head.weight (or one whose config lets "
                "SGLang take the target's lm_head)"
            ),
            evidence=ConfigEvidence.of(
                {
                    "draft_vocab_size": draft_config.get("draft_vocab_size"),
                    "tie_word_embeddings": draft_config.get("tie_word_embeddings"),
                    "checkpoint": checkpoint.source,
                    "worker_keeps_draft_head": kept[0].read_from,
                },
                read_from=head.read_from,
            ),
        )
    ]


def check_draft_weights(
    index: TreeIndex, draft_class: str, checkpoint: Checkpoint
) -> list[Finding]:
    """Checkpoint tensors the draft class's `load_weights` drops without a word."""
    if checkpoint.names is None:
        return []
    ref = find_class(index, draft_class)
    shape = loader_shape(index, ref)
    if shape is None:
        return []
    dropped = unplaceable(index, ref, shape, checkpoint.names)
    if not dropped:
        return []
    short = draft_class.rsplit(".", 1)[-1]
    return [
        Finding(
            id="config.draft_weights",
            severity="error",
            message=(
                f"{len(dropped)} of {len(checkpoint.names)} tensors in the draft checkpoint "
                f"match no parameter of {short}, whose load_weights drops them silently: "
                f"{', '.join(dropped[:5])}"
                + (" ..." if len(dropped) > 5 else "")
                + "; those weights keep their initial values (acceptance ~1.0)"
            ),
            role="draft",
            class_=short,
            attribute="load_weights",
            fix=AdviceFix(
                f"rename the tensors to {short}'s parameter names (or use a checkpoint "
                "exported for SGLang)"
            ),
            evidence=ConfigEvidence.of(
                {"dropped": dropped, "checkpoint": checkpoint.source},
                read_from=shape.read_from,
            ),
        )
    ]


def draft_findings(
    index: TreeIndex,
    algorithm: str,
    draft_class: str | None,
    target_config: Mapping[str, Any],
    draft_config: Mapping[str, Any],
    draft_dir: Path | None,
) -> list[Finding]:
    """Every check of one launch that reads the draft's checkpoint (and, when known, its class):
    the vocabulary's token map, the kind of draft, its lm_head, the tensors its loader drops.

    A tree answer, kept by everything they read besides the tree (the algorithm, the draft's
    class, both configs, the draft folder's weight index and shards by name, size and mtime):
    no launch flag changes them, so a preflight of the same launch with a flag changed (the
    everyday re-check) or another shell variable reads them back instead of evaluating the
    draft's code again (0.37 s in a profile on 0.5.23; the run ends ~0.14 s sooner, since the
    memory stage parses most of the same files anyway)."""

    def checked() -> list[Finding]:
        checkpoint = read_checkpoint(draft_dir)
        shape = loader_shape(index, find_class(index, draft_class)) if draft_class else None
        token_map_from = shape.skip_site("d2t") if shape is not None else None
        found = check_vocab(target_config, draft_config, algorithm, checkpoint, token_map_from)
        if draft_class is None:
            return found
        return [
            *found,
            *check_algorithm_mismatch(index, algorithm, draft_class),
            *check_draft_lm_head(index, algorithm, draft_class, draft_config, checkpoint),
            *check_draft_weights(index, draft_class, checkpoint),
        ]

    stamp = shards_stamp(draft_dir) if draft_dir is not None else None
    if draft_dir is not None and stamp is None:  # a folder that cannot be listed: read it now
        return checked()
    subject = [algorithm, draft_class, target_config, draft_config, str(draft_dir), stamp]
    return index.answer_for(_ANSWER, subject, list[Finding], checked, _KEEP_ANSWERS)
