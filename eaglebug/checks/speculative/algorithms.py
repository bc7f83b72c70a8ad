"""Which speculative algorithms exist in a tree, and which worker classes serve each.

Read from the tree's own `SpeculativeAlgorithm` enum: its members, its `is_*()` predicates
(`is_eagle()` is true for EAGLE and EAGLE3) and its `create_worker` dispatch. That is what
lets the audit follow SGLang as workers are added, split and renamed between releases.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.pyeval.budget import Budget
from eaglebug.checks.pyeval.intrinsics import Handler, Intrinsics
from eaglebug.checks.pyeval.machine import Machine, Observer
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Call, Frame
from eaglebug.checks.pyeval.values import (
    ClassVal,
    EnumMember,
    FunctionSite,
    FuncVal,
    Top,
    alternatives,
)
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.facts import MISSING, Fact, module_name
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.dispatch import (
    dispatch_sites,
    registered_factories,
    stored_workers,
)

ENUM_NAME = "SpeculativeAlgorithm"
# Launch-time spellings that SGLang maps onto an enum member before it dispatches.
ALIASES = {"NEXTN": "EAGLE"}
# A predicate is a line or two; `create_worker` a page: far below the default limits.
_BUDGET = Budget(depth=8, steps=20_000)


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


def _registered(
    tree: ast.Module,
) -> tuple[list[str], dict[str, set[str]], dict[str, list[ast.Call]]]:
    """Members, flags and register calls of a registry-style enum: `register("NONE")`,
    `register_speculative_algorithm("EAGLE3", flags=("EAGLE", "EAGLE3"), ...)` (sglang 0.5.6)."""
    members: list[str] = []
    flags: dict[str, set[str]] = {}
    calls: dict[str, list[ast.Call]] = {}
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
        calls.setdefault(member, []).append(call)
        for kw in call.keywords:
            if kw.arg == "flags" and isinstance(kw.value, (ast.Tuple, ast.List)):
                flags[member] |= {
                    e.value.upper()
                    for e in kw.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
    return members, flags, calls


class _Returns(Observer):
    """The values `create_worker` returns on each of its paths (a path that returns what
    only the run knows, such as a platform's worker class, is not a worker of the tree)."""

    def __init__(self, site: FunctionSite) -> None:
        self.site = site
        self.values: list[Any] = []

    def on_return(self, frame: Frame, value: Any) -> None:
        if frame.site == self.site:
            self.values.append(value)


def _members_of(
    machine: Machine, cls: ClassVal, members: list[str], registered: bool
) -> dict[str, Any]:
    """The run's object for each member: the enum's member, or (the registry form, whose
    members `register(...)` makes at import) an object of the class, named by the tree's own
    `SpeculativeAlgorithm.<NAME>` for the methods that compare with one."""
    if not registered:
        return {name: EnumMember(cls, name, index) for index, name in enumerate(members)}
    out: dict[str, Any] = {}
    for index, name in enumerate(members):
        made = machine.new_object(cls, {"name": name, "value": index})
        machine.intrinsics.value(f"{cls.qualname}.{name}", made)
        out[name] = made
    return out


def _flag_check(flags: dict[str, set[str]], objects: dict[str, Any]) -> Handler:
    """`self._has_flag("EAGLE3")` of the registry form: the flags its `register_*` call gave."""
    names = {id(obj): name for name, obj in objects.items()}

    def has_flag(call: Call) -> Any:
        owner = call.callee.bound if isinstance(call.callee, FuncVal) else None
        flag = call.args[0] if call.args else None
        member = names.get(id(owner)) if owner is not None else None
        if member is None or not isinstance(flag, str):
            return Top(f"{call.where}: _has_flag of an unknown member")
        return flag.upper() in flags.get(member, set())

    return has_flag


def _predicates(
    machine: Machine, cls: ClassVal, node: ast.ClassDef, objects: dict[str, Any]
) -> dict[str, frozenset[str]]:
    """Each method of the class taking only `self` whose value is a bool for every member."""
    out: dict[str, frozenset[str]] = {}
    for fn in node.body:
        if not isinstance(fn, ast.FunctionDef) or fn.decorator_list:
            continue
        args = fn.args
        if len(args.args) != 1 or args.vararg or args.kwonlyargs or args.kwarg:
            continue
        site = machine.source.method(cls.ref, fn.name) if cls.ref is not None else None
        if site is None:
            continue
        values = {}
        for name, member in objects.items():
            machine.raised.clear()
            result = machine.run(FuncVal(site, cls, member, "method"), [], {})
            values[name] = result.value if not result.raised else None
        if all(isinstance(v, bool) for v in values.values()):
            out[fn.name] = frozenset(n for n, v in values.items() if v)
    return out


def _dispatch(machine: Machine, cls: ClassVal, member: Any) -> set[str]:
    """The worker classes `create_worker` may return for one member, on any of its paths."""
    site = machine.source.method(cls.ref, "create_worker") if cls.ref is not None else None
    if site is None:
        return set()
    watch = _Returns(site)
    machine.observer = watch
    params = [a.arg for a in site.node.args.args[1:]]  # type: ignore[union-attr]
    given = {name: machine.new_object(None) for name in params}  # server args: not known
    machine.run(FuncVal(site, cls, member, "method"), [], given)
    machine.observer = Observer()
    found: set[str] = set()
    for value in watch.values:
        for one in alternatives(value):
            if isinstance(one, ClassVal):
                found.add(one.qualname)
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
    cls_node = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == ENUM_NAME), None
    )
    if cls_node is None:
        return None
    members = _members(cls_node)
    flags: dict[str, set[str]] = {}
    register_calls: dict[str, list[ast.Call]] = {}
    registered = not members
    if registered:  # members registered by calls at import time, not declared
        members, flags, register_calls = _registered(tree)
    module, _ = module_name(rel)
    source = Source.of(index)
    cls = source.class_val(f"{module}.{ENUM_NAME}")
    hooks = Intrinsics()
    machine = Machine(source, hooks, budget=_BUDGET)
    objects = _members_of(machine, cls, members, registered)
    hooks.call(f"{cls.qualname}._has_flag", _flag_check(flags, objects))
    predicates = _predicates(machine, cls, cls_node, objects)
    workers: dict[str, set[str]] = {}
    for member, obj in objects.items():
        machine.raised.clear()
        for worker in _dispatch(machine, cls, obj):
            workers.setdefault(worker, set()).add(member)
    if not workers:  # no `create_worker`: the scheduler chooses (an if/elif chain, a registry)
        methods = {fn.name for fn in cls_node.body if isinstance(fn, ast.FunctionDef)}
        sites = list(dispatch_sites(index, methods))
        for member, obj in objects.items():
            factories = [
                f
                for call in register_calls.get(member, [])
                for f in registered_factories(machine, call, module)
            ]
            for site in sites:
                for worker in stored_workers(machine, cls, obj, site, factories):
                    workers.setdefault(worker, set()).add(member)
        # A worker only other launches build (0.5.7's multi-layer EAGLE, under a flag the
        # tree sets for one model) is still worker code: it serves none of these launches.
        for site in sites:
            for worker in stored_workers(machine, cls, Top("any algorithm"), site, []):
                workers.setdefault(worker, set())
    return AlgorithmFacts(
        members=tuple(members),
        predicates=predicates,
        workers={k: frozenset(v) for k, v in workers.items()},
        source=rel,
    )
