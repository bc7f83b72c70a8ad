"""The values a launch flag may take, as the tree's own parser lists them (`choices=`).

Where a variable sets a flag when the launch runs (`--kv-cache-dtype $D`), a check that needs a
value can still decide: a verdict that holds for every value the tree accepts rests on none of
them. The list is SGLang's: `parser.add_argument("--kv-cache-dtype", choices=[...])` (0.5.9),
or a field's `Arg(choices=KV_CACHE_DTYPE_CHOICES)` (0.5.2x), the expression evaluated by the one
evaluator in its module (a constant of `choices.py`, a list built from others).
"""

from __future__ import annotations

import ast
from typing import Any

from eaglebug.checks.launch.flags import FlagSpec
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import Top
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex

_MOST = 64  # more values than this is not a list to try one by one


def flag_choices(index: TreeIndex, spec: FlagSpec) -> tuple[str, ...]:
    """The values `spec`'s flag accepts, as text; () where the tree lists none (any text) or
    what it lists is not read here (a tree answer)."""
    return index.answer(
        f"flag_choices:{spec.file}:{spec.line}", tuple[str, ...], lambda: _read(index, spec)
    )


def _read(index: TreeIndex, spec: FlagSpec) -> tuple[str, ...]:
    parsed = index.parse_file(spec.file) if spec.file in index.entries else None
    if parsed is None:
        return ()
    expression = _choices_at(parsed.tree, spec.line)
    if expression is None:
        return ()
    try:
        value: Any = ast.literal_eval(expression)
    except ValueError:
        module = spec.file[:-3].replace("/", ".")
        value = Machine(Source.of(index)).evaluate(expression, module).value
    if isinstance(value, Top) or not isinstance(value, (list, tuple, set, frozenset)):
        return ()
    if len(value) > _MOST or not all(isinstance(v, str) for v in value):
        return ()
    return tuple(dict.fromkeys(value))


def _choices_at(tree: ast.Module, line: int) -> ast.expr | None:
    """The `choices=` expression of the flag declared at `line`: an `add_argument(...)` call,
    or a field's `Arg(...)` in its annotation."""
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) != line:
            continue
        calls: list[ast.Call] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            calls = [node] if node.func.attr == "add_argument" else []
        elif isinstance(node, ast.AnnAssign):
            calls = [
                n
                for n in ast.walk(node.annotation)
                if isinstance(n, ast.Call) and dotted(n.func) in {"Arg", "arg_utils.Arg"}
            ]
        for call in calls:
            found = next((k.value for k in call.keywords if k.arg == "choices"), None)
            if found is not None:
                return found
    return None
