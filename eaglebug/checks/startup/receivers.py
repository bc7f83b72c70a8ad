"""What the start-up walk (`walk.py`) knows of the places it passes: which files it enters,
each file's functions by name, and which classes a receiver holds (`self.model_runner`,
`worker = create_worker(...)`, a property that hands back `self._model_runner`).

Why apart: the walk's order (what runs when, in which role) is `walk.py`; this is the lookup it
asks at every call, and it reads the index only (the byte scan, the class facts), parsing a file
just when the walk enters it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from eaglebug.checks.reach.consumers import is_candidate
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.classfacts import ModuleFacts, dotted
from eaglebug.checks.source.index import TreeIndex

# The launcher reaches the scheduler through a few files that never touch the model
# (launch_server -> http_server -> engine): how many such frames the walk stacks up.
MAX_ASIDE = 3
_TABLES_KEPT = 8  # files whose function tables stay in memory during the walk
# `self.<a runner or worker>`, searched from its literal start: a leading `\b` (or lookbehind)
# makes the engine try every byte of the file, ten times slower (0.5.23: 60 ms of a cold audit).
_RUNNER_RE = re.compile(rb"self\.(?:model_runner|tp_worker|draft_worker|target_worker)\b")


def _uses_runner(data: bytes) -> bool:
    """Does the file say `self.model_runner` (or a worker) where `self` is a whole word?"""
    for match in _RUNNER_RE.finditer(data):
        before = data[match.start() - 1 : match.start()]
        if not (before.isalnum() or before == b"_"):
            return True
    return False


@dataclass
class Frame:
    rel: str
    module: ModuleFacts
    role: str
    instance: ClassRef | None  # the class of `self` (dispatch)
    owner: ClassRef | None  # the class that defines the function (for super())
    self_name: str | None
    locals: dict[str, tuple[ClassRef, ...]] = field(default_factory=dict)
    workers_var: set[str] = field(default_factory=set)
    imports: dict[str, str] = field(default_factory=dict)
    handed: dict[str, str] = field(default_factory=dict)  # parameters defaulting to a function
    calls: list[tuple[int, int]] = field(default_factory=list)


Def = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Table:
    """A file's functions and methods by name, so the walk finds a callee without a search."""

    functions: dict[str, Def]
    methods: dict[tuple[str, int, str], Def]

    @classmethod
    def of(cls, tree: ast.Module | None) -> Table:
        functions: dict[str, Def] = {}
        methods: dict[tuple[str, int, str], Def] = {}
        for node in tree.body if tree else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.setdefault(node.name, node)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        methods[(node.name, node.lineno, item.name)] = item
        return cls(functions, methods)


class Receivers:
    """The walk's knowledge of files and receivers (the base of `walk._Tracer`)."""

    def __init__(self, index: TreeIndex, worker_classes: tuple[str, ...]) -> None:
        self.index = index
        self.classes = index.classes
        self.worker_classes = worker_classes
        self.attr_types: dict[tuple[str, str], tuple[ClassRef, ...]] = {}
        self.open: str | None = None  # the milestone whose span is open
        self.aside = 0  # frames on the stack in files that do not touch the model
        self.runtime = 0  # frames on the stack in files that do
        self.files: list[str] = []  # the file of each frame on the stack
        self.tables: dict[str, Table] = {}
        self.on_way: dict[str, bool] = {}

    def _may_enter(self, rel: str) -> bool:
        """Off the spine (inside a milestone, or a few files away from the launcher) only the
        files on the way to the model are walked into; the rest are known by name."""
        if self._touches_model(rel) or (self.files and self.files[-1] == rel):
            return True  # the model's way, or the file being walked (parsed already)
        return self.open is None and self.aside < MAX_ASIDE and not self.runtime

    def _touches_model(self, rel: str) -> bool:
        """A file on the way to the model: it uses a runner's model, or it holds a runner or
        a model worker (the scheduler, the workers, the graph runners)."""
        known = self.on_way.get(rel)
        if known is None:
            entry = self.index.entries.get(rel)
            data = self.index.files.source(rel) or b""
            known = self.on_way[rel] = bool(
                (entry is not None and is_candidate(entry)) or _uses_runner(data)
            )
        return known

    def _table(self, rel: str) -> Table:
        """The file's functions by name; the few files in use are kept (a syntax tree is ten
        times its source), the rest parsed again if the walk comes back to them."""
        table = self.tables.pop(rel, None)
        if table is None:
            parsed = self.index.parse_file(rel)
            table = Table.of(parsed.tree if parsed else None)
        self.tables[rel] = table  # the newest last
        while len(self.tables) > _TABLES_KEPT:
            self.tables.pop(next(iter(self.tables)))
        return table

    def _bind(self, targets: list[ast.expr], value: ast.Call, frame: Frame) -> None:
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr == "create_worker":
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            frame.workers_var |= names
            return
        classes: tuple[ClassRef, ...] = ()
        if isinstance(func, ast.Name) and func.id in frame.workers_var:
            found = [self.classes.cls(q) for q in self.worker_classes]
            classes = tuple(c for c in found if c is not None)
        elif (name := dotted(func)) is not None:
            qualified = self._resolve(frame, name)
            split = self.index.split_qualified(qualified)
            rel = self.index.files.module_files.get(split[0]) if split else None
            if rel is None or not self._touches_model(rel):
                return  # only the runtime's own objects are followed by their type
            ref = self.classes.cls(qualified)
            classes = (ref,) if ref is not None else ()
        if not classes:
            return
        for target in targets:
            if isinstance(target, ast.Name):
                frame.locals[target.id] = classes
            elif (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == frame.self_name
                and frame.instance is not None
            ):
                self.attr_types[(frame.instance.qualname, target.attr)] = classes

    def _receiver_classes(self, receiver: ast.expr, frame: Frame) -> tuple[ClassRef, ...]:
        if isinstance(receiver, ast.Name):
            return frame.locals.get(receiver.id, ())
        if (
            isinstance(receiver, ast.Attribute)
            and isinstance(receiver.value, ast.Name)
            and receiver.value.id == frame.self_name
            and frame.instance is not None
        ):
            qualname = frame.instance.qualname
            known = self.attr_types.get((qualname, receiver.attr))
            if not known and (held := self._property_of(frame.instance, receiver.attr)):
                known = self.attr_types.get(
                    (qualname, held)
                )  # `self.model_runner` -> `_model_runner`
            if known:
                return known
            return tuple(self.classes.inner_classes(frame.instance, receiver.attr))
        return ()

    def _property_of(self, instance: ClassRef, name: str) -> str | None:
        """The attribute a property hands back (`return self._model_runner`), as the MRO
        finds the property; None for anything else."""
        for owner in self.classes.mro(instance)[0]:
            facts = owner.facts.methods.get(name)
            if facts is None:
                continue
            if facts.kind != "property":  # known from the index: no file is parsed for it
                return None
            fn = self._table(owner.file).methods.get((owner.facts.name, owner.facts.line, name))
            if fn is None:
                return None
            last = fn.body[-1]
            value = last.value if isinstance(last, ast.Return) else None
            if (
                isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Name)
                and fn.args.args
                and value.value.id == fn.args.args[0].arg
            ):
                return value.attr
            return None
        return None

    def _named_class(self, receiver: ast.expr, frame: Frame) -> ClassRef | None:
        """`ModelConfig` in `ModelConfig.from_server_args(...)`: a class, known from the byte
        scan of its file before anything is parsed."""
        if not isinstance(receiver, ast.Name) or receiver.id in frame.locals:
            return None
        split = self.index.split_qualified(self._resolve(frame, receiver.id))
        rel = self.index.files.module_files.get(split[0]) if split else None
        entry = self.index.entries.get(rel) if rel else None
        if split is None or entry is None or split[1] not in entry.class_names:
            return None
        if rel is None or not self._may_enter(rel):
            return None
        return self.classes.cls(f"{split[0]}.{split[1]}")

    def _resolve(self, frame: Frame, name: str) -> str:
        head, _, rest = name.partition(".")
        target = frame.imports.get(head)
        if target is not None:
            return f"{target}.{rest}" if rest else target
        return self.classes.resolve(frame.module, name)

    def _is_function(self, qualified: str) -> bool:
        split = self.index.split_qualified(qualified)
        rel = self.index.files.module_files.get(split[0]) if split else None
        if split is None or rel is None or not self._may_enter(rel):
            return False
        module = self.index.module(split[0])
        return module is not None and (split[1] in module.functions or split[1] in module.imports)
