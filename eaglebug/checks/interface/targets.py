"""Where a runner's start-up must go to reach a use: the statements, and the runner's methods
on the way, read from the tree's syntax (what runs is then decided in `roles.py`).

A use found in a runner's own method is reached when the statement that holds it runs. A use
found in another class's `__init__` (`CudaGraphRunner.__init__` reads `self.model_runner.model`)
is reached where the runner builds that class: a statement of a runner method that names it (or
a subclass) as a value, the statement as a whole (`defaultdict(lambda: CudaGraphRunner, ...)`
builds it later, under the same tests). The runner's methods on a self-call path from its
`__init__` to those statements are the ones the start-up follows.

Nothing here guesses: a statement the evaluator would not run as written (inside a loop, a
nested function, a lambda or a comprehension), a class named outside the runner's methods, or a
runner method some other object calls (`model_runner.init_device_graphs()` after the build)
gives no target, and the use stands as for any runner.
"""

from __future__ import annotations

import ast
import os
import re
from bisect import bisect_left
from dataclasses import dataclass

from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.files import read_file
from eaglebug.checks.source.index import TreeIndex, parsed_with

# Nodes whose body the evaluator does not run as written: a loop over an unknown is not run
# (`flow.havoc`), a nested function or lambda runs only where it is called.
_DEFERRED = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_MAX_MENTIONS = 64
# A call on a name that holds a runner (`model_runner.x(`, `self.draft_model_runner.x(`,
# `runners[i].x(`): which methods of a runner the runtime calls from outside it. Matched from
# the `unner` after an `R`/`r` (`runner_calls`): a pattern that starts with a class of
# characters is tried at every byte, six times slower over the runtime's 17 MB.
_RUNNER_CALL = re.compile(rb"unners?\w{0,64}(?:\[[^\]\n]{0,256}\]|\(\))?\s*\.\s*(\w+)\s*\(")


@dataclass(frozen=True)
class Target:
    """Statements (file, line where the statement starts) whose running is the arrival, and the
    runner's methods on a self-call path from `__init__` to them."""

    statements: frozenset[tuple[str, int]]
    chain: frozenset[str]


class Targets:
    """Per index: the statements that name a class, and which methods are called from outside."""

    def __init__(self, index: TreeIndex) -> None:
        self.index = index
        self._outside: set[str] | None = None
        self._methods: dict[str, dict[str, ast.FunctionDef]] = {}
        self._calls: dict[str, dict[str, dict[str, bool]]] = {}

    def target(self, scope: str, line: int, runner: ClassRef) -> Target | None:
        """Where the runner's start-up reaches a use taken in `scope` (module.Class.method) at
        `line`; None when that is not decided here."""
        split = self.index.split_qualified(scope)
        if split is None:
            return None
        module, rest = split
        cls_name, _, method = rest.partition(".")
        qualified = f"{module}.{cls_name}"
        order, _, _ = self.index.classes.mro(runner)
        methods = self.methods(order)
        owner = next((r for r in order if r.qualname == qualified), None)
        if owner is not None:
            fn = methods.get(method)
            if fn is None or not _holds(fn, owner.file, line, order) or self.called_outside(method):
                return None
            found = _innermost(fn, line)
            if found is None:
                return None
            statements = {(owner.file, found.lineno)}
            goals = {method}
        else:
            cls = self.index.classes.cls(qualified)
            if method != "__init__" or cls is None:
                return None  # a method of another class: who calls it is not followed here
            named = self.naming(cls)
            runner_files = {r.file for r in order}
            if not named:
                return None
            statements, goals = set(), set()
            for rel, fn_name, lineno, deferred in named:
                if rel not in runner_files or not fn_name or deferred:
                    return None  # built elsewhere, or not as written: not decided here
                fn = methods.get(fn_name)
                if fn is None or not _holds(fn, rel, lineno, order) or self.called_outside(fn_name):
                    return None
                statements.add((rel, lineno))
                goals.add(fn_name)
        chain = _chain(methods, goals, self._call_graph(order, methods))
        if chain is None:
            return None
        return Target(frozenset(statements), chain)

    def _call_graph(
        self, order: list[ClassRef], methods: dict[str, ast.FunctionDef]
    ) -> dict[str, dict[str, bool]]:
        """Per runner method, the methods it calls on self, each with whether every such call
        is plain (not under a loop, nested function or comprehension). Once per runner."""
        key = ",".join(r.qualname for r in order)
        if key not in self._calls:
            graph: dict[str, dict[str, bool]] = {}
            for name, fn in methods.items():
                found: dict[str, bool] = {}
                for node, deferred in _walk(fn):
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and dotted(node.func.value) == "self"
                    ):
                        found[node.func.attr] = found.get(node.func.attr, True) and not deferred
                graph[name] = found
            self._calls[key] = graph
        return self._calls[key]

    def methods(self, order: list[ClassRef]) -> dict[str, ast.FunctionDef]:
        """The runner's methods as its lookup order resolves them."""
        key = ",".join(r.qualname for r in order)
        if key not in self._methods:
            found: dict[str, ast.FunctionDef] = {}
            for ref in order:
                parsed = self.index.parse_file(ref.file)
                if parsed is None:
                    continue
                for node in parsed.tree.body:
                    if isinstance(node, ast.ClassDef) and node.name == ref.facts.name:
                        for fn in node.body:
                            if isinstance(fn, ast.FunctionDef):
                                found.setdefault(fn.name, fn)
            self._methods[key] = found
        return self._methods[key]

    def naming(self, cls: ClassRef) -> list[tuple[str, str, int, bool]]:
        """Every statement of the runtime that names `cls` (or a subclass) as a value: (file,
        its method or "" outside one, the statement's line, whether it sits where the evaluator
        would not run it). A tree answer: a warm audit does not search again."""
        return self.index.answer(
            f"named-as-value:{cls.qualname}",
            list[tuple[str, str, int, bool]],
            lambda: self._naming(cls),
        )

    def _naming(self, cls: ClassRef) -> list[tuple[str, str, int, bool]]:
        names = {cls.facts.name}
        out: list[tuple[str, str, int, bool]] = []
        todo = [cls.facts.name]
        while todo:
            name = todo.pop()
            for rel in self.index.files.runtime_files():
                parsed = parsed_with(self.index, rel, name)
                if parsed is None:
                    continue
                for sub in _subclasses_named(parsed.tree, name):
                    if sub not in names:
                        names.add(sub)
                        todo.append(sub)
                out.extend(
                    (rel, fn.name if fn is not None else "", stmt.lineno, deferred)
                    for fn, stmt, deferred in _value_mentions(
                        parsed.tree, name, syntax.lines_with(parsed.text, name)
                    )
                )
        return out if len(out) <= _MAX_MENTIONS else [("", "", 0, True)]

    def called_outside(self, method: str) -> bool:
        """Is `method` called on a runner other than `self` anywhere in the runtime (a receiver
        named for a runner, as the consumer scan names them: `model_runner.init_x()`)?"""
        if self._outside is None:
            self._outside = set(
                self.index.answer("called-on-a-runner", list[str], self._runner_calls)
            )
        return method in self._outside

    def _runner_calls(self) -> list[str]:
        """The method names the runtime calls on a runner's name, one pass over the bytes."""
        files = self.index.files
        root = str(files.tree.root)
        found: set[str] = set()
        for rel in files.runtime_files():
            data = files.held(rel)
            if data is None:
                try:
                    data = read_file(os.path.join(root, rel), files.entries[rel].size)
                except OSError:
                    continue
            found.update(runner_calls(data))
        return sorted(found)


def runner_calls(data: bytes) -> list[str]:
    """The methods called on a runner's name in `data`: what `[Rr]` + `_RUNNER_CALL` finds,
    left to right without overlaps, with `bytes.find` between the candidates."""
    out: list[str] = []
    at = data.find(b"unner", 1)
    while at >= 0:
        if data[at - 1] in b"Rr" and (call := _RUNNER_CALL.match(data, at)) is not None:
            out.append(call.group(1).decode())
            at = data.find(b"unner", call.end())
        else:
            at = data.find(b"unner", at + 1)
    return out


def _holds(fn: ast.FunctionDef, rel: str, lineno: int, order: list[ClassRef]) -> bool:
    """Is the statement at `lineno` of `rel` inside `fn` (the method the lookup order gives)?"""
    owner = next((r for r in order if r.file == rel and fn.name in r.facts.methods), None)
    return owner is not None and fn.lineno <= lineno <= (fn.end_lineno or fn.lineno)


def _innermost(fn: ast.FunctionDef, line: int) -> ast.stmt | None:
    """The innermost statement of `fn` that holds `line`, if the evaluator runs it as written."""
    found: ast.stmt | None = None
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if isinstance(node, _DEFERRED):
                return None
            found = node
            todo = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
            todo += [
                c for h in getattr(node, "handlers", []) for c in h.body
            ]  # an `except` body: its statements too
    return found


def _chain(
    methods: dict[str, ast.FunctionDef], goals: set[str], calls: dict[str, dict[str, bool]]
) -> frozenset[str] | None:
    """The runner's methods on a self-call path from `__init__` to a goal, and the methods the
    tests on the way call; None when a call on the way sits where the evaluator would not run
    it, or no path starts at `__init__`."""
    on_path = set(goals)
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in on_path and on_path & set(callees):
                on_path.add(name)
                changed = True
    if "__init__" not in on_path:
        return None
    for name in on_path:
        if any(not plain for callee, plain in calls[name].items() if callee in on_path):
            return None
    return frozenset(on_path | _deciders(methods, on_path))


def _deciders(methods: dict[str, ast.FunctionDef], on_path: set[str]) -> set[str]:
    """The runner's own methods the tests on the way call (`if self._should_run_x():`), and
    those their tests call: followed too, so that the runner's own predicates decide."""
    found: set[str] = set()
    todo = list(on_path)
    while todo:
        fn = methods.get(todo.pop())
        if fn is None:
            continue
        for node, deferred in _walk(fn):
            if deferred or not isinstance(node, (ast.If, ast.IfExp, ast.Return)):
                continue
            test = node.value if isinstance(node, ast.Return) else node.test
            for call in syntax.walk(test) if test is not None else ():
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and dotted(call.func.value) == "self"
                    and call.func.attr in methods
                    and call.func.attr not in on_path | found
                ):
                    found.add(call.func.attr)
                    todo.append(call.func.attr)
    return found


def _walk(fn: ast.FunctionDef) -> list[tuple[ast.AST, bool]]:
    """Every node of `fn` with whether it sits under a loop, nested function or comprehension."""
    out: list[tuple[ast.AST, bool]] = []
    todo: list[tuple[ast.AST, bool]] = [(c, False) for c in fn.body]
    while todo:
        node, deferred = todo.pop()
        out.append((node, deferred))
        inner = deferred or isinstance(node, _DEFERRED)
        todo.extend((c, inner) for c in ast.iter_child_nodes(node))
    return out


def _subclasses_named(tree: ast.Module, base: str) -> list[str]:
    return [
        node.name
        for node in syntax.statements(tree)
        if isinstance(node, ast.ClassDef)
        and any((dotted(b) or "").rsplit(".", 1)[-1] == base for b in node.bases)
    ]


def _value_mentions(
    tree: ast.Module, name: str, lines: tuple[int, ...]
) -> list[tuple[ast.FunctionDef | None, ast.stmt, bool]]:
    """Statements that use `name` as a value (not an annotation, a base, `name.attr`, or an
    `isinstance` test): (the function they are in, the statement, whether the statement sits
    under a loop or nested function of that function). `lines`: those of the module's text
    that hold `name` (`syntax.lines_with`, sorted); a statement spanning none of them is not
    entered, since nothing in it can be spelt `name`."""
    out: list[tuple[ast.FunctionDef | None, ast.stmt, bool]] = []

    def visit(
        node: ast.AST, fn: ast.FunctionDef | None, stmt: ast.stmt | None, deferred: bool
    ) -> None:
        if isinstance(node, ast.stmt):
            first = bisect_left(lines, node.lineno)
            if first == len(lines) or lines[first] > (node.end_lineno or node.lineno):
                return
        if isinstance(node, ast.FunctionDef) and fn is None:
            fn, deferred = node, False
        elif isinstance(node, ast.stmt) and isinstance(stmt, _DEFERRED) and stmt is not fn:
            deferred = True
        if isinstance(node, ast.stmt):
            stmt = node
        for field_name, value in ast.iter_fields(node):
            if field_name in {"annotation", "returns", "bases", "decorator_list"}:
                continue
            if isinstance(node, ast.Attribute) and field_name == "value":
                continue  # `Name.attr`: a use of the class's attribute, not of the class
            if (
                isinstance(node, ast.Call)
                and dotted(node.func) in {"isinstance", "issubclass"}
                and field_name == "args"
            ):
                continue
            for child in value if isinstance(value, list) else [value]:
                if not isinstance(child, ast.AST):
                    continue
                mentioned = (isinstance(child, ast.Name) and child.id == name) or (
                    isinstance(child, ast.Attribute) and child.attr == name
                )
                if mentioned and stmt is not None and not isinstance(stmt, ast.ClassDef):
                    out.append((fn, stmt, deferred))
                visit(child, fn, stmt, deferred)

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                visit(item, None, None, False)
        else:
            visit(node, None, None, False)
    return out
