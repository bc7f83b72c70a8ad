"""Walking a syntax tree: `ast.walk`'s nodes in `ast.walk`'s order, in about half its time.

Why: the engine's analyses walk syntax trees some 450,000 nodes per cold preflight of the seed
launch, and `ast.walk` spends most of each step in two generators (`iter_child_nodes` over
`iter_fields`). This is the same breadth-first walk with the child loop written out: every
field of every node, each node a child of its field or of its field's list, in that order.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator

_AST = ast.AST


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and every node under it, breadth first, as `ast.walk` yields them."""
    todo = deque([node])
    take, put = todo.popleft, todo.append
    while todo:
        node = take()
        for name in node._fields:
            try:
                value = getattr(node, name)
            except AttributeError:  # an optional field a hand-built node never set
                continue
            if isinstance(value, _AST):
                put(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        put(item)
        yield node
