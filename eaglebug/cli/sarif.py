"""SARIF 2.1.0 for `audit`, `preflight` and `matrix` (`--format sarif`): what code-scanning
tools (GitHub code scanning, VS Code's SARIF viewer, `sarif-tools`) read.

One rule per finding id; a result's location is the audited class's definition (a config
finding's, the tree file its rule was read from), its related locations the call sites, and
its fix, where the finding's fix is a delegation patch, the very patch `eaglebug fix --apply`
writes (`checks.plan_patches`) as SARIF replacements. Paths are relative to the repository
that holds the tree (`python/sglang/...` in an SGLang checkout, what code scanning matches
against the repository's files), or to the tree root outside a repository
(`originalUriBaseIds` SRCROOT).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eaglebug import __version__
from eaglebug.checks import ConfigEvidence, Finding, Patch

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
BASE = "SRCROOT"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
# What each family of finding ids is about (a rule's short description).
_FAMILIES = {
    "interface.missing": "A model class lacks an attribute SGLang calls on the model object",
    "interface.stub": "A model class's method only raises, or silently does nothing",
    "interface.signature": "A model class's method cannot accept the calls SGLang makes",
    "config": "A launch or model config SGLang refuses or mishandles",
    "log": "A failure read from an SGLang server log",
    "runtime": "What a running SGLang server shows",
}


@dataclass(frozen=True)
class Result:
    """One finding, with where its class is defined (file relative to the tree root, line)."""

    finding: Finding
    where: tuple[str, int] | None
    algorithm: str | None = None


def _describe(rule: str) -> str:
    return _FAMILIES.get(rule) or _FAMILIES.get(rule.split(".", 1)[0], f"eaglebug {rule}")


def repository_root(root: Path) -> tuple[Path, str]:
    """(the folder URIs are relative to, the prefix from it to the tree root): the nearest
    folder at or above the tree root that holds `.git`, else the tree root itself."""
    root = root.resolve()
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            prefix = root.relative_to(folder).as_posix()
            return folder, "" if prefix == "." else prefix + "/"
    return root, ""


def _artifact(file: str, prefix: str) -> dict[str, Any]:
    return {"uri": prefix + file, "uriBaseId": BASE}


def _location(file: str, line: int, prefix: str, snippet: str | None = None) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(1, line)}
    if snippet:
        region["snippet"] = {"text": snippet}
    return {"physicalLocation": {"artifactLocation": _artifact(file, prefix), "region": region}}


def _read_from(finding: Finding) -> tuple[str, int] | None:
    """A config finding's rule, `file:line` in the tree, as a location."""
    evidence = finding.evidence
    if not isinstance(evidence, ConfigEvidence) or not evidence.read_from:
        return None
    file, _, line = evidence.read_from.rpartition(":")
    return (file, int(line)) if file and line.isdigit() else None


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def sarif_fix(patch: Patch, prefix: str = "") -> dict[str, Any]:
    """The patch as a SARIF fix: each changed run of lines, by character offset in the file."""
    before = patch.original.decode("utf-8", errors="replace")
    after = patch.patched.decode("utf-8", errors="replace")
    old_lines = before.splitlines(keepends=True)
    new_lines = after.splitlines(keepends=True)
    starts = _offsets(before)
    replacements = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        replacements.append(
            {
                "deletedRegion": {"charOffset": starts[i1], "charLength": starts[i2] - starts[i1]},
                "insertedContent": {"text": "".join(new_lines[j1:j2])},
            }
        )
    return {
        "description": {
            "text": f"{patch.short_class}: delegate {', '.join(patch.methods)} "
            f"to self.{patch.delegate} (what `eaglebug fix --apply` writes)"
        },
        "artifactChanges": [
            {
                "artifactLocation": {"uri": patch.file, "uriBaseId": BASE},
                "replacements": replacements,
            }
        ],
    }


def _result(
    item: Result, rules: dict[str, int], fixes: Mapping[str, Patch], prefix: str
) -> dict[str, Any]:
    f = item.finding
    rule = f.id
    out: dict[str, Any] = {
        "ruleId": rule,
        "ruleIndex": rules.setdefault(rule, len(rules)),
        "level": _LEVEL[f.severity],
        "message": {"text": f.message},
        "partialFingerprints": {"eaglebugKey/v1": f.key.text()},
        "properties": {
            "class": f.class_,
            "attribute": f.attribute,
            "role": f.role,
            "delegate": f.delegate,
            "algorithm": item.algorithm,
        },
    }
    where = item.where or _read_from(f)
    if where is not None:
        out["locations"] = [_location(*where, prefix)]
    if f.call_sites:
        out["relatedLocations"] = [
            {
                **_location(s.file, s.line, prefix, s.code),
                "id": n,
                "message": {"text": "called here"},
            }
            for n, s in enumerate(f.call_sites)
        ]
    patch = fixes.get(f.class_ or "")
    if patch is not None and f.attribute in patch.methods:
        out["fixes"] = [sarif_fix(patch, prefix)]
    return out


def sarif_log(
    results: Iterable[Result],
    root: Path,
    version: str | None,
    patches: Iterable[Patch] = (),
) -> dict[str, Any]:
    """The SARIF log of one run over one tree (`root`: the folder holding `sglang/`)."""
    rules: dict[str, int] = {}
    fixes = {p.class_name: p for p in patches if p.methods}
    base, prefix = repository_root(root)
    items = [_result(r, rules, fixes, prefix) for r in results]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "eaglebug",
                        "version": __version__,
                        "rules": [
                            {
                                "id": rule,
                                "name": rule.replace(".", "_"),
                                "shortDescription": {"text": _describe(rule)},
                            }
                            for rule in rules
                        ],
                    }
                },
                "originalUriBaseIds": {BASE: {"uri": base.as_uri() + "/"}},
                "results": items,
                "properties": {"sglangVersion": version},
            }
        ],
    }
