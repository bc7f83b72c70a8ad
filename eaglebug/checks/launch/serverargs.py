"""The tree's own `ServerArgs` methods, found by name: what `from_cli_args` renames (0.5.9:
`args.tp_size = args.tensor_parallel_size`), and any method the checks run on a launch."""

from __future__ import annotations

import ast

from eaglebug.checks.source.index import TreeIndex


def cli_renames(index: TreeIndex) -> tuple[tuple[str, str], ...]:
    """(field, argparse dest) for each `args.field = args.dest` in `from_cli_args`."""
    return index.answer("cli_renames", tuple[tuple[str, str], ...], lambda: _cli_renames(index))


def _cli_renames(index: TreeIndex) -> tuple[tuple[str, str], ...]:
    method = server_args_method(index, "from_cli_args")
    if method is None:
        return ()
    out: list[tuple[str, str]] = []
    for stmt in method.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(target := stmt.targets[0], ast.Attribute)
            and isinstance(stmt.value, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and isinstance(stmt.value.value, ast.Name)
            and target.value.id == stmt.value.value.id
        ):
            out.append((target.attr, stmt.value.attr))
    return tuple(out)


def server_args_method(index: TreeIndex, name: str) -> ast.FunctionDef | None:
    rel = "sglang/srt/server_args.py"
    parsed = index.parse_file(rel) if rel in index.entries else None
    for cls in parsed.tree.body if parsed else ():
        if isinstance(cls, ast.ClassDef) and cls.name == "ServerArgs":
            for stmt in cls.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                    return stmt
    return None
