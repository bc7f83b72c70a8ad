"""The findings contract shared by every front end (DESIGN.md, "Findings")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class CallSite:
    """One place in the audited tree that touches the model object."""

    file: str  # relative to the SGLang package's parent folder, e.g. sglang/srt/...
    line: int
    code: str


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
    fix: str | None = None
    # Evidence beyond the contract's core fields (provided-by chains, assumptions, guards).
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "message": self.message,
            "role": self.role,
            "class": self.class_,
            "attribute": self.attribute,
            "call_sites": [dataclasses.asdict(site) for site in self.call_sites],
            "delegate": self.delegate,
            "fix": self.fix,
            "details": self.details,
        }


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(
        findings,
        key=lambda f: (SEVERITY_ORDER[f.severity], f.class_ or "", f.role or "", f.attribute or ""),
    )
