"""A delegation patch as a value: the file before and after, its diff and commit message.

Why apart from `patching.py`: a patch is shown, sent and kept far from where it is made (the
TUI's app reads the patches its checks' worker planned, the CLI prints them, a kept answer
holds them); reading one must not load libcst, which only making one needs (~0.3 s).
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from eaglebug.checks.contract.findings import Finding

TRAILER = "Eaglebug-Fix"


@dataclass(frozen=True)
class Patch:
    """One class's delegations: the file before and after, and what was left out and why."""

    path: Path
    file: str  # relative to the tree root, as in call sites
    class_name: str  # qualified
    delegate: str
    methods: tuple[str, ...]
    fixes: tuple[Finding, ...]
    original: bytes
    patched: bytes
    refused: dict[str, str] = field(default_factory=dict)  # method -> reason
    notes: tuple[str, ...] = ()

    @property
    def original_sha(self) -> str:
        return hashlib.sha256(self.original).hexdigest()

    @property
    def short_class(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]

    def diff(self) -> str:
        before = self.original.decode("utf-8", errors="replace").splitlines(keepends=True)
        after = self.patched.decode("utf-8", errors="replace").splitlines(keepends=True)
        return "".join(difflib.unified_diff(before, after, f"a/{self.file}", f"b/{self.file}"))

    def commit_message(self) -> str:
        methods = ", ".join(self.methods)
        lines = [
            f"{self.short_class}: delegate {methods} to self.{self.delegate}",
            "",
            f"SGLang's speculative workers call these on the model object; {self.short_class}",
            f"holds its language model in self.{self.delegate}, which provides them.",
        ]
        for finding in self.fixes:
            for site in finding.call_sites[:3]:
                lines.append(f"  {finding.attribute}: {site.file}:{site.line}")
        for method, reason in self.refused.items():
            lines += ["", f"Not delegated: {method}: {reason}"]
        lines += ["", f"{TRAILER}: {self.class_name}"]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "path": str(self.path),
            "class": self.class_name,
            "delegate": self.delegate,
            "methods": list(self.methods),
            "refused": self.refused,
            "notes": list(self.notes),
            "diff": self.diff(),
        }
