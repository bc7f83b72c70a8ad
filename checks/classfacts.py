"""Per-module facts about classes, imports and the model registry, read with `ast`.

These facts are what the class index needs to answer "does class C provide attribute X, and
from where". They are plain, picklable dataclasses so the parse cache can keep them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Signature:
    """What call shapes a method accepts (the `self` parameter already removed)."""

    positional: tuple[str, ...]
    required_positional: int
    varargs: bool
    kwonly: tuple[str, ...]
    required_kwonly: tuple[str, ...]
    varkw: bool
    text: str  # the parameter list as written, for messages and generated delegations

    def accepts(self, n_positional: int, keywords: tuple[str, ...], star: bool) -> bool:
        """Could a call with this many positional args and these keywords bind?"""
        if star:
            return True
        if n_positional > len(self.positional) and not self.varargs:
            return False
        bound = set(self.positional[:n_positional])
        for kw in keywords:
            if kw in bound:
                return False
            if kw not in self.positional and kw not in self.kwonly and not self.varkw:
                return False
            bound.add(kw)
        missing_positional = [
            p for p in self.positional[: self.required_positional] if p not in bound
        ]
        missing_kwonly = [k for k in self.required_kwonly if k not in bound]
        return not missing_positional and not missing_kwonly


@dataclass(frozen=True)
class MethodFacts:
    name: str
    line: int
    kind: str  # "method" | "property" | "staticmethod" | "classmethod"
    signature: Signature
    stub: bool  # the body only raises NotImplementedError
    # `if hasattr(self.x, "m"): ...self.x.m(...)`: present, but may silently do nothing.
    guarded_delegate: tuple[str, str] | None = None
    # `return self.x.m(...)` / `self.x.m(...)`: a plain delegation to an inner attribute.
    delegate: tuple[str, str] | None = None


@dataclass(frozen=True)
class InnerAssignment:
    """`self.attr = SomeClass(...)` in `__init__`: the inner objects a delegate may target."""

    attr: str
    line: int
    classes: tuple[str, ...]  # dotted names as written; more than one when chosen by config
    conditions: tuple[str | None, ...]  # per class: the condition that picks it (None: always)

    def condition_of(self, name: str) -> str | None:
        return self.conditions[self.classes.index(name)] if name in self.classes else None


@dataclass
class ClassFacts:
    name: str
    line: int
    bases: tuple[str, ...]  # dotted names as written in the class statement
    methods: dict[str, MethodFacts] = field(default_factory=dict)
    class_attrs: dict[str, int] = field(default_factory=dict)  # name -> line
    init_attrs: dict[str, int] = field(default_factory=dict)  # self.x assigned in __init__
    inner: dict[str, InnerAssignment] = field(default_factory=dict)
    local_imports: dict[str, str] = field(default_factory=dict)  # imports inside __init__
    relative_imports: dict[str, tuple[int, str | None, str]] = field(default_factory=dict)
    getattr_forward: str | None = None  # `__getattr__` forwarding to self.<this>
    getattr_dynamic: bool = False  # any other `__getattr__`


@dataclass
class ModuleFacts:
    module: str
    is_package: bool
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)  # module-level function names
    entry_classes: tuple[str, ...] = ()
    lines: int = 0


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` for Name/Attribute chains, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """Turn `from ..x import y` inside `module` into an absolute module name."""
    if level == 0:
        return target or ""
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        package_parts = package_parts[: len(package_parts) - (level - 1)]
    base = ".".join(package_parts)
    if target:
        return f"{base}.{target}" if base else target
    return base


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> Signature:
    args = fn.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    n_defaults = len(args.defaults)
    required = len(positional) - n_defaults
    if drop_first and positional:
        positional = positional[1:]
        required = max(required - 1, 0)
    kwonly = tuple(a.arg for a in args.kwonlyargs)
    required_kwonly = tuple(
        a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None
    )
    text = ast.unparse(args)
    return Signature(
        positional=tuple(positional),
        required_positional=required,
        varargs=args.vararg is not None,
        kwonly=kwonly,
        required_kwonly=required_kwonly,
        varkw=args.kwarg is not None,
        text=text,
    )


def _is_stub(body: list[ast.stmt]) -> bool:
    stmts = [
        s
        for s in body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))  # docstrings
    ]
    if len(stmts) != 1 or not isinstance(stmts[0], ast.Raise) or stmts[0].exc is None:
        return False
    exc = stmts[0].exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return dotted(exc) == "NotImplementedError"


def _self_attr_call(node: ast.AST) -> tuple[str, str] | None:
    """`self.x.m(...)` -> ("x", "m")."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Attribute)
        and isinstance(node.func.value.value, ast.Name)
        and node.func.value.value.id == "self"
    ):
        return node.func.value.attr, node.func.attr
    return None


def _delegation(body: list[ast.stmt]) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """Recognise plain and hasattr-guarded delegations to an inner attribute."""
    stmts = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(stmts) == 1:
        stmt = stmts[0]
        if isinstance(stmt, (ast.Return, ast.Expr)) and stmt.value is not None:
            target = _self_attr_call(stmt.value)
            if target:
                return target, None
        if isinstance(stmt, ast.If) and not stmt.orelse:
            test = stmt.test
            if (
                isinstance(test, ast.Call)
                and dotted(test.func) == "hasattr"
                and len(test.args) == 2
                and isinstance(test.args[1], ast.Constant)
            ):
                holder = dotted(test.args[0])
                if holder and holder.startswith("self."):
                    return None, (holder[len("self.") :], str(test.args[1].value))
    return None, None


def _decorator_kind(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    for dec in fn.decorator_list:
        name = dotted(dec.func if isinstance(dec, ast.Call) else dec) or ""
        last = name.rsplit(".", 1)[-1]
        if last in {"property", "cached_property"} or name.endswith(".setter"):
            return "property"
        if last == "staticmethod":
            return "staticmethod"
        if last == "classmethod":
            return "classmethod"
    return "method"


def _getattr_forward(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """`return getattr(self.inner, name)` somewhere in `__getattr__` -> "inner"."""
    param = fn.args.args[1].arg if len(fn.args.args) > 1 else None
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Call)
            and dotted(node.value.func) == "getattr"
            and len(node.value.args) >= 2
            and isinstance(node.value.args[1], ast.Name)
            and node.value.args[1].id == param
        ):
            holder = dotted(node.value.args[0])
            if holder and holder.startswith("self.") and holder.count(".") == 1:
                return holder[len("self.") :]
    return None


def _class_facts(node: ast.ClassDef) -> ClassFacts:
    bases = tuple(name for name in (dotted(b) for b in node.bases) if name)
    facts = ClassFacts(name=node.name, line=node.lineno, bases=bases)
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = _decorator_kind(stmt)
            delegate, guarded = _delegation(stmt.body)
            existing = facts.methods.get(stmt.name)
            if existing is not None and kind == "property":
                continue  # keep the getter of a property/setter pair
            facts.methods[stmt.name] = MethodFacts(
                name=stmt.name,
                line=stmt.lineno,
                kind=kind,
                signature=_signature(stmt, drop_first=kind != "staticmethod"),
                stub=_is_stub(stmt.body),
                guarded_delegate=guarded,
                delegate=delegate,
            )
            if stmt.name == "__init__":
                _init_facts(stmt, facts)
            elif stmt.name == "__getattr__":
                facts.getattr_forward = _getattr_forward(stmt)
                facts.getattr_dynamic = facts.getattr_forward is None
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        facts.class_attrs.setdefault(name.id, stmt.lineno)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            facts.class_attrs.setdefault(stmt.target.id, stmt.lineno)
    return facts


def _init_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, facts: ClassFacts) -> None:
    """Record `self.x = ...` in `__init__`, with the condition that picks each inner class."""
    for node in ast.walk(fn):  # imports inside __init__ name the inner classes too
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                facts.local_imports.setdefault(
                    alias.asname or alias.name, f"{node.module}.{alias.name}"
                )
        elif isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                facts.relative_imports.setdefault(
                    alias.asname or alias.name, (node.level, node.module, alias.name)
                )

    def visit(stmts: list[ast.stmt], conditions: tuple[str, ...]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        facts.init_attrs.setdefault(target.attr, stmt.lineno)
                        if stmt.value is not None:
                            _record_inner(facts, target.attr, stmt.lineno, stmt.value, conditions)
            elif isinstance(stmt, ast.If):
                text = ast.unparse(stmt.test)
                visit(stmt.body, (*conditions, text))
                visit(stmt.orelse, (*conditions, f"not ({text})"))
            elif isinstance(stmt, (ast.With, ast.AsyncWith, ast.For, ast.While)):
                visit(stmt.body, conditions)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body, conditions)
                for handler in stmt.handlers:
                    visit(handler.body, conditions)
                visit(stmt.orelse, conditions)
                visit(stmt.finalbody, conditions)

    visit(fn.body, ())


def _choices(value: ast.expr, conditions: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """(class name, conditions) for each class an assignment may instantiate."""
    if isinstance(value, ast.Call):
        name = dotted(value.func)
        return [(name, conditions)] if name else []
    if isinstance(value, ast.IfExp):
        text = ast.unparse(value.test)
        return _choices(value.body, (*conditions, text)) + _choices(
            value.orelse, (*conditions, f"not ({text})")
        )
    return []


def _record_inner(
    facts: ClassFacts, attr: str, line: int, value: ast.expr, conditions: tuple[str, ...]
) -> None:
    found = [
        (c, conds) for c, conds in _choices(value, conditions) if c.rsplit(".", 1)[-1][:1].isupper()
    ]
    if not found:
        return
    previous = facts.inner.get(attr)
    classes = list(previous.classes) if previous else []
    conds = list(previous.conditions) if previous else []
    for name, when in found:
        if name not in classes:
            classes.append(name)
            conds.append(" and ".join(when) if when else None)
    facts.inner[attr] = InnerAssignment(
        attr, previous.line if previous else line, tuple(classes), tuple(conds)
    )


def module_imports(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Local name -> dotted target of the module's own imports (without its class facts)."""
    imports: dict[str, str] = {}
    for node in _import_statements(tree.body):
        if isinstance(node, ast.ImportFrom):
            base = resolve_relative(module, is_package, node.level, node.module)
            for alias in node.names:
                if alias.name != "*":
                    imports.setdefault(alias.asname or alias.name, f"{base}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports.setdefault(alias.asname, alias.name)
                else:
                    head = alias.name.split(".", 1)[0]
                    imports.setdefault(head, head)
    return imports


def module_facts(tree: ast.Module, module: str, is_package: bool) -> ModuleFacts:
    facts = ModuleFacts(module=module, is_package=is_package)
    facts.imports = module_imports(tree, module, is_package)
    for stmt in tree.body:
        _top_level(stmt, facts)
    return facts


def _import_statements(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """Module-level imports, including those under `if TYPE_CHECKING:` and `try:`."""
    found: list[ast.Import | ast.ImportFrom] = []
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found.append(stmt)
        elif isinstance(stmt, ast.If):
            found += _import_statements(stmt.body) + _import_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            found += _import_statements(stmt.body)
            for handler in stmt.handlers:
                found += _import_statements(handler.body)
            found += _import_statements(stmt.orelse)
    return found


def _top_level(stmt: ast.stmt, facts: ModuleFacts) -> None:
    if isinstance(stmt, ast.ClassDef):
        facts.classes.setdefault(stmt.name, _class_facts(stmt))
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        facts.functions.add(stmt.name)
    elif isinstance(stmt, ast.Assign):
        if any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in stmt.targets):
            values = (
                stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
            )
            facts.entry_classes = tuple(n for n in (dotted(v) for v in values) if n)
    elif isinstance(stmt, ast.If):  # `if TYPE_CHECKING:` / version switches
        for inner in (*stmt.body, *stmt.orelse):
            _top_level(inner, facts)
    elif isinstance(stmt, ast.Try):
        for inner in (*stmt.body, *[s for h in stmt.handlers for s in h.body], *stmt.orelse):
            _top_level(inner, facts)
