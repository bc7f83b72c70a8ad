"""Reachability per role: what the worker hands the runner it builds, and where that runner's
own start-up goes with it.

A use of a runner's model whose reference is not named for a role (`self.model` in a
ModelRunner, `self.model_runner.model` in `CudaGraphRunner.__init__`) applies to every runner
that reaches it. The draft's runner is built by a worker (a call with `is_draft_worker=True`),
often after the worker wrote values on the objects it hands over: 0.4.10 to 0.5.9's EAGLE worker
sets `server_args.disable_cuda_graph = True` before `super().__init__(..., is_draft_worker=True)`,
so the draft's `ModelRunner.init_device_graphs` returns before it builds a `CudaGraphRunner`,
and what `CudaGraphRunner.__init__` asks of the model is not asked of the draft. Both halves are
read with the one evaluator, for the algorithm at hand (the launch's `speculative_algorithm`):

1. The worker's function that builds the draft runner runs on the launch's server arguments
   (their declared constant defaults, the algorithm). It follows the worker's own calls (its
   base's `__init__`) and the enum's; the call that makes the runner (a class named
   `...ModelRunner`) is not run: its arguments are what the worker hands over, with the
   worker's writes on them. Every other call of the tree is unknown.
2. The runner's `__init__` runs on those arguments, following only the runner's methods on a
   self-call path to the target statements (`targets.py`) and the enum's. Whether a path runs a
   target statement, and under which undecided tests, is the answer.
3. The same run with the launch's own values (not a draft) is the baseline: where the draft's
   path rests only on undecided tests the baseline's rests on too, the role's values change
   nothing and the use stands as for any runner.

The target's runner is built by the scheduler with the launch's values: its uses stand.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.interface.targets import Target, Targets
from eaglebug.checks.pyeval.budget import Budget
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine, Observer
from eaglebug.checks.pyeval.protocol import Policy
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Call, Frame
from eaglebug.checks.pyeval.truth import Tri
from eaglebug.checks.pyeval.values import (
    UNSET,
    ClassVal,
    FuncVal,
    Instance,
    Top,
    alternatives,
)
from eaglebug.checks.reach.resolve import ResolvedUse
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex, parsed_with
from eaglebug.checks.speculative.algorithms import ENUM_NAME, AlgorithmFacts
from eaglebug.checks.speculative.dispatch import SERVER_ARGS

_DRAFT_KEYWORD = "is_draft_worker"  # the builder's keyword in every release from 0.4 to 0.5.23
_RUNNER_SUFFIX = "ModelRunner"
# A start-up path through a few methods of the runner: far below the default limits.
_BUDGET = Budget(depth=12, steps=60_000)


@dataclass(frozen=True)
class RoleReach:
    """Does the role's runner reach a use: True, False, or None (undecided: `assumed` says on
    which tests); `read_from` says where the role's values were written."""

    reached: Tri
    assumed: tuple[str, ...] = ()
    read_from: tuple[str, ...] = ()


_STANDS = RoleReach(True)


@dataclass(frozen=True)
class _Build:
    """What one worker function hands the draft's runner it builds."""

    runner: ClassRef
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    written: tuple[str, ...]  # `file:line sets attr = value`, the worker's known writes on them


class RoleReacher:
    """Per index: the draft's builders per algorithm, and each use's reach (memoised)."""

    def __init__(self, index: TreeIndex, algo: AlgorithmFacts) -> None:
        self.index = index
        self.enum_file = algo.source
        self.source = Source.of(index)
        self.targets = Targets(index)
        # A refusal of some other launch is passed over: what runs after it still runs here.
        self.algorithm = ""  # the algorithm of the run at hand (the enum's plug-ins read it)
        self.machine = Machine(
            self.source,
            self._enum_plugins(algo),
            budget=_BUDGET,
            policy=Policy(record_raises=False, skip_raises=True),
        )
        self._sites: dict[str, list[tuple[str, str, str]]] = {}
        self._builds: dict[tuple[str, str], _Build | None] = {}
        self._memo: dict[tuple[str, int, str, tuple[str, ...]], RoleReach] = {}

    def _enum_plugins(self, algo: AlgorithmFacts) -> Intrinsics:
        """The launch's algorithm as the enum's code gives it: `from_string` of the launch's
        text is its member (an object of the enum where the tree builds members by a registry
        the reading cannot run: 0.5.7), and each predicate (`is_eagle3()`) is what the audit
        read of the enum (`AlgorithmFacts.predicates`)."""
        hooks = Intrinsics()
        if algo.source is None:
            return hooks
        enum = f"{module_name(algo.source)[0]}.{ENUM_NAME}"

        def member(call: Call) -> Any:
            made = (
                call.machine.call_within(call.callee, list(call.args), dict(call.kwargs))
                if isinstance(call.callee, FuncVal)
                else UNSET
            )
            if isinstance(made, Top) or made is UNSET:
                return call.machine.new_object(self.source.class_val(enum))
            return made

        hooks.call(f"{enum}.from_string", member)
        for name, members in algo.predicates.items():
            hooks.call(f"{enum}.{name}", self._predicate(members))
        return hooks

    def _predicate(self, members: frozenset[str]) -> Callable[[Call], bool]:
        """A predicate of the enum: true for the algorithm of the run at hand if a member."""
        return lambda _call: self.algorithm in members

    def reach(
        self,
        scope: str,
        line: int,
        algorithm: str,
        worker_modules: frozenset[str],
        serves: Callable[[str], bool],
    ) -> RoleReach:
        """Does the draft's runner reach the use taken in `scope` (module.Class.method) at
        `line`, built by the worker functions of `worker_modules` that `serves` says run?"""
        builders = tuple(s for s in self.builders(worker_modules) if serves(s))
        key = (scope, line, algorithm, builders)
        if key not in self._memo:
            self.algorithm = algorithm
            # Where no runner the tree names `ModelRunner` could decide the use, running the
            # builders would decide nothing: the use stands (the safe answer) without them.
            runners = self.index.classes.classes_named(_RUNNER_SUFFIX)
            if runners and all(self.targets.target(scope, line, r) is None for r in runners):
                self._memo[key] = _STANDS
            else:
                builds = [self.build(s, algorithm) for s in builders]
                self._memo[key] = self._reach(scope, line, algorithm, builds)
        return self._memo[key]

    def _reach(
        self, scope: str, line: int, algorithm: str, builds: list[_Build | None]
    ) -> RoleReach:
        if not builds:
            return _STANDS
        verdicts = []
        for build in builds:
            if build is None:
                return _STANDS
            target = self.targets.target(scope, line, build.runner)
            if target is None:
                return _STANDS
            draft = self._run(build.runner, target, build.args, dict(build.kwargs))
            if draft.reached is None:
                launch: dict[str, Any] = {name: Top("the launch's") for name, _ in build.kwargs}
                launch["server_args"] = self._server_args(algorithm)
                launch[_DRAFT_KEYWORD] = False
                base = self._run(build.runner, target, (), launch)
                own = tuple(t for t in draft.assumed if t not in base.assumed)
                if base.reached is None and not own:
                    return _STANDS  # the role's values decide nothing here
                draft = RoleReach(None, own or draft.assumed)
            if draft.reached is True:
                return _STANDS
            verdicts.append(RoleReach(draft.reached, draft.assumed, build.written))
        written = tuple(dict.fromkeys(w for v in verdicts for w in v.read_from))
        undecided = [v for v in verdicts if v.reached is None]
        if undecided:
            return RoleReach(None, tuple(dict.fromkeys(a for v in undecided for a in v.assumed)),
                             written)  # fmt: skip
        return RoleReach(False, (), written)

    # -- 1. the builders ---------------------------------------------------------------------
    def builders(self, worker_modules: frozenset[str]) -> list[str]:
        """module.Class.function of every worker function that builds a runner with
        `is_draft_worker=True`."""
        key = ",".join(sorted(worker_modules))
        if key not in self._sites:
            found: list[tuple[str, str, str]] = []
            for rel in sorted(self.index.entries):
                module, _ = module_name(rel)
                if module not in worker_modules:
                    continue
                parsed = parsed_with(self.index, rel, _DRAFT_KEYWORD)
                if parsed is None:
                    continue
                for cls in parsed.tree.body:
                    if isinstance(cls, ast.ClassDef):
                        found += [
                            (module, cls.name, fn.name)
                            for fn in cls.body
                            if isinstance(fn, ast.FunctionDef) and _builds_draft(fn)
                        ]
            self._sites[key] = found
        return [".".join(site) for site in self._sites[key]]

    def build(self, function: str, algorithm: str) -> _Build | None:
        """What the worker function hands the runner it builds (None: it builds none here)."""
        key = (function, algorithm)
        if key not in self._builds:
            self._builds[key] = self._build(function, algorithm)
        return self._builds[key]

    def _build(self, function: str, algorithm: str) -> _Build | None:
        split = self.index.split_qualified(function)
        if split is None:
            return None
        module, qualname = split
        site = self.source.function(module, qualname)
        owner = self.source.class_val(f"{module}.{qualname.rpartition('.')[0]}")
        if site is None or not isinstance(site.node, ast.FunctionDef):
            return None
        machine = self.machine
        this = machine.new_object(owner)
        watch = _Builder(machine, self.enum_file)
        given: dict[str, Any] = {a.arg: machine.new_object(None) for a in site.node.args.args[1:]}
        if "server_args" in given:
            given["server_args"] = self._server_args(algorithm)
        self._running(watch, FuncVal(site, owner, this, "method"), [], given)
        if watch.made is None:
            return None
        runner, args, kwargs = watch.made
        written = [
            f"{where} sets {key} = {value!r}"
            for handed in (*args, *kwargs.values())
            if isinstance(handed, Instance)
            for key, (value, where) in sorted(watch.written.get(handed.oid, {}).items())
            if isinstance(value, (bool, int, float)) or value is None
        ]
        return _Build(runner, tuple(args), tuple(kwargs.items()), tuple(written))

    def _server_args(self, algorithm: str) -> Instance:
        """The launch's server arguments: the algorithm, and the constant defaults other than
        None that `ServerArgs`'s body declares (a None is resolved at start-up: `device`
        becomes the platform's); every other field unknown. No class: its body's None would
        stand in for a field the object lacks."""
        fields: dict[str, Any] = {}
        for ref in self.index.classes.classes_named(SERVER_ARGS):
            for name, node in self.source.class_body(ref).items():
                if isinstance(node, ast.Constant) and node.value is not None:
                    fields.setdefault(name, node.value)
        fields["speculative_algorithm"] = algorithm
        return self.machine.new_object(None, fields)

    # -- 2. the runner's start-up --------------------------------------------------------------
    def _run(
        self, runner: ClassRef, target: Target, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> RoleReach:
        order, _ = self.source.mro(runner)
        init = next(
            ((r, s) for r in order if (s := self.source.method(r, "__init__")) is not None), None
        )
        if init is None:
            return _STANDS
        owner, site = init
        this = self.machine.new_object(self.source.class_val(runner.qualname))
        watch = _Start(self.machine, this, target, self.enum_file)
        function = FuncVal(site, self.source.class_val(owner.qualname), this, "method")
        incomplete = self._running(watch, function, list(args), kwargs)
        if not watch.paths:
            if incomplete is not None:
                return RoleReach(None, (f"the runner's start-up was not read to the end: "
                                        f"{incomplete}",))  # fmt: skip
            return RoleReach(False)
        if any(not undecided for undecided in watch.paths):
            return _STANDS
        return RoleReach(None, tuple(dict.fromkeys(t for p in watch.paths for t in p)))

    def _running(
        self, watch: Observer, function: FuncVal, args: list[Any], kwargs: dict[str, Any]
    ) -> str | None:
        """One run with `watch`; the limit it reached, if any. What it assumed is not kept."""
        machine = self.machine
        machine.observer = watch
        machine.raised.clear()
        mark = len(machine.assumed)
        try:
            return machine.run(function, args, kwargs).incomplete
        finally:
            machine.observer = Observer()
            del machine.assumed[mark:]


def _builds_draft(fn: ast.FunctionDef) -> bool:
    return any(
        isinstance(node, ast.keyword)
        and node.arg == _DRAFT_KEYWORD
        and isinstance(node.value, ast.Constant)
        and node.value.value is True
        for node in syntax.walk(fn)
    )


def _same(a: Any, b: Any) -> bool:
    return isinstance(a, Instance) and isinstance(b, Instance) and a.oid == b.oid


class _Builder(Observer):
    """The worker's build of the draft runner: the worker's own calls and the enum's are
    followed; the runner's constructor is not run, its arguments kept; what the run writes on
    objects is remembered; every other call of the tree is unknown."""

    def __init__(self, machine: Machine, enum_file: str | None) -> None:
        self.machine = machine
        self.enum_file = enum_file
        self.made: tuple[ClassRef, list[Any], dict[str, Any]] | None = None
        # object id -> attribute -> (value, file:line)
        self.written: dict[int, dict[str, tuple[Any, str]]] = {}

    def on_write(self, obj: Instance, key: str, value: Any, rel: str, line: int) -> None:
        self.written.setdefault(obj.oid, {})[key] = (value, f"{rel}:{line}")

    def on_call(self, call: Call) -> Any:
        if self.made is not None:
            return Top(f"{call.where}: after the runner is built")
        running = call.frame.bound if call.frame is not None else None
        for one in alternatives(call.callee):
            if isinstance(one, ClassVal) and one.ref is not None:
                if one.ref.facts.name.endswith(_RUNNER_SUFFIX):
                    self.made = (one.ref, list(call.args), dict(call.kwargs))
                elif call.kwargs.get(_DRAFT_KEYWORD) is True:
                    return UNSET  # the draft's worker (`TpModelWorker(..., is_draft_worker=True)`)
                return Top(f"{call.where}: {one.qualname}() not built")
            if isinstance(one, FuncVal):
                # a method of the object a followed frame runs on (the worker's own, its base's
                # `__init__`, a helper of the draft's worker), or the enum's
                own = _same(one.bound, running) or (
                    one.bound is None and bool(call.args) and _same(call.args[0], running)
                )
                if own or one.site.rel == self.enum_file:
                    return UNSET  # the worker's own method (its base's `__init__`), the enum's
                return Top(f"{call.where}: not followed")
        return UNSET  # a builtin or a plug-in's


class _Start(Observer):
    """The runner's start-up: its methods on the way to the target and the enum's are
    followed; each target statement run keeps the undecided tests on its path."""

    def __init__(
        self, machine: Machine, this: Instance, target: Target, enum_file: str | None
    ) -> None:
        self.machine = machine
        self.this = this
        self.target = target
        self.enum_file = enum_file
        self.paths: list[tuple[str, ...]] = []

    def on_statement(self, frame: Frame, stmt: ast.stmt) -> None:
        if (frame.rel, stmt.lineno) in self.target.statements:
            self.paths.append(
                tuple(t.text for f in self.machine.stack for t in f.tests if not t.definite)
            )

    def on_call(self, call: Call) -> Any:
        for one in alternatives(call.callee):
            if isinstance(one, FuncVal):
                name = one.site.qualname.rpartition(".")[2]
                if (_same(one.bound, self.this) and name in self.target.chain) or (
                    one.site.rel == self.enum_file
                ):
                    return UNSET
                return Top(f"{call.where}: not followed")
            if isinstance(one, ClassVal) and one.ref is not None:
                return Top(f"{call.where}: {one.qualname}() not built")
        return UNSET  # a builtin or a plug-in's


def by_role(
    index: TreeIndex,
    uses: list[ResolvedUse],
    role: str,
    algorithm: str,
    algo: AlgorithmFacts,
    worker_modules: frozenset[str],
    serves: Callable[[str], bool],
) -> tuple[list[ResolvedUse], tuple[str, ...]]:
    """The uses the role's runner may reach, and, when each of them rests on an undecided test
    the role's own values enter, what it rests on (else ()). Only the draft's runner is built
    with values of its own; a use of a reference named for the draft
    (`draft_model_runner.model`) is the draft's whatever its runner's start-up does."""
    if role != "draft":
        return uses, ()
    reacher = role_reacher(index, algo)
    kept: list[ResolvedUse] = []
    notes: list[str] = []
    every_undecided = True
    for u in uses:
        if u.role != "any":
            kept.append(u)
            every_undecided = False
            continue
        # where the reference was taken: the use's line, or the first call passing it on
        line = int(u.via[0].rpartition(":")[2]) if u.via else u.use.line
        found = reacher.reach(
            u.origin_scope or u.use.scope, line, algorithm, worker_modules, serves
        )
        if found.reached is False:
            continue
        kept.append(u)
        if found.reached is True:
            every_undecided = False
            continue
        notes += [f"the draft's runner reaches {u.file}:{u.use.line} only if {t}"
                  for t in found.assumed]  # fmt: skip
        if found.read_from:
            notes.append(f"the draft's runner is built after: {'; '.join(found.read_from)}")
    return kept, (tuple(dict.fromkeys(notes)) if kept and every_undecided else ())


def role_reacher(index: TreeIndex, algo: AlgorithmFacts) -> RoleReacher:
    """One per index: what the builders hand over does not depend on the audit that asks."""
    return index.kept("interface.role_reacher", lambda: RoleReacher(index, algo))
