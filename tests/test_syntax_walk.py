"""The engine's one syntax-tree walk (`eaglebug/checks/source/syntax.py`) yields exactly what
`ast.walk` yields, in the same order: every analysis that took the first match, or relied on
breadth-first order, answers as before. Its statement walk (`statements`) yields exactly the
statements among them, in that order, having visited no expression."""

from __future__ import annotations

import ast
from pathlib import Path

from eaglebug.checks.source import syntax

RUNTIME_FILES = (
    "sglang/srt/server_args.py",
    "sglang/srt/model_executor/model_runner.py",
    "sglang/srt/models/deepseek_v2.py",
    "sglang/srt/speculative/eagle_worker.py",
)


def _same(tree: ast.AST) -> int:
    ours, theirs = list(syntax.walk(tree)), list(ast.walk(tree))
    assert [id(n) for n in ours] == [id(n) for n in theirs]
    statements = [id(n) for n in theirs if isinstance(n, ast.stmt)]
    assert [id(n) for n in syntax.statements(tree)] == statements
    return len(ours)


def _every_function_and_class(tree: ast.AST) -> int:
    """Each definition's own statements (an analysis walks one method), as `ast.walk`'s."""
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    for node in defs:
        expected = [id(n) for n in ast.walk(node) if isinstance(n, ast.stmt)]
        assert [id(n) for n in syntax.statements(node)] == expected
    return len(defs)


def test_the_same_nodes_in_the_same_order_on_real_source(sglang_0523: Path) -> None:
    trees = [
        ast.parse((sglang_0523 / rel).read_bytes(), rel)
        for rel in RUNTIME_FILES
        if (sglang_0523 / rel).is_file()
    ]
    assert sum(_same(tree) for tree in trees) > 20_000
    assert sum(_every_function_and_class(tree) for tree in trees) > 200


def test_statements_visit_no_expression() -> None:
    """What makes the statement walk cheap: it never reads an expression's fields (here, a
    node whose every expression field raises when read)."""

    class Poisoned(ast.Name):
        @property
        def ctx(self) -> ast.expr_context:
            raise AssertionError("an expression was visited")

    tree = ast.parse("if a:\n    b = c(d)\nelse:\n    e()\n")
    call = tree.body[0].orelse[0].value  # type: ignore[attr-defined]
    call.func = Poisoned(id="e")
    assert [type(n).__name__ for n in syntax.statements(tree)] == ["If", "Assign", "Expr"]


def test_hand_built_nodes_and_every_syntax_form() -> None:
    # A node built without its optional fields (as an analysis may build one), a subtree, and
    # the forms whose children sit in lists of lists or beside non-node values.
    _same(ast.Call(func=ast.Name(id="f", ctx=ast.Load()), args=[], keywords=[]))
    _same(ast.BinOp(left=ast.Constant(1), op=ast.Add(), right=ast.Constant(2)))
    source = (
        "import a.b as c\n"
        "@d(e)\nclass K(B, metaclass=M):\n    x: int = 1\n"
        "    async def f(self, /, a, *b, c=1, **d) -> None:\n"
        "        async with g() as (h, i):\n            pass\n"
        "        return [j async for j in k if j] or {l: m for l, m in n}\n"
        "match p:\n    case {'q': [r, *s]} | Point(x=0) if t:\n        pass\n"
        "try:\n    u\nexcept* (V, W) as e:\n    raise X from e\n"
        "y = lambda *a: f'{a!r:>{w}}' if a else (yield)\n"
    )
    tree = ast.parse(source)
    _same(tree)
    _same(tree.body[1])
    _every_function_and_class(tree)
    # Statements in `except*` clauses and `case` blocks sit a level deeper than their
    # neighbours' (under the clause): breadth-first order must still match.
    nested = ast.parse(
        "try:\n    a = 1\nexcept E:\n    b = 2\n    try:\n        c = 3\n    finally:\n"
        "        d = 4\nelse:\n    f = 5\nmatch g:\n    case 1:\n        h = 6\n"
        "    case _:\n        while i:\n            j = 7\n        else:\n            k = 8\n"
        "for l in m:\n    n = 9\n"
    )
    assert _same(nested) and len(list(syntax.statements(nested))) == 14


_SHARED = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)


def _over_is_the_walk_pruned(tree: ast.AST, text: str, name: str) -> int:
    """`walk_over` yields, in `walk`'s order, `walk`'s nodes whose lines (or none, for a
    node without a position) include one that spells `name`, and each node named `name`."""
    lines = syntax.lines_with(text, name)
    assert list(lines) == [i for i, line in enumerate(text.splitlines(), 1) if name in line]
    # (contexts and operators are shared objects, met all over the tree: left out)
    ours = [id(n) for n in syntax.walk_over(tree, lines) if not isinstance(n, _SHARED)]
    kept = set(ours)
    assert ours == [id(n) for n in syntax.walk(tree) if id(n) in kept]  # walk's order
    named = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
    assert all(id(n) in kept for n in named)
    return len(named)


def test_the_pruned_walk_keeps_every_node_its_lines_name(sglang_0523: Path) -> None:
    """The memory check's reading of the flags the tree hands on as variables walks only the
    statements that name `envs` or `environ` (`memory/envflags.py`)."""
    rel = "sglang/srt/server_args.py"
    text = (sglang_0523 / rel).read_text()
    tree = ast.parse(text)
    assert _over_is_the_walk_pruned(tree, text, "envs") >= 4
    small = "x = [\n    envs.A.get(),\n]\nclass K:\n    def f(self):\n        return 1\n"
    small += "    def g(self):\n        envs.B.set(\n            self.b)\n"
    assert _over_is_the_walk_pruned(ast.parse(small), small, "envs") == 2
    pruned = {type(n).__name__ for n in syntax.walk_over(ast.parse(small), (2, 9))}
    assert "Return" not in pruned and "Constant" not in pruned  # `f`'s body was not walked
