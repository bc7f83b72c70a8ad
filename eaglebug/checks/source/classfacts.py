"""Per-module facts about classes, imports and the model registry, read with `ast`.

These facts are what the class index needs to answer "does class C provide attribute X, and
from where". They are plain, picklable dataclasses so the parse cache can keep them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from eaglebug.checks.source import syntax
from eaglebug.checks.source.initfacts import (
    InnerAssignment,
    class_table,
    dotted,
    expand_tables,
    init_facts,
)

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

__all__ = [  # `dotted` and `InnerAssignment` live in initfacts; most modules import them here
    "ClassFacts",
    "FunctionNode",
    "InnerAssignment",
    "MethodFacts",
    "ModuleFacts",
    "Signature",
    "dotted",
    "function_nodes",
    "module_facts",
    "param_table",
    "resolve_relative",
]


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
    # The line of a `ModelRegistry.resolve_model_cls(...)` call: the method picks a class
    # through the model registry (Llava's `_get_sgl_model_cls`).
    registry_line: int | None = None


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
    # Module-level `NAME = {key: Class, ...}` (or a list/tuple of classes): tables a class is
    # picked from (`_SUPPORT_VERSION[version]`), as (key as written, class as written).
    class_tables: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    lines: int = 0


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
    for node in syntax.statements(fn):
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


_REGISTRY_CALL = ("ModelRegistry", "resolve_model_cls")  # how a model asks the registry


def _registry_call(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The line where a method asks the model registry for a class, if it does."""
    for node in syntax.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func) or ""
        if tuple(name.split(".")[-2:]) == _REGISTRY_CALL:
            return node.lineno
    return None


def _class_facts(node: ast.ClassDef, registry: bool) -> ClassFacts:
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
                registry_line=_registry_call(stmt) if registry else None,
            )
            if stmt.name == "__init__":
                init_facts(stmt, facts)
            elif stmt.name == "__getattr__":
                facts.getattr_forward = _getattr_forward(stmt)
                facts.getattr_dynamic = facts.getattr_forward is None
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for name in syntax.walk(target):
                    if isinstance(name, ast.Name):
                        facts.class_attrs.setdefault(name.id, stmt.lineno)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            facts.class_attrs.setdefault(stmt.target.id, stmt.lineno)
    return facts


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


def module_facts(
    tree: ast.Module, module: str, is_package: bool, text: str | None = None
) -> ModuleFacts:
    """The facts of one module; `text`, its source, spares looking for registry calls in
    the (nearly all) modules that never name the registry."""
    facts = ModuleFacts(module=module, is_package=is_package)
    facts.imports = module_imports(tree, module, is_package)
    registry = text is None or _REGISTRY_CALL[1] in text
    for stmt in tree.body:
        _top_level(stmt, facts, registry)
    for cls in facts.classes.values():
        expand_tables(cls, facts.class_tables)
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


def _top_level(stmt: ast.stmt, facts: ModuleFacts, registry: bool) -> None:
    if isinstance(stmt, ast.ClassDef):
        facts.classes.setdefault(stmt.name, _class_facts(stmt, registry))
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        facts.functions.add(stmt.name)
    elif isinstance(stmt, ast.Assign):
        table = class_table(stmt.value)
        if table is not None:
            for target in stmt.targets:
                if isinstance(target, ast.Name) and target.id != "EntryClass":
                    facts.class_tables.setdefault(target.id, table)
        if any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in stmt.targets):
            values = (
                stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
            )
            facts.entry_classes = tuple(n for n in (dotted(v) for v in values) if n)
    elif isinstance(stmt, ast.If):  # `if TYPE_CHECKING:` / version switches
        for inner in (*stmt.body, *stmt.orelse):
            _top_level(inner, facts, registry)
    elif isinstance(stmt, ast.Try):
        for inner in (*stmt.body, *[s for h in stmt.handlers for s in h.body], *stmt.orelse):
            _top_level(inner, facts, registry)


def class_string(cls: ast.ClassDef, name: str) -> str | None:
    """A class body's `name = "literal"` (`model_type = "qwen3_next"`, `_NS_PATH = ...`)."""
    for stmt in cls.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            return stmt.value.value
    return None


def function_nodes(tree: ast.Module) -> list[tuple[str | None, ast.ClassDef | None, FunctionNode]]:
    """(class name, class, function) for module functions and the methods of top-level
    classes, including those defined under `if` and `try` (version switches)."""
    found: list[tuple[str | None, ast.ClassDef | None, FunctionNode]] = []
    _functions_in(tree.body, None, found)
    return found


def _functions_in(
    body: list[ast.stmt],
    cls: ast.ClassDef | None,
    found: list[tuple[str | None, ast.ClassDef | None, FunctionNode]],
) -> None:
    # Not a recursive closure: one is a cycle, and this one would hold the syntax tree (through
    # `found`) where the CLI runs with the cyclic collector off: never freed.
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((cls.name if cls else None, cls, stmt))
        elif isinstance(stmt, ast.ClassDef) and cls is None:
            _functions_in(stmt.body, stmt, found)
        elif isinstance(stmt, (ast.If, ast.Try)):
            _functions_in(stmt.body, cls, found)


def function_params(fn: FunctionNode) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]


def param_table(tree: ast.Module) -> dict[str, list[str]]:
    """`Class.method` / `function` -> its positional parameters, the first definition winning
    (as `find_function` finds it), so a call edge binds without parsing the callee again."""
    table: dict[str, list[str]] = {}
    for cls_name, _cls, fn in function_nodes(tree):
        table.setdefault(f"{cls_name}.{fn.name}" if cls_name else fn.name, function_params(fn))
    return table
