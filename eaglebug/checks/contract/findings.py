"""The findings contract shared by every front end (DESIGN.md, "Findings").

A finding has a stable key (id, qualified class, attribute, role) by which every front end
selects it, marks it pending or fixed and records what was applied; typed evidence
(`evidence.py`) and a typed fix (`fixes.py`). `to_json` keeps the JSON contract: `fix` is the
fix's text (exactly what `--apply` writes, for a patch), `fix_detail` the typed fix, `details`
the evidence under the keys it has always had.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from eaglebug.checks.contract.evidence import (
    ConfigEvidence,
    Evidence,
    InterfaceEvidence,
    LogEvidence,
)
from eaglebug.checks.contract.fixes import Choice, Fix

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class CallSite:
    """One place in the audited tree that touches the model object."""

    file: str  # relative to the SGLang package's parent folder, e.g. sglang/srt/...
    line: int
    code: str


@dataclass(frozen=True, order=True)
class FindingKey:
    """What a finding is, whatever its message or evidence says this time."""

    id: str
    class_: str | None
    attribute: str | None
    role: str | None

    def text(self) -> str:
        return "|".join(part or "" for part in (self.id, self.class_, self.attribute, self.role))

    @classmethod
    def parse(cls, text: str) -> FindingKey:
        id_, class_, attribute, role = ([*text.split("|"), "", "", "", ""])[:4]
        return cls(id_, class_ or None, attribute or None, role or None)


@dataclass(frozen=True)
class Step:
    """Where in SGLang's start-up the finding would stop it (see `steps.py`)."""

    name: str  # arguments | distributed_init | target_load | draft_load | kv_pools | lm_head | ...
    label: str  # "KV pools"
    role: str  # the role the step runs in: target | draft
    order: int  # its place in the start-up: smaller runs first
    within: bool  # inside the step (True) or just before it
    site: str  # file:line where the step begins
    after: tuple[str, ...] = ()  # the weight loads finished by then: target, draft
    loaded_bytes_per_gpu: int | None = None  # what those loads put on each GPU

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "role": self.role,
            "order": self.order,
            "within": self.within,
            "site": self.site,
            "after_loads": list(self.after),
            "loaded_bytes_per_gpu": self.loaded_bytes_per_gpu,
        }


@dataclass(frozen=True)
class Finding:
    """One problem, its evidence and its fix; serialises to the JSON contract."""

    id: str
    severity: Severity
    message: str
    role: str | None = None
    class_: str | None = None
    attribute: str | None = None
    call_sites: tuple[CallSite, ...] = ()
    delegate: str | None = None
    fix: Fix | None = None
    evidence: Evidence | None = field(default=None, hash=False)
    step: Step | None = field(default=None, hash=False, compare=False)

    @property
    def key(self) -> FindingKey:
        return FindingKey(self.id, self.class_, self.attribute, self.role)

    @property
    def interface(self) -> InterfaceEvidence | None:
        return self.evidence if isinstance(self.evidence, InterfaceEvidence) else None

    @property
    def log(self) -> LogEvidence | None:
        return self.evidence if isinstance(self.evidence, LogEvidence) else None

    @property
    def ranks(self) -> tuple[str, ...]:
        return self.log.ranks if self.log else ()

    def to_json(self) -> dict[str, Any]:
        details = self.evidence.to_json() if self.evidence is not None else {}
        if isinstance(self.fix, Choice):  # the options' trade-offs, where they always were
            details["options"] = {o.text(): o.tradeoff for o in self.fix.options}
        return {
            "id": self.id,
            "key": self.key.text(),
            "severity": self.severity,
            "message": self.message,
            "role": self.role,
            "class": self.class_,
            "attribute": self.attribute,
            "call_sites": [dataclasses.asdict(site) for site in self.call_sites],
            "delegate": self.delegate,
            "fix": self.fix.text() if self.fix is not None else None,
            "fix_detail": self.fix.to_json() if self.fix is not None else None,
            "details": details,
            "step": self.step.to_json() if self.step is not None else None,
        }


def resting_on(finding: Finding, unknowns: Sequence[str], read_as: str | None = None) -> Finding:
    """A config finding whose verdict rests on values not known here (`unknowns`, each said
    as the user wrote it: "--kv-cache-dtype $D: set when the launch runs, ..."). It is not an
    error on a guess: an error is a warning that says it is not decided, and every finding
    says in `assumed` what it took. `read_as`: how the check read them where it did not read
    them as unknown ("at its default"), said in the message."""
    if not unknowns:
        return finding
    evidence = finding.evidence if isinstance(finding.evidence, ConfigEvidence) else None
    if evidence is None and finding.evidence is not None:
        return finding  # interface and log findings carry their own `assumed`
    new = tuple(u for u in unknowns if evidence is None or u not in evidence.assumed)
    base = evidence or ConfigEvidence()
    said = []
    if finding.severity == "error":
        said.append("not decided")
    if read_as is not None:
        heads = " and ".join(u.partition(": ")[0] for u in unknowns)
        said.append(f"read with {heads} {read_as}")
    message = finding.message + (f"; {': '.join(said)} (see assumed)" if said else "")
    return dataclasses.replace(
        finding,
        severity="warning" if finding.severity == "error" else finding.severity,
        message=message,
        evidence=dataclasses.replace(base, assumed=base.assumed + new),
    )


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """In start-up order where the steps are known (what SGLang would hit first comes first),
    then by severity; findings without a step after those with one."""
    return sorted(
        findings,
        key=lambda f: (
            f.step is None,
            f.step.order if f.step is not None else 0,
            SEVERITY_ORDER[f.severity],
            f.class_ or "",
            f.role or "",
            f.attribute or "",
        ),
    )
