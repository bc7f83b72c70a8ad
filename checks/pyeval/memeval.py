"""A small evaluator for SGLang's memory arithmetic, run over the audited tree's own `ast`.

SGLang's default `--mem-fraction-static`, its KV budget, cell size and request limit are plain
arithmetic over server arguments and model-config fields, spread over functions whose shape
changes between releases (a method of `ServerArgs` in 0.5.9, a hook in 0.5.23). Rather than
copy the constants and the order of their conditions, preflight evaluates those functions'
statements on the launch's values: the constants, the GPU-size table, the condition order and
the formula's terms are the tree's, and every step is traced with its line. Nothing is
imported or executed: only a closed set of node types is understood (assignments, `if`,
arithmetic, comparisons, f-strings, calls of the same files' functions and of the inputs'
stand-ins); anything else is an `Unknown` value whose reason names the line, so a reading that
cannot be completed says so instead of guessing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from eaglebug.checks.pyeval import memobjects
from eaglebug.checks.pyeval.memobjects import ClassInfo, ClassTable, EnumMember, Instance
from eaglebug.checks.pyeval.memops import (
    BINOPS,
    BUILTINS,
    COMPARE,
    STR_METHODS,
    call_name,
    comprehension,
    dict_of,
    first_unknown,
    fstring,
    is_unknown,
    isinstance_of,
    join,
    why,
)

# Re-exported: the evaluator's values are what its callers test for.
from eaglebug.checks.pyeval.memops import ROOTS as ROOTS
from eaglebug.checks.pyeval.memops import Ref as Ref
from eaglebug.checks.pyeval.memops import Unknown as Unknown

_MAX_DEPTH = 12
_MAX_STEPS = 20_000
FLAT = object()  # a function of the flat `self` (server args, configurator, runner)


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
class Raised:
    file: str
    line: int
    exception: str
    message: str | None


class ReturnSignal(Exception):
    """A `return` unwinding the evaluated function (a subclass that runs bodies catches it)."""

    def __init__(self, value: object) -> None:
        self.value = value


class RaiseSignal(Exception):
    """A `raise` of the tree unwinding to the caller that reports it."""

    def __init__(self, raised: Raised) -> None:
        self.raised = raised


@dataclass(frozen=True)
class Function:
    file: str
    node: ast.FunctionDef
    owner: str = ""  # the class of a method: `self.f()` inside it calls `Owner.f` first


Stub = Callable[["Evaluator", list[object], dict[str, object]], object]


@dataclass
class Evaluator:
    """Evaluates functions of the tree on `values` (server args, model config) and `stubs`
    (what the box would answer: free GPU memory, the dtype's size)."""

    functions: Mapping[str, Function]
    values: dict[str, object]
    stubs: Mapping[str, Stub] = field(default_factory=dict)
    watch: frozenset[str] = frozenset()
    objects: ClassTable | None = None  # the tree's classes the model's config reaches
    steps: list[Step] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    _count: int = 0
    _depth: int = 0
    _owners: list[str] = field(default_factory=list)

    # -- entry -----------------------------------------------------------------------------
    def call(self, name: str, args: list[object], kwargs: dict[str, object]) -> object:
        """Run `name` from the tree; a raise comes back as `Raised`."""
        try:
            return self._call_function(self.functions[name], args, kwargs)
        except RaiseSignal as stop:
            return stop.raised

    def value(self, node: ast.expr, file: str) -> object:
        """An expression of the tree evaluated on the values (a raise cannot happen here)."""
        return self._expr(node, {}, file)

    def call_method(
        self,
        file: str,
        node: ast.FunctionDef,
        args: list[object],
        kwargs: dict[str, object],
        bound: object,
    ) -> object:
        """A tree class's method on `bound` (an instance, a class; None: static)."""
        try:
            return self._call_function(Function(file, node), args, kwargs, bound)
        except RaiseSignal as stop:
            return Unknown(f"{stop.raised.file}:{stop.raised.line}: raised {stop.raised.exception}")

    def constant(self, node: ast.expr, file: str) -> object:
        """A literal expression's value (`1 * 1024`), or Unknown."""
        value = self._expr(node, {}, file)
        return Unknown(f"{file}:{node.lineno}: not a constant") if isinstance(value, Ref) else value

    # -- statements ------------------------------------------------------------------------
    def _call_function(
        self,
        function: Function,
        args: list[object],
        kwargs: dict[str, object],
        bound: object = FLAT,
    ) -> object:
        if self._depth >= _MAX_DEPTH:
            return Unknown(f"{function.file}:{function.node.lineno}: calls nest too deep")
        params = function.node.args
        names = [a.arg for a in params.posonlyargs + params.args]
        scope: dict[str, object] = {}
        if bound is not FLAT:  # a tree object's method: its first parameter is the object
            if bound is not None and names:
                scope[names[0]] = bound
                names = names[1:]
        # `self` / `kvc` / `server_args` first: the object the evaluator models as the flat
        # values; dropped for a method, and for a function called without it (a module-level
        # `f(kvc, n)` called with both keeps both).
        elif names and names[0] in ROOTS | {"cls"} and (function.owner or len(args) < len(names)):
            names = names[1:]
        defaults = params.defaults
        for name, node in zip(names[len(names) - len(defaults) :], defaults, strict=True):
            scope[name] = self._expr(node, {}, function.file)
        for kw, default in zip(params.kwonlyargs, params.kw_defaults, strict=True):
            if default is not None:
                scope[kw.arg] = self._expr(default, {}, function.file)
        for name, value in zip(names, args, strict=False):
            scope[name] = value
        scope.update(kwargs)
        self._depth += 1
        self._owners.append(function.owner)
        try:
            self._block(function.node.body, scope, function.file)
        except ReturnSignal as done:
            return done.value
        finally:
            self._depth -= 1
            self._owners.pop()
        return None

    def _block(self, body: list[ast.stmt], scope: dict[str, object], file: str) -> None:
        for stmt in body:
            self._count += 1
            if self._count > _MAX_STEPS:
                raise ReturnSignal(Unknown(f"{file}:{stmt.lineno}: too many steps"))
            self._stmt(stmt, scope, file)

    def _stmt(self, stmt: ast.stmt, scope: dict[str, object], file: str) -> None:
        match stmt:
            case ast.Assign(targets=targets, value=value):
                result = self._expr(value, scope, file)
                for target in targets:
                    self._assign(target, result, scope, file, stmt)
            case ast.AnnAssign(target=target, value=value) if value is not None:
                self._assign(target, self._expr(value, scope, file), scope, file, stmt)
            case ast.AugAssign(target=target, op=op, value=value):
                before = self._expr(target, scope, file)
                after = self._binop(op, before, self._expr(value, scope, file), file, stmt)
                self._assign(target, after, scope, file, stmt, before)
            case ast.If(test=test, body=body, orelse=orelse):
                branch = body if self._truth(test, scope, file) else orelse
                self._block(branch, scope, file)
            case ast.Return(value=value):
                raise ReturnSignal(None if value is None else self._expr(value, scope, file))
            case ast.Raise(exc=exc):
                raise RaiseSignal(self._raised(exc, scope, file, stmt.lineno))
            case ast.Expr(value=value):
                if isinstance(value, ast.Call):
                    self._expr(value, scope, file)
            case ast.Try(body=body, orelse=orelse, finalbody=final):
                self._block(body + orelse + final, scope, file)
            case ast.With(body=body):
                self._block(body, scope, file)
            case ast.For(target=ast.Name(id=name), iter=it, body=body):
                items = self._expr(it, scope, file)
                if isinstance(items, (list, tuple, range)):
                    for item in items:
                        scope[name] = item
                        self._block(body, scope, file)
                else:
                    self.assumed.append(f"{file}:{stmt.lineno}: loop skipped ({why(items)})")
            case ast.FunctionDef(name=name):
                scope[name] = Function(file, stmt)
            case _:
                pass  # imports, asserts, logging: no arithmetic

    def _assign(
        self,
        target: ast.expr,
        value: object,
        scope: dict[str, object],
        file: str,
        stmt: ast.stmt,
        before: object = None,
    ) -> None:
        if isinstance(target, ast.Tuple):  # `a, b = f()`: each part, when the parts are known
            parts = value if isinstance(value, (list, tuple)) else None
            if parts is None or len(parts) != len(target.elts):
                parts = [value if isinstance(value, Unknown) else Unknown(why(value))] * len(
                    target.elts
                )
            for element, part in zip(target.elts, parts, strict=True):
                self._assign(element, part, scope, file, stmt)
            return
        if isinstance(target, ast.Name):
            scope[target.id] = value
            name = target.id
        elif isinstance(target, ast.Attribute):
            owner = self._expr(target.value, scope, file)
            if isinstance(owner, Instance):
                owner.attrs[target.attr] = value
                return
            if not isinstance(owner, Ref):
                return
            name = join(owner.path, target.attr)
            self.values[name] = value
        else:
            return
        if name in self.watch or name.rsplit(".", 1)[-1] in self.watch:
            self.steps.append(
                Step(file, stmt.lineno, name, ast.unparse(stmt), value, before, self._depth)
            )

    def _raised(
        self, exc: ast.expr | None, scope: dict[str, object], file: str, line: int
    ) -> Raised:
        if isinstance(exc, ast.Call):
            kind = ast.unparse(exc.func)
            message = None
            if exc.args:
                text = self._expr(exc.args[0], scope, file)
                message = text if isinstance(text, str) else None
            return Raised(file, line, kind, message)
        return Raised(file, line, ast.unparse(exc) if exc else "raise", None)

    def _truth(self, test: ast.expr, scope: dict[str, object], file: str) -> bool:
        value = self._expr(test, scope, file)
        if isinstance(value, (Unknown, Ref)):
            self.assumed.append(
                f"{file}:{test.lineno}: taken as false: {ast.unparse(test)} ({why(value)})"
            )
            return False
        return bool(value)

    # -- expressions -----------------------------------------------------------------------
    def _expr(self, node: ast.expr, scope: dict[str, object], file: str) -> object:
        match node:
            case ast.Constant(value=value):
                return value
            case ast.Name(id=name):
                if name in scope:
                    return scope[name]
                if name in self.values:
                    return self.values[name]
                if self.objects is not None and name in self.objects.classes:
                    return self.objects.classes[name]
                if self.objects is not None and name in self.objects.constants:
                    return self.objects.constants[name]
                return Ref("" if name in ROOTS else name)
            case ast.Attribute(value=inner, attr=attr):
                owner = self._expr(inner, scope, file)
                if isinstance(owner, Ref) and owner.path == "" and attr in ROOTS:
                    return owner  # `self.server_args.x` is the same value as `server_args.x`
                if isinstance(owner, (Instance, ClassInfo, EnumMember)):
                    return memobjects.attribute(self, owner, attr, f"{file}:{node.lineno}")
                if isinstance(owner, Ref):
                    path = join(owner.path, attr)
                    if path in self.values:
                        return self.values[path]
                    return self._flat_property(path) if owner.path == "" else Ref(path)
                if isinstance(owner, Unknown):
                    return owner
                if isinstance(owner, (int, float, str, bool, list, tuple)) or owner is None:
                    return Unknown(f"{file}:{node.lineno}: attribute {attr} of a value")
                return getattr(owner, attr, Unknown(f"{file}:{node.lineno}: {attr}"))
            case ast.BinOp(left=left, op=op, right=right):
                return self._binop(
                    op, self._expr(left, scope, file), self._expr(right, scope, file), file, node
                )
            case ast.UnaryOp(op=unary, operand=operand):
                inner_value = self._expr(operand, scope, file)
                if isinstance(unary, ast.Not):
                    if isinstance(inner_value, (Unknown, Ref)):
                        return (
                            inner_value
                            if isinstance(inner_value, Unknown)
                            else Unknown(inner_value.path)
                        )
                    return not inner_value
                if is_unknown(inner_value):
                    return first_unknown(file, node, inner_value)
                if isinstance(unary, ast.USub):
                    return -inner_value  # type: ignore[operator]
                return inner_value
            case ast.BoolOp(op=boolop, values=items):
                result: object = None
                for item in items:
                    result = self._expr(item, scope, file)
                    if isinstance(result, (Unknown, Ref)):
                        return result if isinstance(result, Unknown) else Unknown(result.path)
                    if isinstance(boolop, ast.And) and not result:
                        return result
                    if isinstance(boolop, ast.Or) and result:
                        return result
                return result
            case ast.Compare(left=first, ops=cmpops, comparators=rights):
                a = self._expr(first, scope, file)
                for cmpop, right in zip(cmpops, rights, strict=True):
                    b = self._expr(right, scope, file)
                    outcome = self._compare(cmpop, a, b, file, node)
                    if outcome is not True:
                        return outcome
                    a = b
                return True
            case ast.IfExp(test=test, body=body, orelse=orelse):
                chosen = body if self._truth(test, scope, file) else orelse
                return self._expr(chosen, scope, file)
            case ast.NamedExpr(target=ast.Name(id=name), value=value):
                scope[name] = self._expr(value, scope, file)
                return scope[name]
            case ast.JoinedStr(values=parts):
                return fstring(parts, lambda part: self._expr(part, scope, file))
            case ast.List(elts=elts) | ast.Tuple(elts=elts) | ast.Set(elts=elts):
                made = self._items(elts, scope, file)
                if not (isinstance(node, ast.Set) and isinstance(made, list)):
                    return made
                try:
                    return set(made)
                except TypeError:  # an element the evaluator holds as a list or a dict
                    return Unknown(f"{file}:{node.lineno}: a set of unhashable values")
            case ast.Dict():
                return dict_of(node, lambda part: self._expr(part, scope, file), file)
            case ast.ListComp() | ast.GeneratorExp():
                return comprehension(node, scope, lambda e, inner: self._expr(e, inner, file), file)
            case ast.Subscript(value=inner, slice=index):
                return self._subscript(
                    self._expr(inner, scope, file), self._expr(index, scope, file), file, node
                )
            case ast.Call():
                return self._call(node, scope, file)
        return Unknown(f"{file}:{node.lineno}: {type(node).__name__} not evaluated")

    def _flat_property(self, attr: str) -> object:
        """`self.x` where the flat object's class defines `x` as a property (0.5.9's
        `ModelRunner.mambaish_config`): the property, evaluated."""
        owner = self._owners[-1] if self._owners else ""
        function = self.functions.get(f"{owner}.{attr}") if owner else None
        if function is None or memobjects.kind_of(function.node) != "property":
            return Ref(attr)
        return self._call_function(function, [], {})

    def _binop(self, op: ast.operator, a: object, b: object, file: str, node: ast.AST) -> object:
        if isinstance(op, ast.BitOr) and (classes := memobjects.union(a, b)) is not None:
            return classes  # `A | B` in an isinstance test
        if is_unknown(a) or is_unknown(b):
            return first_unknown(file, node, a, b)
        fn = BINOPS.get(type(op))
        if fn is None:
            return Unknown(f"{file}:{getattr(node, 'lineno', 0)}: operator")
        try:
            return fn(a, b)
        except (TypeError, ZeroDivisionError, ValueError) as error:
            return Unknown(f"{file}:{getattr(node, 'lineno', 0)}: {error}")

    def _compare(self, op: ast.cmpop, a: object, b: object, file: str, node: ast.AST) -> object:
        if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
            # Enum members the tree compares with (`Backend.DISABLED`) are Refs; a value
            # given as the member's name compares equal to it.
            a = a.path if isinstance(a, Ref) and not isinstance(b, Unknown) else a
            b = b.path if isinstance(b, Ref) and not isinstance(a, Unknown) else b
            if isinstance(a, str) and isinstance(b, str) and isinstance(op, (ast.Is, ast.IsNot)):
                same = a == b
                return same if isinstance(op, ast.Is) else not same
        if is_unknown(a) or is_unknown(b):
            return first_unknown(file, node, a, b)
        try:
            return bool(COMPARE[type(op)](a, b))
        except TypeError as error:
            return Unknown(f"{file}:{getattr(node, 'lineno', 0)}: {error}")

    def _items(self, elts: list[ast.expr], scope: dict[str, object], file: str) -> object:
        """A literal's elements, `*name` spread where it names a known sequence."""
        out: list[object] = []
        for e in elts:
            value = self._expr(e.value if isinstance(e, ast.Starred) else e, scope, file)
            if not isinstance(e, ast.Starred):
                out.append(value)
            elif isinstance(value, (list, tuple, set, frozenset)):
                out.extend(value)
            else:
                return Unknown(f"{file}:{e.lineno}: *{why(value)}")
        return out

    def _subscript(self, owner: object, key: object, file: str, node: ast.AST) -> object:
        if is_unknown(owner) or is_unknown(key):
            return first_unknown(file, node, owner, key)
        try:
            return owner[key]  # type: ignore[index]
        except (TypeError, KeyError, IndexError) as error:
            return Unknown(f"{file}:{getattr(node, 'lineno', 0)}: subscript: {error}")

    def _call(self, node: ast.Call, scope: dict[str, object], file: str) -> object:
        name = call_name(node.func)
        args = [self._expr(a, scope, file) for a in node.args if not isinstance(a, ast.Starred)]
        kwargs = {k.arg: self._expr(k.value, scope, file) for k in node.keywords if k.arg}
        last = name.rsplit(".", 1)[-1]
        if isinstance(node.func, ast.Attribute) and isinstance(
            node.func.value, (ast.Name, ast.Attribute)
        ):  # a method of a tree object, a list's `append`
            owner_value = self._expr(node.func.value, scope, file)
            made = memobjects.call(self, owner_value, node.func.attr, args, kwargs)
            if made is not memobjects.MISSING:
                return made
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "envs" and f"envs.{last}" in self.stubs:
            return self.stubs[f"envs.{last}"](self, [parts[1]], {})  # envs.NAME.get()
        for key in (name, last):
            if key in self.stubs:
                return self.stubs[key](self, args, kwargs)
        made = memobjects.builtin(self, name, args, f"{file}:{node.lineno}")
        if made is not memobjects.MISSING:  # isinstance / getattr / hasattr of tree objects
            return made
        if name == "isinstance" and len(args) == 2:
            return isinstance_of(*args)
        if name in {"getattr", "hasattr"} and len(args) >= 2 and isinstance(args[1], str):
            owner = args[0]
            if isinstance(owner, Ref):
                path = join(owner.path, args[1])
                found = path in self.values
                if name == "hasattr":
                    return found
                return self.values[path] if found else (args[2] if len(args) > 2 else Ref(path))
            return Unknown(f"{file}:{node.lineno}: {name} of a value")
        if name in BUILTINS or last in {"max", "min", "round", "len", "int", "float"}:
            fn = BUILTINS.get(name) or BUILTINS[last]
            inner = [x for a in args if isinstance(a, list) for x in a]
            if any(is_unknown(a) for a in [*args, *inner]):
                return first_unknown(file, node, *args, *inner)
            try:
                return fn(*args)
            except (TypeError, ValueError) as error:
                return Unknown(f"{file}:{node.lineno}: {name}: {error}")
        if isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS:
            text = self._expr(node.func.value, scope, file)
            if isinstance(text, str):
                return getattr(text, node.func.attr)(*args)
        local = scope.get(last)
        owner = self._owners[-1] if self._owners else ""
        function = (
            local
            if isinstance(local, Function)
            else (self.functions.get(f"{owner}.{last}") if owner and name == last else None)
            or self.functions.get(last)
        )
        if function is not None:
            try:
                return self._call_function(function, args, kwargs)
            except ReturnSignal as done:  # pragma: no cover - _call_function catches returns
                return done.value
        if isinstance(node.func, ast.Name):  # a tree class made, a config module's helper
            made = memobjects.named(self, name, args, kwargs)
            if made is not memobjects.MISSING:
                return made
        return Unknown(f"{file}:{node.lineno}: {name}() is not evaluated")


def functions_of(tree: ast.Module, file: str) -> dict[str, Function]:
    """Every function and method of a module by name (the first definition wins)."""
    found: dict[str, Function] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name not in found:
            found[node.name] = Function(file, node)
    return found
