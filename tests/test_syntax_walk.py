"""The engine's one syntax-tree walk (`eaglebug/checks/source/syntax.py`) yields exactly what
`ast.walk` yields, in the same order: every analysis that took the first match, or relied on
breadth-first order, answers as before."""

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
    return len(ours)


def test_the_same_nodes_in_the_same_order_on_real_source(sglang_0523: Path) -> None:
    walked = sum(
        _same(ast.parse((sglang_0523 / rel).read_bytes(), rel))
        for rel in RUNTIME_FILES
        if (sglang_0523 / rel).is_file()
    )
    assert walked > 20_000


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
