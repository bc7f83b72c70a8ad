"""Runtime-checkable Protocols of the audited tree: what an `isinstance` test on one checks.

`isinstance(model, P)` where `P` is a `@runtime_checkable` `typing.Protocol` is a presence
test of P's members, as `hasattr` is of one name (that is how Python evaluates it): code under
it runs only for a model that has them all, so it does not make them required. The members are
read from the Protocol's own class body (and its Protocol bases) in the tree, once per tree.
"""

from __future__ import annotations

import ast

from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex

_PROTOCOL_BASES = {"Protocol", "typing.Protocol", "typing_extensions.Protocol"}
_MAX_DEPTH = 4


def protocol_members(index: TreeIndex, qualname: str) -> frozenset[str] | None:
    """The members a runtime-checkable Protocol checks; None when `qualname` is no such class
    of the tree (any other `isinstance` stays undecided)."""
    found = index.answer(
        f"protocol:{qualname}", frozenset[str] | None, lambda: _members(index, qualname, 0)
    )
    return found


def _members(index: TreeIndex, qualname: str, depth: int) -> frozenset[str] | None:
    ref = index.classes.cls(qualname)
    if ref is None or depth > _MAX_DEPTH:
        return None
    node = _class_node(index, ref)
    if node is None or not _is_protocol(index, ref):
        return None
    if depth == 0 and not any(
        (dotted(d) or "").rsplit(".", 1)[-1] == "runtime_checkable" for d in node.decorator_list
    ):
        return None  # isinstance on a plain Protocol raises TypeError: nothing to decide
    names: set[str] = set()
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    for base in ref.facts.bases:
        if _resolved(index, ref, base) in _PROTOCOL_BASES or base in _PROTOCOL_BASES:
            continue
        inherited = _members(index, index.classes.resolve(ref.module, base), depth + 1)
        if inherited is None:
            return None  # a base we cannot read: the check is not pinned down
        names |= inherited
    return frozenset(n for n in names if not (n.startswith("__") and n.endswith("__")))


def _resolved(index: TreeIndex, ref: ClassRef, base: str) -> str:
    head, _, rest = base.partition(".")
    target = ref.module.imports.get(head)
    return (f"{target}.{rest}" if rest else target) if target else base


def _is_protocol(index: TreeIndex, ref: ClassRef) -> bool:
    return any(
        base in _PROTOCOL_BASES or _resolved(index, ref, base) in _PROTOCOL_BASES
        for base in ref.facts.bases
    )


def _class_node(index: TreeIndex, ref: ClassRef) -> ast.ClassDef | None:
    parsed = index.parse_file(ref.file)
    if parsed is None:
        return None
    for node in syntax.statements(parsed.tree):
        if isinstance(node, ast.ClassDef) and node.name == ref.facts.name:
            return node
    return None
