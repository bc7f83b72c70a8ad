"""What the audited SGLang does when a speculative launch names no draft model.

Read from the tree's argument handling: every `if <args>.speculative_draft_model_path is None:`
in `server_args.py` and `arg_groups/` with what its body does (raise, with SGLang's message, or
set the draft path to the target's, for the target architectures its enclosing
`model_arch in [...]` lists), the algorithms it applies to (an enclosing
`speculative_algorithm in (...)` test, or the handler that `SpeculativeAlgorithm.
handle_server_args` dispatches the algorithm to), and the fallback when nothing sets it:
`ModelConfig.from_server_args(model_path=model_path or <args>.model_path)`, the target.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.flags import flag_files
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex, parsed_with
from eaglebug.checks.speculative.algorithms import AlgorithmFacts, algorithm_facts

_FIELD = "speculative_draft_model_path"
_MODEL_CONFIG = "sglang/srt/configs/model_config.py"


@dataclass(frozen=True)
class DraftPathRule:
    """One `speculative_draft_model_path is None` branch of the tree."""

    algorithms: tuple[str, ...]
    raises: str | None  # SGLang's message, when it refuses
    # target architectures that get the target's path (() for every one); None: not set
    defaults_for: tuple[str, ...] | None
    read_from: str  # file:line of the branch
    conditional: bool = False  # it raises or sets only under a condition not read here


@dataclass(frozen=True)
class DraftPathRules:
    rules: tuple[DraftPathRule, ...]
    fallback: str | None  # file:line where a missing draft path becomes the target's

    def for_algorithm(self, algorithm: str) -> list[DraftPathRule]:
        return [r for r in self.rules if algorithm in r.algorithms]


def draft_path_rules(index: TreeIndex) -> DraftPathRules:
    """This tree's handling of a missing draft path (a tree answer)."""
    return index.answer("draft_path_rules", DraftPathRules, lambda: _read(index))


def _message(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(v.value) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
            for v in node.values
            if isinstance(v, (ast.Constant, ast.FormattedValue))
        )
    return None


def _strings(node: ast.expr) -> tuple[str, ...] | None:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(values) == len(node.elts) and all(isinstance(v, str) for v in values):
            return tuple(str(v) for v in values)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    return None


def _compare(test: ast.expr, name: str) -> tuple[str, ...] | None:
    """`<x>.<name> in (...)` / `<x>.<name> == "A"`, or `name in [...]`: the strings."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [_compare(v, name) for v in test.values]
        if all(p is not None for p in parts):
            return tuple(s for p in parts if p for s in p)
        return None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left = dotted(test.left) or ""
    if left != name and not left.endswith("." + name):
        return None
    if isinstance(test.ops[0], (ast.In, ast.Eq)):
        return _strings(test.comparators[0])
    return None


def _outcome(body: list[ast.stmt]) -> tuple[str | None, bool, bool]:
    """(the message it raises, whether it sets the draft path, whether either happens only
    under a further condition) for a branch body; only its own statements decide."""
    for stmt in body:
        if isinstance(stmt, ast.Raise) and isinstance(stmt.exc, ast.Call) and stmt.exc.args:
            return _message(stmt.exc.args[0]) or ast.unparse(stmt.exc.args[0]), False, False
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == _FIELD for t in stmt.targets
        ):
            return None, True, False
        if (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and any(k.arg == _FIELD for k in stmt.value.keywords)
        ):
            return None, True, False
    nested = any(
        isinstance(n, ast.Raise) or (isinstance(n, ast.keyword) and n.arg == _FIELD)
        for stmt in body
        for n in syntax.walk(stmt)
    )
    return None, False, nested


def _dispatch(index: TreeIndex, algo: AlgorithmFacts) -> dict[str, tuple[str, ...]]:
    """handler function name -> the algorithms `handle_server_args` sends to it."""
    if algo.source is None:
        return {}
    parsed = index.parse_file(algo.source)
    if parsed is None:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for node in syntax.statements(parsed.tree):
        if isinstance(node, ast.FunctionDef) and node.name == "handle_server_args":
            _walk_chain(node.body, algo, out, set(algo.members))
    return out


def _walk_chain(
    body: list[ast.stmt], algo: AlgorithmFacts, out: dict[str, tuple[str, ...]], left: set[str]
) -> None:
    for stmt in body:
        if not isinstance(stmt, ast.If):
            continue
        test_members = _predicate_members(stmt.test, algo)
        if test_members is None:
            continue
        chosen = left & test_members
        for inner in stmt.body:
            if isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Call):
                name = dotted(inner.value.func)
                if name:
                    out[name] = tuple(sorted(chosen))
                break
        _walk_chain(stmt.orelse, algo, out, left - test_members)


def _predicate_members(test: ast.expr, algo: AlgorithmFacts) -> set[str] | None:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [_predicate_members(v, algo) for v in test.values]
        if any(p is None for p in parts):
            return None
        return set().union(*(p for p in parts if p is not None))
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and not test.args:
        members = algo.predicates.get(test.func.attr)
        return set(members) if members is not None else None
    return None


def _read(index: TreeIndex) -> DraftPathRules:
    algo = algorithm_facts(index)
    handlers = _dispatch(index, algo)
    rules: list[DraftPathRule] = []
    for rel in sorted(flag_files(index)):
        parsed = parsed_with(index, rel, f"{_FIELD} is None")
        if parsed is None:
            continue
        rules.extend(_rules_in(parsed.tree, rel, handlers, algo))
    return DraftPathRules(tuple(rules), _fallback(index))


def _rules_in(
    tree: ast.Module, rel: str, handlers: dict[str, tuple[str, ...]], algo: AlgorithmFacts
) -> list[DraftPathRule]:
    found: list[DraftPathRule] = []

    def visit(node: ast.AST, algorithms: set[str] | None, archs: tuple[str, ...] | None) -> None:
        if isinstance(node, ast.FunctionDef):
            served = handlers.get(node.name)
            algorithms = set(served) if served is not None else algorithms
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            if test.endswith(f"{_FIELD} is None"):
                raises, sets, conditional = _outcome(node.body)
                if algorithms and (raises is not None or sets or conditional):
                    found.append(
                        DraftPathRule(
                            tuple(sorted(algorithms)),
                            raises,
                            (archs or ()) if sets else None,
                            f"{rel}:{node.lineno}",
                            conditional,
                        )
                    )
            named = _compare(node.test, "speculative_algorithm")
            if named is not None:
                chosen = {algo.canonical(n) for n in named if _known(algo, n)}
                for item in node.body:
                    visit(item, chosen if algorithms is None else algorithms & chosen, archs)
                for item in node.orelse:
                    visit(item, algorithms, archs)
                return
            listed = _compare(node.test, "model_arch")
            if listed is not None:
                for stmt in node.body:
                    visit(stmt, algorithms, listed)
                for stmt in node.orelse:
                    visit(stmt, algorithms, archs)
                return
        for child in ast.iter_child_nodes(node):
            visit(child, algorithms, archs)

    visit(tree, None, None)
    return found


def _known(algo: AlgorithmFacts, name: str) -> bool:
    try:
        algo.canonical(name)
    except InputError:  # not a member of this tree's enum
        return False
    return True


def _fallback(index: TreeIndex) -> str | None:
    """Where `model_path=model_path or <args>.model_path` makes a missing path the target's."""
    parsed = index.parse_file(_MODEL_CONFIG) if _MODEL_CONFIG in index.entries else None
    if parsed is None:
        return None
    for node in syntax.walk(parsed.tree):
        if not isinstance(node, ast.keyword) or node.arg != "model_path":
            continue
        value = node.value
        if (
            isinstance(value, ast.BoolOp)
            and isinstance(value.op, ast.Or)
            and ast.unparse(value.values[0]) == "model_path"
            and ast.unparse(value.values[-1]).endswith(".model_path")
        ):
            return f"{_MODEL_CONFIG}:{value.lineno}"
    return None
