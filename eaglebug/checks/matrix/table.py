"""The support matrix: every registered class x every speculative algorithm x role, audited.

A row is one class that an `EntryClass` exports; a cell is one algorithm and role: supported
(no error), missing (what, with the delegate the fix would use) or not applicable (the tree's
reason, `roles.py`). The cells are the interface audit's own findings (`interface/classes.py`,
the same code `eaglebug audit` runs, without the start-up steps); a class is audited once per
role, its algorithm-independent work shared across the algorithms (`ClassAudit.for_algorithm`).

Rows are independent, so they go through the caller's `Mapper` (the CLI's splits them with a
helper process) in chunks, `progress` told after each. The whole matrix is a tree answer: asked
again of an unchanged tree, it is read back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeVar

from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import PatchFix
from eaglebug.checks.contract.limits import MATRIX_SOURCE_BYTES
from eaglebug.checks.interface.audit import worker_scopes
from eaglebug.checks.interface.classes import ClassAudit
from eaglebug.checks.matrix.roles import draft_reason, not_applicable, read_roles
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.reach.resolve import consumers
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.facts import RUNTIME
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.mapper import Mapper, in_process
from eaglebug.checks.speculative.algorithms import algorithm_facts

T = TypeVar("T")
Status = Literal["supported", "missing", "n/a"]
ROLES = ("target", "draft")
_CHUNKS = 20  # progress steps over a whole release


@dataclass(frozen=True)
class Missing:
    """One attribute a cell lacks (or has broken: a stub, a signature the calls cannot bind)."""

    attribute: str
    finding: str  # the finding id: interface.missing | interface.stub | interface.signature
    delegate: str | None  # self.<delegate> provides it: what the fix delegates to
    fixable: bool  # the fix is a delegation eaglebug can write (`eaglebug fix`)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # every field, under its own name


@dataclass(frozen=True)
class Cell:
    algorithm: str
    role: str  # target | draft
    status: Status
    missing: tuple[Missing, ...] = ()
    reason: str | None = None  # why not applicable, read from the tree
    findings: tuple[Finding, ...] = field(default=(), compare=False)  # errors and warnings

    def to_json(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "role": self.role,
            "status": self.status,
            "missing": [m.to_json() for m in self.missing],
            "reason": self.reason,
            "warnings": [f.attribute for f in self.findings if f.severity == "warning"],
        }


@dataclass(frozen=True)
class Row:
    architecture: str  # the name `EntryClass` exports it under (config.json's architectures)
    class_: str  # qualified
    file: str  # relative to the tree root
    line: int
    draft: str | None  # why the class can be a draft; None: a target only
    cells: tuple[Cell, ...]

    def cell(self, algorithm: str, role: str) -> Cell | None:
        return next((c for c in self.cells if c.algorithm == algorithm and c.role == role), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "architecture": self.architecture,
            "class": self.class_,
            "file": self.file,
            "line": self.line,
            "draft": self.draft,
            "cells": [c.to_json() for c in self.cells],
        }


@dataclass(frozen=True)
class Matrix:
    version: str | None
    package_dir: str
    algorithms: tuple[str, ...]
    rows: tuple[Row, ...]
    warnings: tuple[str, ...] = ()

    def cells(self) -> Iterable[tuple[Row, Cell]]:
        for row in self.rows:
            for cell in row.cells:
                yield row, cell

    def counts(self) -> dict[str, int]:
        counts = {"supported": 0, "missing": 0, "n/a": 0}
        for _, cell in self.cells():
            counts[cell.status] += 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "sglang": {"version": self.version, "package_dir": self.package_dir},
            "algorithms": list(self.algorithms),
            "counts": self.counts(),
            "rows": [r.to_json() for r in self.rows],
            "warnings": list(self.warnings),
        }


def support_matrix(
    index: TreeIndex,
    *,
    files: Iterable[str] | None = None,
    mapper: Mapper = in_process,
    progress: Callable[[int, int], None] | None = None,
) -> Matrix:
    """The matrix of every class `EntryClass` exports, or only of those defined in `files`
    (paths relative to the tree root, as in findings)."""
    only = sorted(set(files)) if files is not None else None
    key = f"matrix:{'|'.join(only) if only is not None else '*'}{index.classes.choice_key}"
    rows = index.answer(
        key, list[Row], lambda: _kept_less(index, lambda: _rows(index, only, mapper, progress))
    )
    index.save()
    return Matrix(
        version=index.tree.version,
        package_dir=str(index.tree.package_dir),
        algorithms=read_roles(index, algorithm_facts(index)).algorithms,
        rows=rows,
        warnings=tuple(dict.fromkeys(index.warnings)),
    )


def registered(index: TreeIndex) -> list[tuple[str, ClassRef]]:
    """(exported name, class) for each class of the registry, once, by name."""
    seen: dict[str, tuple[str, ClassRef]] = {}
    for name, refs in index.registry().items():
        for ref in refs:
            seen.setdefault(ref.qualname, (name, ref))
    return sorted(seen.values(), key=lambda pair: (pair[0], pair[1].qualname))


def _kept_less(index: TreeIndex, compute: Callable[[], T]) -> T:
    """`compute()` with fewer trees kept meanwhile (`MATRIX_SOURCE_BYTES`)."""
    files = index.files
    budget, files.kept_bytes = files.kept_bytes, min(files.kept_bytes, MATRIX_SOURCE_BYTES)
    try:
        return compute()
    finally:
        files.kept_bytes = budget


def _rows(
    index: TreeIndex,
    only: list[str] | None,
    mapper: Mapper,
    progress: Callable[[int, int], None] | None,
) -> tuple[Row, ...]:
    algo = algorithm_facts(index)
    roles = read_roles(index, algo)
    uses = consumers(index)
    scopes = worker_scopes(index, algo)
    # The model files, parsed through the mapper (split with the CLI's helper) before the
    # registry reads them one by one: on a cold cache that parse is a third of the matrix.
    index.files.parse_all(
        [
            rel
            for rel, entry in index.entries.items()
            if entry.has_entry_class and rel.startswith(RUNTIME) and (only is None or rel in only)
        ]
    )
    entries = [(name, ref) for name, ref in registered(index) if only is None or ref.file in only]

    def row(item: tuple[str, ClassRef]) -> Row:
        name, ref = item
        draft = draft_reason(index, ref, roles)
        cells: list[Cell] = []
        for role in ROLES if draft is not None else ROLES[:1]:
            first: ClassAudit | None = None
            for algorithm in roles.algorithms:
                reason = not_applicable(index, ref, algorithm, role, roles)
                if reason is not None:
                    cells.append(Cell(algorithm, role, "n/a", reason=reason))
                    continue
                if first is None:
                    audit = first = ClassAudit(index, ref, algorithm, role, algo, scopes)
                else:
                    audit = first.for_algorithm(algorithm)
                cells.append(_cell(algorithm, role, audit.run(uses).findings))
        return Row(name, ref.qualname, ref.file, ref.facts.line, draft, tuple(cells))

    sizes = [index.entries[ref.file].size if ref.file in index.entries else 1 for _, ref in entries]
    done: list[Row] = []
    step = max(1, -(-len(entries) // _CHUNKS))
    source = Source.of(index)
    for start in range(0, len(entries), step):
        if progress is not None:
            progress(start, len(entries))
        done += mapper(row, entries[start : start + step], sizes[start : start + step])
        source.let_go()  # the memory a step's classes took goes with them
    if progress is not None:
        progress(len(entries), len(entries))
    return tuple(done)


def _cell(algorithm: str, role: str, findings: list[Finding]) -> Cell:
    kept = tuple(f for f in findings if f.severity != "info")
    errors = [f for f in kept if f.severity == "error"]
    missing = tuple(
        Missing(
            f.attribute or "",
            f.id,
            f.delegate,
            isinstance(f.fix, PatchFix) and f.fix.method is not None,
        )
        for f in errors
    )
    return Cell(algorithm, role, "missing" if errors else "supported", missing, None, kept)
