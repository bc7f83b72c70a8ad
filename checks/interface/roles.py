"""Reachability per role: what the worker hands the runner it builds, and where that runner's
own start-up goes with it.

A use of a runner's model found in a class other than the runner (`CudaGraphRunner.__init__`
reads `self.model_runner.model`) applies to every runner that builds that class. The draft's
runner is built by a worker (a call with `is_draft_worker=True`), often after the worker wrote
values on the objects it hands over: 0.4.10 to 0.5.9's EAGLE worker sets
`server_args.disable_cuda_graph = True` before `super().__init__(..., is_draft_worker=True)`,
so the draft's `ModelRunner.init_device_graphs` returns before it builds a `CudaGraphRunner`,
and what `CudaGraphRunner.__init__` asks of the model is not asked of the draft. Both halves are
read with the one evaluator:

1. The worker's function that builds the draft runner runs on the launch's declared server
   arguments. It follows the builder call and, inside it, calls on the same object; the call
   that makes the runner (a class named `...ModelRunner`) is not run: its arguments are what
   the worker hands over, with the worker's writes on them. Every other call is unknown.
2. The runner's `__init__` runs on those arguments, following only the runner's own methods on
   a self-call path to the target: the function that takes the use's reference (a runner method
   itself), or a statement of a runner method that names the class whose `__init__` takes it.
   Whether a path reaches the target, and under which undecided tests, is the answer.
3. The same run with the launch's own values (declared defaults, not a draft) is the baseline:
   where the draft's path rests on the same undecided tests as the baseline's, the role's values
   change nothing and the use stands as for any runner.

Where the class is named outside the runner's methods (constructed by someone else), or the
runner method is called from outside the runner, nothing is decided here: the use stands.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.pyeval.budget import Budget
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine, Observer
from eaglebug.checks.pyeval.protocol import Policy
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.truth import Tri
from eaglebug.checks.pyeval.values import (
    UNSET,
    ClassVal,
    FuncVal,
    Instance,
    Top,
    alternatives,
    is_known,
)
from eaglebug.checks.reach.resolve import ResolvedUse
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex, parsed_with
from eaglebug.checks.speculative.dispatch import SERVER_ARGS

_DRAFT_KEYWORD = "is_draft_worker"  # the builder's keyword in every release from 0.4 to 0.5.23
_RUNNER_SUFFIX = "ModelRunner"
# A start-up path through a few methods of the runner: far below the default limits.
_BUDGET = Budget(depth=12, steps=60_000)


@dataclass(frozen=True)
class RoleReach:
    """Does the role's runner reach a function: True, False, or None (undecided: `assumed` says
    on which tests); `read_from` says where the role's values were written."""

    reached: Tri
    assumed: tuple[str, ...] = ()
    read_from: tuple[str, ...] = ()


_STANDS = RoleReach(True)


@dataclass(frozen=True)
class _Target:
    """What the runner's start-up must reach: a runner method entered, or statements (line
    spans) of runner methods that name the class whose `__init__` takes the reference."""

    methods: frozenset[str]  # runner methods whose entry is the target
    spans: tuple[tuple[str, int, int], ...]  # (runner method, first line, last line)
    classes: frozenset[str]  # qualified classes whose construction is the target


@dataclass(frozen=True)
class _Build:
    """One builder of the draft's runner: the worker function, and what it hands over."""

    runner: ClassRef
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    written: tuple[str, ...]  # `file:line sets attr = value`, what the worker wrote on them


class RoleReacher:
    """Per index: the draft's builders (once), and each target's reach (memoised)."""

    def __init__(self, index: TreeIndex) -> None:
        self.index = index
        self.source = Source.of(index)
        # A refusal of some other launch is passed over: what runs after it still runs here.
        self.machine = Machine(
            self.source,
            Intrinsics(),
            budget=_BUDGET,
            policy=Policy(record_raises=False, skip_raises=True),
        )
        self._builders: dict[str, list[tuple[str, _Build | None]]] = {}
        self._memo: dict[tuple[str, str, tuple[str, ...]], RoleReach] = {}
        self._named: dict[str, list[tuple[str, ast.FunctionDef | None, ast.stmt]] | None] = {}

    # -- the question ----------------------------------------------------------------------
    def reach(
        self, scope: str, worker_modules: frozenset[str], serves: Callable[[str], bool]
    ) -> RoleReach:
        """Does the draft's runner reach `scope` (module.Class.method, where a use took its
        reference) during its build, for the builders in `worker_modules` that `serves`?"""
        builds = [b for fn, b in self.builders(worker_modules) if serves(fn)]
        key = (scope, ",".join(sorted(worker_modules)), tuple(sorted(fn for fn, _ in
               self.builders(worker_modules) if serves(fn))))  # fmt: skip
        if key not in self._memo:
            self._memo[key] = self._reach(scope, builds)
        return self._memo[key]

    def _reach(self, scope: str, builds: list[_Build | None]) -> RoleReach:
        if not builds or any(b is None for b in builds):
            return _STANDS
        verdicts = []
        for build in builds:
            assert build is not None
            target = self._target(scope, build.runner)
            if target is None:
                return _STANDS
            draft = self._run(build.runner, target, build.args, dict(build.kwargs))
            if draft.reached is None:
                base = self._run(build.runner, target, (), self._launch_kwargs(build))
                own = tuple(t for t in draft.assumed if t not in base.assumed)
                if base.reached is None and not own:
                    return _STANDS  # the role's values decide nothing here
                draft = RoleReach(None, own or draft.assumed)
            verdicts.append(RoleReach(draft.reached, draft.assumed, build.written))
        if any(v.reached is True for v in verdicts):
            return _STANDS
        undecided = [v for v in verdicts if v.reached is None]
        if undecided:
            return RoleReach(
                None,
                tuple(dict.fromkeys(a for v in undecided for a in v.assumed)),
                tuple(dict.fromkeys(w for v in verdicts for w in v.read_from)),
            )
        return RoleReach(False, (), tuple(dict.fromkeys(w for v in verdicts for w in v.read_from)))

    # -- 1. the builders ---------------------------------------------------------------------
    def builders(self, worker_modules: frozenset[str]) -> list[tuple[str, _Build | None]]:
        """(module.Class.function, what it hands the draft's runner; None: not read) of every
        worker function that builds a runner with `is_draft_worker=True`."""
        key = ",".join(sorted(worker_modules))
        if key not in self._builders:
            found: list[tuple[str, _Build | None]] = []
            for rel in sorted(self.index.entries):
                module, _ = module_name(rel)
                if module not in worker_modules:
                    continue
                parsed = parsed_with(self.index, rel, _DRAFT_KEYWORD)
                if parsed is None:
                    continue
                for cls in parsed.tree.body:
                    if not isinstance(cls, ast.ClassDef):
                        continue
                    for fn in cls.body:
                        if isinstance(fn, ast.FunctionDef) and _builds_draft(fn):
                            scope = f"{module}.{cls.name}.{fn.name}"
                            found.append((scope, self._build(module, cls.name, fn.name)))
            self._builders[key] = found
        return self._builders[key]

    def _build(self, module: str, cls_name: str, method: str) -> _Build | None:
        site = self.source.function(module, f"{cls_name}.{method}")
        owner = self.source.class_val(f"{module}.{cls_name}")
        if site is None or site.node is None:
            return None
        machine = self.machine
        watch = _Builder(machine)
        machine.observer = watch
        this = machine.new_object(owner)
        watch.worker = this
        given = {a.arg: machine.new_object(None) for a in site.node.args.args[1:]}
        if "server_args" in given:
            given["server_args"] = self._declared()
        machine.raised.clear()
        machine.run(FuncVal(site, owner, this, "method"), [], given)
        machine.observer = Observer()
        if watch.made is None:
            return None
        runner, args, kwargs = watch.made
        written = []
        for value in (*args, *kwargs.values()):
            if isinstance(value, Instance) and value.oid in watch.handed:
                for key, (val, where) in sorted(watch.handed[value.oid].items()):
                    if is_known(val):
                        written.append(f"{where} sets {key} = {val!r}")
        return _Build(runner, tuple(args), tuple(kwargs.items()), tuple(written))

    def _declared(self) -> Instance:
        """The launch's `ServerArgs` where its class body declares a constant default other than
        None (a None is resolved at start-up: `device` becomes the platform's)."""
        fields: dict[str, Any] = {}
        found = self.index.classes.classes_named(SERVER_ARGS)
        for ref in found:
            for name, node in self.source.class_body(ref).items():
                if isinstance(node, ast.Constant) and node.value is not None:
                    fields.setdefault(name, node.value)
        # No class: its body's None would stand in for a field the object lacks.
        return self.machine.new_object(None, fields)

    def _launch_kwargs(self, build: _Build) -> dict[str, Any]:
        """The runner's arguments as the launch's own runner gets them: declared server
        arguments, not a draft; everything else unknown."""
        out: dict[str, Any] = {name: Top("not read") for name, _ in build.kwargs}
        out["server_args"] = self._declared()
        out[_DRAFT_KEYWORD] = False
        return out

    # -- 2. the target -----------------------------------------------------------------------
    def _target(self, scope: str, runner: ClassRef) -> _Target | None:
        split = self.index.split_qualified(scope)
        if split is None:
            return None
        module, rest = split
        cls_name, _, method = rest.partition(".")
        qualified = f"{module}.{cls_name}"
        order, _, _ = self.index.classes.mro(runner)
        if any(r.qualname == qualified for r in order):
            if self._called_outside(runner, method):
                return None
            return _Target(frozenset({method}), (), frozenset())
        if method != "__init__":
            return None  # a method of another class: who calls it is not followed here
        cls = self.index.classes.cls(qualified)
        if cls is None:
            return None
        named = self._naming(cls)
        if named is None:
            return None
        runner_files = {r.file for r in order}
        spans = []
        for rel, fn, stmt in named:
            if rel not in runner_files or fn is None:
                return None  # built elsewhere: not decided here
            if self._called_outside(runner, fn.name):
                return None
            spans.append((fn.name, stmt.lineno, stmt.end_lineno or stmt.lineno))
        if not spans:
            return None
        return _Target(frozenset(), tuple(spans), frozenset({cls.qualname}))

    def _naming(self, cls: ClassRef) -> list[tuple[str, ast.FunctionDef | None, ast.stmt]] | None:
        """Every statement of the tree that names `cls` (or a subclass) as a value, with its
        file and function: where it may be constructed."""
        if cls.qualname in self._named:
            return self._named[cls.qualname]
        names = {cls.facts.name}
        out: list[tuple[str, ast.FunctionDef | None, ast.stmt]] = []
        todo = [cls.facts.name]
        seen_files: set[tuple[str, str]] = set()
        while todo:
            name = todo.pop()
            for rel in self.index.entries:
                if (rel, name) in seen_files:
                    continue
                seen_files.add((rel, name))
                parsed = parsed_with(self.index, rel, name)
                if parsed is None:
                    continue
                for sub in _subclasses_named(parsed.tree, name):
                    if sub not in names:
                        names.add(sub)
                        todo.append(sub)
                out.extend((rel, fn, stmt) for fn, stmt in _value_mentions(parsed.tree, name))
        if len(out) > 64:
            self._named[cls.qualname] = None
            return None
        self._named[cls.qualname] = out
        return out

    def _called_outside(self, runner: ClassRef, method: str) -> bool:
        """Is `method` called on something other than `self` anywhere in the tree?"""
        needle = f".{method}("
        for rel in self.index.entries:
            parsed = parsed_with(self.index, rel, needle)
            if parsed is None:
                continue
            for node in ast.walk(parsed.tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == method
                    and dotted(node.func.value) not in {"self", "super()"}
                    and not (
                        isinstance(node.func.value, ast.Call)
                        and dotted(node.func.value.func) == "super"
                    )
                ):
                    return True
        return False

    # -- 3. the run ----------------------------------------------------------------------------
    def _run(
        self, runner: ClassRef, target: _Target, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> RoleReach:
        source = self.source
        order, _ = source.mro(runner)
        init = next(
            ((r, s) for r in order if (s := source.method(r, "__init__")) is not None), None
        )
        if init is None:
            return _STANDS
        owner_ref, site = init
        chain = _chain(self.index, order, target)
        machine = self.machine
        this = machine.new_object(source.class_val(runner.qualname))
        watch = _Start(machine, this, chain, target)
        machine.observer = watch
        machine.raised.clear()
        mark = len(machine.assumed)
        result = machine.run(
            FuncVal(site, source.class_val(owner_ref.qualname), this, "method"),
            list(args),
            kwargs,
        )
        machine.observer = Observer()
        del machine.assumed[mark:]
        if result.incomplete is not None and not watch.paths:
            return RoleReach(None, (f"the runner's start-up was not read to the end: "
                                    f"{result.incomplete}",))  # fmt: skip
        if not watch.paths:
            return RoleReach(False)
        if any(not undecided for undecided in watch.paths):
            return RoleReach(True)
        return RoleReach(None, tuple(dict.fromkeys(t for p in watch.paths for t in p)))


def _builds_draft(fn: ast.FunctionDef) -> bool:
    return any(
        isinstance(node, ast.keyword)
        and node.arg == _DRAFT_KEYWORD
        and isinstance(node.value, ast.Constant)
        and node.value.value is True
        for node in ast.walk(fn)
    )


def _subclasses_named(tree: ast.Module, base: str) -> list[str]:
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any((dotted(b) or "").rsplit(".", 1)[-1] == base for b in node.bases)
    ]


def _value_mentions(tree: ast.Module, name: str) -> list[tuple[ast.FunctionDef | None, ast.stmt]]:
    """Statements that use `name` as a value (not an annotation, a base, `name.attr`, or an
    `isinstance` test), with the function of a class they are in."""
    out: list[tuple[ast.FunctionDef | None, ast.stmt]] = []

    def visit(node: ast.AST, fn: ast.FunctionDef | None, stmt: ast.stmt | None) -> None:
        if isinstance(node, ast.stmt):
            stmt = node
        if isinstance(node, ast.FunctionDef):
            fn = node
        for field_name, value in ast.iter_fields(node):
            if field_name in {"annotation", "returns", "bases", "decorator_list"}:
                continue
            children = value if isinstance(value, list) else [value]
            for child in children:
                if not isinstance(child, ast.AST):
                    continue
                if isinstance(node, ast.Attribute) and field_name == "value":
                    continue  # `Name.attr`: a use of the class's attribute, not of the class
                if (
                    isinstance(node, ast.Call)
                    and dotted(node.func) in {"isinstance", "issubclass"}
                    and field_name == "args"
                ):
                    continue
                mentioned = (isinstance(child, ast.Name) and child.id == name) or (
                    isinstance(child, ast.Attribute)
                    and child.attr == name
                    and not (isinstance(node, ast.Attribute) and field_name == "value")
                )
                if mentioned and stmt is not None and not isinstance(stmt, ast.ClassDef):
                    out.append((fn, stmt))
                visit(child, fn, stmt)

    visit(tree, None, None)
    return out


def _chain(index: TreeIndex, order: list[ClassRef], target: _Target) -> frozenset[str]:
    """The runner's methods on a self-call path from `__init__` to a target method."""
    goals = set(target.methods) | {name for name, _, _ in target.spans}
    calls: dict[str, set[str]] = {}
    for ref in order:
        parsed = index.parse_file(ref.file)
        if parsed is None:
            continue
        for node in parsed.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == ref.facts.name:
                for fn in node.body:
                    if isinstance(fn, ast.FunctionDef) and fn.name not in calls:
                        calls[fn.name] = {
                            n.func.attr
                            for n in ast.walk(fn)
                            if isinstance(n, ast.Call)
                            and isinstance(n.func, ast.Attribute)
                            and dotted(n.func.value) == "self"
                        }
    on_path = set(goals)
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in on_path and callees & on_path:
                on_path.add(name)
                changed = True
    return frozenset(on_path)


class _Builder(Observer):
    """The worker's build of the draft runner: follow the worker's own calls; the runner's
    constructor is not run, its arguments kept; every other call is unknown."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.worker: Instance | None = None
        self.made: tuple[ClassRef, list[Any], dict[str, Any]] | None = None
        # object id -> attribute -> (value, file:line), what the run wrote on objects
        self.handed: dict[int, dict[str, tuple[Any, str]]] = {}

    def on_write(self, obj: Instance, key: str, value: Any, rel: str, line: int) -> None:
        self.handed.setdefault(obj.oid, {})[key] = (value, f"{rel}:{line}")

    def on_call(self, call: Call) -> Any:
        if self.made is not None:
            return Top(f"{call.where}: after the runner is built")
        for one in alternatives(call.callee):
            if isinstance(one, ClassVal) and one.ref is not None:
                if one.ref.facts.name.endswith(_RUNNER_SUFFIX):
                    self.made = (one.ref, list(call.args), dict(call.kwargs))
                return Top(f"{call.where}: {one.qualname}() not built")
            if isinstance(one, FuncVal):
                if _same(one.bound, self.worker) or (
                    one.bound is None and call.args and _same(call.args[0], self.worker)
                ):
                    return UNSET  # the worker's own method (its base's `__init__`): followed
                return Top(f"{call.where}: not followed")
        return UNSET  # a builtin or a plug-in's


class _Start(Observer):
    """The runner's start-up: its own methods on the way to the target are followed; each
    arrival at the target keeps the undecided tests on its path."""

    def __init__(self, machine: Machine, this: Instance, chain: frozenset[str], target: _Target):
        self.machine = machine
        self.this = this
        self.chain = chain
        self.target = target
        self.paths: list[tuple[str, ...]] = []

    def _arrive(self) -> None:
        self.paths.append(
            tuple(t.text for frame in self.machine.stack for t in frame.tests if not t.definite)
        )

    def on_call(self, call: Call) -> Any:
        frame = call.frame
        line = call.node.lineno if call.node is not None else 0
        if frame is not None and frame.site is not None:
            method = frame.site.qualname.rpartition(".")[2]
            if any(m == method and a <= line <= b for m, a, b in self.target.spans):
                self._arrive()
                return Top(f"{call.where}: the target")
        for one in alternatives(call.callee):
            if isinstance(one, FuncVal) and _same(one.bound, self.this):
                name = one.site.qualname.rpartition(".")[2]
                if name in self.target.methods:
                    self._arrive()
                    return Top(f"{call.where}: the target")
                if name in self.chain:
                    return UNSET
            if isinstance(one, ClassVal) and one.qualname in self.target.classes:
                self._arrive()
            if isinstance(one, (FuncVal, ClassVal)):
                return Top(f"{call.where}: not followed")
        return UNSET  # a builtin or a plug-in's


def _same(a: Any, b: Instance | None) -> bool:
    return isinstance(a, Instance) and b is not None and a.oid == b.oid


def by_role(
    index: TreeIndex,
    uses: list[ResolvedUse],
    role: str,
    worker_modules: frozenset[str],
    serves: Callable[[str], bool],
) -> tuple[list[ResolvedUse], tuple[str, ...]]:
    """The uses the role's runner may reach, and, when each of them rests on an undecided test
    the role's own values enter, what it rests on (else ()). Only the draft's runner is built
    with values of its own (the target's is the launch's); a use of the draft's own seed
    (`draft_model_runner.model`) is the draft's whatever the runner's start-up does."""
    if role != "draft":
        return uses, ()
    reacher = role_reacher(index)
    kept: list[ResolvedUse] = []
    notes: list[str] = []
    every_undecided = True
    for u in uses:
        if u.role != "any":
            kept.append(u)
            every_undecided = False
            continue
        found = reacher.reach(u.origin_scope or u.use.scope, worker_modules, serves)
        if found.reached is False:
            continue
        kept.append(u)
        if found.reached is True:
            every_undecided = False
        else:
            where = "; ".join(found.read_from)
            notes += [f"the draft's runner reaches {u.file}:{u.use.line} only if {t}"
                      for t in found.assumed]  # fmt: skip
            if where:
                notes.append(f"the draft's runner is built after: {where}")
    return kept, (tuple(dict.fromkeys(notes)) if kept and every_undecided else ())


_REACHERS: weakref.WeakKeyDictionary[TreeIndex, RoleReacher] = weakref.WeakKeyDictionary()


def role_reacher(index: TreeIndex) -> RoleReacher:
    """One per index: what the builders hand over does not depend on the audit that asks."""
    found = _REACHERS.get(index)
    if found is None:
        found = _REACHERS[index] = RoleReacher(index)
    return found
