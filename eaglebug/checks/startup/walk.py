"""The walk that gives a `StartupTrace` (see `startup.py`): the start-up run in the mind.

From the launcher's `__main__` block, depth first, in source order, into every function,
method (through the instance's MRO, so an override that does nothing cuts the path; `super()`
after the defining class), constructor, function passed as an argument (`Process(target=f)`,
`run_hook(handle_x, args)`, a parameter defaulting to a function) and the worker classes
`create_worker` picks for the algorithm (entered in the draft role; a call through an attribute
named for the draft runs in the draft role too). Each function is walked once per role and
class of `self`.

Speed: a cold audit must stay a small multiple of grep, so the walk parses few files. Off the
spine it enters only files on the way to the model (they use a runner's model, or hold a
runner or a worker), and it decides that from the file's bytes before parsing it; the insides
of the serving loop and the warmup are not walked (the start-up is over by then). What it does
not enter it still knows by name: the first call or mention of every name is kept, which is
how `steps.py` places a line in a file the walk never opened (a model config, a hook).
"""

from __future__ import annotations

import ast

from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.classfacts import ModuleFacts, dotted, resolve_relative
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.startup.receivers import Frame, Receivers
from eaglebug.checks.startup.trace import LAUNCHER, Span, StartupTrace, Visit, milestone

_MAX_FUNCTIONS = 4000
_MAX_DEPTH = 80
# Milestones whose insides are not walked: the server is up by then; a line that only runs
# there is found by name (see `steps.py`) or is not part of the start-up.
_UNWALKED = frozenset({"serving", "warmup"})


class _Tracer(Receivers):
    def __init__(self, index: TreeIndex, algorithm: str, worker_classes: tuple[str, ...]) -> None:
        super().__init__(index, worker_classes)
        self.algorithm = algorithm
        self.counter = 0
        self.seen: set[tuple[str, str, str, str]] = set()
        self.spans: list[Span] = []
        self.visits: dict[str, list[Visit]] = {}
        self.depth = 0
        self.first_named: dict[str, int] = {}

    # -- entry ---------------------------------------------------------------------------
    def run(self) -> StartupTrace:
        rel = self.index.files.module_files.get(LAUNCHER)
        module = self.index.module(LAUNCHER) if rel else None
        parsed = self.index.parse_file(rel) if rel else None
        if rel is None or module is None or parsed is None:
            return StartupTrace(self.algorithm, ())
        main = [n for n in parsed.tree.body if _is_main_block(n)]
        body: list[ast.stmt] = [s for n in main for s in n.body]  # type: ignore[attr-defined]
        if not body:  # a launcher with a `main()`: start there
            body = [
                n for n in parsed.tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"
            ]
            body = [s for n in body for s in n.body]  # type: ignore[attr-defined]
        frame = Frame(rel, module, "target", None, None, None)
        last = max((getattr(s, "end_lineno", s.lineno) for s in body), default=1)
        first = self.counter
        for stmt in body:
            self._walk(stmt, frame)
        self._visited(frame, (body[0].lineno if body else 1, last), first)
        return StartupTrace(
            self.algorithm,
            tuple(self.spans),
            {k: tuple(v) for k, v in self.visits.items()},
            rel,
            self.first_named,
        )

    # -- functions -----------------------------------------------------------------------
    def _enter(
        self,
        rel: str,
        module: ModuleFacts,
        fn: ast.FunctionDef | ast.AsyncFunctionDef,
        qualname: str,
        role: str,
        instance: ClassRef | None,
        owner: ClassRef | None,
        site: str,
        via_self: bool = False,
    ) -> None:
        key = (rel, qualname, role, instance.qualname if instance else "")
        if self.open in _UNWALKED:
            return  # once the server serves, the start-up is over: its loops are not walked
        touches = self._touches_model(rel)
        if not via_self and not self._may_enter(rel):
            return
        if key in self.seen or len(self.seen) >= _MAX_FUNCTIONS or self.depth >= _MAX_DEPTH:
            return
        self.seen.add(key)
        opened = self._open_span(qualname, role, site)
        positional = fn.args.posonlyargs + fn.args.args
        self_name = positional[0].arg if owner is not None and positional else None
        frame = Frame(rel, module, role, instance, owner, self_name)
        defaults = [*[None] * (len(positional) - len(fn.args.defaults)), *fn.args.defaults]
        for arg, default in [
            *zip(positional, defaults, strict=True),
            *zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True),
        ]:
            if isinstance(default, ast.Name):
                qualified = self._resolve(frame, default.id)
                if self._is_function(qualified):
                    frame.handed[arg.arg] = qualified
        first = self.counter
        self.depth += 1
        self.aside += not touches
        self.runtime += touches
        self.files.append(rel)
        for stmt in fn.body:
            self._walk(stmt, frame)
        self.files.pop()
        self.runtime -= touches
        self.aside -= not touches
        self.depth -= 1
        self._visited(frame, (fn.lineno, getattr(fn, "end_lineno", fn.lineno)), first)
        if opened is not None:
            name, span_role, start, span_site = opened
            self.spans.append(Span(name, span_role, start, self.counter, span_site))
            self.open = None

    def _visited(self, frame: Frame, lines: tuple[int, int], first: int) -> None:
        """The file and the line range identify the function."""
        self.visits.setdefault(frame.rel, []).append(
            Visit(frame.role, first, lines, tuple(frame.calls))
        )

    def _open_span(self, name: str, role: str, site: str) -> tuple[str, str, int, str] | None:
        if self.open is not None:
            return None
        found = milestone(name)
        if found is None:
            return None
        if found == "load":
            found = f"{role}_load"
        self.open = found  # it starts with the call that entered it
        return found, role, self.counter, site

    def _enter_function(self, qualified: str, role: str, site: str) -> None:
        split = self.index.split_qualified(qualified)
        if split is None:
            return
        module_name, name = split
        rel = self.index.files.module_files.get(module_name)
        if rel is None:
            return
        if not self._may_enter(rel):
            return  # decided before the file is parsed: most callees are never entered
        module = self.index.module(module_name)
        if module is None:
            return
        if name in module.classes:
            ref = self.classes.cls(f"{module_name}.{name}")
            if ref is not None:
                self._construct(ref, role, site)
            return
        if "." in name or name not in module.functions:
            target = module.imports.get(name)
            if target and target != qualified and "." not in name:
                self._enter_function(target, role, site)
            return
        fn = self._table(rel).functions.get(name)
        if fn is not None:
            self._enter(rel, module, fn, name, role, None, None, site)

    def _construct(self, ref: ClassRef, role: str, site: str) -> None:
        """A constructor runs its `__init__` (and a dataclass's `__post_init__`)."""
        for method in ("__init__", "__post_init__"):
            self._method(ref, method, role, site)

    def _method(
        self,
        instance: ClassRef,
        name: str,
        role: str,
        site: str,
        after: str | None = None,
        via_self: bool = False,
    ) -> bool:
        """Run `name` as `instance`'s MRO finds it (after `after`, for super()); False when
        no class of it defines the method."""
        order, _, _ = self.classes.mro(instance)
        if after is not None:
            names = [c.qualname for c in order]
            order = order[names.index(after) + 1 :] if after in names else []
        for owner in order:
            facts = owner.facts.methods.get(name)
            if facts is None:
                continue
            if not via_self and not self._may_enter(owner.file):
                return True  # decided before the file is parsed
            fn = self._table(owner.file).methods.get((owner.facts.name, owner.facts.line, name))
            if fn is not None:
                qualname = f"{owner.facts.name}.{name}"
                self._enter(
                    owner.file, owner.module, fn, qualname, role, instance, owner, site, via_self
                )
            return True
        return False

    # -- statements and calls ----------------------------------------------------------------
    def _walk(self, node: ast.AST, frame: Frame) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, ast.ImportFrom):
            base = resolve_relative(
                frame.module.module, frame.module.is_package, node.level, node.module
            )
            for alias in node.names:
                frame.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    frame.imports[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    frame.imports[head] = head
            return
        if isinstance(node, ast.Name):  # a class in a table, a hook in a list: named here
            self._named(node.id, frame.role)
            return
        for field in _fields(type(node)):  # ast.iter_child_nodes, without its generators
            value = getattr(node, field, None)
            if isinstance(value, list):
                for child in value:
                    if isinstance(child, ast.AST):
                        self._walk(child, frame)
            elif isinstance(value, ast.AST):
                self._walk(value, frame)
        if isinstance(node, ast.Call):
            self._call(node, frame)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            self._bind(node.targets, node.value, frame)

    def _site(self, frame: Frame, node: ast.AST) -> str:
        return f"{frame.rel}:{getattr(node, 'lineno', 0)}"

    def _call(self, node: ast.Call, frame: Frame) -> None:
        self.counter += 1
        frame.calls.append((node.lineno, self.counter))
        site = self._site(frame, node)
        func = node.func
        role = frame.role
        if isinstance(func, ast.Attribute) and "draft" in (dotted(func.value) or "").lower():
            role = "draft"  # self.draft_worker.x(), self.draft_model_runner.y()
        self._handed_on(node, frame, role, site)
        if isinstance(func, ast.Attribute):
            self._attribute_call(func, frame, role, site)
        elif isinstance(func, ast.Name):
            self._named(func.id, role)
            if func.id in frame.workers_var:
                for qualified in self.worker_classes:
                    ref = self.classes.cls(qualified)
                    if ref is not None:
                        self._construct(ref, "draft", site)
            elif func.id == frame.self_name and frame.instance is not None:  # cls(...)
                self._construct(frame.instance, role, site)
            elif func.id not in frame.locals:
                self._enter_function(self._resolve(frame, func.id), role, site)

    def _attribute_call(self, func: ast.Attribute, frame: Frame, role: str, site: str) -> None:
        receiver = func.value
        text = dotted(receiver) or ""
        entered = len(self.seen)
        is_super = (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
        )
        if frame.instance is not None and (is_super or text == frame.self_name):
            after = frame.owner.qualname if is_super and frame.owner else None
            if self._method(frame.instance, func.attr, role, site, after, via_self=True):
                return  # the MRO says which method runs; its name says nothing more
        self._named(func.attr, role)
        if (cls_ref := self._named_class(receiver, frame)) is not None:
            self._method(cls_ref, func.attr, role, site)
        else:
            for ref in self._receiver_classes(receiver, frame):
                self._method(ref, func.attr, role, site)
            if text and text.split(".")[0] in {**frame.imports, **frame.module.imports}:
                self._enter_function(self._resolve(frame, f"{text}.{func.attr}"), role, site)
        if len(self.seen) == entered:
            self._milestone_call(func.attr, role, site)

    def _handed_on(self, node: ast.Call, frame: Frame, role: str, site: str) -> None:
        """Functions passed to a call (`Process(target=f)`, `run_hook(handle_x, args)`) run
        from there: entered before the callee, as a process target starts at once."""
        for arg in [*node.args, *(k.value for k in node.keywords)]:  # functions handed on
            name = dotted(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else None
            if name is None:
                continue
            self._named(name.rpartition(".")[2], role)
            if (
                name.startswith(f"{frame.self_name}.")
                and frame.instance is not None
                and name.count(".") == 1
            ):
                self._method(frame.instance, name.split(".", 1)[1], role, site)
            elif isinstance(arg, ast.Name) and arg.id in frame.handed:
                self._enter_function(frame.handed[arg.id], role, site)
            elif isinstance(arg, ast.Name) and arg.id not in frame.locals:
                qualified = self._resolve(frame, name)
                if self._is_function(qualified):
                    self._enter_function(qualified, role, site)

    def _named(self, name: str, role: str) -> None:
        self.first_named.setdefault(f"{role}:{name}", self.counter)
        self.first_named.setdefault(f"any:{name}", self.counter)

    def _milestone_call(self, name: str, role: str, site: str) -> None:
        """A call of a milestone's name that the trace could not enter (a method of the
        model, say): a span of its own, so the sites on that line fall in it."""
        if self.open is not None:
            return
        opened = self._open_span(name, role, site)
        if opened is not None:
            milestone, span_role, start, span_site = opened
            self.spans.append(Span(milestone, span_role, start, self.counter, span_site))
            self.open = None


def walk(index: TreeIndex, algorithm: str, worker_classes: tuple[str, ...]) -> StartupTrace:
    """The tree's start-up under `algorithm`, its draft workers `worker_classes`; a tree
    nested past Python's stack gives no steps (and says so) rather than no audit."""
    try:
        return _Tracer(index, algorithm, worker_classes).run()
    except RecursionError:
        index.warnings.append("the start-up nests too deep to follow: findings have no step")
        return StartupTrace(algorithm, ())


# Fields that hold only an operator or a load/store marker: nodes with nothing to walk.
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}


def _fields(kind: type[ast.AST]) -> tuple[str, ...]:
    """The fields of a node type that may hold nodes worth walking, in the order
    `ast.iter_child_nodes` gives them."""
    found = _FIELDS.get(kind)
    if found is None:
        found = _FIELDS[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
    return found


def _is_main_block(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)


def startup_trace(
    index: TreeIndex, algorithm: str, worker_classes: tuple[str, ...]
) -> StartupTrace:
    """The tree's start-up under `algorithm` (a tree answer)."""
    return index.answer(
        f"startup:{algorithm}", StartupTrace, lambda: walk(index, algorithm, worker_classes)
    )
