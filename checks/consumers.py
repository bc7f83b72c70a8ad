"""Where the SGLang runtime touches a runner's model object, read from one module's `ast`.

A *model reference* is an expression that evaluates to the model a ModelRunner holds:
`<something>runner.model`, `self.model` inside a ModelRunner, a local alias of either, an
attribute of `self` assigned from one, or a parameter that a caller passes one into. Every
attribute read or call on such a reference is a *use*; each use keeps the conditions that
guard it, so the audit can decide later, per algorithm, role and class, whether it runs.

Parameters are handled as summaries: the module scan records calls that pass a reference on,
and the index asks for the callee's uses of that parameter only when a caller needs them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from eaglebug.checks.classfacts import dotted

# A reference's origin: ("seed", role) | ("param", function, name). An attribute of `self`
# assigned from a seed keeps that seed's origin.
Origin = tuple[str, ...]
# A condition tree: ("pred", name) | ("flag", name) | ("hasattr", origin, attr) | ("not", c)
# | ("and", (c, ...)) | ("or", (c, ...)) | ("other", text)
Cond = tuple[object, ...]
# While walking: the tests in force, each with whether it holds negated (else-branches, `or`).
Stack = tuple[tuple[ast.expr, bool], ...]

# A method that may store a model reference on self (checked before walking it in full).
_SELF_REF_ASSIGN = re.compile(r"self\.\w+\s*(?::[^=\n]*)?=\s*[^=\n]*\.model\b")

REQUIRED_KINDS = frozenset({"call", "read", "getattr", "hasattr-raise"})


@dataclass(frozen=True)
class Use:
    origin: Origin
    attribute: str
    kind: str  # call | read | getattr | getattr-default | hasattr | hasattr-raise
    line: int
    code: str
    conds: tuple[Cond, ...]
    guards: tuple[str, ...]  # the same conditions as source text, for the evidence
    scope: str  # module.Class.function
    n_args: int = 0
    keywords: tuple[str, ...] = ()
    star: bool = False  # *args / **kwargs at the call: any shape may bind


@dataclass(frozen=True)
class CallEdge:
    """A call that passes a model reference on to another function."""

    callee: str  # dotted name as resolved in this module (module.func, module.Class.method)
    bindings: tuple[tuple[int | str, Origin], ...]  # positional index or keyword -> origin
    conds: tuple[Cond, ...]
    guards: tuple[str, ...]
    line: int
    scope: str


@dataclass
class ConsumerFacts:
    uses: list[Use] = field(default_factory=list)
    calls: list[CallEdge] = field(default_factory=list)
    # attribute name -> conditions under which it is set to something truthy; () = always
    flags: dict[str, list[tuple[Cond, ...]]] = field(default_factory=dict)


def _last_name(node: ast.expr) -> str | None:
    """The identifier an expression ends in: `a.b_runner[i]` and `a.b_runner(i)` -> b_runner."""
    while isinstance(node, (ast.Subscript, ast.Call)):
        node = node.value if isinstance(node, ast.Subscript) else node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def runner_role(runner_text: str, draft_worker_class: bool) -> str:
    lowered = runner_text.lower()
    if "draft" in lowered or "mtp" in lowered:
        return "draft"
    if "target" in lowered:
        return "target"
    if draft_worker_class and runner_text == "self.model_runner":
        return "draft"
    return "any"


def _exits_early(body: list[ast.stmt]) -> bool:
    """A branch that leaves the function without raising (raising still crashes the launch)."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue, ast.Break))


def _ends_in_raise(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)


class _Scanner:
    """Walks one function body with the conditions in force at each node."""

    def __init__(
        self,
        module: str,
        imports: dict[str, str],
        functions: set[str],
        lines: list[str],
        scope: str,
        class_name: str | None,
        is_runner_class: bool,
        draft_worker_class: bool,
        selfattrs: dict[str, Origin],
        params: dict[str, Origin],
        out: ConsumerFacts,
        only: Origin | None = None,
        flag_names: frozenset[str] | None = None,
    ) -> None:
        self.module = module
        self.imports = imports
        self.functions = functions
        self.lines = lines
        self.scope = scope
        self.class_name = class_name
        self.is_runner_class = is_runner_class
        self.draft_worker_class = draft_worker_class
        self.selfattrs = selfattrs
        self.aliases: dict[str, Origin] = dict(params)
        self.out = out
        self.only = only  # when set, record only what flows from this origin (param summaries)
        self.flag_names = flag_names  # when set, record only assignments to these attributes
        self.self_assigns: list[tuple[str, Origin]] = []
        self.in_handler = 0

    # -- references -----------------------------------------------------------------------
    def origin(self, node: ast.expr) -> Origin | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            if node.attr == "model":
                runner = _last_name(node.value)
                if runner and "runner" in runner.lower():
                    text = ast.unparse(node.value)
                    return ("seed", runner_role(text, self.draft_worker_class))
                if (
                    self.is_runner_class
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                ):
                    return ("seed", "any")
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return self.selfattrs.get(node.attr)
        return None

    def collect_aliases(self, assigns: list[ast.Assign | ast.AnnAssign]) -> None:
        """Bind every alias up front (for code that uses a name above its assignment)."""
        for _ in range(3):  # chains like `a = runner.model; b = a`
            self.self_assigns = []
            if not any([self.bind(node) for node in assigns]):
                break

    def bind(self, node: ast.Assign | ast.AnnAssign) -> bool:
        """`name = <ref>` makes `name` a reference; `self.x = <ref>` is remembered."""
        if node.value is None:
            return False
        origin = self.origin(node.value)
        if origin is None:
            return False
        changed = False
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and self.aliases.get(target.id) != origin:
                self.aliases[target.id] = origin
                changed = True
            elif (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and (target.attr != "model" or not self.is_runner_class)
            ):
                self.self_assigns.append((target.attr, origin))
        return changed

    # -- conditions -----------------------------------------------------------------------
    def resolve_stack(self, stack: Stack) -> tuple[tuple[Cond, ...], tuple[str, ...]]:
        """Turn the (test, negated) stack into condition trees and their source text."""
        conds: list[Cond] = []
        guards: list[str] = []
        for node, negated in stack:
            c = self.cond(node)
            text = ast.unparse(node)
            conds.append(("not", c) if negated else c)
            guards.append(f"not ({text})" if negated else text)
        return tuple(conds), tuple(guards)

    def cond(self, node: ast.expr) -> Cond:
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return (op, tuple(self.cond(v) for v in node.values))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ("not", self.cond(node.operand))
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name == "hasattr" and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
                origin = self.origin(node.args[0])
                if origin is not None:
                    return ("hasattr", origin, str(node.args[1].value))
            if (
                name == "callable"
                and len(node.args) == 1
                and isinstance(node.args[0], ast.Call)
                and dotted(node.args[0].func) == "getattr"
            ):
                return self.cond(
                    ast.Call(ast.Name("hasattr", ast.Load()), node.args[0].args[:2], [])
                )
            if isinstance(node.func, ast.Attribute) and not node.args and not node.keywords:
                return ("pred", node.func.attr)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left = node.left
            right = node.comparators[0]
            # `getattr(m, "x", None) is not None` tests for the attribute like hasattr does
            if (
                isinstance(left, ast.Call)
                and dotted(left.func) == "getattr"
                and len(left.args) == 3
                and isinstance(right, ast.Constant)
                and right.value is None
                and isinstance(node.ops[0], (ast.IsNot, ast.Is))
            ):
                probe = self.cond(ast.Call(ast.Name("hasattr", ast.Load()), left.args[:2], []))
                return probe if isinstance(node.ops[0], ast.IsNot) else ("not", probe)
            # `m.__class__.__name__ == "X"`: decided by the audited class itself
            if (
                isinstance(left, ast.Attribute)
                and left.attr == "__name__"
                and isinstance(left.value, ast.Attribute)
                and left.value.attr == "__class__"
                and isinstance(right, ast.Constant)
                and isinstance(right.value, str)
                and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
            ):
                origin = self.origin(left.value.value)
                if origin is not None:
                    test: Cond = ("classname", origin, right.value)
                    return test if isinstance(node.ops[0], ast.Eq) else ("not", test)
        if isinstance(node, ast.Attribute):
            return ("flag", node.attr)
        if isinstance(node, ast.Name):
            return ("flag", node.id)
        return ("other", ast.unparse(node))

    # -- walking --------------------------------------------------------------------------
    def stmts(self, body: list[ast.stmt], stack: Stack) -> None:
        for stmt in body:
            self.stmt(stmt, stack)
            if isinstance(stmt, ast.If) and not stmt.orelse and _exits_early(stmt.body):
                stack = (*stack, (stmt.test, True))

    def stmt(self, stmt: ast.stmt, stack: Stack) -> None:
        if isinstance(stmt, (ast.If, ast.While)):
            raising = (
                isinstance(stmt, ast.If)
                and isinstance(stmt.test, ast.UnaryOp)
                and isinstance(stmt.test.op, ast.Not)
                and _ends_in_raise(stmt.body)
            )
            self.expr(stmt.test, stack, hasattr_raises=raising)
            self.stmts(stmt.body, (*stack, (stmt.test, False)))
            self.stmts(stmt.orelse, (*stack, (stmt.test, True)))
            return
        if isinstance(stmt, ast.Assign):
            self.flag_assignment(stmt.targets, stmt.value, stack)
        for name, value in ast.iter_fields(stmt):
            if isinstance(value, list):
                if value and isinstance(value[0], ast.stmt):
                    self.stmts(value, stack)
                elif value and isinstance(value[0], ast.excepthandler):
                    # Handlers run only after something else failed: uses there are not
                    # what a launch needs (kinds get an -in-handler suffix, never required).
                    self.in_handler += 1
                    for handler in value:
                        self.stmts(handler.body, stack)
                    self.in_handler -= 1
                else:
                    for item in value:
                        if isinstance(item, ast.expr):
                            self.expr(item, stack)
                        elif isinstance(item, ast.withitem):
                            self.expr(item.context_expr, stack)
            elif isinstance(value, ast.expr) and name != "annotation" and name != "returns":
                self.expr(value, stack)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self.bind(stmt)  # aliases take effect in statement order

    def flag_assignment(self, targets: list[ast.expr], value: ast.expr, stack: Stack) -> None:
        """Remember where the wanted attributes become truthy (for `scan_flags` only: flags
        are looked up tree-wide on demand, so the consumer scan records none)."""
        if self.flag_names is None:
            return
        if isinstance(value, ast.Constant) and not value.value:
            return
        attrs = [
            t.attr for t in targets if isinstance(t, ast.Attribute) and t.attr in self.flag_names
        ]
        if attrs:
            conds = tuple(("not", self.cond(n)) if neg else self.cond(n) for n, neg in stack)
            for attr in attrs:
                self.out.flags.setdefault(attr, []).append(conds)

    def expr(self, node: ast.expr, stack: Stack, hasattr_raises: bool = False) -> None:
        if isinstance(node, ast.BoolOp):
            acc = stack
            negate = isinstance(node.op, ast.Or)
            for value in node.values:
                self.expr(value, acc, hasattr_raises)
                acc = (*acc, (value, negate))
            return
        if isinstance(node, ast.UnaryOp):
            self.expr(node.operand, stack, hasattr_raises)
            return
        if isinstance(node, ast.IfExp):
            self.expr(node.test, stack)
            self.expr(node.body, (*stack, (node.test, False)))
            self.expr(node.orelse, (*stack, (node.test, True)))
            return
        if isinstance(node, ast.Call):
            self.call(node, stack, hasattr_raises)
            return
        if isinstance(node, ast.Attribute):
            origin = self.origin(node.value)
            if origin is not None and isinstance(node.ctx, ast.Load):
                self.use(origin, node.attr, "read", node, stack)
                return
            self.expr(node.value, stack)
            return
        if isinstance(node, ast.Lambda):
            self.expr(node.body, stack)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, stack)
            elif isinstance(child, ast.comprehension):
                self.expr(child.iter, stack)
                for test in child.ifs:
                    self.expr(test, stack)
            elif isinstance(child, ast.keyword):
                self.expr(child.value, stack)

    def call(self, node: ast.Call, stack: Stack, hasattr_raises: bool) -> None:
        name = dotted(node.func)
        if (
            name in {"getattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
        ):
            origin = self.origin(node.args[0])
            if origin is not None and isinstance(node.args[1].value, str):
                if name == "hasattr":
                    kind = "hasattr-raise" if hasattr_raises else "hasattr"
                else:
                    kind = "getattr-default" if len(node.args) >= 3 else "getattr"
                self.use(origin, node.args[1].value, kind, node, stack)
                for extra in node.args[2:]:
                    self.expr(extra, stack)
                return
        func = node.func
        star = any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        )
        if isinstance(func, ast.Attribute):
            origin = self.origin(func.value)
            if origin is not None:
                self.use(
                    origin,
                    func.attr,
                    "call",
                    node,
                    stack,
                    n_args=len(node.args),
                    keywords=tuple(k.arg for k in node.keywords if k.arg),
                    star=star,
                )
            else:
                self.expr(func, stack)
        else:
            self.expr(func, stack)
        bindings: list[tuple[int | str, Origin]] = []
        for i, arg in enumerate(node.args):
            origin = self.origin(arg)
            if origin is not None:
                bindings.append((i, origin))
            else:
                self.expr(arg, stack)
        for kw in node.keywords:
            origin = self.origin(kw.value)
            if origin is not None and kw.arg:
                bindings.append((kw.arg, origin))
            else:
                self.expr(kw.value, stack)
        if bindings:
            callee = self.callee(func)
            if callee is not None:
                kept = tuple(b for b in bindings if self.only is None or b[1] == self.only)
                if kept:
                    conds, guards = self.resolve_stack(stack)
                    self.out.calls.append(
                        CallEdge(callee, kept, conds, guards, node.lineno, self.scope)
                    )

    def callee(self, func: ast.expr) -> str | None:
        if isinstance(func, ast.Name):
            if func.id in self.functions:
                return f"{self.module}.{func.id}"
            return self.imports.get(func.id)
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "self" and self.class_name:
                return f"{self.module}.{self.class_name}.{func.attr}"
            base = dotted(func.value)
            if base:
                head, _, rest = base.partition(".")
                if head in self.imports:
                    resolved = self.imports[head] + (f".{rest}" if rest else "")
                    return f"{resolved}.{func.attr}"
        return None

    def use(
        self,
        origin: Origin,
        attribute: str,
        kind: str,
        node: ast.expr,
        stack: Stack,
        n_args: int = 0,
        keywords: tuple[str, ...] = (),
        star: bool = False,
    ) -> None:
        if self.only is not None and origin != self.only:
            return
        if self.in_handler:
            kind = f"{kind}-in-handler"
        conds, guards = self.resolve_stack(stack)
        line = node.lineno
        code = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.out.uses.append(
            Use(
                origin,
                attribute,
                kind,
                line,
                code,
                conds,
                guards,
                self.scope,
                n_args,
                keywords,
                star,
            )
        )


def _assignments(fn: ast.AST) -> list[ast.Assign | ast.AnnAssign]:
    return [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign))]


def _function_nodes(
    tree: ast.Module,
) -> list[tuple[str | None, ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found: list[tuple[str | None, ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(body: list[ast.stmt], cls: ast.ClassDef | None) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((cls.name if cls else None, cls, stmt))
            elif isinstance(stmt, ast.ClassDef) and cls is None:
                visit(stmt.body, stmt)
            elif isinstance(stmt, (ast.If, ast.Try)):
                visit(stmt.body, cls)

    visit(tree.body, None)
    return found


def _class_traits(cls: ast.ClassDef | None) -> tuple[bool, bool]:
    """(is a ModelRunner, builds its runner as a draft worker)."""
    if cls is None:
        return False, False
    bases = [dotted(b) or "" for b in cls.bases]
    is_runner = cls.name.endswith("ModelRunner") or any(b.endswith("ModelRunner") for b in bases)
    init = next(
        (s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None
    )
    draft = "draft" in cls.name.lower() or (
        init is not None
        and any(
            isinstance(n, ast.keyword)
            and n.arg == "is_draft_worker"
            and isinstance(n.value, ast.Constant)
            and n.value.value is True
            for n in ast.walk(init)
        )
    )
    return is_runner, draft


def scan_module(
    tree: ast.Module, module: str, imports: dict[str, str], functions: set[str], source: str
) -> ConsumerFacts:
    """Every use of a model reference in one module, parameters left for summaries."""
    lines = source.splitlines()
    out = ConsumerFacts()
    by_class: dict[
        str | None, list[tuple[ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef]]
    ] = {}
    for cls_name, cls, fn in _function_nodes(tree):
        by_class.setdefault(cls_name, []).append((cls, fn))
    for cls_name, fns in by_class.items():
        cls = fns[0][0]
        is_runner, draft = _class_traits(cls)
        selfattrs: dict[str, Origin] = {}
        # Pass 1: attributes of self that hold a model reference, in any method of the class.
        for _, fn in fns:
            text = "\n".join(lines[fn.lineno - 1 : fn.end_lineno])
            if cls_name is None or not _SELF_REF_ASSIGN.search(text):
                continue
            scope = f"{module}.{cls_name}.{fn.name}" if cls_name else f"{module}.{fn.name}"
            probe = _Scanner(
                module,
                imports,
                functions,
                lines,
                scope,
                cls_name,
                is_runner,
                draft,
                {},
                {},
                ConsumerFacts(),
            )
            probe.collect_aliases(_assignments(fn))
            for attr, origin in probe.self_assigns:
                if origin[0] == "seed":
                    selfattrs.setdefault(attr, origin)
        # Pass 2: the uses, in functions whose text could hold a reference at all.
        needles = ("model", "runner", *selfattrs)
        for _, fn in fns:
            text = "\n".join(lines[fn.lineno - 1 : fn.end_lineno])
            if not any(n in text for n in needles):
                continue
            scope = f"{module}.{cls_name}.{fn.name}" if cls_name else f"{module}.{fn.name}"
            scanner = _Scanner(
                module,
                imports,
                functions,
                lines,
                scope,
                cls_name,
                is_runner,
                draft,
                selfattrs,
                {},
                out,
            )
            scanner.stmts(fn.body, ())
    return out


def function_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]


def find_function(
    tree: ast.Module, qualname: str
) -> tuple[ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """`Class.method` or `function` inside one module."""
    for cls_name, cls, fn in _function_nodes(tree):
        name = f"{cls_name}.{fn.name}" if cls_name else fn.name
        if name == qualname:
            return cls, fn
    return None


def scan_parameter(
    tree: ast.Module,
    module: str,
    imports: dict[str, str],
    functions: set[str],
    source: str,
    qualname: str,
    param: str,
) -> ConsumerFacts | None:
    """The uses of one parameter of one function, as if a caller passed a model reference in."""
    found = find_function(tree, qualname)
    if found is None:
        return None
    cls, fn = found
    if param not in function_params(fn) and param not in [a.arg for a in fn.args.kwonlyargs]:
        return None
    is_runner, draft = _class_traits(cls)
    origin: Origin = ("param", f"{module}.{qualname}", param)
    out = ConsumerFacts()
    scanner = _Scanner(
        module,
        imports,
        functions,
        source.splitlines(),
        f"{module}.{qualname}",
        cls.name if cls else None,
        is_runner,
        draft,
        {},
        {param: origin},
        out,
        only=origin,
    )
    scanner.collect_aliases(_assignments(fn))
    scanner.stmts(fn.body, ())
    return out


def scan_flags(
    tree: ast.Module,
    module: str,
    imports: dict[str, str],
    functions: set[str],
    source: str,
    names: frozenset[str],
) -> dict[str, list[tuple[Cond, ...]]]:
    """Where in one module the attributes `names` are set to something truthy, and under what.

    Walks statements only (no expressions), since only assignments and the tests enclosing
    them matter here.
    """
    out = ConsumerFacts()
    lines = source.splitlines()
    for cls_name, _cls, fn in _function_nodes(tree):
        scope = f"{module}.{cls_name}.{fn.name}" if cls_name else f"{module}.{fn.name}"
        scanner = _Scanner(
            module,
            imports,
            functions,
            lines,
            scope,
            cls_name,
            False,
            False,
            {},
            {},
            out,
            only=("flags",),
            flag_names=names,
        )
        _assignments_under(scanner, fn.body, ())
    return out.flags


def _assignments_under(scanner: _Scanner, body: list[ast.stmt], stack: Stack) -> None:
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            scanner.flag_assignment(stmt.targets, stmt.value, stack)
        elif isinstance(stmt, (ast.If, ast.While)):
            _assignments_under(scanner, stmt.body, (*stack, (stmt.test, False)))
            _assignments_under(scanner, stmt.orelse, (*stack, (stmt.test, True)))
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody):
                _assignments_under(scanner, block, stack)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            _assignments_under(scanner, stmt.body, stack)
        if isinstance(stmt, ast.If) and not stmt.orelse and _exits_early(stmt.body):
            stack = (*stack, (stmt.test, True))
