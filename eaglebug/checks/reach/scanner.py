"""Walking one function body of the runtime, with the conditions in force at each node.

A *model reference* is an expression that evaluates to the model a ModelRunner holds:
`<something>runner.model`, `self.model` inside a ModelRunner, a local alias of either, an
attribute of `self` assigned from one, or a parameter that a caller passes one into. Every
attribute read or call on such a reference is a use (`uses.py`); each keeps the tests that
guard it, turned into conditions (`conditions.py`), so the audit can decide them later.
"""

from __future__ import annotations

import ast

from eaglebug.checks.reach.chains import raise_message, read_chain
from eaglebug.checks.reach.conditions import (
    And,
    ClassIs,
    Cond,
    Const,
    Flag,
    HasAttr,
    IsInstance,
    NoneTest,
    Not,
    Opaque,
    Or,
    Origin,
    Pred,
    Seed,
    negated,
)
from eaglebug.checks.reach.shapes import (
    ends_in_raise,
    exits_early,
    getattr_then_raise,
    hasattr_call,
    last_name,
    runner_role,
)
from eaglebug.checks.reach.uses import CallEdge, ConsumerFacts, Use, UseKind
from eaglebug.checks.source.classfacts import dotted

# While walking: the tests in force, each with whether it holds negated (else-branches, `or`).
Stack = tuple[tuple[ast.expr, bool], ...]


class FunctionScanner:
    """Walks one function body, recording uses of model references and calls passing them on."""

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
        self.self_assigns: list[tuple[str, Origin]] = []
        self.in_handler = 0
        self.chained: set[int] = set()  # `elif` links already recorded with their chain
        # `x = getattr(model, "a", None)` then `if x is None: raise`: ids of those getattrs
        self.getattr_raises: set[int] = set()

    # -- references -----------------------------------------------------------------------
    def origin(self, node: ast.expr) -> Origin | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            if node.attr == "model":
                runner = last_name(node.value)
                if runner and "runner" in runner.lower():
                    text = ast.unparse(node.value)
                    return Seed(runner_role(text, self.draft_worker_class))
                if (
                    self.is_runner_class
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                ):
                    return Seed("any")
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
        """Turn the (test, negated) stack into conditions and their source text."""
        conds: list[Cond] = []
        guards: list[str] = []
        for node, negate in stack:
            text = ast.unparse(node)
            conds.append(negated(self.cond(node), negate))
            guards.append(f"not ({text})" if negate else text)
        return tuple(conds), tuple(guards)

    def cond(self, node: ast.expr) -> Cond:
        """What a test reads, as far as the audit can decide it later."""
        if isinstance(node, ast.BoolOp):
            parts = tuple(self.cond(v) for v in node.values)
            return And(parts) if isinstance(node.op, ast.And) else Or(parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Not(self.cond(node.operand))
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name == "hasattr" and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
                origin = self.origin(node.args[0])
                if origin is not None:
                    return HasAttr(origin, str(node.args[1].value))
            if name == "isinstance" and len(node.args) == 2 and not node.keywords:
                test = self.isinstance_cond(node.args[0], node.args[1])
                if test is not None:
                    return test
            if (
                name == "callable"
                and len(node.args) == 1
                and isinstance(node.args[0], ast.Call)
                and dotted(node.args[0].func) == "getattr"
            ):
                return self.cond(hasattr_call(node.args[0].args))
            if isinstance(node.func, ast.Attribute) and not node.args and not node.keywords:
                return Pred(node.func.attr)
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
                probe = self.cond(hasattr_call(left.args))
                return probe if isinstance(node.ops[0], ast.IsNot) else Not(probe)
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
                    test = ClassIs(origin, right.value)
                    return test if isinstance(node.ops[0], ast.Eq) else Not(test)
            # `x is None` / `x is not None`: a model reference is never None; on a plain
            # name (a parameter) the caller's argument decides it
            if (
                isinstance(right, ast.Constant)
                and right.value is None
                and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            ):
                is_none: Cond | None = None
                if self.origin(left) is not None:
                    is_none = Const(False)
                elif isinstance(left, ast.Name):
                    is_none = NoneTest(left.id)
                if is_none is not None:
                    return is_none if isinstance(node.ops[0], ast.Is) else Not(is_none)
        if isinstance(node, ast.Attribute):
            return Flag(node.attr)
        if isinstance(node, ast.Name):
            return Const(True) if self.origin(node) is not None else Flag(node.id, True)
        return Opaque(ast.unparse(node))

    def isinstance_cond(self, subject: ast.expr, classes: ast.expr) -> Cond | None:
        """`isinstance(ref, P)` (or a tuple of classes), the classes resolved in this module;
        whether P is a runtime-checkable Protocol is decided at audit time."""
        origin = self.origin(subject)
        if origin is None:
            return None
        elts = classes.elts if isinstance(classes, ast.Tuple) else [classes]
        tests: list[Cond] = []
        for elt in elts:
            name = dotted(elt)
            if name is None:
                return None
            head, _, rest = name.partition(".")
            target = self.imports.get(head)
            resolved = (f"{target}.{rest}" if rest else target) if target else None
            tests.append(IsInstance(origin, resolved or f"{self.module}.{name}"))
        return tests[0] if len(tests) == 1 else Or(tuple(tests))

    # -- walking --------------------------------------------------------------------------
    def stmts(self, body: list[ast.stmt], stack: Stack) -> None:
        for i, stmt in enumerate(body):
            checked = getattr_then_raise(stmt, body[i + 1 :])
            if checked is not None:
                self.getattr_raises.add(id(checked))
            self.stmt(stmt, stack)
            if isinstance(stmt, ast.If) and not stmt.orelse and exits_early(stmt.body):
                stack = (*stack, (stmt.test, True))

    def stmt(self, stmt: ast.stmt, stack: Stack) -> None:
        if isinstance(stmt, (ast.If, ast.While)):
            raising = (
                isinstance(stmt, ast.If)
                and isinstance(stmt.test, ast.UnaryOp)
                and isinstance(stmt.test.op, ast.Not)
                and ends_in_raise(stmt.body)
            )
            if isinstance(stmt, ast.If) and id(stmt) not in self.chained:
                self.one_of(stmt, stack)
            self.expr(stmt.test, stack, hasattr_raises=raising)
            self.stmts(stmt.body, (*stack, (stmt.test, False)))
            self.stmts(stmt.orelse, (*stack, (stmt.test, True)))
            return
        for name in stmt._fields:  # ast.iter_fields, without its generator
            value = getattr(stmt, name, None)
            if isinstance(value, list):
                if value and isinstance(value[0], ast.stmt):
                    self.stmts(value, stack)
                elif value and isinstance(value[0], ast.excepthandler):
                    # Handlers run only after something else failed: uses there are not
                    # what a launch needs (see `Use.in_handler`).
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

    def expr(self, node: ast.expr, stack: Stack, hasattr_raises: bool = False) -> None:
        # Exact types, compared by identity, most frequent first: this runs for every node.
        if type(node) is ast.Name or type(node) is ast.Constant:
            return  # a leaf: no use of a reference is a bare name or a constant
        if type(node) is ast.Attribute:
            origin = self.origin(node.value)
            if origin is not None and isinstance(node.ctx, ast.Load):
                self.use(origin, node.attr, UseKind.READ, node, stack)
                return
            self.expr(node.value, stack)
            return
        if type(node) is ast.Call:
            self.call(node, stack, hasattr_raises)
            return
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
        if isinstance(node, ast.Lambda):
            self.expr(node.body, stack)
            return
        for name in node._fields:  # ast.iter_child_nodes, in its order, without generators
            field = getattr(node, name, None)
            if isinstance(field, list):
                for item in field:
                    self.child(item, stack)
            elif field is not None:
                self.child(field, stack)

    def child(self, child: object, stack: Stack) -> None:
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
                    kind = UseKind.HASATTR_RAISE if hasattr_raises else UseKind.HASATTR
                elif id(node) in self.getattr_raises:
                    kind = UseKind.GETATTR_RAISE
                else:
                    kind = UseKind.GETATTR_DEFAULT if len(node.args) >= 3 else UseKind.GETATTR
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
                    UseKind.CALL,
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
        others: list[tuple[int | str, ast.expr]] = []
        for i, arg in enumerate(node.args):
            origin = self.origin(arg)
            if origin is not None:
                bindings.append((i, origin))
            else:
                self.expr(arg, stack)
                others.append((i, arg))
        for kw in node.keywords:
            origin = self.origin(kw.value)
            if origin is not None and kw.arg:
                bindings.append((kw.arg, origin))
            else:
                self.expr(kw.value, stack)
                if kw.arg:
                    others.append((kw.arg, kw.value))
        if bindings:
            callee = self.callee(func)
            if callee is not None:
                kept = tuple(b for b in bindings if self.only is None or b[1] == self.only)
                if kept:
                    conds, guards = self.resolve_stack(stack)
                    args: list[tuple[int | str, Cond, Cond]] = [
                        (b[0], Const(True), Const(False)) for b in bindings if b not in kept
                    ]
                    args += [(b, *self.arg_conds(arg)) for b, arg in others]
                    self.out.calls.append(
                        CallEdge(callee, kept, conds, guards, node.lineno, self.scope, tuple(args))
                    )

    def arg_conds(self, arg: ast.expr) -> tuple[Cond, Cond]:
        """An argument as a test on the parameter it arrives in would read it."""
        if isinstance(arg, ast.Constant):
            return Const(bool(arg.value)), Const(arg.value is None)
        if isinstance(arg, ast.Name):
            return Flag(arg.id, True), NoneTest(arg.id)  # passed on: the caller's caller decides
        return self.cond(arg), Opaque(f"{ast.unparse(arg)} is None")

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

    def one_of(self, stmt: ast.If, stack: Stack) -> None:
        """Record an if/elif chain of hasattr tests on one reference that ends in a raise."""
        chain = read_chain(stmt, self.origin, self.cond)
        if chain is not None:
            self.chained.update(id(link) for link in chain.links[1:])
            attribute = " or ".join(name for name, _ in chain.alternatives)
            message = raise_message(chain.raised)
            self.use(chain.origin, attribute, UseKind.ONE_OF, chain.raised, stack,
                     one_of=chain.alternatives, message=message)  # fmt: skip

    def use(
        self,
        origin: Origin,
        attribute: str,
        kind: UseKind,
        node: ast.expr | ast.stmt,
        stack: Stack,
        n_args: int = 0,
        keywords: tuple[str, ...] = (),
        star: bool = False,
        one_of: tuple[tuple[str, Cond], ...] = (),
        message: str | None = None,
    ) -> None:
        if self.only is not None and origin != self.only:
            return
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
                in_handler=self.in_handler > 0,
                one_of=one_of,
                message=message,
            )
        )
