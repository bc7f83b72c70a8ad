"""The flags the tree hands on as environment variables, and which variable each becomes.

Why: a reading of the memory arithmetic runs where the server-args code already ran, so a
variable that code sets from a flag (`--mamba-ssm-dtype` -> SGLANG_MAMBA_SSM_DTYPE, which the
mamba state size reads) must be in the reading's environment with the flag's value, or the
field's default where the launch gives none (`fit.Context.world`). Which flags those are is
read from the tree's server-args files, in both spellings the releases use:
`envs.NAME.set(cfg.field)` (0.5.9 on) and `os.environ["NAME"] = self.field` (0.5.3).
"""

from __future__ import annotations

import ast

from eaglebug.checks.launch.flags import flag_files
from eaglebug.checks.memory.reading import flat_path
from eaglebug.checks.source import syntax
from eaglebug.checks.source.index import TreeIndex, parsed_with
from eaglebug.checks.source.initfacts import dotted


def flag_env(index: TreeIndex) -> dict[str, tuple[str, str]]:
    """Field -> (variable, file:line) of each flag the server-args code hands on. A tree
    answer; only the files whose bytes hold such a statement are parsed."""
    return index.answer("memory_flag_env", dict[str, tuple[str, str]], lambda: _flag_env(index))


def _flag_env(index: TreeIndex) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for rel in sorted(flag_files(index)):
        parsed = parsed_with(index, rel, "envs.", "os.environ[")
        if parsed is None:
            continue
        # Both spellings name `envs` or `environ` on a line of the statement: the statements
        # without either (nearly all of a server-args file) are not walked.
        for node in syntax.walk_over(
            parsed.tree, syntax.lines_with(parsed.text, "envs", "environ")
        ):
            handed = _handed_to_env(node)
            if handed is not None:
                field, variable = handed
                out.setdefault(field, (variable, f"{rel}:{getattr(node, 'lineno', 0)}"))
    return out


def _handed_to_env(node: ast.AST) -> tuple[str, str] | None:
    """(field, variable) of `envs.VARIABLE.set(<root>.field)` or
    `os.environ["VARIABLE"] = <root>.field`, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "set"
        and isinstance(node.func.value, ast.Attribute)
        and dotted(node.func.value.value) == "envs"
        and len(node.args) == 1
    ):
        variable, value = node.func.value.attr, node.args[0]
    elif (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Subscript)
        and dotted(node.targets[0].value) == "os.environ"
        and isinstance(node.targets[0].slice, ast.Constant)
        and isinstance(node.targets[0].slice.value, str)
    ):
        variable, value = node.targets[0].slice.value, node.value
    else:
        return None
    path = flat_path(value)  # a field of the server args itself, not a deeper path
    if path is None or not path.path or "." in path.path:
        return None
    return path.path, variable
