"""Every registered class under every algorithm of each release the tests read (issue 12).

One index per release (a module fixture), every `EntryClass` audited under every member of the
tree's `SpeculativeAlgorithm`. The false categories the issue found are asserted gone, and the
true requirements next to them asserted kept, each against the class index (does the class
provide the name?) rather than a count typed in: a one-of chain is an error exactly for the
classes that provide none of the names its branches can take, EAGLE3's unguarded
`set_eagle3_layers_to_capture` exactly for the classes without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.interface.audit import audit
from eaglebug.checks.reach.conditions import Pred, flag_names
from eaglebug.checks.reach.guards import GuardContext, GuardMemo, possible
from eaglebug.checks.reach.resolve import consumers, origin_role
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.checks.speculative.algorithms import algorithm_facts

RELEASES = ("sglang_059", "sglang_0510", "sglang_0514", "sglang_0522", "sglang_0523")
CAPTURE_ONE_OF = ("set_dspark_layers_to_capture", "set_dflash_layers_to_capture")


@dataclass
class Survey:
    root: Path
    index: TreeIndex
    refs: dict[str, ClassRef]
    members: tuple[str, ...]
    errors: dict[str, dict[str, list[Finding]]]  # algorithm -> class -> its error findings

    def has(self, cls: str, attribute: str) -> bool:
        return self.index.classes.lookup(self.refs[cls], attribute) is not None

    def with_error(self, algorithm: str, attribute: str) -> set[str]:
        return {
            cls
            for cls, findings in self.errors[algorithm].items()
            if any(f.attribute == attribute for f in findings)
        }

    def attributes(self, algorithm: str) -> set[str]:
        return {f.attribute or "" for fs in self.errors[algorithm].values() for f in fs}


_SURVEYS: dict[str, Survey] = {}


def _survey(request: pytest.FixtureRequest, release: str) -> Survey:
    if release not in _SURVEYS:
        root: Path = request.getfixturevalue(release)
        index = TreeIndex(locate(str(root)), use_cache=False)
        refs = {refs[0].qualname: refs[0] for refs in index.registry().values() if refs}
        members = algorithm_facts(index).members
        errors: dict[str, dict[str, list[Finding]]] = {}
        for algorithm in members:
            errors[algorithm] = {}
            for cls in sorted(refs):
                found = [f for f in audit(index, cls, algorithm).findings if f.severity == "error"]
                if found:
                    errors[algorithm][cls] = found
        _SURVEYS[release] = Survey(root, index, refs, members, errors)
    return _SURVEYS[release]


@pytest.fixture(scope="module", params=RELEASES)
def survey(request: pytest.FixtureRequest) -> Survey:
    return _survey(request, request.param)


@pytest.fixture(scope="module")
def survey_0522(request: pytest.FixtureRequest) -> Survey:
    return _survey(request, "sglang_0522")


@pytest.fixture(scope="module")
def survey_0523(request: pytest.FixtureRequest) -> Survey:
    return _survey(request, "sglang_0523")


def test_every_missing_error_names_what_the_class_lacks(survey: Survey) -> None:
    """An error for a missing name is never raised for a class that provides it (or, for a
    one-of, any of the names)."""
    for algorithm, by_class in survey.errors.items():
        for cls, findings in by_class.items():
            for f in findings:
                if f.id != "interface.missing":
                    continue
                names = (f.attribute or "").split(" or ")
                assert not any(survey.has(cls, n) for n in names), (algorithm, cls, f.attribute)


def test_no_speculative_requirement_without_a_worker(survey: Survey) -> None:
    """NONE (create_worker gives it no worker) requires nothing of any class."""
    assert survey.errors["NONE"] == {}


def test_protocol_members_and_flags_from_them_are_not_required(survey: Survey) -> None:
    guarded = {
        "get_aux_hidden_states_width",  # isinstance(model, _SupportsPackedAuxHiddenStates)
        "get_pp_proxy_dspark_hidden_size",  # isinstance(model, _SupportsDSparkPPProxy)
        "set_dspark_target_hidden_projector",  # under `if not isinstance(...): return False`
        "should_project_dspark_target_hidden",  # behind a flag set from that helper
    }
    for algorithm in survey.members:
        assert not guarded & survey.attributes(algorithm), algorithm


def test_standalone_does_not_share_the_target_embedding(survey: Survey) -> None:
    """0.5.9's StandaloneWorker replaces __init__; 0.5.21+'s StandaloneDraftWorker makes
    init_lm_head a no-op: neither reaches the target's get_embed_and_head."""
    assert survey.with_error("STANDALONE", "get_embed_and_head") == set()
    # ... while EAGLE still needs it of the classes without it (the true requirement).
    lacking = {c for c in survey.refs if not survey.has(c, "get_embed_and_head")}
    assert survey.with_error("EAGLE", "get_embed_and_head") <= lacking
    assert len(survey.with_error("EAGLE", "get_embed_and_head")) > len(lacking) // 2


def test_eagle3_still_requires_the_capture_it_calls_unguarded(survey: Survey) -> None:
    lacking = {c for c in survey.refs if not survey.has(c, "set_eagle3_layers_to_capture")}
    flagged = survey.with_error("EAGLE3", "set_eagle3_layers_to_capture")
    assert flagged <= lacking
    assert len(flagged) > len(lacking) // 2
    llama = "sglang.srt.models.llama.LlamaForCausalLM"
    assert llama not in flagged and survey.has(llama, "set_eagle3_layers_to_capture")


@pytest.mark.parametrize("version", ["0522", "0523"])
def test_the_capture_chain_is_one_requirement_where_it_is_reached(
    request: pytest.FixtureRequest, version: str
) -> None:
    survey = _survey(request, f"sglang_{version}")
    either = " or ".join(CAPTURE_ONE_OF)
    neither = {c for c in survey.refs if not any(survey.has(c, n) for n in CAPTURE_ONE_OF)}
    dflash_only = {c for c in survey.refs if survey.has(c, CAPTURE_ONE_OF[1])}
    dspark_only = {c for c in survey.refs if survey.has(c, CAPTURE_ONE_OF[0])} - dflash_only
    assert neither and dspark_only and dflash_only
    # DSPARK: either name takes a branch; the classes with neither get one finding for both.
    assert survey.with_error("DSPARK", either) == neither
    assert not (
        survey.with_error("DSPARK", CAPTURE_ONE_OF[0])
        | survey.with_error("DSPARK", CAPTURE_ONE_OF[1])
    )
    finding = next(f for f in survey.errors["DSPARK"][min(neither)] if f.attribute == either)
    details = finding.to_json()["details"]
    rel, line = details["read_from"].rsplit(":", 1)
    raise_line = (survey.root / rel).read_text(encoding="utf-8").splitlines()[int(line) - 1]
    assert raise_line.strip().startswith("raise ValueError")
    assert "implements neither" in details["sglang_message"]
    # DFLASH: the classes with set_dflash_layers_to_capture are clean of it.
    dflash_flagged = survey.with_error("DFLASH", either) | survey.with_error(
        "DFLASH", CAPTURE_ONE_OF[1]
    )
    assert neither <= dflash_flagged
    assert not dflash_flagged & dflash_only
    # Algorithms that set no DFlash capture flag never reach the chain.
    for algorithm in ("EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "NONE"):
        assert not {either, *CAPTURE_ONE_OF} & survey.attributes(algorithm), algorithm


@pytest.mark.parametrize("version", ["0522", "0523"])
def test_dflash_decides_the_dspark_branch(request: pytest.FixtureRequest, version: str) -> None:
    """0.5.22 passes `is_dspark=self.spec_algorithm.is_dspark()`, 0.5.23 a config built with
    `SpecAuxHiddenStateConfig(is_dspark=spec_algorithm.is_dspark())`: under DFLASH the DSpark
    branch cannot be taken, so a class with only set_dspark_layers_to_capture still fails."""
    survey = _survey(request, f"sglang_{version}")
    flagged = survey.with_error("DFLASH", CAPTURE_ONE_OF[1])
    dspark_only = {c for c in survey.refs if survey.has(c, CAPTURE_ONE_OF[0])} - {
        c for c in survey.refs if survey.has(c, CAPTURE_ONE_OF[1])
    }
    assert dspark_only and dspark_only <= flagged
    finding = next(
        f for f in survey.errors["DFLASH"][min(dspark_only)] if f.attribute == CAPTURE_ONE_OF[1]
    )
    assert "cannot be taken for DFLASH" in finding.message


def test_a_guard_on_the_draft_every_caller_passes(survey_0523: Survey) -> None:
    """`if draft_model is not None and hasattr(target_model, "get_embed_and_head_for_draft")`
    returns first: every caller passes a draft model, so a class with the draft variant never
    reaches `get_embed_and_head` there."""
    uses = [
        u
        for u in consumers(survey_0523.index)
        if u.use.attribute == "get_embed_and_head" and u.file.endswith("pp_draft_embedding.py")
    ]
    assert uses
    for u in uses:
        for algorithm in ("EAGLE", "FROZEN_KV_MTP"):
            facts = algorithm_facts(survey_0523.index)
            ctx = GuardContext(
                algorithm=algorithm,
                role="target",
                predicates=facts.predicates,
                flags={},
                provides=lambda a: a == "get_embed_and_head_for_draft",
                origin_role=lambda o, r=u.role: origin_role(o, r),
            )
            assert not possible(u.conds, ctx), u.via
            without = GuardContext(
                algorithm, "target", facts.predicates, {}, lambda a: False, ctx.origin_role
            )
            assert possible(u.conds, without), u.via


def test_the_guard_memo_answers_as_the_guards_do(survey_0523: Survey) -> None:
    """Every guarded use of 0.5.23, under every algorithm and role, for classes that provide
    every name, none, or some (and the flag table full or empty): the memo, shared by all of
    them as in a survey, says what evaluating the guards says. It fails if the memo reused an
    answer without asking again what that answer rested on."""
    index = survey_0523.index
    facts = algorithm_facts(index)
    # Every flag the guards read, truthy only under the tree's first predicate: a full table
    # makes a flag's value depend on the algorithm, an empty one leaves it undecided.
    uses = list(consumers(index))
    first = next(iter(facts.predicates))
    flags = {name: [(Pred(name=first),)] for u in uses for name in flag_names(u.conds)}
    assert flags
    memo = GuardMemo()
    checked = differs = 0
    for u in uses:
        if not u.conds:
            continue
        answers = set()
        for algorithm in facts.members:
            for role in ("target", "draft"):
                for provides in (lambda a: True, lambda a: False, lambda a: len(a) % 2 == 0):
                    for table in (flags, {}):
                        ctx = GuardContext(
                            algorithm, role, facts.predicates, table, provides,
                            lambda o, r=u.role: origin_role(o, r), class_name="KimiK25",
                        )  # fmt: skip
                        value = possible(u.conds, ctx)
                        assert memo.possible(u.conds, ctx) == value, (u.via, algorithm, role)
                        answers.add(value)
                        checked += 1
        differs += len(answers) > 1
    assert checked > 1000 and differs > 10  # the contexts do tell uses apart


def test_a_gemma4_assistant_draft_promotes_nextn(sglang_0523: Path) -> None:
    index = TreeIndex(locate(str(sglang_0523)), use_cache=False)
    result = audit(index, "Gemma4ForCausalLM", "NEXTN", "Gemma4AssistantForCausalLM")
    assert (result.algorithm, result.promoted_from) == ("FROZEN_KV_MTP", "NEXTN")
    (note,) = [w for w in result.warnings if "promotes" in w]
    rel, line = note.split("(", 1)[1].split(")", 1)[0].rsplit(":", 1)
    text = (sglang_0523 / rel).read_text(encoding="utf-8").splitlines()[int(line) - 1]
    assert text.strip() == 'return "FROZEN_KV_MTP"'
    assert audit(index, "Gemma4ForCausalLM", "NEXTN").algorithm == "EAGLE"
