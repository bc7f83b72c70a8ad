"""What a class's `__init__` assigns to `self`: its attributes, and the inner objects a
delegate may target with the classes each may hold (chosen by an `if`, a conditional
expression, a module-level table such as MiniCPMV's `_SUPPORT_VERSION`, or a method that asks
the model registry, as Llava's `_get_sgl_model_cls` does). Read with `ast`, for `classfacts`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eaglebug.checks.source import syntax

if TYPE_CHECKING:
    from eaglebug.checks.source.classfacts import ClassFacts


SELF_CALL = "@self:"  # an inner object made by a method of the instance: `@self:<method>`


def self_assignment(node: ast.Assign) -> str | None:
    """`x` when `node` is `self.x = <value>` with that one target, else None: how a class's
    methods set the attributes the checks read."""
    if len(node.targets) != 1:
        return None
    target = node.targets[0]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return target.attr if target.value.id == "self" else None
    return None


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


@dataclass(frozen=True)
class InnerAssignment:
    """`self.attr = SomeClass(...)` in `__init__`: the inner objects a delegate may target."""

    attr: str
    line: int
    # Dotted names as written; more than one when chosen by config. A name starting with
    # `@registry:` is a class the registry picks from a config: `@registry:METHOD:CONFIG:AUTO`
    # (the method of the class that asks the registry, the config expression it is given,
    # the transformers Auto class named beside it, if any).
    classes: tuple[str, ...]
    conditions: tuple[str | None, ...]  # per class: the condition that picks it (None: always)

    def condition_of(self, name: str) -> str | None:
        return self.conditions[self.classes.index(name)] if name in self.classes else None


def template_text(node: ast.expr) -> str | None:
    """A string literal as written, an f-string with its `{expressions}` kept as text (the
    wording of a message the tree raises or warns with); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                out.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                out.append("{" + ast.unparse(value.value) + "}")
        return "".join(out)
    return None


def init_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, facts: ClassFacts) -> None:
    """Record `self.x = ...` in `__init__`, with the condition that picks each inner class."""
    for node in syntax.statements(fn):  # imports inside __init__ name the inner classes too
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

    # Locals of `__init__` that name classes: `cls = TABLE.get(key)` / `TABLE[key]` (a
    # module-level table), `cls = self.m(config, ...)` (a method, maybe one that asks the
    # registry); and locals holding an instance, `inner = cls(...)` / `inner = Class(...)`.
    class_locals: dict[str, str] = {}
    instances: dict[str, list[tuple[str, tuple[str, ...]]]] = {}

    def choices(value: ast.expr, conditions: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        if isinstance(value, ast.Name) and value.id in instances:
            return instances[value.id]
        func = value.func if isinstance(value, ast.Call) else None
        if isinstance(func, ast.Name) and func.id in class_locals:
            return [(class_locals[func.id], conditions)]
        return _choices(value, conditions)

    def local(name: str, value: ast.expr, conditions: tuple[str, ...]) -> None:
        chooser = _class_chooser(value)
        if chooser is not None:
            class_locals[name] = chooser
            return
        found = choices(value, conditions)
        if found:
            instances[name] = found

    def visit(stmts: list[ast.stmt], conditions: tuple[str, ...]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if isinstance(target, ast.Name) and stmt.value is not None:
                        local(target.id, stmt.value, conditions)
                    elif (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        facts.init_attrs.setdefault(target.attr, stmt.lineno)
                        if stmt.value is not None:
                            found = choices(stmt.value, conditions)
                            _record_inner(facts, target.attr, stmt.lineno, found)
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


def _class_chooser(value: ast.expr) -> str | None:
    """`TABLE.get(key)` / `TABLE[key]` -> "@table:TABLE"; `self.m(config, ...)` ->
    "@registry:m:config" (kept only if `m` asks the registry, see `ClassIndex`)."""
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
        return f"@table:{value.value.id}"
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    if (
        isinstance(func, ast.Attribute)
        and func.attr == "get"
        and isinstance(func.value, ast.Name)
        and func.value.id != "self"
    ):
        return f"@table:{func.value.id}"
    name = dotted(func) or ""
    if name.startswith("self.") and name.count(".") == 1 and value.args:
        kind = dotted(value.args[1]) if len(value.args) > 1 else None
        config = ast.unparse(value.args[0])
        return f"@registry:{name[len('self.') :]}:{config}:{kind or ''}"
    return None


def _record_inner(
    facts: ClassFacts, attr: str, line: int, choices: list[tuple[str, tuple[str, ...]]]
) -> None:
    found = [
        (c, conds)
        for c, conds in choices
        if c.startswith("@") or c.rsplit(".", 1)[-1][:1].isupper()
    ]
    # `self.llm = self.init_llm(...)` (sglang's MiniCPM models): the class is what the
    # instance's own `init_llm` returns, so only a reader that knows the instance's class (and
    # runs the method) can say; kept as `@self:init_llm` for it.
    found += [
        (f"{SELF_CALL}{c[len('self.') :]}", conds)
        for c, conds in choices
        if c.startswith("self.") and c.count(".") == 1
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


def class_table(value: ast.expr) -> tuple[tuple[str, str], ...] | None:
    """`{key: Class, ...}` or `[Class, ...]` whose every value names a class."""
    if isinstance(value, ast.Dict):
        pairs = [
            (ast.unparse(k) if k is not None else "**", dotted(v))
            for k, v in zip(value.keys, value.values, strict=True)
        ]
    elif isinstance(value, (ast.List, ast.Tuple)):
        pairs = [(str(i), dotted(v)) for i, v in enumerate(value.elts)]
    else:
        return None
    if not pairs or any(v is None or not v.rsplit(".", 1)[-1][:1].isupper() for _, v in pairs):
        return None
    return tuple((k, v) for k, v in pairs if v is not None)


def expand_tables(cls: ClassFacts, tables: dict[str, tuple[tuple[str, str], ...]]) -> None:
    """`self.x = TABLE[key](...)`: each class of the module-level table is a choice."""
    for attr, inner in list(cls.inner.items()):
        if not any(c.startswith("@table:") for c in inner.classes):
            continue
        classes: list[str] = []
        conditions: list[str | None] = []
        for name, when in zip(inner.classes, inner.conditions, strict=True):
            table = tables.get(name[len("@table:") :]) if name.startswith("@table:") else None
            if table is None:
                if not name.startswith("@table:"):
                    classes.append(name)
                    conditions.append(when)
                continue
            for key, value in table:
                if value not in classes:
                    classes.append(value)
                    picked = f"{name[len('@table:') :]}[{key}] is picked"
                    conditions.append(f"{when} and {picked}" if when else picked)
        if classes:
            cls.inner[attr] = InnerAssignment(attr, inner.line, tuple(classes), tuple(conditions))
        else:
            del cls.inner[attr]
