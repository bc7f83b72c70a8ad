"""The machine's raises, `try` blocks, loops and item writes (`machine.Machine` runs the
statements that reach here).

A `raise` or a failing `assert` is recorded with the tests on the way to it and the inputs they
read, and ends the function (a decided path), the path (an undecided one) or the whole run
(`Policy.stop_at_raise`, a definite raise). A `for` over a known sequence runs each item; one
over an unknown, or a `while`, is not run: what it assigns becomes unknown (`havoc`). An item
written or deleted changes a container the reading holds; one it cannot follow leaves the
container unknown (`change_item`).
"""

from __future__ import annotations

import ast
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval import flat
from eaglebug.checks.pyeval.protocol import Break, Continue, PathEnded, Returned, Stopped, Thrown
from eaglebug.checks.pyeval.state import Frame, Test, source_text
from eaglebug.checks.pyeval.values import (
    Instance,
    OneOf,
    Raised,
    Top,
    message_text,
    reads_of,
    truth,
)
from eaglebug.checks.source import syntax

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.machine import Machine


_DELETED: Any = object()  # `change_item` without a value: `del container[key]`


# -- items --------------------------------------------------------------------------------
def change_item(m: Machine, target: ast.Subscript, stmt: ast.stmt, value: Any = _DELETED) -> None:
    """`container[key] = value`, or `del container[key]` without a value. A dict or list the
    reading holds is changed in place where the key is known; at an unknown key any item may
    have changed, so the name or attribute the container was read from becomes unknown
    (another name holding it keeps the old items); a config.json's nested mapping is changed
    through its path (`flat.py`)."""
    container, key = m.expr(target.value), m.expr(target.slice)
    rel, line = m.stack[-1].rel, stmt.lineno
    deleted = value is _DELETED
    if isinstance(container, (dict, list)):
        if isinstance(key, (Top, OneOf)):
            how = "deleted" if deleted else "written"
            why = f"{rel}:{line}: an item {how} at an unknown key"
            if isinstance(target.value, (ast.Name, ast.Attribute)):  # else it keeps its items
                m.assign(target.value, Top(why, reads_of(key)), stmt, frozenset())
            return
        m.items.changing(container)
        with suppress(TypeError, IndexError, KeyError):
            if deleted:
                del container[key]
            else:
                container[key] = value
    elif deleted:
        if flat.as_mapping(m, container) is not None:
            flat.spoil(m, container, f"{rel}:{line}: a key of {container.path} deleted")
    else:
        flat.set_item(m, container, key, value, rel, line)


def forget(m: Machine, held_in: ast.expr, unknown: Top) -> None:
    """The local or attribute a container was read from holds `unknown` now: it was changed
    in a way the reading does not follow (another name holding it keeps the old items)."""
    frame = m.stack[-1]
    if isinstance(held_in, ast.Name) and held_in.id in frame.locals:
        frame.locals[held_in.id] = unknown
    elif isinstance(held_in, ast.Attribute):
        owner = m.expr(held_in.value)
        if isinstance(owner, Instance):
            m.write(owner, held_in.attr, unknown, frame.rel, held_in.lineno)


# -- returns -------------------------------------------------------------------------------
KEPT_RETURNS = 8  # heaps of paths that returned early kept apart at once; more are merged


def return_undecided(m: Machine, frame: Frame) -> None:
    """A `return` under an undecided test: the path runs the `finally` bodies it leaves
    through (innermost first), then its state is kept for the call's end (`Machine.invoke`
    merges it with the other paths'), and the path ends."""
    pending, frame.finals = frame.finals, []
    try:
        for final in reversed(pending):
            m.block(final)
    finally:
        frame.finals = pending
    frame.returned_by.update(*(t.reads | t.chosen_by for t in frame.tests if not t.definite))
    if len(frame.returned) >= KEPT_RETURNS:  # memory bounded: merged as they come
        frame.returned = [m.merged(frame.returned, frozenset(frame.returned_by))]
    frame.returned.append(m.heap)  # this path's state, written no more
    kept = m.items.current()  # its dicts and lists, copied: counted against the run's steps
    m.steps += sum(len(items) for _, items in kept.values()) // 16
    m.tick()
    frame.returned_items.append(kept)
    raise PathEnded


# -- raises --------------------------------------------------------------------------------
def raise_(m: Machine, stmt: ast.stmt, exc: ast.expr | None, msg: ast.expr | None) -> None:
    if m.policy.skip_raises:
        return
    kind, message = "Exception", None
    if isinstance(exc, ast.Call):
        kind = ast.unparse(exc.func)
        if exc.args:
            made = m.expr(exc.args[0])
            message = message_text(made)
    elif exc is not None:
        kind = ast.unparse(exc)
    elif msg is not None:
        made = m.expr(msg)
        message = message_text(made)
    kind = kind.rsplit(".", 1)[-1]
    record(m, stmt, kind, message, ())
    raise _end_after_raise(m, kind)


def check_assert(m: Machine, stmt: ast.Assert, test: ast.expr, msg: ast.expr | None) -> None:
    if m.policy.skip_raises:
        return
    value, reads = m.measured(test)
    told = truth(value)
    if told is True:
        return
    message = None
    if msg is not None:
        made = m.expr(msg)
        message = message_text(made)
    extra = (Test(f"not ({source_text(test)})", reads, told is False),)
    record(m, stmt, "AssertionError", message, extra)
    if told is False:
        raise _end_after_raise(m, "AssertionError")
    # undecided: the path where it holds goes on, on that assumption
    m.stack[-1].tests.append(Test(source_text(test), reads, False))


def try_(m: Machine, stmt: ast.Try) -> None:
    """A `try`: a raise recorded inside it that an `except` takes runs that handler; `finally`
    runs on every way out (a path that returns under an undecided test runs it first, as
    `Frame.finals`: its state is kept when it returns)."""
    frame = m.stack[-1]
    frame.in_try += bool(stmt.handlers)
    frame.finals.append(stmt.finalbody)
    try:
        try:
            try:
                m.block(stmt.body)
            finally:
                frame.in_try -= bool(stmt.handlers)
        except Thrown as thrown:
            caught = handler(stmt.handlers, thrown.kind)
            if caught is None:
                raise
            if caught.name:
                frame.locals[caught.name] = Top(f"{frame.rel}:{caught.lineno}: {thrown}")
            m.block(caught.body)
        else:
            m.block(stmt.orelse)
        finally:
            frame.finals.pop()
    except (Thrown, Returned, Break, Continue):
        m.block(stmt.finalbody)
        raise
    except PathEnded:  # a path that ended: one that returned ran the `finally` already
        raise
    m.block(stmt.finalbody)


def _end_after_raise(m: Machine, kind: str) -> Exception:
    frame = m.stack[-1]
    definite = all(f.definite() and not f.in_try for f in m.stack)
    if definite and m.policy.stop_at_raise and m.raised:
        return Stopped(m.raised[-1])
    if frame.definite() and not frame.in_try:
        frame.ended_by = kind
        return Returned()
    return PathEnded()


def record(
    m: Machine, stmt: ast.stmt, kind: str, message: str | None, extra: tuple[Test, ...]
) -> None:
    if not m.policy.record_raises:
        return
    tests = [t for f in m.stack for t in f.tests] + list(extra)
    reads: set[str] = set()
    for t in tests:
        reads |= t.reads
    frame = m.stack[-1]
    definite = all(t.definite for t in tests) and not any(f.in_try for f in m.stack)
    m.raised.append(
        Raised(
            rel=frame.rel,
            line=stmt.lineno,
            function=frame.site.name if frame.site is not None else "<module>",
            kind=kind,
            message=message,
            reads=frozenset(reads),
            condition=" and ".join(f"({t.text})" for t in tests[-4:]),
            definite=definite,
        )
    )


# -- loops ---------------------------------------------------------------------------------
def for_loop(m: Machine, stmt: ast.For, target: ast.expr, iterable: ast.expr) -> None:
    items = m.expr(iterable)
    known = isinstance(items, (list, tuple, range, set, frozenset, dict, str))
    if not known or len(items) > m.budget.loop:
        why = why_of(items) if not known else f"more than {m.budget.loop} iterations"
        havoc(m, stmt, f"a loop over {why}")
        return
    sequence = list(items.keys()) if isinstance(items, dict) else list(items)
    frame = m.stack[-1]
    frame.loops.append(len(frame.tests))
    try:
        for item in sequence:
            m.assign(target, item, stmt, frozenset())
            try:
                m.block(stmt.body)
            except Break:
                break
            except Continue:
                continue
        else:
            m.block(stmt.orelse)
    finally:
        frame.loops.pop()


def havoc(m: Machine, stmt: ast.stmt, why: str) -> None:
    """A loop the reading does not run: what it assigns becomes unknown, and a loop that
    may leave early (`return`, `raise`, `break`) makes the rest of the function a path
    that is not definite."""
    frame = m.stack[-1]
    where = f"{frame.rel}:{stmt.lineno}"
    m.assume(f"{where}: not run: {why}")
    unknown = Top(f"{where}: set in {why}")
    for node in syntax.walk(stmt):
        targets = syntax.assigned(node)
        if isinstance(node, ast.For):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"append", "extend", "update", "add", "insert", "pop"}
        ):
            targets = [node.func.value]
        for target in targets:
            for name in syntax.walk(target):
                if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                    frame.locals[name.id] = unknown
            if isinstance(target, ast.Name) and target.id in frame.locals:
                frame.locals[target.id] = unknown
            if isinstance(target, ast.Attribute) and isinstance(target.ctx, ast.Store):
                owner = m.expr(target.value)
                if isinstance(owner, Instance):
                    m.write(owner, target.attr, unknown, frame.rel, stmt.lineno)
    if any(isinstance(n, (ast.Return, ast.Raise, ast.Break)) for n in syntax.statements(stmt)):
        frame.tests.append(Test(f"<{why} at line {stmt.lineno}>", frozenset(), False))


def why_of(value: Any) -> str:
    if isinstance(value, Top):
        return value.why
    if isinstance(value, OneOf):
        return "one of " + ", ".join(repr(v) for v in value.values[:4])
    return type(value).__name__


# The builtins' exceptions by what an `except` names them (its bases up to `Exception`).
_BASES = {
    "ValueError": ("ValueError", "Exception", "BaseException"),
    "TypeError": ("TypeError", "Exception", "BaseException"),
    "KeyError": ("KeyError", "LookupError", "Exception", "BaseException"),
    "ZeroDivisionError": ("ZeroDivisionError", "ArithmeticError", "Exception", "BaseException"),
    "OverflowError": ("OverflowError", "ArithmeticError", "Exception", "BaseException"),
}


def handler(handlers: list[ast.ExceptHandler], kind: str) -> ast.ExceptHandler | None:
    """The first `except` that takes a builtin's `kind` of exception (a bare one takes all)."""
    names = _BASES.get(kind, (kind, "Exception", "BaseException"))
    for candidate in handlers:
        if candidate.type is None:
            return candidate
        kinds = candidate.type.elts if isinstance(candidate.type, ast.Tuple) else [candidate.type]
        if any(ast.unparse(k).rsplit(".", 1)[-1] in names for k in kinds):
            return candidate
    return None
