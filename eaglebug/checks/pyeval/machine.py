"""The one evaluator of SGLang's Python: statements, calls, branches and the run's result.

`Machine.run(function, args, kwargs)` evaluates a function of the audited tree (never imported)
on the values a caller hands in, and returns a `Result`: its value, the raises it would reach,
what it had to assume, and whether a limit cut it short. The rules every reading shares:

- A test that cannot be decided runs both branches on copies of the run's state; what they
  wrote merges (`OneOf` where they differ). A branch that returns or raises ends that path;
  the rest of the function runs on the other path, under a test that is not definite. Nothing
  unknown is ever taken as true or false, and each undecided test is said in `assumed`.
- A raise (or a failing assert) is recorded with the tests that lead to it and the inputs they
  read; `definite` only when every test on the way was decided. `Policy.stop_at_raise` ends the
  run at a definite raise (a launch that stops); otherwise the raising call ends and the caller
  goes on, so one run finds every refusal (argument resolution).
- Every limit is `budget.Budget`; reaching one ends the run with `incomplete` set.
- Callers extend it with plug-ins (`intrinsics.Intrinsics`: what a call means) and observers
  (`Observer`: what a run did: assignments, writes, calls, divisions), never by subclassing.
Expressions are in `exprs.py`, names and attributes in `objects.py`, calls in `calls.py`, raises,
returns and loops in `flow.py`, `if` in `branches.py`; what a caller hands in and gets back is in
`protocol.py`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from eaglebug.checks.pyeval import branches, calls, exprs, flow, objects
from eaglebug.checks.pyeval.budget import DEFAULT, Budget, Exhausted
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.items import Items
from eaglebug.checks.pyeval.protocol import (
    Break,
    Continue,
    Observer,
    PathEnded,
    Policy,
    Result,
    Returned,
    Stopped,
)
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import (
    Call,
    Frame,
    Heap,
    Write,
    merge_paths,
)
from eaglebug.checks.pyeval.values import (
    UNSET,
    ClassVal,
    FunctionSite,
    FuncVal,
    Instance,
    OneOf,
    Raised,
    Top,
    one_of,
    reads_of,
)

# How many objects a merge of paths' heaps walks per step of the run's budget (a function of
# thousands of early returns on a large heap is cut short, said incomplete, not run for minutes).
_MERGE_OBJECTS_PER_STEP = 16


class Machine:
    def __init__(
        self,
        source: Source,
        intrinsics: Intrinsics | None = None,
        *,
        policy: Policy | None = None,
        budget: Budget = DEFAULT,
        observer: Observer | None = None,
    ) -> None:
        self.source = source
        self.intrinsics = intrinsics or Intrinsics()
        self.policy = policy or Policy()
        self.budget = budget
        self.observer = observer or Observer()
        self.heap = Heap()
        self.items = Items()  # dicts and lists changed on the open undecided paths
        self.narrowed = False  # the last branch run went on only where a path under it ended
        self.stack: list[Frame] = []
        self.raised: list[Raised] = []
        self.assumed: list[str] = []
        self.steps = 0
        self.forks = 0
        self.reads: set[str] = set()
        self.module_values: dict[tuple[str, str], Any] = {}  # (module, name) -> value
        self.class_values: dict[tuple[str, str], Any] = {}  # (class, attribute) -> value
        self._resolving: set[tuple[str, str]] = set()

    # -- inputs --------------------------------------------------------------------------------
    def bag(
        self,
        fields: dict[str, Any],
        cls: ClassVal | None = None,
        *,
        track: bool = False,
        closed: bool = True,
    ) -> Instance:
        """An input object whose attributes are the dotted keys of `fields`; `closed`: complete
        (a key it lacks is an attribute it does not have; else an unknown one); `track`: its
        reads are recorded."""
        oid = self.heap.new(fields)
        if closed:
            self.heap.closed.add(oid)
        if track:
            self.heap.tracked.add(oid)
        return Instance(oid, cls)

    def new_object(self, cls: ClassVal | None, attrs: dict[str, Any] | None = None) -> Instance:
        """An object of the run whose other attributes are not known (a `self` whose
        `__init__` did not run here)."""
        return Instance(self.heap.new(attrs), cls)

    def fields(self, obj: Instance) -> dict[str, Any]:
        return self.heap.objects[obj.oid]

    def assume(self, note: str) -> None:
        if note not in self.assumed:
            self.assumed.append(note)

    # -- entry ---------------------------------------------------------------------------------
    def run(
        self, function: FuncVal | FunctionSite, args: list[Any], kwargs: dict[str, Any]
    ) -> Result:
        fn = function if isinstance(function, FuncVal) else FuncVal(function)
        try:
            value = self.invoke(fn, args, kwargs)
        except Stopped as stop:
            return self.result(Top(f"raised {stop.raised.kind}"))
        except Exhausted as limit:
            return self.result(Top(f"incomplete: {limit.what}"), incomplete=limit.what)
        except RecursionError:
            where = fn.site.where
            return self.result(Top("nested too deep"), incomplete=f"{where}: nested too deep")
        return self.result(value)

    def evaluate(self, node: ast.expr, module: str) -> Result:
        """One expression of a module, at its top level (a constant, a field's default)."""
        table = self.source.table(module)
        rel = table.rel if table is not None else module.replace(".", "/") + ".py"
        frame = Frame(None, module, rel, table)
        self.stack.append(frame)
        try:
            value = exprs.expr(self, node)
        except (Stopped, PathEnded):
            value = Top("raised")
        except Exhausted as limit:
            return self.result(Top(f"incomplete: {limit.what}"), incomplete=limit.what)
        except RecursionError:
            return self.result(Top("nested too deep"), incomplete="nested too deep")
        finally:
            self.stack.pop()
        return self.result(value)

    def call_within(self, fn: FuncVal, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A call made by a plug-in on the run's behalf: its value, unknown where it raised.
        Its raises are not the run's: they are said in `assumed`, and the run goes on."""
        mark = len(self.raised)
        try:
            return self.invoke(fn, args, kwargs)
        except Stopped as stop:
            return Top(f"{fn.site.qualname} raised {stop.raised.kind}")
        except (PathEnded, Returned):
            return Top(f"{fn.site.qualname} raised")
        finally:
            for raised in self.raised[mark:]:
                self.assume(f"{raised.rel}:{raised.line}: {fn.site.qualname} raises {raised.kind}")
            del self.raised[mark:]

    def expr(self, node: ast.expr) -> Any:
        """An expression in the current frame; what it raises goes on up (the plug-ins and the
        resolver evaluate through here: they know the machine, not the expression module)."""
        return exprs.expr(self, node)

    def evaluate_here(self, node: ast.expr) -> Any:
        """An expression in the current frame (a caller's own `module_frame`)."""
        try:
            return exprs.expr(self, node)
        except (Stopped, PathEnded, Returned):
            return Top("raised")
        except Exhausted as limit:
            return Top(f"incomplete: {limit.what}")

    def result(self, value: Any, incomplete: str | None = None) -> Result:
        return Result(value, tuple(self.raised), tuple(self.assumed), incomplete)

    # -- calls ---------------------------------------------------------------------------------
    def invoke(
        self,
        fn: FuncVal,
        args: list[Any],
        kwargs: dict[str, Any],
        reads: dict[int | str, frozenset[str]] | None = None,
    ) -> Any:
        site = fn.site
        node = self.source.node_of(site)
        if node is None:
            return Top(f"{site.where}: {site.qualname} is defined on several paths")
        if site.node is None:
            site = FunctionSite(site.rel, site.module, site.qualname, node)
            fn = FuncVal(site, fn.owner, fn.bound, fn.kind, fn.closure)
        if len(self.stack) >= self.budget.depth:
            return Top(f"{site.where}: calls nest deeper than {self.budget.depth}")
        if any(f.site is not None and f.site == site for f in self.stack):
            return Top(f"{site.where}: {site.qualname} calls itself")
        table = self.source.table(site.module)
        frame = Frame(site, site.module, site.rel, table, owner=fn.owner, bound=fn.bound)
        frame.locals.update(dict(fn.closure))
        calls.bind(self, frame, fn, args, kwargs, reads or {})
        self.stack.append(frame)
        went_on = True  # a path reached the end of the function (or its definite return)
        try:
            if isinstance(node, ast.Lambda):
                return exprs.expr(self, node.body)
            self.block(node.body)
        except Returned:
            pass
        except PathEnded:  # every path of the function ended in an undecided branch
            went_on = False
        finally:
            self.stack.pop()
        if frame.returned and frame.ended_by is None:
            # What the caller sees is the state of whichever path returned: an early return
            # under an undecided test (`if dtype != "nvfp4": return`) keeps the state it had.
            chosen_by = frozenset(frame.returned_by)
            self.heap = self.merged(frame.returned + ([self.heap] if went_on else []), chosen_by)
            self.items.returned(frame.returned_items, went_on, self.budget.alternatives, chosen_by)
            self.forget_unsized(chosen_by, frame.returns)
        ended: list[Any] = []
        if frame.ended_by is not None:  # the call raises on its definite path
            ended = [Top(f"{site.where}: {site.qualname} raised {frame.ended_by}")]
        if not frame.returns and not ended:
            return None
        return one_of(
            [*frame.returns, *ended], self.budget.alternatives, frozenset(frame.returned_by)
        )

    # -- statements ----------------------------------------------------------------------------
    def merged(self, heaps: list[Heap], chosen_by: frozenset[str] = frozenset()) -> Heap:
        """The paths' heaps as one, each merge counted against the run's steps."""
        merged, walked = merge_paths(heaps, self.budget.alternatives, chosen_by)
        self.steps += walked // _MERGE_OBJECTS_PER_STEP
        self.tick()
        return merged

    def forget_unsized(self, chosen_by: frozenset[str], values: list[Any] | None = None) -> None:
        """After a join: what holds a list the paths left of different lengths is unknown."""
        stores = (self.module_values, self.class_values)
        walked = self.items.forget_unsized(self.stack, self.heap, chosen_by, values, stores)
        self.steps += walked // _MERGE_OBJECTS_PER_STEP

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.budget.steps:
            frame = self.stack[-1] if self.stack else None
            where = f" at {frame.rel} in {frame.name}" if frame else ""
            raise Exhausted(f"more than {self.budget.steps} steps{where}")

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.tick()
            self.observer.on_statement(self.stack[-1], stmt)
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        frame = self.stack[-1]
        match stmt:
            case ast.Expr(value=value):
                exprs.expr(self, value)
            case ast.Assign(targets=targets, value=value):
                result, read = self.measured(value)
                for target in targets:
                    self.assign(target, result, stmt, read)
            case ast.AnnAssign(target=target, value=value) if value is not None:
                result, read = self.measured(value)
                self.assign(target, result, stmt, read)
            case ast.AugAssign(target=target, op=op, value=value):
                before = exprs.expr(self, _as_load(target))
                after = exprs.binop_node(self, ast.BinOp(target, op, value), before)
                self.assign(target, after, stmt, frozenset(), before)
            case ast.If(test=test, body=body, orelse=orelse):
                branches.branch(self, test, body, orelse)
            case ast.Return(value=value):
                frame.returns.append(exprs.expr(self, value) if value is not None else None)
                self.observer.on_return(frame, frame.returns[-1])
                if frame.definite():
                    raise Returned
                flow.return_undecided(self, frame)
            case ast.Raise(exc=exc):
                flow.raise_(self, stmt, exc, None)
            case ast.Assert(test=test, msg=msg):
                flow.check_assert(self, stmt, test, msg)
            case ast.Try():
                flow.try_(self, stmt)
            case ast.For(target=target, iter=iterable):
                flow.for_loop(self, stmt, target, iterable)
            case ast.While() | ast.AsyncFor():
                flow.havoc(self, stmt, "a while loop" if isinstance(stmt, ast.While) else "a loop")
            case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name):
                site = FunctionSite(frame.rel, frame.module, f"{frame.name}.<locals>.{name}", stmt)
                frame.locals[name] = FuncVal(site, closure=tuple(frame.locals.items()))
            case ast.ClassDef(name=name):
                frame.locals[name] = Top(f"{frame.rel}:{stmt.lineno}: a class defined in a body")
            case ast.ImportFrom(module=module, level=level, names=aliases):
                base = _relative(frame.module, frame.rel, level, module)
                for alias in aliases:  # a function's import binds a local name
                    if alias.name != "*":
                        dotted = f"{base}.{alias.name}"
                        frame.locals[alias.asname or alias.name] = self.resolve_dotted(dotted)
            case ast.Import(names=aliases):
                for alias in aliases:
                    local = alias.asname or alias.name.split(".", 1)[0]
                    frame.locals[local] = self.resolve_dotted(alias.name if alias.asname else local)
            case ast.With(items=items, body=body) | ast.AsyncWith(items=items, body=body):
                for item in items:
                    entered = exprs.expr(self, item.context_expr)
                    if item.optional_vars is not None:
                        why = f"{frame.rel}:{stmt.lineno}: what a `with` gives"
                        self.assign(
                            item.optional_vars, Top(why, reads_of(entered)), stmt, frozenset()
                        )
                self.block(body)
            case ast.Break() | ast.Continue() if frame.loops:
                if all(test.definite for test in frame.tests[frame.loops[-1] :]):
                    raise Break if isinstance(stmt, ast.Break) else Continue
                # leaving the loop on an undecided path: that path's iteration ends here
                self.assume(f"{frame.rel}:{stmt.lineno}: undecided {type(stmt).__name__.lower()}")
                raise PathEnded
            case ast.Delete(targets=targets):
                for target in targets:
                    if isinstance(target, ast.Name):
                        frame.locals.pop(target.id, None)
                    elif isinstance(target, ast.Subscript):
                        flow.change_item(self, target, stmt)
            case _:
                pass  # pass, global, nonlocal, break / continue outside an unrolled loop

    def measured(self, node: ast.expr) -> tuple[Any, frozenset[str]]:
        """The value of `node` and the inputs it read (the enclosing expression reads them too)."""
        outer = self.reads
        self.reads = set()
        try:
            value = exprs.expr(self, node)
            return value, frozenset(self.reads)
        finally:
            outer |= self.reads
            self.reads = outer

    def assign(
        self,
        target: ast.expr,
        value: Any,
        stmt: ast.stmt,
        read: frozenset[str],
        before: Any = UNSET,
    ) -> None:
        frame = self.stack[-1]
        match target:
            case ast.Name(id=name):
                frame.locals[name] = value
                frame.local_reads[name] = read
                self.observer.on_assign(frame, name, value, stmt, before)
            case ast.Attribute(value=base, attr=attr):
                owner = exprs.expr(self, base)
                self.observer.on_store(target, value, stmt, frame)
                if isinstance(owner, Instance):
                    self.write(owner, attr, value, frame.rel, stmt.lineno)
                    self.observer.on_field(frame, owner, owner.key(attr), value, stmt, before)
            case ast.Subscript():
                flow.change_item(self, target, stmt, value)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                for element, part in zip(elts, self.unpack(value, len(elts), stmt), strict=True):
                    if isinstance(element, ast.Starred):
                        self.assign(element.value, part, stmt, read)
                    else:
                        self.assign(element, part, stmt, read)
            case _:
                pass

    def unpack(self, value: Any, count: int, stmt: ast.stmt) -> list[Any]:
        if isinstance(value, OneOf) and all(
            isinstance(v, (tuple, list)) and len(v) == count for v in value.values
        ):
            return [
                one_of([v[i] for v in value.values], self.budget.alternatives) for i in range(count)
            ]
        if isinstance(value, (tuple, list)) and len(value) == count:
            return list(value)
        frame = self.stack[-1]
        why = value if isinstance(value, Top) else Top(f"{frame.rel}:{stmt.lineno}: unpacked")
        return [why] * count

    def write(self, obj: Instance, attr: str, value: Any, rel: str, line: int) -> None:
        key = obj.key(attr)
        self.heap.set(obj.oid, key, value)
        self.heap.writes[(obj.oid, key)] = Write(value, rel, line)
        self.observer.on_write(obj, key, value, rel, line)

    # -- names ---------------------------------------------------------------------------------
    @contextmanager
    def module_frame(self, module: str) -> Iterator[Frame]:
        table = self.source.table(module)
        rel = table.rel if table is not None else ""
        frame = Frame(None, module, rel, table)
        self.stack.append(frame)
        try:
            yield frame
        finally:
            self.stack.pop()

    def resolve(self, module: str, name: str, hops: int = 0) -> Any:
        """A top-level name of a module of the tree: its function, class, value (evaluated at
        import, once per run), or what its import brings in."""
        return objects.resolve(self, module, name, hops)

    def resolve_dotted(self, dotted: str, hops: int = 0) -> Any:
        return objects.resolve_dotted(self, dotted, hops)


def _as_load(target: ast.expr) -> ast.expr:
    copy = ast.fix_missing_locations(ast.parse(ast.unparse(target), mode="eval").body)
    return ast.copy_location(copy, target)


def _relative(module: str, rel: str, level: int, target: str | None) -> str:
    from eaglebug.checks.source.classfacts import resolve_relative

    return resolve_relative(module, rel.endswith("__init__.py"), level, target)


Factory = Callable[[], Machine]


# What callers import from here: the machine and what they agree on with it.
__all__ = ["Call", "Machine", "Observer", "PathEnded", "Policy", "Result", "Returned", "Stopped"]
