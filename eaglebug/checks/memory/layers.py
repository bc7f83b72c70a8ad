"""What a model's `__init__` builds, and how each layer divides its weights, read from the tree.

A module's `__init__` runs in the one evaluator (`pyeval`, never imported) on the launch's
parallel layout: the children it assigns to `self.<attr>` (a class, `nn.ModuleList([...])`,
`make_layers(n, lambda ...: Layer(...))`, a factory such as `get_moe_impl_class(q)(...)`) are
recorded with the arguments each construction is handed, as the run evaluated them
(`tp_size=attn_tp_size`, `parallel_group="attn_tp"`, `use_attn_tp_group=...`). A layer class's
own `__init__` (through `super().__init__` and the methods it calls, e.g. `divide(...)` in
`_initialize_partition`) runs with those arguments: every division by a group size (the
tensor-parallel world, the attention TP group, the MoE EP / TP groups, whatever name the release
gives them) is recorded with its file:line. A layer that divides by nothing is replicated on
every rank (ReplicatedLinear, RMSNorm, a gate's raw `nn.Parameter`).

The walk's policy: a construction of another of the tree's classes is recorded, not run (that
child's own `__init__` is walked when the weight's name leads to it); a `raise` is passed over
(a refusal of some other launch: what is built after it is still built); an undecided test runs
both sides (a tensor's name picks the child later). The launch's layout enters only through the
distributed state's plug-ins (`memory/parallel.py`); the attention TP size itself is what the
tree's own derivation computes from tp, dp and `--enable-dp-attention` (`memory/widths.py`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.args.world import env_names, register_platform
from eaglebug.checks.memory.parallel import GroupSize, Layout
from eaglebug.checks.memory.parallel import register as register_parallel
from eaglebug.checks.pyeval import brains, objects
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine, Observer, Policy
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import (
    UNSET,
    ClassVal,
    FuncVal,
    Instance,
    Intrinsic,
    OneOf,
    Top,
)
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex

# Families of groups whose divisions multiply (experts over EP, their width over MoE TP);
# other divisions of one layer (`output_size` and each of `output_sizes` by one TP size) are
# the same split, counted once.
_MULTIPLY = frozenset({"moe_ep", "moe_tp"})
UNREAD = "unread"  # a division by a size the evaluation could not read
_TORCH_NN = ("torch.nn.",)  # torch's own layers: whole on every rank
_LIST_BUILDERS = frozenset({"ModuleList", "make_layers", "make_pp_layers", "Sequential"})
# Where the server's arguments are read from in a layer (`get_global_server_args()
# .enable_dp_lm_head`): answered, like the distributed state, with the launch's layout.
_SERVER_ARGS = ("get_global_server_args", "get_server_args")


@dataclass(frozen=True)
class Built:
    """One construction of a child module: its class and the arguments it was handed."""

    attr: str
    ref: ClassRef | None  # None: a class outside the tree (`external`)
    args: tuple[object, ...]
    kwargs: tuple[tuple[str, object], ...]
    file: str
    line: int
    external: str | None = None  # `torch.nn.Linear`: torch's own layers know no TP group


@dataclass(frozen=True)
class Split:
    """How a layer class divides its weights for one set of arguments."""

    factor: int
    groups: tuple[str, ...]  # the groups it divides by; () when replicated
    where: str  # file:line of the division, or of the class when it divides by nothing


@dataclass
class _Site:
    attr: str
    element: ast.Call | None  # the element a list builder makes (lambda / comprehension)


class _Walk(Observer):
    """The observer of one `__init__` walk: the constructions at its `self.<attr> = ...`
    sites, and the divisions by group sizes."""

    def __init__(self, tree: LayerTree, mro: list[ClassRef], sites: dict[int, _Site]) -> None:
        self.tree = tree
        self.mro = mro
        self.sites = sites
        self.built: list[Built] = []
        self.divisions: list[tuple[str, int, str]] = []

    def on_call(self, call: Call) -> Any:
        site = self.sites.get(id(call.node)) if call.node is not None else None
        if site is not None:
            made = self._record(site, call)
            if made is not UNSET:
                return made
        callee = call.callee
        if isinstance(callee, FuncVal) and callee.site.qualname.rsplit(".", 1)[-1] == "divide":
            if len(call.args) == 2:
                self._divided(call.args[1], call.where)
            return UNSET
        modules = [c for c in _tree_classes(callee) if self._is_module(c)]
        if modules:  # another of the tree's modules: its own walk, when a name leads there
            return call.machine.new_object(modules[0] if len(modules) == 1 else None)
        return UNSET

    def _is_module(self, cls: ClassVal) -> bool:
        """An `nn.Module` of the tree (a layer), not a helper object (an env variable, a
        config) whose construction the walk needs run."""
        assert cls.ref is not None
        return bool(self.tree.index.classes.mro(cls.ref)[2])

    def on_binop(self, node: ast.BinOp, left: Any, right: Any, frame: Any) -> None:
        # `x // tp_size` shards; `(v + pad - 1) // pad` rounds: only a divisor named for a
        # size counts when its value is not read.
        if isinstance(node.op, ast.FloorDiv) and (
            isinstance(right, GroupSize) or "size" in ast.unparse(node.right)
        ):
            self._divided(right, f"{frame.rel}:{node.lineno}")

    def _divided(self, divisor: object, where: str) -> None:
        if isinstance(divisor, GroupSize):
            self.divisions.append((divisor.group, int(divisor), where))
        elif isinstance(divisor, (Top, OneOf)):  # a size not read: split by tp assumed
            self.divisions.append((UNREAD, self.tree.layout.tp, where))

    def _record(self, site: _Site, call: Call) -> Any:
        """A construction at a site: each class it may be, with its arguments. What the call
        then answers: a builder's list is not built (UNSET: the call runs)."""
        m = call.machine
        node = site.element or call.node
        assert node is not None
        callee: Any = call.callee
        args, kwargs = list(call.args), dict(call.kwargs)
        if site.element is not None:  # the element's own arguments, in the builder's scope
            callee = m.evaluate_here(node.func)
            args = [m.evaluate_here(a) for a in node.args if not isinstance(a, ast.Starred)]
            kwargs = {k.arg: m.evaluate_here(k.value) for k in node.keywords if k.arg}
        frame = m.stack[-1]
        if isinstance(callee, FuncVal) and callee.bound is not None and site.element is None:
            # `self.model = self._init_model(...)`: what the method returns is the child
            method = m.source.node_of(callee.site)
            for item in syntax.walk(method) if method is not None else []:
                if isinstance(item, ast.Return) and isinstance(item.value, ast.Call):
                    self.sites[id(item.value)] = _Site(site.attr, None)
            return UNSET
        refs = [c.ref for c in _tree_classes(callee) if c.ref is not None]
        if len(refs) != 1 and isinstance(callee, (Top, OneOf)):
            # A factory whose choice rests on what the walk does not read (the MoE backend:
            # `get_moe_impl_class(q)(...)`): its default, the last class it returns.
            owner = next((c for c in self.mro if c.file == frame.rel), None)
            found = _class_called(self.tree.index, owner, node.func) if owner else None
            if found is not None and (not refs or found in refs):
                refs = [found]
        external = None
        if not refs and isinstance(callee, Intrinsic) and callee.qualname.startswith(_TORCH_NN):
            external = callee.qualname
        held: list[ClassRef | None] = [*refs] or ([None] if external else [])
        for ref in held:
            self.built.append(
                Built(
                    site.attr,
                    ref,
                    tuple(args),
                    tuple(kwargs.items()),
                    frame.rel,
                    node.lineno,
                    external,
                )
            )
        if site.element is not None:
            return Top(f"{frame.rel}:{node.lineno}: the layers a builder makes")
        if refs and all(self._is_module(m.source.class_val(r.qualname)) for r in refs):
            return m.new_object(m.source.class_val(refs[0].qualname) if len(refs) == 1 else None)
        return UNSET


def _tree_classes(callee: Any) -> list[ClassVal]:
    values = callee.values if isinstance(callee, OneOf) else (callee,)
    return [v for v in values if isinstance(v, ClassVal) and v.ref is not None]


def class_node(index: TreeIndex, ref: ClassRef) -> ast.ClassDef | None:
    """The class's syntax, as the evaluator runs it (one parse per index)."""
    return Source.of(index).class_node(ref)


def _module_function(index: TreeIndex, file: str, name: str) -> ast.FunctionDef | None:
    """A module function a file defines or imports (through re-exports)."""
    module, _ = index.files.module_of(file)
    site = Source.of(index).function(module, name)
    if site is None:
        facts = index.module(module)
        target = facts.imports.get(name) if facts is not None else None
        split = index.split_qualified(target) if target else None
        site = Source.of(index).function(*split) if split else None
    node = Source.of(index).node_of(site) if site is not None else None
    return node if isinstance(node, ast.FunctionDef) else None


def _class_called(index: TreeIndex, owner: ClassRef, func: ast.expr) -> ClassRef | None:
    """The class a construction names as written, where the run could not tell: a
    factory's last `return Class` (its default: `get_moe_impl_class(q)(...)` -> FusedMoE)."""
    if isinstance(func, ast.Call):
        name = dotted(func.func)
        factory = _module_function(index, owner.file, name) if name else None
        if factory is None:
            return None
        returns = [
            dotted(n.value)
            for n in sorted(
                (r for r in syntax.walk(factory) if isinstance(r, ast.Return)),
                key=lambda r: r.lineno,
            )
            if n.value is not None and dotted(n.value)
        ]
        module, _ = index.files.module_of(owner.file)
        facts = index.module(module)
        for written in reversed(returns):
            if written and facts is not None:
                found = index.classes.cls(index.classes.resolve(facts, written))
                if found is not None:
                    return found
        return None
    name = dotted(func)
    if not name or not name.rsplit(".", 1)[-1][:1].isupper():
        return None
    return index.classes.resolve_class(owner, name)


def _sites(index: TreeIndex, mro: list[ClassRef]) -> dict[int, _Site]:
    """The constructions `self.<attr> = ...` of each `__init__` in the MRO, by call node."""
    out: dict[int, _Site] = {}
    source = Source.of(index)
    for ref in mro:
        site = source.method(ref, "__init__")
        init = source.node_of(site) if site is not None else None
        for node in syntax.walk(init) if init is not None else []:
            if not isinstance(node, ast.Assign):
                continue
            attrs = [
                t.attr
                for t in (
                    e
                    for target in node.targets
                    for e in (target.elts if isinstance(target, ast.Tuple) else [target])
                )
                if isinstance(t, ast.Attribute) and dotted(t.value) == "self"
            ]
            if not attrs:
                continue
            for call in _calls_of(node.value):
                builder = (dotted(call.func) or "").rsplit(".", 1)[-1]
                out[id(call)] = _Site(
                    attrs[0], _element(call) if builder in _LIST_BUILDERS else None
                )
    return out


def _calls_of(value: ast.expr) -> list[ast.Call]:
    if isinstance(value, ast.Call):
        return [value]
    if isinstance(value, ast.IfExp):
        return _calls_of(value.body) + _calls_of(value.orelse)
    return []


def _element(call: ast.Call) -> ast.Call | None:
    """The element class call of a list builder's lambda, comprehension or list."""
    for arg in call.args:
        node: ast.expr | None = arg
        if isinstance(node, ast.Lambda):
            node = node.body
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            node = node.elt
        elif isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            node = node.elts[0]
        if isinstance(node, ast.Call):
            return node
    return None


@dataclass
class LayerTree:
    """Walks `__init__`s for one launch layout, each (class, arguments) once, in one machine
    (so the objects one walk hands a child stay the same objects in the child's)."""

    index: TreeIndex
    layout: Layout
    config: Mapping[str, object]
    environ: Mapping[str, str] = field(default_factory=dict)  # the server's environment
    # The checkpoint renames a class's loader lists (`weights.loader_renames`).
    renamer: Callable[[ClassRef], list[tuple[str, str]]] = lambda ref: []
    _built: dict[str, list[Built]] = field(default_factory=dict)
    _splits: dict[str, Split] = field(default_factory=dict)
    _renames: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    _machine: Machine | None = None
    _config: Instance | None = None

    def renames(self, ref: ClassRef) -> list[tuple[str, str]]:
        if ref.qualname not in self._renames:
            self._renames[ref.qualname] = self.renamer(ref)
        return self._renames[ref.qualname]

    def machine(self) -> Machine:
        if self._machine is None:
            hooks = Intrinsics()
            brains.register_all(hooks, self.environ, None, known=set(env_names(self.index)))
            register_platform(hooks, self.index, None)
            register_parallel(hooks, self.layout)
            state = Intrinsic("sglang.parallel")
            for name in _SERVER_ARGS:
                hooks.call_in("sglang.srt*", name, lambda call: state)
            policy = Policy(record_raises=False, skip_raises=True)
            self._machine = Machine(Source.of(self.index), hooks, policy=policy)
            self._config = self._machine.bag(_flatten(self.config), closed=False)
        return self._machine

    def start(self, entry: ClassRef) -> tuple[ClassRef, tuple[object, ...], dict[str, object]]:
        """The entry class as the model loader constructs it: `Cls(config, quant_config,
        prefix="")` (the quantization config not known here)."""
        self.machine()
        quant = Top("the quantization config")
        return entry, (self._config,), {"quant_config": quant, "prefix": ""}

    def _walk(self, ref: ClassRef, args: tuple[object, ...], kwargs: dict[str, object]) -> _Walk:
        m = self.machine()
        mro = self.index.classes.mro(ref)[0]
        walk = _Walk(self, mro, _sites(self.index, mro))
        m.observer, m.steps, m.forks = walk, 0, 0
        obj = m.new_object(m.source.class_val(ref.qualname))
        init = objects.attribute(m, obj, "__init__", f"{ref.file}:{ref.facts.line}")
        if isinstance(init, FuncVal):
            m.run(init, list(args), dict(kwargs))
        m.raised.clear()
        m.assumed.clear()
        return walk

    def children(
        self, ref: ClassRef, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> list[Built]:
        key = f"{ref.qualname}|{args!r}|{sorted(kwargs.items())!r}"
        if key not in self._built:
            self._built[key] = self._walk(ref, args, kwargs).built
        return self._built[key]

    def split(self, ref: ClassRef, args: tuple[object, ...], kwargs: dict[str, object]) -> Split:
        key = f"{ref.qualname}|{args!r}|{sorted(kwargs.items())!r}"
        if key not in self._splits:
            self._splits[key] = _split_of(ref, self._walk(ref, args, kwargs).divisions)
        return self._splits[key]


def _split_of(ref: ClassRef, divisions: list[tuple[str, int, str]]) -> Split:
    if not divisions:
        return Split(1, (), f"{ref.file}:{ref.facts.line}")
    by_group: dict[str, tuple[int, str]] = {}
    known = [d for d in divisions if d[0] != UNREAD] or divisions
    for group, size, where in known:
        by_group.setdefault(group, (size, where))
    multiplied = [by_group[g][0] for g in by_group if g in _MULTIPLY]
    others = [by_group[g][0] for g in by_group if g not in _MULTIPLY]
    factor = max(others, default=1)
    for size in multiplied:
        factor *= size
    if multiplied and others:
        factor = max(max(others), factor // max(others))
    first = known[0][2]
    return Split(max(factor, 1), tuple(by_group), first)


def _flatten(config: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """config.json's keys as the dotted attributes of the config object (`rope_scaling.type`)."""
    out: dict[str, object] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, path + "."))
        else:
            out[path] = value
    return out
