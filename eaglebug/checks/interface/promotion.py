"""How the tree rewrites the launch's `--speculative-algorithm` from the draft's architecture.

sglang 0.5.23's `arg_groups/speculative_hook.py` turns NEXTN or EAGLE with a Gemma4 assistant
draft into FROZEN_KV_MTP (and refuses EAGLE3 with one). The audit must then run under the
algorithm the server will run. The rewrite is read from the tree: a function taking both
`speculative_algorithm` and `speculative_draft_model_path` whose branches test the algorithm's
spelling and a flag set from the draft config's `architectures`, and return a spelling or raise.
Nothing here names an architecture or an algorithm: they are the function's own constants.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from eaglebug.checks.reach.chains import raise_message
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.facts import RUNTIME
from eaglebug.checks.source.index import TreeIndex

_PARAMS = {"speculative_algorithm", "speculative_draft_model_path"}


@dataclass(frozen=True)
class Rewrite:
    """One branch of the tree's rewrite: what it maps, for which draft architectures."""

    when_algorithms: tuple[str, ...]  # the launch spellings the branch tests for
    draft_architectures: tuple[str, ...]  # the draft flag's architectures; () for any draft
    to: str | None  # the algorithm it returns; None when it raises
    read_from: str  # file:line of the return or raise
    message: str | None = None  # the raise's text


def rewrites(index: TreeIndex) -> tuple[Rewrite, ...]:
    """The tree's rewrites that depend on the draft's architecture (a tree answer)."""
    return index.answer("algorithm-rewrites", tuple[Rewrite, ...], lambda: _rewrites(index))


def promoted(index: TreeIndex, algorithm: str, draft_class: str | None) -> Rewrite | None:
    """The rewrite SGLang applies to `algorithm` (as launched) for this draft class, if any."""
    if draft_class is None:
        return None
    arch = draft_class.rsplit(".", 1)[-1]
    for rewrite in rewrites(index):
        if algorithm.upper() in rewrite.when_algorithms and arch in rewrite.draft_architectures:
            return rewrite
    return None


def _rewrites(index: TreeIndex) -> tuple[Rewrite, ...]:
    found: list[Rewrite] = []
    for rel in index.entries:
        if not rel.startswith(RUNTIME) or "speculative" not in rel.rsplit("/", 1)[-1]:
            continue
        parsed = index.parse_file(rel)
        if parsed is None or "speculative_draft_model_path" not in parsed.text:
            continue
        for node in parsed.tree.body:
            if (
                isinstance(node, ast.FunctionDef)
                and {a.arg for a in (*node.args.args, *node.args.kwonlyargs)} >= _PARAMS
            ):
                found.extend(_read(rel, node))
    return tuple(found)


def _read(rel: str, fn: ast.FunctionDef) -> list[Rewrite]:
    flags: dict[str, tuple[str, ...]] = {}  # name -> architectures it is true for
    for node in syntax.statements(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            archs = _architectures(node.value)
            if isinstance(target, ast.Name) and archs:
                flags[target.id] = archs
    out: list[Rewrite] = []

    def walk(stmts: list[ast.stmt], algorithms: tuple[str, ...], archs: tuple[str, ...]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                tested, flag = _test(stmt.test, flags)
                walk(stmt.body, tested or algorithms, flag or archs)
            elif isinstance(stmt, ast.Return) and archs and algorithms:
                value = stmt.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    out.append(Rewrite(algorithms, archs, value.value, f"{rel}:{stmt.lineno}"))
            elif isinstance(stmt, ast.Raise) and archs and algorithms:
                text = raise_message(stmt)
                out.append(Rewrite(algorithms, archs, None, f"{rel}:{stmt.lineno}", text))

    walk(fn.body, (), ())
    return out


def _architectures(value: ast.expr) -> tuple[str, ...]:
    """`any(arch in ("A", "B") for arch in ...)` -> ("A", "B")."""
    if (
        isinstance(value, ast.Call)
        and dotted(value.func) == "any"
        and len(value.args) == 1
        and isinstance(value.args[0], ast.GeneratorExp)
    ):
        test = value.args[0].elt
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.ops[0], ast.In)
            and isinstance(test.comparators[0], (ast.Tuple, ast.List, ast.Set))
        ):
            return tuple(
                e.value
                for e in test.comparators[0].elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return ()


def _test(
    test: ast.expr, flags: dict[str, tuple[str, ...]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(algorithm spellings a test requires one of, architectures of a flag it requires)."""
    if isinstance(test, ast.Name) and test.id in flags:
        return (), flags[test.id]
    if isinstance(test, ast.BoolOp):
        parts = [_test(v, flags) for v in test.values]
        algorithms = tuple(a for p in parts for a in p[0])
        archs = tuple(a for p in parts for a in p[1])
        if isinstance(test.op, ast.And):
            return algorithms, archs
        return (algorithms, ()) if not archs else ((), ())
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.left, ast.Name)
        and test.left.id == "speculative_algorithm"
        and isinstance(test.comparators[0], ast.Constant)
        and isinstance(test.comparators[0].value, str)
    ):
        return (test.comparators[0].value.upper(),), ()
    return (), ()
