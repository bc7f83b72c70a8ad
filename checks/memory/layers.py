"""What a model's `__init__` builds, and how each layer divides its weights, read from the tree.

A module's `__init__` is evaluated (with `memeval`'s evaluator, never imported) on the launch's
parallel layout: the children it assigns to `self.<attr>` (a class, `nn.ModuleList([...])`,
`make_layers(n, lambda ...: Layer(...))`, a factory such as `get_moe_impl_class(q)(...)`), with
the arguments each construction is handed, evaluated where they are written
(`tp_size=attn_tp_size`, `parallel_group="attn_tp"`, `use_attn_tp_group=...`). A layer class's
own `__init__` (through `super().__init__` and the methods it calls, e.g. `divide(...)` in
`_initialize_partition`) is evaluated with those arguments: every division by a group size
(the tensor-parallel world, the attention TP group, the MoE EP / TP groups, whatever name the
release gives them) is recorded with its file:line. A layer that divides by nothing is
replicated on every rank (ReplicatedLinear, RMSNorm, a gate's raw `nn.Parameter`).

The launch's layout enters only through stand-ins for the runtime's distributed state: a call
or attribute whose name says which group it sizes (`get_attention_tp_size()`,
`get_parallel().moe_ep_size`, `tp_group`) answers that group's size; the attention TP size
itself is what the tree's `compute_dp_attention_world_info` computes from tp, dp and
`--enable-dp-attention`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from eaglebug.checks.pyeval.memeval import (
    FLAT,
    Evaluator,
    Function,
    RaiseSignal,
    Ref,
    ReturnSignal,
    Unknown,
)
from eaglebug.checks.pyeval.memops import call_name
from eaglebug.checks.pyeval.parallelstate import GroupSize, Layout, State, StateGroup
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


class _Walker(Evaluator):
    """`memeval`'s evaluator, following the tree's calls across files and recording what a
    module builds and divides; unknown `if` tests run both branches (a tensor name picks the
    child later)."""

    index: TreeIndex
    layout: Layout
    mro: list[ClassRef]
    sites: dict[int, _Site]
    built: list[Built]
    divisions: list[tuple[str, int, str]]
    resolved: dict[tuple[str, str], Function | None]
    env: Mapping[str, object]

    def setup(
        self, index: TreeIndex, layout: Layout, mro: list[ClassRef], env: Mapping[str, object]
    ) -> _Walker:
        self.index, self.layout, self.mro, self.env = index, layout, mro, env
        self.sites, self.built, self.divisions, self.resolved = {}, [], [], {}
        return self

    def _call_function(
        self,
        function: Function,
        args: list[object],
        kwargs: dict[str, object],
        bound: object = FLAT,
    ) -> object:
        try:
            return super()._call_function(function, args, kwargs, bound)
        except RaiseSignal:  # a check that refuses some other layout: the layers built so far stay
            return Unknown(f"{function.file}:{function.node.lineno}: raised")

    def _compare(self, op: ast.cmpop, a: object, b: object, file: str, node: ast.AST) -> object:
        # A config key the model's config.json lacks is not an enum member's name.
        if any(isinstance(v, Ref) and v.path.startswith("config") for v in (a, b)):
            return Unknown(f"{file}:{getattr(node, 'lineno', 0)}: a config key not given")
        return super()._compare(op, a, b, file, node)

    def _stmt(self, stmt: ast.stmt, scope: dict[str, object], file: str) -> None:
        if isinstance(stmt, ast.Raise):
            return  # a refusal of some other launch: what is built after it is still built
        if isinstance(stmt, ast.If):
            test = self._expr(stmt.test, scope, file)
            if isinstance(test, (Unknown, Ref)):
                for branch in (stmt.body, stmt.orelse):
                    try:
                        self._block(branch, scope, file)
                    except (ReturnSignal, RaiseSignal):
                        continue
                return
        super()._stmt(stmt, scope, file)

    def _assign(
        self,
        target: ast.expr,
        value: object,
        scope: dict[str, object],
        file: str,
        stmt: ast.stmt,
        before: object = None,
    ) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            items = value if isinstance(value, (list, tuple)) else None
            for i, elt in enumerate(target.elts):
                part = items[i] if items is not None and i < len(items) else Unknown("unpacked")
                self._assign(elt, part, scope, file, stmt)
            return
        super()._assign(target, value, scope, file, stmt, before)

    def _expr(self, node: ast.expr, scope: dict[str, object], file: str) -> object:
        if isinstance(node, ast.IfExp):
            test = self._expr(node.test, scope, file)
            if isinstance(test, (Unknown, Ref)):
                self._expr(node.body, scope, file)
                self._expr(node.orelse, scope, file)
                return Unknown(f"{file}:{node.lineno}: either branch")
        if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
            keys = [self._expr(k, scope, file) for k in node.keys if k is not None]
            values = [self._expr(v, scope, file) for v in node.values]
            if all(isinstance(k, str) for k in keys):
                return dict(zip(keys, values, strict=True))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            right = self._expr(node.right, scope, file)
            # `x // tp_size` shards; `(v + pad - 1) // pad` rounds: only a divisor named for
            # a size counts when its value is not read.
            if isinstance(right, GroupSize) or "size" in ast.unparse(node.right):
                self._divided(right, file, node.lineno)
        return super()._expr(node, scope, file)

    def _divided(self, divisor: object, file: str, line: int) -> None:
        if isinstance(divisor, GroupSize):
            self.divisions.append((divisor.group, int(divisor), f"{file}:{line}"))
        elif isinstance(divisor, (Unknown, Ref)):  # a size not read: split by tp assumed
            self.divisions.append((UNREAD, self.layout.tp, f"{file}:{line}"))

    def _call(self, node: ast.Call, scope: dict[str, object], file: str) -> object:
        args = [self._expr(a, scope, file) for a in node.args if not isinstance(a, ast.Starred)]
        kwargs: dict[str, object] = {}
        for keyword in node.keywords:
            value = self._expr(keyword.value, scope, file)
            if keyword.arg is not None:
                kwargs[keyword.arg] = value
            elif isinstance(value, dict):
                kwargs.update({str(k): v for k, v in value.items()})
        site = self.sites.get(id(node))
        if site is not None:
            self._record(site, node, args, kwargs, scope, file)
        name = call_name(node.func)
        last = name.rsplit(".", 1)[-1]
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "envs" and parts[2] == "get":
            return self.env.get(parts[1], Unknown(f"{parts[1]} is not declared"))
        if last == "divide" and len(args) == 2:
            self._divided(args[1], file, node.lineno)
        if name == "dict":
            return dict(kwargs)
        if name == "isinstance" and args and (args[0] is None or type(args[0]) in _PLAIN):
            return False  # a plain value is no instance of the tree's classes
        state = bool(args) and isinstance(args[0], (State, StateGroup))
        if name in {"getattr", "hasattr"} and len(args) >= 2 and isinstance(args[1], str) and state:
            found = getattr(args[0], args[1], args[2] if len(args) > 2 else None)
            return found is not None if name == "hasattr" else found
        if name.startswith("super.") and name.count(".") == 1:
            return self._super_call(last, args, kwargs)
        if name in {"get_parallel", "get_global_server_args", "get_server_args"}:
            return State(self.layout)
        if name == last and last.startswith(("get_", "is_")) and not args:
            sized = self.layout.size(last)
            if sized is not None:
                return sized
        function = self._function(node.func, name, file)
        if function is not None:
            return self._call_function(function, args, kwargs)
        return super()._call(node, scope, file)

    def _record(
        self,
        site: _Site,
        node: ast.Call,
        args: list[object],
        kwargs: dict[str, object],
        scope: dict[str, object],
        file: str,
    ) -> None:
        call = site.element or node
        if site.element is not None:  # the element's own arguments, in the builder's scope
            args = [self._expr(a, scope, file) for a in call.args]
            kwargs = {k.arg: self._expr(k.value, scope, file) for k in call.keywords if k.arg}
        owner = self._owner_of(file)
        ref = _class_called(self.index, owner, call.func) if owner else None
        if (
            ref is None
            and isinstance(call.func, ast.Attribute)
            and dotted(call.func.value) == "self"
        ):
            # `self.model = self._init_model(...)`: what the method returns is the child
            method = self._function(call.func, call.func.attr, file)
            for item in ast.walk(method.node) if method is not None else []:
                if isinstance(item, ast.Return) and isinstance(item.value, ast.Call):
                    self.sites[id(item.value)] = _Site(site.attr, None)
            return
        name = dotted(call.func) or ""
        outside = self.index.classes.resolve(owner.module, name) if owner and name else ""
        if ref is not None or outside.startswith(_TORCH_NN):
            self.built.append(
                Built(
                    site.attr,
                    ref,
                    tuple(args),
                    tuple(kwargs.items()),
                    file,
                    call.lineno,
                    None if ref is not None else outside,
                )
            )

    def _owner_of(self, file: str) -> ClassRef | None:
        owner = self._owners[-1] if self._owners else ""
        return next((c for c in self.mro if c.qualname == owner), None) or next(
            (c for c in self.mro if c.file == file), None
        )

    def _super_call(self, method: str, args: list[object], kwargs: dict[str, object]) -> object:
        """`super().m(...)`: `m` of the next class after the running method's in the MRO."""
        owner = self._owners[-1] if self._owners else ""
        names = [c.qualname for c in self.mro]
        start = names.index(owner) + 1 if owner in names else len(names)
        for base in self.mro[start:]:
            found = _method(self.index, base, method)
            if found is not None:
                return self._call_function(found, args, kwargs)
        return None

    def _function(self, func: ast.expr, name: str, file: str) -> Function | None:
        """A method of the module's classes (`self.f`), or a function the file imports."""
        if isinstance(func, ast.Attribute) and dotted(func.value) == "self":
            for ref in self.mro:
                found = _method(self.index, ref, func.attr)
                if found is not None:
                    return found
            return None
        if not isinstance(func, ast.Name):
            return None
        key = (file, name)
        if key not in self.resolved:
            self.resolved[key] = _module_function(self.index, file, name)
        return self.resolved[key]


_PLAIN = (str, int, float, bool, list, tuple, dict)


def _method(index: TreeIndex, ref: ClassRef, name: str) -> Function | None:
    node = class_node(index, ref)
    for stmt in node.body if node is not None else []:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return Function(ref.file, stmt, ref.qualname)
    return None


# Parsed module (kept alive here, so its id stays its own) -> its classes by line.
_CLASSES: dict[int, tuple[ast.Module, dict[int, ast.ClassDef]]] = {}


def class_node(index: TreeIndex, ref: ClassRef) -> ast.ClassDef | None:
    parsed = index.parse_file(ref.file)
    if parsed is None:
        return None
    kept = _CLASSES.get(id(parsed.tree))
    if kept is None or kept[0] is not parsed.tree:
        if len(_CLASSES) > 512:
            _CLASSES.clear()
        lines = {n.lineno: n for n in ast.walk(parsed.tree) if isinstance(n, ast.ClassDef)}
        kept = _CLASSES[id(parsed.tree)] = (parsed.tree, lines)
    return kept[1].get(ref.facts.line)


def _module_function(index: TreeIndex, file: str, name: str) -> Function | None:
    module, _ = index.files.module_of(file)
    facts = index.module(module)
    if facts is None:
        return None
    target = f"{module}.{name}" if name in facts.functions else facts.imports.get(name)
    for _ in range(4):  # re-exports
        split = index.split_qualified(target) if target else None
        if split is None:
            return None
        owner, short = split
        rel = index.files.module_files.get(owner)
        found = index.module(owner)
        if rel is None or found is None:
            return None
        if short in found.functions:
            parsed = index.parse_file(rel)
            if parsed is None:
                return None
            node = next(
                (n for n in parsed.tree.body if isinstance(n, ast.FunctionDef) and n.name == short),
                None,
            )
            return Function(rel, node) if node is not None else None
        target = found.imports.get(short)
    return None


def _class_called(index: TreeIndex, owner: ClassRef, func: ast.expr) -> ClassRef | None:
    """The class a construction names: `Class(...)`, or a factory's `return Class` (the last
    one, the factory's default: `get_moe_impl_class(q)(...)` -> FusedMoE)."""
    if isinstance(func, ast.Call):
        name = dotted(func.func)
        factory = _module_function(index, owner.file, name) if name else None
        if factory is None:
            return None
        returns = [
            dotted(n.value)
            for n in sorted(
                (r for r in ast.walk(factory.node) if isinstance(r, ast.Return)),
                key=lambda r: r.lineno,
            )
            if n.value is not None and dotted(n.value)
        ]
        module, _ = index.files.module_of(factory.file)
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
    for ref in mro:
        init = _method(index, ref, "__init__")
        if init is None:
            continue
        for node in ast.walk(init.node):
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
    """Runs `__init__`s for one launch layout, each (class, arguments) once."""

    index: TreeIndex
    layout: Layout
    config: Mapping[str, object]
    env: Mapping[str, object] = field(default_factory=dict)  # `envs.X.get()`, as the run sees it
    # The checkpoint renames a class's loader lists (`weightsplit.loader_renames`).
    renamer: Callable[[ClassRef], list[tuple[str, str]]] = lambda ref: []
    _built: dict[str, list[Built]] = field(default_factory=dict)
    _splits: dict[str, Split] = field(default_factory=dict)
    _renames: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def renames(self, ref: ClassRef) -> list[tuple[str, str]]:
        if ref.qualname not in self._renames:
            self._renames[ref.qualname] = self.renamer(ref)
        return self._renames[ref.qualname]

    def _walker(self, ref: ClassRef) -> tuple[_Walker, Function | None]:
        mro = self.index.classes.mro(ref)[0]
        walker = _Walker({}, _flatten("config", self.config)).setup(
            self.index, self.layout, mro, self.env
        )
        init = next((f for f in (_method(self.index, c, "__init__") for c in mro) if f), None)
        return walker, init

    def children(
        self, ref: ClassRef, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> list[Built]:
        key = f"{ref.qualname}|{args!r}|{sorted(kwargs.items())!r}"
        if key not in self._built:
            walker, init = self._walker(ref)
            walker.sites = _sites(self.index, walker.mro)
            if init is not None:
                walker._call_function(init, list(args), dict(kwargs))
            self._built[key] = walker.built
        return self._built[key]

    def split(self, ref: ClassRef, args: tuple[object, ...], kwargs: dict[str, object]) -> Split:
        key = f"{ref.qualname}|{args!r}|{sorted(kwargs.items())!r}"
        if key not in self._splits:
            walker, init = self._walker(ref)
            if init is not None:  # `_call_function` turns a raise into an Unknown
                walker._call_function(init, list(args), dict(kwargs))
            self._splits[key] = _split_of(ref, walker.divisions)
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


def _flatten(prefix: str, config: Mapping[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in config.items():
        path = f"{prefix}.{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(path, value))
        else:
            out[path] = value
    return out
