"""Which speculative algorithms exist in a tree, and which worker classes serve each.

Read from the tree's own `SpeculativeAlgorithm` enum: its members, its `is_*()` predicates
(`is_eagle()` is true for EAGLE and EAGLE3) and its `create_worker` dispatch. That is what
lets the audit follow SGLang as workers are added, split and renamed between releases.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.pyeval.truth import Tri, tri_and, tri_not, tri_or
from eaglebug.checks.source.classfacts import dotted, resolve_relative
from eaglebug.checks.source.facts import MISSING, Fact
from eaglebug.checks.source.index import TreeIndex

ENUM_NAME = "SpeculativeAlgorithm"
# Launch-time spellings that SGLang maps onto an enum member before it dispatches.
ALIASES = {"NEXTN": "EAGLE"}


@dataclass(frozen=True)
class AlgorithmFacts:
    members: tuple[str, ...]
    predicates: dict[str, frozenset[str]]  # predicate name -> members for which it is true
    workers: dict[str, frozenset[str]]  # worker class (qualified) -> members it serves
    source: str | None  # the file the enum was read from

    def canonical(self, name: str) -> str:
        upper = name.upper()
        if upper in self.members:
            return upper
        alias = ALIASES.get(upper)
        if alias and alias in self.members:
            return alias
        known = ", ".join(m for m in self.members if m != "NONE")
        raise InputError(
            f"unknown speculative algorithm {name!r} for this SGLang tree",
            f"choose one of: {known}",
        )


_FACT: Fact[AlgorithmFacts] = Fact("algorithms", AlgorithmFacts)  # kept with the enum's file


def _members(cls: ast.ClassDef) -> list[str]:
    names = []
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign):
            names += [t.id for t in stmt.targets if isinstance(t, ast.Name) and t.id.isupper()]
    return names


def _registered(tree: ast.Module) -> tuple[list[str], dict[str, set[str]]]:
    """Members and flags of a registry-style enum: `register("NONE")`,
    `register_speculative_algorithm("EAGLE3", flags=("EAGLE", "EAGLE3"), ...)` (sglang 0.5.6)."""
    members: list[str] = []
    flags: dict[str, set[str]] = {}
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call):
            continue
        name = dotted(call.func) or ""
        if not name.endswith(("register", "register_speculative_algorithm")):
            continue
        if (
            not call.args
            or not isinstance(call.args[0], ast.Constant)
            or not isinstance(call.args[0].value, str)
        ):
            continue
        member = call.args[0].value.upper()
        members.append(member)
        flags[member] = set()
        for kw in call.keywords:
            if kw.arg == "flags" and isinstance(kw.value, (ast.Tuple, ast.List)):
                flags[member] |= {
                    e.value.upper()
                    for e in kw.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
    return members, flags


def _single_return(fn: ast.FunctionDef) -> ast.expr | None:
    body = [
        s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if len(body) == 1 and isinstance(body[0], ast.Return):
        return body[0].value
    return None


class _Evaluator:
    def __init__(
        self,
        members: list[str],
        methods: dict[str, ast.FunctionDef],
        flags: dict[str, set[str]] | None = None,
    ) -> None:
        self.members = members
        self.methods = methods
        self.flags = flags or {}  # registry form: member -> its flags
        self.memo: dict[tuple[str, str], Tri] = {}

    def predicate(self, name: str, member: str, depth: int = 0) -> Tri:
        key = (name, member)
        if key not in self.memo:
            self.memo[key] = None  # recursion guard
            fn = self.methods.get(name)
            expr = _single_return(fn) if fn is not None else None
            self.memo[key] = self.value(expr, member, depth + 1) if expr is not None else None
        return self.memo[key]

    def value(self, node: ast.expr, member: str, depth: int = 0) -> Tri:
        if depth > 12:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return tri_not(self.value(node.operand, member, depth + 1))
        if isinstance(node, ast.BoolOp):
            values = [self.value(v, member, depth + 1) for v in node.values]
            return tri_and(values) if isinstance(node.op, ast.And) else tri_or(values)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
            if dotted(node.func.value) == "self":
                return self.predicate(node.func.attr, member, depth + 1)
            return None
        if (  # registry form (0.5.6): `self._has_flag("EAGLE3")`
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "_has_flag"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            return node.args[0].value.upper() in self.flags.get(member, set())
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and dotted(node.left) == "self":
            right = node.comparators[0]
            op = node.ops[0]
            if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                name = dotted(right)
                if name is None:
                    return None
                same = name.rsplit(".", 1)[-1] == member
                return same if isinstance(op, (ast.Eq, ast.Is)) else not same
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(
                right, (ast.Tuple, ast.List, ast.Set)
            ):
                names = {(dotted(e) or "").rsplit(".", 1)[-1] for e in right.elts}
                inside = member in names
                return inside if isinstance(op, ast.In) else not inside
        return None


def _dispatch(
    fn: ast.FunctionDef, evaluator: _Evaluator, member: str, imports: dict[str, str]
) -> set[str]:
    """Worker classes `create_worker` may return for one member."""
    local = dict(imports)
    for node in ast.walk(fn):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                local[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    found: set[str] = set()
    # Names the function assigns itself (`platform_worker_cls = self.get_platform_worker_cls()`
    # in 0.5.23): a value found at run time, not a worker class of the tree.
    assigned = {
        t.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }

    def walk(stmts: list[ast.stmt]) -> bool:
        for stmt in stmts:
            if isinstance(stmt, ast.Assert) and evaluator.value(stmt.test, member) is False:
                return True  # `assert not self.is_none()`: this member gets no worker
            if isinstance(stmt, ast.If):
                value = evaluator.value(stmt.test, member)
                body_returns = walk(stmt.body) if value is not False else False
                else_returns = walk(stmt.orelse) if value is not True else False
                if (value is True and body_returns) or (value is False and else_returns):
                    return True
                if body_returns and else_returns:
                    return True
            elif isinstance(stmt, ast.Return):
                if stmt.value is not None:
                    name = dotted(stmt.value)
                    if name and name not in assigned:
                        found.add(local.get(name, name))
                return True
            elif isinstance(stmt, ast.Raise):
                return True
        return False

    walk(fn.body)
    return found


def algorithm_facts(index: TreeIndex) -> AlgorithmFacts:
    """The tree's algorithms (a tree answer: the enum's file is found without a walk)."""
    return index.answer("algorithms", AlgorithmFacts, lambda: _algorithm_facts(index))


def _algorithm_facts(index: TreeIndex) -> AlgorithmFacts:
    for rel, entry in index.entries.items():
        if ENUM_NAME not in entry.class_names:
            continue
        kept = index.recall(rel, _FACT)
        if kept is not MISSING:
            return kept
        parsed = index.parse_file(rel)
        facts = _read(index, rel, parsed.tree) if parsed else None
        if facts is None:
            continue
        index.remember(rel, _FACT, facts)
        return facts
    # A tree too old or too new to read: the audit still runs, without worker scoping.
    return AlgorithmFacts(("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"), {}, {}, None)


def _read(index: TreeIndex, rel: str, tree: ast.Module) -> AlgorithmFacts | None:
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == ENUM_NAME), None)
    if cls is None:
        return None
    members = _members(cls)
    flags: dict[str, set[str]] = {}
    if not members:  # members registered by calls at import time, not declared
        members, flags = _registered(tree)
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    evaluator = _Evaluator(members, methods, flags)
    predicates: dict[str, frozenset[str]] = {}
    for name in methods:
        values = {m: evaluator.predicate(name, m) for m in members}
        if all(v is not None for v in values.values()):
            predicates[name] = frozenset(m for m, v in values.items() if v)
    module, is_package = index.tree.module_name(index.tree.root / rel)
    imports: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = resolve_relative(module, is_package, node.level, node.module)
            for alias in node.names:
                imports[alias.asname or alias.name] = f"{base}.{alias.name}"
    workers: dict[str, set[str]] = {}
    create = methods.get("create_worker")
    if create is not None:
        for member in members:
            for worker in _dispatch(create, evaluator, member, imports):
                workers.setdefault(worker, set()).add(member)
    return AlgorithmFacts(
        members=tuple(members),
        predicates=predicates,
        workers={k: frozenset(v) for k, v in workers.items()},
        source=rel,
    )
