"""What changed between two support matrices: a release against the next, a base branch against
a pull request.

Rows are matched by the name `EntryClass` exports (what a model's config.json names), cells by
algorithm and role. A cell that was supported and now lacks something is a regression; one that
lacked something and no longer does gained support; a cell with no counterpart before (a new
class, a new algorithm, a new role) that lacks something appeared without support, which is what
would have flagged sglang 0.5.9's `KimiK25ForConditionalGeneration` in the release that added it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from eaglebug.checks.matrix.table import Cell, Matrix, Row

ChangeKind = Literal[
    "regression",  # supported before, lacks something now
    "new_unsupported",  # no such cell before, lacks something now
    "gained",  # lacked something before, supported now
    "changed",  # lacks something before and now, not the same things
    "new_supported",  # no such cell before, supported now
    "removed",  # the class is no longer registered
]
# The order a report lists them in: what needs a look first.
KINDS: tuple[ChangeKind, ...] = (
    "regression",
    "new_unsupported",
    "changed",
    "gained",
    "new_supported",
    "removed",
)


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    architecture: str
    row: Row  # the new tree's row (the old one's for a removed class)
    algorithm: str | None = None  # None for a removed class
    role: str | None = None
    before: Cell | None = None
    after: Cell | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "architecture": self.architecture,
            "class": self.row.class_,
            "file": self.row.file,
            "line": self.row.line,
            "algorithm": self.algorithm,
            "role": self.role,
            "before": self.before.to_json() if self.before else None,
            "after": self.after.to_json() if self.after else None,
        }


@dataclass(frozen=True)
class Comparison:
    old: Matrix
    new: Matrix
    changes: tuple[Change, ...]

    def of_kind(self, kind: ChangeKind) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]

    @property
    def regressions(self) -> list[Change]:
        return self.of_kind("regression")

    def to_json(self) -> dict[str, Any]:
        return {
            "old": {"version": self.old.version, "package_dir": self.old.package_dir},
            "new": {"version": self.new.version, "package_dir": self.new.package_dir},
            "counts": {k: len(self.of_kind(k)) for k in KINDS},
            "changes": [c.to_json() for c in self.changes],
        }


def _missing_names(cell: Cell) -> frozenset[str]:
    return frozenset(f"{m.finding}:{m.attribute}" for m in cell.missing)


def _change(before: Cell | None, after: Cell) -> ChangeKind | None:
    if before is None or before.status == "n/a":
        if after.status == "n/a":
            return None
        return "new_unsupported" if after.status == "missing" else "new_supported"
    if after.status == "n/a":
        return None  # no longer applicable: nothing to support
    if before.status == "supported":
        return "regression" if after.status == "missing" else None
    if after.status == "supported":
        return "gained"
    return "changed" if _missing_names(before) != _missing_names(after) else None


def compare(old: Matrix, new: Matrix) -> Comparison:
    """Every cell whose support changed from `old` to `new`, regressions first."""
    before = {row.architecture: row for row in old.rows}
    changes: list[Change] = []
    for row in new.rows:
        was = before.get(row.architecture)
        for cell in row.cells:
            prior = was.cell(cell.algorithm, cell.role) if was is not None else None
            kind = _change(prior, cell)
            if kind is not None:
                changes.append(
                    Change(kind, row.architecture, row, cell.algorithm, cell.role, prior, cell)
                )
    now = {row.architecture for row in new.rows}
    changes += [Change("removed", r.architecture, r) for r in old.rows if r.architecture not in now]
    order = {k: i for i, k in enumerate(KINDS)}
    changes.sort(key=lambda c: (order[c.kind], c.architecture, c.role or "", c.algorithm or ""))
    return Comparison(old, new, tuple(changes))
