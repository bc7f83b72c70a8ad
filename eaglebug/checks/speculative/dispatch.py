"""Which worker class the scheduler builds for each algorithm, read from the scheduler itself.

Releases before `SpeculativeAlgorithm.create_worker` (0.5.9) choose the draft worker where the
scheduler stores it: an `if/elif` chain on the enum's predicates (0.4.10, 0.5.3), or
`self.spec_algorithm.create_draft_worker(...)` on a registry whose `register_*` calls at import
give each member its factory (0.5.7). Whatever the shape, the function that stores the
scheduler's `draft_worker` is run in the one evaluator with the algorithm known and the rest
unknown, and every worker class a path can store there is kept:

- `self.spec_algorithm`, and anything the enum makes from the launch's text
  (`SpeculativeAlgorithm.from_string(...)`), is the member at hand;
- the server args hold their declared defaults where the class body gives a constant
  (`enable_multi_layer_eagle: bool = False`), every other field unknown: the audit audits a
  launch that names the algorithm, not one that sets 0.5.7's multi-layer EAGLE (set by the
  tree itself for MiMoV2Flash only, and then the draft is that model's own);
- a class of the tree called there is the object it makes (its `__init__`, a model load, is not
  run); the scheduler's other methods and calls outside the enum's module are not followed
  (what they return is unknown, so a test on it runs both branches);
- the registry form: an unknown callable a member calls on itself (its stored factory) is the
  callable its `register_*(...)` call at import gave it, called with the same keywords.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from eaglebug.checks.pyeval.machine import Machine, Observer
from eaglebug.checks.pyeval.state import Call, Frame
from eaglebug.checks.pyeval.values import (
    UNSET,
    ClassVal,
    FuncVal,
    Instance,
    Top,
    alternatives,
    one_of,
)
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex, parsed_with

# The scheduler's field that holds the draft worker in every release from 0.4 to 0.5.23
# (`self.draft_worker = EAGLEWorker(...)`, `= ...create_draft_worker(...)`, `= Cls(...)`).
FIELD = "draft_worker"
_NEEDLE = f"self.{FIELD} ="
SERVER_ARGS = "ServerArgs"  # the launch's arguments, the same class name in every release


def dispatch_sites(index: TreeIndex, enum_methods: set[str]) -> Iterator[tuple[str, str]]:
    """(module, `Class.method`) of each function that stores `self.draft_worker` and asks the
    enum there (calls one of its methods): the scheduler's dispatch, not a worker's own
    `self.draft_worker = TpModelWorker(...)`."""
    for rel in index.entries:
        parsed = parsed_with(index, rel, _NEEDLE)
        if parsed is None:
            continue
        module, _ = module_name(rel)
        for cls in parsed.tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and _stores_and_asks(fn, enum_methods):
                    yield module, f"{cls.name}.{fn.name}"


def _stores_and_asks(fn: ast.FunctionDef, enum_methods: set[str]) -> bool:
    stores = asks = False
    for node in syntax.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            stores = stores or (node.attr == FIELD and dotted(node.value) == "self")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            asks = asks or (
                node.func.attr in enum_methods
                and (dotted(node.func.value) or "").endswith("spec_algorithm")
            )
    return stores and asks


class _Dispatch(Observer):
    """One run of the dispatch for one member: what it stores in `draft_worker`."""

    def __init__(self, machine: Machine, enum: ClassVal, member: Any, factories: list[Any]) -> None:
        self.machine = machine
        self.enum = enum
        self.member = member
        self.factories = factories
        self.stored: list[Any] = []

    def on_store(self, target: ast.Attribute, value: Any, stmt: ast.stmt, frame: Frame) -> None:
        if target.attr == FIELD and dotted(target.value) == "self":
            self.stored.append(value)

    def on_call(self, call: Call) -> Any:
        made = [self._one(call, one) for one in alternatives(call.callee)]
        if all(m is UNSET for m in made):
            return UNSET
        if any(m is UNSET for m in made):  # part of a choice is followed: follow all of it
            return UNSET
        return one_of(made, self.machine.budget.alternatives)

    def _one(self, call: Call, callee: Any) -> Any:
        if isinstance(callee, ClassVal):
            if callee.qualname == self.enum.qualname:
                return self.member
            return self.machine.new_object(callee) if callee.ref is not None else UNSET
        if isinstance(callee, FuncVal):
            if callee.site.module != self.enum_module:
                return Top(f"{call.where}: {callee.site.qualname}() not followed")
            owner = callee.owner
            if (
                owner is not None
                and owner.qualname == self.enum.qualname
                and (callee.kind in {"static", "class"})
            ):
                return self.member  # `SpeculativeAlgorithm.from_string(...)`: the member
            # The enum's own code runs even where the caller's `**kwargs` is not known (the
            # keywords it forwards to a factory are then unknown, not the factory).
            return self.machine.call_within(callee, list(call.args), dict(call.kwargs))
        if isinstance(callee, Top) and self._on_member(call) and self.factories:
            return one_of(
                [self.machine.call_within(f, [], dict(call.kwargs)) for f in self.factories],
                self.machine.budget.alternatives,
            )
        return UNSET

    @property
    def enum_module(self) -> str:
        return self.enum.ref.module.module if self.enum.ref is not None else ""

    def _on_member(self, call: Call) -> bool:
        frame = call.frame
        return frame is not None and frame.bound is self.member


def stored_workers(
    machine: Machine,
    enum: ClassVal,
    member: Any,
    site: tuple[str, str],
    factories: list[Any],
) -> set[str]:
    """The worker classes the dispatch function `site` may store for `member`."""
    module, qualname = site
    function = machine.source.function(module, qualname)
    if function is None:
        return set()
    cls_name = qualname.rpartition(".")[0]
    owner = machine.source.class_val(f"{module}.{cls_name}")
    server_args: Any = _declared_defaults(machine) if not isinstance(member, Top) else Top("any")
    scheduler = machine.new_object(owner, {"spec_algorithm": member, "server_args": server_args})
    watch = _Dispatch(machine, enum, member, factories)
    machine.observer = watch
    params = [a.arg for a in function.node.args.args[1:]]  # type: ignore[union-attr]
    given: dict[str, Any] = {name: machine.new_object(None) for name in params}
    if "server_args" in given:
        given["server_args"] = server_args
    machine.raised.clear()
    machine.run(FuncVal(function, owner, scheduler, "method"), [], given)
    machine.observer = Observer()
    found: set[str] = set()
    for value in watch.stored:
        for one in alternatives(value):
            if isinstance(one, Instance) and one.cls is not None and one.cls.ref is not None:
                found.add(one.cls.qualname)
    return found


def _declared_defaults(machine: Machine) -> Instance:
    """The launch's `ServerArgs` where its class body declares a constant default."""
    fields: dict[str, Any] = {}
    for ref in machine.source.index.classes_named(SERVER_ARGS):
        for name, node in machine.source.class_body(ref).items():
            if isinstance(node, ast.Constant):
                fields.setdefault(name, node.value)
    found = machine.source.index.classes_named(SERVER_ARGS)
    cls = machine.source.class_val(found[0].qualname) if found else None
    return machine.new_object(cls, fields)


def registered_factories(machine: Machine, call: ast.Call, module: str) -> list[Any]:
    """The callables of the tree a `register_*(...)` call hands over (its arguments that are a
    function or a class of the tree): what the registry will call to build the worker."""
    out: list[Any] = []
    for node in (*call.args[1:], *(k.value for k in call.keywords)):
        if not isinstance(node, (ast.Name, ast.Attribute)):
            continue
        value = machine.evaluate(node, module).value
        if isinstance(value, FuncVal) or (isinstance(value, ClassVal) and value.ref is not None):
            out.append(value)
    return out
