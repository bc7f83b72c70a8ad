"""A small abstract interpreter for SGLang's argument resolution, run over its syntax trees.

SGLang decides the attention backend, the page size and the speculative top-k in plain Python
(`ServerArgs.__post_init__` and its `_handle_*` methods up to 0.5.14; a pipeline of hooks
under `arg_groups/` later), and raises when a combination is refused. Rather than copying
those rules, this walks the audited tree's own statements with the launch's values: `if`
tests are decided where the values are known, both branches are followed (and their writes
merged) where they are not, assignments to the server args are tracked, calls into the tree
are followed, and every `raise` / failing `assert` is recorded with its file:line, the
fields its conditions read and its message rendered with the launch's values. Nothing is
imported or executed. Values it cannot know are `UNKNOWN`; a condition is only decided when
every value it needs is known, so unknowns never produce a finding.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.pyeval.treeexprs import Expressions
from eaglebug.checks.pyeval.treevalues import (
    ARGS,
    UNKNOWN,
    FuncRef,
    OneOf,
    Raised,
    Sentinel,
    World,
    Write,
    _binop,
    _Branch,
    _ends,
    _literal,
    _merge,
    _merge_all,
    _merge_value,
    _State,
    _truth,
)
from eaglebug.checks.source.classfacts import dotted, resolve_relative
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import AlgorithmFacts, algorithm_facts

_ENVIRON = "sglang/srt/environ.py"
_MAX_DEPTH = 24
_MAX_STEPS = 400_000


class _Return(Exception):
    pass


@dataclass
class _Frame:
    rel: str
    module: str
    function: str
    locals: dict[str, Any]
    imports: dict[str, str]
    owner: str | None
    returns: list[Any] = field(default_factory=list)
    tests: list[tuple[str, frozenset[str], bool]] = field(default_factory=list)
    # The server-args fields each local (or parameter) was computed from, so a test on the
    # local reads them too (`backend = view.attention_backend; if backend == ...`).
    local_reads: dict[str, frozenset[str]] = field(default_factory=dict)


class Interpreter(Expressions):
    """Run tree functions abstractly against one `World` (see the module's docstring)."""

    def __init__(self, index: TreeIndex, world: World, args_class: tuple[str, str] | None) -> None:
        self.index = index
        self.world = world
        self.args_class = args_class  # (rel, class name) whose methods `self.x()` reach
        self.state = _State(dict(world.values), {})
        self.raised: list[Raised] = []
        self.steps = 0
        self.stack: list[_Frame] = []
        self._modules: dict[str, tuple[str, ast.Module, dict[str, str]] | None] = {}
        self._reads: set[str] = set()
        self.algorithms: AlgorithmFacts | None = (
            algorithm_facts(index) if index is not None else None
        )

    # -- modules and names -----------------------------------------------------------------
    def module(self, module: str) -> tuple[str, ast.Module, dict[str, str]] | None:
        if module not in self._modules:
            rel = self.index.files.module_files.get(module)
            parsed = self.index.parse_file(rel) if rel else None
            if rel is None or parsed is None:
                self._modules[module] = None
            else:
                self._modules[module] = (rel, parsed.tree, _imports(parsed.tree, module, rel))
        return self._modules[module]

    def lookup_module(self, module: str) -> ast.Module | None:
        found = self.module(module)
        return found[1] if found else None

    def lookup(self, module: str, name: str, depth: int = 0) -> Any:
        """A module-level name: a function, a constant, or what an import brings in."""
        found = self.module(module)
        if found is None or depth > 6:
            return UNKNOWN
        rel, tree, imports = found
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return FuncRef(rel, module, stmt)
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return Sentinel(f"class:{module}:{name}")
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in stmt.targets
            ):
                value = _literal(stmt.value)
                if value is UNKNOWN and isinstance(stmt.value, ast.Call):  # `_is_musa = is_musa()`
                    value = self.module_value(rel, module, imports, stmt.value)
                return value
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == name
                and stmt.value is not None
            ):
                return _literal(stmt.value)
        target = imports.get(name)
        if target is not None:
            return self.lookup_dotted(target, depth + 1)
        return UNKNOWN

    def module_value(self, rel: str, module: str, imports: dict[str, str], node: ast.expr) -> Any:
        """A module-level call's value (a platform probe, mostly), evaluated in that module."""
        if len(self.stack) >= _MAX_DEPTH:
            return UNKNOWN
        self.stack.append(_Frame(rel, module, "<module>", {}, dict(imports), None))
        try:
            return self.expr(node)
        finally:
            self.stack.pop()

    def env_declaration(self, variable: str) -> tuple[str, Any, str] | None:
        """(`EnvBool`, its default, file) of `Envs.<variable>` in the tree's `environ.py`."""
        rel = _ENVIRON
        parsed = self.index.parse_file(rel) if rel in self.index.entries else None
        if parsed is None:
            return None
        for cls in parsed.tree.body:
            if not (isinstance(cls, ast.ClassDef) and cls.name == "Envs"):
                continue
            for stmt in cls.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == variable for t in stmt.targets)
                    and isinstance(stmt.value, ast.Call)
                ):
                    kind = dotted(stmt.value.func) or ""
                    default = _literal(stmt.value.args[0]) if stmt.value.args else None
                    return kind, default, rel
        return None

    def env_parser(self, rel: str, kind: str) -> FuncRef | None:
        """The `parse` method of an env field class (`EnvBool.parse`), following its bases."""
        parsed = self.index.parse_file(rel)
        if parsed is None:
            return None
        classes = {c.name: c for c in parsed.tree.body if isinstance(c, ast.ClassDef)}
        todo, seen = [kind], set()
        while todo:
            name = todo.pop(0)
            cls = classes.get(name)
            if cls is None or name in seen:
                continue
            seen.add(name)
            for stmt in cls.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "parse":
                    module = rel[:-3].replace("/", ".")
                    return FuncRef(rel, module, stmt, name, Sentinel(f"env:{kind}"))
            todo += [dotted(b) or "" for b in cls.bases]
        return None

    def lookup_dotted(self, dotted_name: str, depth: int = 0) -> Any:
        if self.module(dotted_name) is not None:
            return Sentinel(f"module:{dotted_name}")
        module, _, name = dotted_name.rpartition(".")
        return self.lookup(module, name, depth) if module else UNKNOWN

    def method(self, name: str) -> FuncRef | None:
        if self.args_class is None:
            return None
        rel, class_name = self.args_class
        parsed = self.index.parse_file(rel)
        if parsed is None:
            return None
        module = rel[:-3].replace("/", ".")
        for cls in parsed.tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name == class_name:
                for stmt in cls.body:
                    if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                        return FuncRef(rel, module, stmt, class_name)
        return None

    # -- running ---------------------------------------------------------------------------
    def call(
        self,
        ref: FuncRef,
        args: list[Any],
        kwargs: dict[str, Any],
        reads: dict[int | str, frozenset[str]] | None = None,
    ) -> Any:
        """Run `ref` with these arguments; `reads` gives the fields each argument (by
        position or keyword) was computed from."""
        if len(self.stack) >= _MAX_DEPTH or any(
            f.function == ref.node.name and f.rel == ref.rel for f in self.stack
        ):
            return UNKNOWN
        params = ref.node.args
        names = [a.arg for a in (*params.posonlyargs, *params.args)]
        bound: dict[str, Any] = {}
        if ref.owner is not None and names:
            bound[names[0]] = ARGS if ref.bound_self is None else ref.bound_self
            names = names[1:]
        defaults = params.defaults
        for i, name in enumerate(names):
            d = i - (len(names) - len(defaults))
            bound[name] = _literal(defaults[d]) if d >= 0 else UNKNOWN
        for name, value in zip(names, args, strict=False):
            bound[name] = value
        for kw, kw_default in zip(params.kwonlyargs, params.kw_defaults, strict=True):
            bound[kw.arg] = _literal(kw_default) if kw_default is not None else UNKNOWN
        for name, value in kwargs.items():
            bound[name] = value
        found = self.module(ref.module)
        imports = dict(found[2]) if found else {}
        frame = _Frame(ref.rel, ref.module, ref.node.name, bound, imports, ref.owner)
        for key, read in (reads or {}).items():
            if isinstance(key, int) and key < len(names):
                frame.local_reads[names[key]] = read
            elif isinstance(key, str):
                frame.local_reads[key] = read
        self.stack.append(frame)
        try:
            self.block(ref.node.body)
        except (_Return, _Branch):
            pass
        finally:
            self.stack.pop()
        if not frame.returns:
            return None
        value = frame.returns[0]
        for other in frame.returns[1:]:
            value = _merge_value(value, other)
        return value

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.steps += 1
            if self.steps > _MAX_STEPS:
                raise _Return
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        frame = self.stack[-1]
        match stmt:
            case ast.Expr(value=value):
                self.expr(value)
            case ast.Assign(targets=targets, value=value):
                result, read = self.measured(value)
                for target in targets:
                    self.assign(target, result, stmt.lineno)
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            frame.local_reads[name.id] = read
            case ast.AnnAssign(target=target, value=value) if value is not None:
                self.assign(target, self.expr(value), stmt.lineno)
            case ast.AugAssign(target=target, op=op, value=value):
                current = self.expr(target)
                self.assign(target, _binop(op, current, self.expr(value)), stmt.lineno)
            case ast.If(test=test, body=body, orelse=orelse):
                self.branch(test, body, orelse)
            case ast.Return(value=value):
                frame.returns.append(self.expr(value) if value is not None else None)
                if all(definite for _, _, definite in frame.tests):
                    raise _Return
                raise _Branch
            case ast.Raise(exc=exc):
                self.record(stmt, exc, None)
                raise _Branch
            case ast.Assert(test=test, msg=msg):
                value, read = self.measured(test)
                truth = _truth(value)
                if truth is not True:
                    self.record(stmt, None, msg, test, truth is False, read)
            case ast.With(body=body) | ast.Try(body=body):
                self.block(body)
            case ast.For() | ast.While() | ast.AsyncFor():
                for node in ast.walk(stmt):
                    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        for target in targets:
                            self.assign(target, UNKNOWN, node.lineno)
                if any(isinstance(n, (ast.Return, ast.Raise, ast.Break)) for n in ast.walk(stmt)):
                    # the loop may leave early: what follows runs only on some paths
                    frame.tests.append((f"<loop at line {stmt.lineno}>", frozenset(), False))
            case ast.FunctionDef(name=name):
                frame.locals[name] = FuncRef(frame.rel, frame.module, stmt)
            case ast.ImportFrom(module=module, level=level, names=aliases):
                base = resolve_relative(
                    frame.module, frame.rel.endswith("__init__.py"), level, module
                )
                for alias in aliases:
                    frame.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
                    frame.locals.pop(alias.asname or alias.name, None)
            case _:
                pass

    def measured(self, node: ast.expr) -> tuple[Any, frozenset[str]]:
        """The value of `node` and the fields it read (the enclosing expression reads them too)."""
        outer = self._reads
        self._reads = set()
        try:
            value = self.expr(node)
            return value, frozenset(self._reads)
        finally:
            outer |= self._reads
            self._reads = outer

    def branch(self, test: ast.expr, body: list[ast.stmt], orelse: list[ast.stmt]) -> None:
        frame = self.stack[-1]
        value, reads = self.measured(test)
        truth = _truth(value)
        text = ast.unparse(test)
        if truth is True:
            if _ends(orelse):  # the rest of the function runs because the test held
                frame.tests.append((text, reads, True))
            self.guarded(f"{text}", reads, True, body)
        elif truth is False:
            if _ends(body):  # `if not ok: return` not taken: the rest runs because ok
                frame.tests.append((f"not ({text})", reads, True))
            self.guarded(f"not ({text})", reads, True, orelse)
        else:
            before = self.state.copy()
            ended_body = self.guarded(text, reads, False, body)
            after_body = self.state
            self.state = before
            ended_else = self.guarded(f"not ({text})", reads, False, orelse)
            if ended_body and ended_else:
                self.state = _merge(after_body, self.state)
                raise _Branch
            if ended_body:  # only the else-branch goes on: the rest of the function assumes it
                frame.tests.append((f"not ({text})", reads, False))
                return
            if ended_else:
                frame.tests.append((text, reads, False))
                self.state = after_body
                return
            self.state = _merge(after_body, self.state)

    def guarded(
        self, text: str, reads: frozenset[str], definite: bool, body: list[ast.stmt]
    ) -> bool:
        """Run a branch; True when it ended (returned or raised) on every path."""
        frame = self.stack[-1]
        depth = len(frame.tests)
        frame.tests.append((text, reads, definite))
        try:
            self.block(body)
        except _Branch:
            return True
        finally:
            del frame.tests[depth:]
        return False

    def record(
        self,
        stmt: ast.stmt,
        exc: ast.expr | None,
        msg: ast.expr | None,
        test: ast.expr | None = None,
        definite_test: bool = True,
        test_reads: frozenset[str] = frozenset(),
    ) -> None:
        reads = set(test_reads)
        kind = "AssertionError"
        message: Any = None
        if exc is not None:
            call = exc if isinstance(exc, ast.Call) else None
            kind = (dotted(call.func) if call else dotted(exc)) or "Exception"
            if call and call.args:
                message = self.expr(call.args[0])
        elif msg is not None:
            message = self.expr(msg)
        tests = [t for f in self.stack for t in f.tests]
        conditions = [f"({text})" for text, _, _ in tests[-3:]]
        if test is not None:
            conditions.append(f"not ({ast.unparse(test)})")
        for _, read, _ in tests:
            reads |= read
        frame = self.stack[-1]
        self.raised.append(
            Raised(
                rel=frame.rel,
                line=stmt.lineno,
                function=frame.function,
                message=message if isinstance(message, str) else None,
                kind=kind.rsplit(".", 1)[-1],
                reads=frozenset(reads),
                condition=" and ".join(conditions),
                definite=definite_test and all(d for _, _, d in tests),
            )
        )

    def assign(self, target: ast.expr, value: Any, line: int) -> None:
        frame = self.stack[-1]
        match target:
            case ast.Name(id=name):
                frame.locals[name] = value
            case ast.Attribute(value=base, attr=attr) if self.expr(base) is ARGS:
                self.write(attr, value, frame.rel, line)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                if isinstance(value, OneOf) and all(
                    isinstance(v, tuple) and len(v) == len(elts) for v in value.values
                ):
                    value = tuple(
                        _merge_all([v[i] for v in value.values]) for i in range(len(elts))
                    )
                parts = (
                    value
                    if isinstance(value, tuple) and len(value) == len(elts)
                    else [UNKNOWN] * len(elts)
                )
                for element, part in zip(elts, parts, strict=True):
                    self.assign(element, part, line)
            case _:
                pass

    def write(self, name: str, value: Any, rel: str, line: int) -> None:
        self.state.fields[name] = value
        self.state.writes[name] = Write(value, rel, line)


def _imports(tree: ast.Module, module: str, rel: str) -> dict[str, str]:
    out: dict[str, str] = {}
    is_package = rel.endswith("__init__.py")
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = resolve_relative(module, is_package, node.level, node.module)
            for alias in node.names:
                out[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.If):  # `if TYPE_CHECKING:` and platform guards
            for inner in node.body:
                if isinstance(inner, ast.ImportFrom):
                    base = resolve_relative(module, is_package, inner.level, inner.module)
                    for alias in inner.names:
                        out.setdefault(alias.asname or alias.name, f"{base}.{alias.name}")
    return out
