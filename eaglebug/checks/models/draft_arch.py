"""The class SGLang really loads as the draft: its architecture rewritten for draft mode.

`ModelConfig._config_draft_model` (configs/model_config.py) renames some architectures when the
model is loaded as a draft (`DeepseekV3ForCausalLM` -> `DeepseekV3ForCausalLMNextN`, ...): the
class the draft role must be audited on is the renamed one. The renames are read from that
method: each `if is_draft_model and <config>.architectures[0] == "X"` (or `in [...]`) whose body
sets `architectures[0] = "Y"` outright; a rename under any further condition is not applied
(the class is then the one config.json names, and the rename is reported as not decided).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.source import syntax
from eaglebug.checks.source.index import TreeIndex

_MODEL_CONFIG = "sglang/srt/configs/model_config.py"
_METHOD = "_config_draft_model"
_FLAG = "is_draft_model"


@dataclass(frozen=True)
class DraftRenames:
    renames: tuple[tuple[str, str, str], ...]  # (architecture, draft architecture, file:line)
    conditional: tuple[tuple[str, str], ...]  # (architecture, file:line) renamed only sometimes

    def of(self, arch: str) -> tuple[str, str] | None:
        """(draft architecture, file:line) when the tree renames `arch` for draft mode."""
        return next(((new, where) for old, new, where in self.renames if old == arch), None)

    def undecided(self, arch: str) -> str | None:
        return next((where for old, where in self.conditional if old == arch), None)


def draft_renames(index: TreeIndex) -> DraftRenames:
    """This tree's draft-mode architecture renames (a tree answer)."""
    return index.answer("draft_renames", DraftRenames, lambda: _read(index))


def _archs(test: ast.expr) -> tuple[tuple[str, ...], bool] | None:
    """(architectures named, whether the test has further conditions) for
    `is_draft_model and X.architectures[0] == "A"` / `in [...]`; None for other tests."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
        return None
    if not any(isinstance(v, ast.Name) and v.id == _FLAG for v in test.values):
        return None
    named: tuple[str, ...] = ()
    others = 0
    for value in test.values:
        if isinstance(value, ast.Name) and value.id == _FLAG:
            continue
        if (
            isinstance(value, ast.Compare)
            and len(value.ops) == 1
            and ast.unparse(value.left).endswith("architectures[0]")
        ):
            right = value.comparators[0]
            if isinstance(value.ops[0], ast.Eq) and isinstance(right, ast.Constant):
                named = (str(right.value),)
                continue
            if isinstance(value.ops[0], ast.In) and isinstance(right, (ast.List, ast.Tuple)):
                named = tuple(str(e.value) for e in right.elts if isinstance(e, ast.Constant))
                continue
        others += 1
    return (named, others > 0) if named else None


def _renamed_to(body: list[ast.stmt]) -> str | None:
    """`...architectures[0] = "Y"` as a statement of the body itself."""
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and ast.unparse(stmt.targets[0]).endswith("architectures[0]")
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            return stmt.value.value
    return None


def _read(index: TreeIndex) -> DraftRenames:
    parsed = index.parse_file(_MODEL_CONFIG) if _MODEL_CONFIG in index.entries else None
    if parsed is None:
        return DraftRenames((), ())
    renames: list[tuple[str, str, str]] = []
    conditional: list[tuple[str, str]] = []
    for fn in syntax.statements(parsed.tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name == _METHOD):
            continue
        for stmt in fn.body:
            if not isinstance(stmt, ast.If):
                continue
            found = _archs(stmt.test)
            if found is None:
                continue
            archs, more = found
            where = f"{_MODEL_CONFIG}:{stmt.lineno}"
            target = _renamed_to(stmt.body)
            if target is not None and not more:
                renames.extend((arch, target, where) for arch in archs)
            else:
                conditional.extend((arch, where) for arch in archs)
    return DraftRenames(tuple(renames), tuple(conditional))


def first_architecture(config: Mapping[str, Any] | None) -> str | None:
    archs = config.get("architectures") if config else None
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def draft_mode_class(index: TreeIndex, arch: str | None, loaded: str) -> str:
    """The class SGLang loads for `arch` as a draft (the tree's draft-mode rename), or `loaded`."""
    renamed = draft_renames(index).of(arch) if arch else None
    exported = index.classes.exporter_names(renamed[0]) if renamed else []
    return exported[0] if exported else loaded
