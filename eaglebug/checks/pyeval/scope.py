"""Names of the tree, resolved as Python would: through the index's import facts, to the
function, class, constant or module they are, by qualified name.

`Source` is what the evaluator reads the tree through: the index's files (parsed once per file
per run), its module facts (imports: the complete builder that follows `if` and `try`), and its
classes (the audit's MRO). A module's top-level names are a `ModuleTable` built once per file;
a name is looked up there, then through its import to the module that defines it (following
re-exports), else it is a builtin, else it is outside the tree: an `Intrinsic` by its qualified
name, which a plug-in may give meaning to. Nothing is matched by the last dotted component.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eaglebug.checks.pyeval.values import ClassVal, FunctionSite
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import resolve_relative

if TYPE_CHECKING:
    from eaglebug.checks.source.classes import ClassRef
    from eaglebug.checks.source.index import TreeIndex

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.expr
# The module-level tests a definition sits under: (test, taken when it is true?). A test of
# None is a `try:` whose handler defines the name: whether the import fails is not known.
Guard = tuple[ast.expr | None, bool]


@dataclass(frozen=True)
class Candidate:
    """One top-level definition of a name, and the `if` / `try` it sits under at import."""

    node: Definition
    guards: tuple[Guard, ...] = ()


@dataclass
class ModuleTable:
    """A module's top-level names: every definition of each (functions, classes, assigned
    expressions, with the tests they sit under), and its imports."""

    module: str
    rel: str
    is_package: bool
    definitions: dict[str, list[Candidate]] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    stars: list[str] = field(default_factory=list)  # modules `from X import *` brings in
    # Names a function of the module rebinds (`global _TP; _TP = ...`): the process's state,
    # set at run time; their import-time value is not what the running server reads.
    runtime: set[str] = field(default_factory=set)

    def only(self, name: str) -> Definition | None:
        """The definition of a name defined once, unguarded; None otherwise."""
        found = self.definitions.get(name, [])
        return found[0].node if len(found) == 1 and not found[0].guards else None


class Source:
    """The tree as the evaluator reads it: one per index (`Source.of`), so every run on the
    index shares its module tables and class nodes, built once per file."""

    def __init__(self, index: TreeIndex) -> None:
        self.index = index
        self._tables: dict[str, ModuleTable | None] = {}
        self._classes: dict[tuple[str, int], ast.ClassDef | None] = {}
        self._methods: dict[tuple[str, int], dict[str, FunctionSite]] = {}
        self._bodies: dict[tuple[str, int], dict[str, ast.expr]] = {}
        self._lazy: dict[tuple[str, str], FunctionSite | None] = {}
        self._columns: dict[str, tuple[dict[str, list[int]], set[str]]] = {}
        # The names each statement binds, looked up at every merge after a branch; kept with
        # the syntax it describes (this index's parse), never by id.
        self._stored: dict[ast.stmt, frozenset[str]] = {}

    def stored(self, *bodies: list[ast.stmt]) -> set[str]:
        """The names the statements of `bodies` bind (a branch's, for the merge after it)."""
        out: set[str] = set()
        for body in bodies:
            for stmt in body:
                names = self._stored.get(stmt)
                if names is None:
                    names = self._stored[stmt] = frozenset(
                        n.id
                        for n in syntax.walk(stmt)
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                    )
                out |= names
        return out

    def let_go(self) -> None:
        """Drop the tables that hold syntax of files whose trees the index no longer keeps
        (made again from a parse if asked for): a batch over a whole release, the matrix,
        between its steps, would otherwise hold every model file's classes here."""
        kept = self.index.files.peek
        for held in (self._classes, self._methods, self._bodies):
            for key in [key for key in held if kept(key[0]) is None]:
                del held[key]
        for module, table in list(self._tables.items()):
            if table is not None and kept(table.rel) is None:
                del self._tables[module]

    @classmethod
    def of(cls, index: TreeIndex) -> Source:
        return index.kept("pyeval.source", lambda: cls(index))

    # -- modules -----------------------------------------------------------------------------
    def file_of(self, module: str) -> str | None:
        return self.index.files.module_files.get(module)

    def is_module(self, dotted: str) -> bool:
        return dotted in self.index.files.module_files

    def table(self, module: str) -> ModuleTable | None:
        if module not in self._tables:
            self._tables[module] = self._table(module)
        return self._tables[module]

    def _table(self, module: str) -> ModuleTable | None:
        rel = self.file_of(module)
        if rel is None:
            return None
        parsed = self.index.parse_file(rel)
        facts = self.index.module(module)
        if parsed is None:
            return None
        table = ModuleTable(module, rel, rel.endswith("__init__.py"))
        table.imports = dict(facts.imports) if facts is not None else {}
        for stmt, guards in _top_level(parsed.tree.body, ()):
            found: list[tuple[str, Definition]] = []
            match stmt:
                case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name):
                    found.append((name, stmt))
                case ast.ClassDef(name=name):
                    found.append((name, stmt))
                case ast.Assign(targets=targets, value=value):
                    found += [(t.id, value) for t in targets if isinstance(t, ast.Name)]
                case ast.AnnAssign(target=ast.Name(id=name), value=value) if value is not None:
                    found.append((name, value))
            for name, node in found:
                candidates = table.definitions.setdefault(name, [])
                if not guards:  # an unguarded definition replaces what came before it
                    candidates.clear()
                candidates.append(Candidate(node, guards))
        for name in table.definitions:
            table.imports.pop(name, None)  # defined after an import of the same name
        for match in _GLOBAL.finditer(parsed.text):  # `global a, b` in a function's body
            table.runtime.update(n.strip() for n in match.group(1).split(","))
        for stmt, _ in _top_level(parsed.tree.body, ()):
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                base = resolve_relative(module, table.is_package, stmt.level, stmt.module)
                table.stars.append(base)
        return table

    def defines(self, module: str, name: str, hops: int = 0) -> str | None:
        """The module that gives `module` its top-level `name` (itself, or one it star-imports),
        or None."""
        table = self.table(module)
        if table is None or hops > 8:
            return None
        if name in table.definitions or name in table.imports:
            return module
        for star in table.stars:
            found = self.defines(star, name, hops + 1)
            if found is not None:
                return found
        return None

    def split(self, dotted: str) -> tuple[str, str] | None:
        """(module, name) of a dotted name whose module is in the tree."""
        module, _, _name = dotted.rpartition(".")
        while module:
            if self.is_module(module):
                return module, dotted[len(module) + 1 :]
            module, _, _ = module.rpartition(".")
        return None

    # -- classes and functions -----------------------------------------------------------------
    def class_ref(self, qualname: str) -> ClassRef | None:
        return self.index.classes.cls(qualname)

    def class_val(self, qualname: str) -> ClassVal:
        ref = self.class_ref(qualname)
        return ClassVal(ref.qualname if ref is not None else qualname, ref)

    def class_node(self, ref: ClassRef) -> ast.ClassDef | None:
        key = (ref.file, ref.facts.line)
        if key not in self._classes:
            parsed = self.index.parse_file(ref.file)
            found = None
            if parsed is not None:
                found = next(
                    (
                        n
                        for n in syntax.statements(parsed.tree)
                        if isinstance(n, ast.ClassDef) and n.lineno == ref.facts.line
                    ),
                    None,
                )
            self._classes[key] = found
        return self._classes[key]

    def mro(self, ref: ClassRef) -> tuple[list[ClassRef], list[str]]:
        """The audit's MRO: the tree's classes in lookup order, and the bases outside it."""
        order, outside, nn_module = self.index.classes.mro(ref)
        return order, [*outside, *(["torch.nn.Module"] if nn_module else [])]

    def method(self, ref: ClassRef, name: str) -> FunctionSite | None:
        """The first `def name` of the class's body (a run asks this of every attribute it
        looks up on an instance, so each class's table is made once)."""
        key = (ref.file, ref.facts.line)
        methods = self._methods.get(key)
        if methods is None:
            node = self.class_node(ref)
            methods = self._methods[key] = {}
            for stmt in node.body if node is not None else []:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    qualname = f"{ref.facts.name}.{stmt.name}"
                    site = FunctionSite(ref.file, ref.module.module, qualname, stmt)
                    methods.setdefault(stmt.name, site)
        return methods.get(name)

    def class_attribute(self, ref: ClassRef, name: str) -> ast.expr | None:
        """`name = <expr>` (or `name: T = <expr>`) in the class body."""
        return self.class_body(ref).get(name)

    def class_body(self, ref: ClassRef) -> dict[str, ast.expr]:
        """A class body's assigned names (the last assignment of each), once per class."""
        key = (ref.file, ref.facts.line)
        if key not in self._bodies:
            node = self.class_node(ref)
            found: dict[str, ast.expr] = {}
            for stmt in node.body if node is not None else []:
                if isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            found[target.id] = stmt.value
                elif (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.value is not None
                ):
                    found[stmt.target.id] = stmt.value
            self._bodies[key] = found
        return self._bodies[key]

    def node_of(
        self, site: FunctionSite
    ) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | None:
        """The function's syntax, parsing its file now if the site was found without it."""
        if site.node is not None:
            return site.node
        found = self.function(site.module, site.qualname)
        return found.node if found is not None else None

    def lazy_function(self, module: str, name: str) -> FunctionSite | None:
        """A module function known from the file's facts and text alone (a `def` at column 0
        that nothing at column 0 rebinds): its site, to be parsed only if it runs."""
        key = (module, name)
        if key not in self._lazy:
            self._lazy[key] = self._lazy_function(module, name)
        return self._lazy[key]

    def _lazy_function(self, module: str, name: str) -> FunctionSite | None:
        rel = self.file_of(module)
        facts = self.index.module(module) if rel is not None else None
        if rel is None or facts is None or name not in facts.functions:
            return None
        defs, bound = self._column_zero(rel)
        if len(defs.get(name, ())) != 1 or name in bound:
            return None
        return FunctionSite(rel, module, name, None, defs[name][0])

    def _column_zero(self, rel: str) -> tuple[dict[str, list[int]], set[str]]:
        """A file's `def`s at column 0 (with their lines) and the names assigned at column 0,
        from its text in one pass."""
        if rel not in self._columns:
            data = self.index.files.source(rel) or b""
            defs: dict[str, list[int]] = {}
            for match in _DEF.finditer(data):
                line = data.count(b"\n", 0, match.start()) + 1
                defs.setdefault(match.group(1).decode(), []).append(line)
            bound = {m.group(1).decode() for m in _BOUND.finditer(data)}
            self._columns[rel] = (defs, bound)
        return self._columns[rel]

    def function(self, module: str, qualname: str) -> FunctionSite | None:
        """A module function or a `Class.method` of a module, by qualified name in it."""
        table = self.table(module)
        if table is None:
            return None
        owner, _, name = qualname.rpartition(".")
        if owner:
            ref = self.class_ref(f"{module}.{owner}")
            return self.method(ref, name) if ref is not None else None
        found = table.only(name)
        if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return FunctionSite(table.rel, module, name, found)
        return None


def _top_level(
    body: list[ast.stmt], guards: tuple[Guard, ...]
) -> list[tuple[ast.stmt, tuple[Guard, ...]]]:
    """A module's statements as import time runs them, each with the tests it sits under (a
    name defined in both branches of an `if` is decided when it is read)."""
    out: list[tuple[ast.stmt, tuple[Guard, ...]]] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            out += _top_level(stmt.body, (*guards, (stmt.test, True)))
            out += _top_level(stmt.orelse, (*guards, (stmt.test, False)))
        elif isinstance(stmt, ast.Try):
            out += _top_level(stmt.body + stmt.orelse, guards)
            for handler in stmt.handlers:
                out += _top_level(handler.body, (*guards, (None, True)))
            out += _top_level(stmt.finalbody, guards)
        else:
            out.append((stmt, guards))
    return out


BUILTIN_NAMES = frozenset(dir(builtins))
_DEF = re.compile(rb"^(?:async )?def (\w+)\(", re.MULTILINE)
_BOUND = re.compile(rb"^(\w+)\s*(?::[^=\n]*)?=[^=]", re.MULTILINE)
_GLOBAL = re.compile(r"^[ \t]+global[ \t]+(\w+(?:[ \t]*,[ \t]*\w+)*)", re.MULTILINE)
