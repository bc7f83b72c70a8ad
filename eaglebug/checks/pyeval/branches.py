"""An `if`: a decided test runs its branch; an undecided one runs both, kept apart, then merged.

Each path starts from the state before the test (the heap forked copy on write, the locals
copied, the dicts and lists changed in place given back: `items.py`) and the test narrows what
it names on each side (`narrow.py`). A path that ends (a `return`, a raise) leaves the rest of
the function to the other, under a test that is not definite; where both go on, what they left
is merged (an attribute written differently is a `OneOf`). The branch is said in `assumed`
unless both ways left the same state and nothing rests on it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from eaglebug.checks.pyeval.budget import Exhausted
from eaglebug.checks.pyeval.flow import why_of
from eaglebug.checks.pyeval.narrow import narrow
from eaglebug.checks.pyeval.protocol import PathEnded, Thrown, hears_events
from eaglebug.checks.pyeval.state import (
    Frame,
    Test,
    merge_heaps,
    merge_locals,
    same_bindings,
    source_text,
)
from eaglebug.checks.pyeval.values import reads_of, truth

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.machine import Machine


def branch(m: Machine, test: ast.expr, body: list[ast.stmt], orelse: list[ast.stmt]) -> None:
    frame = m.stack[-1]
    value, reads = m.measured(test)
    told = truth(value)
    text = source_text(test)
    if told is not None:
        taken, other = (body, orelse) if told else (orelse, body)
        said = text if told else f"not ({text})"
        if _ends(other):  # the rest of the function runs because the test went this way
            frame.tests.append(Test(said, reads, True))
        if guarded(m, Test(said, reads, True), taken):
            raise PathEnded  # the branch taken ended this path (inside an undecided one)
        _went_on_under(frame, m.narrowed, said, reads)
        return
    chosen_by = reads | reads_of(value)  # what chose the path: the test's reads, and its value's
    note, mark = (
        f"{frame.rel}:{test.lineno}: undecided: {text} ({why_of(value)})",
        len(m.assumed),
    )
    m.forks += 1
    if m.forks > m.budget.forks:
        raise Exhausted(f"more than {m.budget.forks} undecided branches")
    before, raised = dict(frame.locals), len(m.raised)
    heap, local, local_reads = m.heap.copy(), dict(frame.locals), dict(frame.local_reads)
    narrow(m, test, True)
    m.items.open()
    try:
        ended_body = guarded(m, Test(text, reads, False, chosen_by), body)
    finally:
        body_items = m.items.close(undo=True)
    body_narrowed = m.narrowed
    body_state = (m.heap, frame.locals, frame.local_reads)
    m.heap, frame.locals, frame.local_reads = heap, local, local_reads
    narrow(m, test, False)
    m.items.open()
    try:
        ended_else = guarded(m, Test(f"not ({text})", reads, False, chosen_by), orelse)
    finally:
        else_items = m.items.close(undo=False)
    else_narrowed = m.narrowed
    limit = m.budget.alternatives
    changed = m.items.join(body_items, else_items, ended_body, ended_else, limit, chosen_by)
    # A branch whose two ways leave the same state (a log line on rank 0) decides nothing
    # the run goes on with, unless a raise may happen under it or the observer hears what
    # the run does there (a call site): no verdict rests on it, so it is not said.
    quiet = not (ended_body or ended_else or body_state[0].owned or m.heap.owned)
    quiet = quiet and len(m.raised) == raised and not hears_events(m.observer)
    unbound = same_bindings(body_state[1], before) and same_bindings(frame.locals, before)
    quiet = quiet and unbound and not changed
    if not quiet and note not in m.assumed:
        m.assumed.insert(mark, note)
    if ended_body and ended_else:
        raise PathEnded
    if ended_body:  # only the else path goes on: the rest of the function assumes it
        frame.tests.append(Test(f"not ({text})", reads, False, chosen_by))
        return
    if ended_else:
        frame.tests.append(Test(text, reads, False, chosen_by))
        m.heap, frame.locals, frame.local_reads = body_state
        return
    _went_on_under(frame, body_narrowed or else_narrowed, text, reads)
    m.heap = merge_heaps(body_state[0], m.heap, limit, chosen_by)
    frame.locals = merge_locals(body_state[1], frame.locals, limit, chosen_by)
    m.forget_unsized(chosen_by)
    for name in frame.locals:
        joined = body_state[2].get(name, frozenset()) | frame.local_reads.get(name, frozenset())
        frame.local_reads[name] = joined | (
            reads if name in m.source.stored(body, orelse) else frozenset()
        )


def guarded(m: Machine, test: Test, body: list[ast.stmt]) -> bool:
    """Run a branch under `test`; True when every path of it ended."""
    frame = m.stack[-1]
    depth = len(frame.tests)
    frame.tests.append(test)
    m.narrowed = False
    try:
        m.block(body)
    except PathEnded:
        return True
    except Thrown:
        if not test.definite:  # on an undecided path: that path ends there
            return True
        raise
    finally:
        # A path under it that ended (an inner `if b: return`) leaves the rest running only
        # where it did not: what follows the branch is not definite (`narrowed`).
        m.narrowed = any(not t.definite for t in frame.tests[depth + 1 :])
        del frame.tests[depth:]
    return False


def _went_on_under(frame: Frame, narrowed: bool, text: str, reads: frozenset[str]) -> None:
    if narrowed:
        frame.tests.append(Test(f"not every path under ({text}) goes on", reads, False))


def _ends(body: list[ast.stmt]) -> bool:
    return any(isinstance(stmt, (ast.Return, ast.Raise)) for stmt in body)
