"""One reading of SGLang's memory arithmetic: a function of the tree run in the one evaluator.

SGLang's memory functions are methods of several runtime objects (`ServerArgs`, `ModelRunner`,
the pool configurators) that all read the same fields: `self.tp_size`, `server_args.tp_size`,
`kvc.model_config.num_hidden_layers`. Here they run on one input object, the launch's flat
store of those fields (`Flat` names a path into it), whose methods are those of the class the
running method belongs to; every name, call and helper is resolved through the tree's imports
(the evaluator's resolver), and what only the running box knows (the GPU's memory, torch's
dtypes, the process's runtime context) is a plug-in by qualified name. What the run assigns to
the names the memory check watches is kept as `Step`s; a raise on a decided path ends the run
(the launch stops there), one on an undecided path is said in `assumed`.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.pyeval import objects
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine, Observer, Policy
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Frame
from eaglebug.checks.pyeval.values import (
    UNSET,
    ClassVal,
    FunctionSite,
    FuncVal,
    Instance,
    OneOf,
    Raised,
    Top,
)
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.initfacts import dotted

# The names that stand for the flat object when a function takes it as a parameter
# (`def handle_gpu_memory_settings(server_args)`, `def _compute(kvc)`), and the attributes of
# it that are the same object (`self.server_args.tp_size` reads `tp_size`).
ROOTS = frozenset({"self", "cfg", "server_args", "kvc", "mr"})
# The paths of the store that hold a config.json.
CONFIGS = ("model_config.hf_config", "model_config.hf_text_config", "hf_config", "hf_text_config")


@dataclass(frozen=True)
class Flat:
    """The flat object at a path (`""` itself, `model_config.hf_config` a part of it), as an
    argument of a reading."""

    path: str = ""


def flat_path(node: ast.expr) -> Flat | None:
    """`server_args.max_running_requests` (a name that stands for the flat object, then a
    path) as that path of the flat store; the name alone, the store itself; else None."""
    root, _, path = (dotted(node) or "").partition(".")
    return Flat(path) if root in ROOTS else None


@dataclass(frozen=True)
class Step:
    """One assignment to a watched name: where, the code, and the value it left."""

    file: str
    line: int
    name: str
    code: str
    value: object
    before: object = None  # the value before an augmented assignment
    depth: int = 0  # 1: the function evaluated; deeper: a function it called


@dataclass(frozen=True)
class Reading:
    """One rule's outcome: a value, or a raise, or why it could not be read."""

    value: object
    steps: tuple[Step, ...] = ()
    assumed: tuple[str, ...] = ()
    raised: Raised | None = None
    unknown: str | None = None
    anchor: str = ""  # "file:line" of the function read
    written: frozenset[str] = frozenset()  # the store's keys the run assigned

    @property
    def ok(self) -> bool:
        return self.unknown is None and self.raised is None

    def line_of(self, name: str) -> str | None:
        """Where the tree last assigned `name` in this reading."""
        hits = [s for s in self.steps if s.name.rsplit(".", 1)[-1] == name and s.line > 0]
        return f"{hits[-1].file}:{hits[-1].line}" if hits else None


@dataclass
class _Watch(Observer):
    """Keeps every assignment (local or field) to a watched name, and where."""

    watch: frozenset[str]
    base: int
    machine: Machine | None = None
    steps: list[Step] = field(default_factory=list)

    def _keep(self, frame: Frame, name: str, value: Any, stmt: ast.stmt, before: Any) -> None:
        if name in self.watch or name.rsplit(".", 1)[-1] in self.watch:
            depth = len(self.machine.stack) - self.base if self.machine is not None else 0
            shown = None if before is UNSET else before
            code = ast.unparse(stmt)
            self.steps.append(Step(frame.rel, stmt.lineno, name, code, value, shown, depth))

    def on_assign(self, frame: Frame, name: str, value: Any, stmt: ast.stmt, before: Any) -> None:
        self._keep(frame, name, value, stmt, before)

    def on_field(
        self, frame: Frame, obj: Instance, key: str, value: Any, stmt: ast.stmt, before: Any
    ) -> None:
        self._keep(frame, key, value, stmt, before)


def machine(index: TreeIndex, hooks: Intrinsics) -> Machine:
    """A machine that stops at a definite raise (the launch stops there)."""
    return Machine(Source.of(index), hooks, policy=Policy(stop_at_raise=True))


def flat_object(m: Machine, values: Mapping[str, object]) -> Instance:
    """The flat object: its fields the launch's store; its methods the running method's
    class's; `self.server_args` (and the other roots) itself."""
    parts = [key.split(".") for key in values if "." in key]
    parents = {".".join(p[:i]) for p in parts for i in range(1, len(p))}
    store = {k: v for k, v in values.items() if not (v is None and k in parents)}
    obj = m.bag(store, closed=False)
    for path in CONFIGS:  # config.json as the tree reads it: a key it lacks, it lacks
        m.heap.closed_paths.add((obj.oid, path))
    m.heap.flat.add(obj.oid)
    m.heap.aliases[obj.oid] = ROOTS
    return obj


def argument(m: Machine, obj: Instance, value: object) -> object:
    """An argument as the run sees it: a `Flat` path, the object there."""
    if not isinstance(value, Flat):
        return value
    found: object = obj
    for part in value.path.split(".") if value.path else []:
        found = objects.attribute(m, found, part, "argument")
    return found


World = Callable[[Machine, Instance], None]  # fills a run's plug-ins, given its flat object


def run(
    index: TreeIndex,
    site: FunctionSite,
    owner: str | None,
    args: list[object],
    values: dict[str, object],
    world: World,
    watch: frozenset[str],
    classes: Mapping[str, str] | None = None,
    kwargs: Mapping[str, object] | None = None,
    roles: tuple[str, ...] = (),
) -> tuple[Reading, dict[str, object]]:
    """Run `site` (a method of `owner` on the flat object, or a module function) on `values`;
    the reading, and the flat store the run left. `classes`: the class of the object at a path
    of the store (`model_config` -> the tree's ModelConfig); `roles`: the classes whose methods
    the store also has (after the running method's)."""
    m = machine(index, Intrinsics())
    obj = flat_object(m, values)
    for path, qualname in (classes or {}).items():
        m.heap.path_classes[(obj.oid, path)] = m.source.class_val(qualname)
    m.heap.roles[obj.oid] = tuple(m.source.class_val(q) for q in roles)
    world(m, obj)
    watcher = _Watch(watch, 0)
    watcher.machine = m
    m.observer = watcher
    node = m.source.node_of(site)
    if node is None or isinstance(node, ast.Lambda):
        return Reading(None, unknown=f"{site.qualname} is not read here"), dict(values)
    given = [argument(m, obj, a) for a in args]
    named = {k: argument(m, obj, v) for k, v in (kwargs or {}).items()}
    params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    if owner:
        cls = ClassVal(owner, m.source.class_ref(owner))
        fn = FuncVal(site, cls, obj, "method")
        # `init_memory_pool(self, total_gpu_memory, server_args)` (0.5.7): a parameter that
        # is one of the flat object's names, left out by the caller, is the flat object
        for name in params[1 + len(given) :]:
            if name in ROOTS and name not in named:
                named[name] = obj
    else:
        fn = FuncVal(site)
        # `f(kvc, n)` called as `f(n)`: the flat object is its first parameter
        if params and params[0] in ROOTS and len(given) + len(named) < len(params):
            given = [obj, *given]
    result = m.run(fn, given, named)
    env = _flattened(m, obj)
    anchor = site.where
    written = frozenset(key for oid, key in m.heap.writes if oid == obj.oid)
    steps, assumed = tuple(watcher.steps), tuple(result.assumed)
    raised = result.definite_raise
    maybe = [r for r in result.raised if not r.definite]
    if maybe:
        assumed += tuple(f"{r.rel}:{r.line}: may raise {r.kind} ({r.condition})" for r in maybe)
    if result.incomplete:
        incomplete = f"incomplete: {result.incomplete}"
        return Reading(None, steps, assumed, None, incomplete, anchor, written), env
    if raised is not None:
        return Reading(None, steps, assumed, raised, None, anchor, written), env
    value = result.value
    if isinstance(value, Top):
        return Reading(None, steps, assumed, None, value.why, anchor, written), env
    if isinstance(value, OneOf):
        said = ", ".join(repr(v) for v in value.values[:4])
        undecided = f"one of {said} (undecided)"
        return Reading(None, steps, assumed, None, undecided, anchor, written), env
    return Reading(_exported(m, value), steps, assumed, None, None, anchor, written), env


def _flattened(m: Machine, obj: Instance) -> dict[str, object]:
    """The store the run left, for the next reading: an object the run made and kept in a
    field (`self.req_to_token_pool = ReqToTokenPool(...)`) becomes that field's dotted paths
    (`req_to_token_pool.size`), as the flat store holds every object."""
    out: dict[str, object] = {}

    def put(prefix: str, value: object, depth: int) -> None:
        if isinstance(value, Instance):
            if value.oid == obj.oid or depth > 3:
                return  # a part of the store itself, or too deep to keep
            for key, inner in m.fields(value).items():
                if not value.path or key.startswith(value.path + "."):
                    short = key[len(value.path) + 1 :] if value.path else key
                    put(f"{prefix}.{short}", inner, depth + 1)
            return
        out[prefix] = value

    for key, value in m.fields(obj).items():
        put(key, value, 0)
    return out


def _exported(m: Machine, value: object, depth: int = 0) -> object:
    """A value the caller keeps after the run's heap is gone: an object of the run as a
    namespace of its attributes (`MemoryPoolConfig(...)`'s `max_total_num_tokens`)."""
    if isinstance(value, Instance) and depth < 4:
        store = m.fields(value)
        prefix = value.path + "." if value.path else ""
        own = {k[len(prefix) :]: v for k, v in store.items() if k.startswith(prefix)}
        return types.SimpleNamespace(
            **{k: _exported(m, v, depth + 1) for k, v in own.items() if "." not in k}
        )
    if isinstance(value, list):
        return [_exported(m, v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_exported(m, v, depth + 1) for v in value)
    return value


def module_site(index: TreeIndex, rel: str, qualname: str) -> FunctionSite | None:
    """A function of the tree by its file and qualified name there."""
    module, _ = module_name(rel)
    return Source.of(index).function(module, qualname)


def evaluate(
    index: TreeIndex,
    rel: str,
    node: ast.expr,
    values: Mapping[str, object],
    world: World | None = None,
    names: Mapping[str, object] | None = None,
) -> object:
    """One expression of a file (a kept `self.x = <expr>` line), with the flat object as
    `self` and the other roots, and `names` as locals; None where it is not known."""
    m = machine(index, Intrinsics())
    obj = flat_object(m, values)
    if world is not None:
        world(m, obj)
    module, _ = module_name(rel)
    with m.module_frame(module) as frame:
        frame.locals.update({root: obj for root in ROOTS})
        frame.locals.update(names or {})
        try:
            made = m.evaluate_here(node)
        except Exception:
            return None
    return None if isinstance(made, (Top, OneOf)) else made


__all__ = ["ROOTS", "Flat", "Reading", "Step", "evaluate", "module_site", "run"]
