"""The model runner's own way to its pool: what it writes into its server args on the way,
and what its call of the pool's function hands it (`handed_on`).

Why: a release may set a figure the pool's arithmetic reads in the runner's start-up rather
than in the arithmetic or in the argument resolution: 0.5.3's `ModelRunner.initialize` sets
`max_mamba_cache_size` (from `--max-running-requests`, else 512, over the DP width) in an `if
self.is_hybrid_gdn:` block, and `profile_max_num_token` then multiplies it. Read without it,
a hybrid model's pool was "not read" (None times an int). The start-up is the runner's own
order: `__init__`'s statements, each `self.<method>(...)` of the runner entered where it is
called, up to the statement that calls the pool's own function; a statement on the way that
writes a server-args field the arithmetic reads is kept (`rules.py`) and run here, in order,
on the launch's flat store, as the tree would have run it. A figure the run leaves undecided
is not taken: the launch's own value stays (the value the reading had before this module),
and where the launch has none, `assumed` says where the tree may set it.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from eaglebug.checks.memory.reading import Flat, flat_path
from eaglebug.checks.memory.reading import run as run_reading
from eaglebug.checks.pyeval.values import FunctionSite, is_known
from eaglebug.checks.source import syntax
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import parsed_with
from eaglebug.checks.source.initfacts import dotted

if TYPE_CHECKING:
    from eaglebug.checks.memory.fit import Context
    from eaglebug.checks.memory.rules import FunctionSource

STARTUP = "=startup."  # the kept statements' names: `=startup.<method>:<line>`
_RUNNER = "ModelRunner"
_OWNERS = ("server_args", "self.server_args")


def written(statement: ast.AST) -> list[str]:
    """The server-args fields `statement` assigns (`self.server_args.x = ...`), in order; not
    one it also assigns on the runner itself (0.5.9's `self.kv_cache_dtype = torch...` beside
    `self.server_args.kv_cache_dtype = "fp8_e4m3"`): the flat store holds one value a name."""
    server: list[str] = []
    runner: set[str] = set()
    for node in ast.walk(statement):
        for target in syntax.assigned(node):
            if not isinstance(target, ast.Attribute):
                continue
            owner = ast.unparse(target.value)
            if owner == "self":
                runner.add(target.attr)
            elif owner in _OWNERS and target.attr not in server:
                server.append(target.attr)
    return [name for name in server if name not in runner]


def statements(tree: ast.Module, stops: Sequence[str]) -> list[tuple[str, ast.stmt]]:
    """The runner's start-up statements that write server-args fields, in the order it runs
    them, each with the method holding it; the walk ends at the first statement that calls
    one of `stops` (the pool's functions)."""
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == _RUNNER), None)
    if cls is None:
        return []
    methods = {
        n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    if "__init__" not in methods:
        return []
    out: list[tuple[str, ast.stmt]] = []
    entered: set[str] = set()

    def walk(name: str) -> bool:
        """True where the pool's call was reached (the walk ends)."""
        entered.add(name)
        for statement in methods[name].body:
            called = list(_self_calls(statement))
            if any(c in stops for c in called):
                return True
            for callee in called:
                if callee in methods and callee not in entered and walk(callee):
                    return True
            if written(statement):
                out.append((name, statement))
        return False

    walk("__init__")
    return out


def _self_calls(statement: ast.stmt) -> Iterator[str]:
    for node in ast.walk(statement):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
        ):
            yield node.func.attr


def source_text(statement: ast.stmt, lines: list[str]) -> str:
    """The statement's own lines, dedented (it is run as the body of a method of its own)."""
    return textwrap.dedent("".join(lines[statement.lineno - 1 : statement.end_lineno]))


def apply(ctx: Context, values: dict[str, object], assumed: list[str]) -> None:
    """Run the kept start-up statements on `values` in order; take each field they leave
    known, and say in `assumed` where one was left undecided."""
    for source in ctx.sources.functions:
        if source.qualname.startswith(STARTUP):
            _run(ctx, source, values, assumed)


def writer(ctx: Context, name: str) -> str | None:
    """Where the runner's start-up sets the server-args field `name` (the first kept
    statement that writes it), as `file:line`."""
    for source in ctx.sources.functions:
        if source.qualname.startswith(STARTUP) and name in written(ast.parse(source.text)):
            return f"{source.file}:{source.line}"
    return None


def _run(
    ctx: Context, source: FunctionSource, values: dict[str, object], assumed: list[str]
) -> None:
    body = textwrap.indent(source.text, "    ")
    try:
        node = ast.parse(f"def startup(self):\n{body}").body[0]
    except SyntaxError:
        return
    ast.increment_lineno(node, source.line - 2)  # the statement on its own line again
    assert isinstance(node, ast.FunctionDef)
    module, _ = module_name(source.file)
    site = FunctionSite(source.file, module, f"{_RUNNER}.startup", node, node.lineno)
    owner = f"{module}.{_RUNNER}"
    _, left = run_reading(
        ctx.index, site, owner, [], values, ctx.world(), frozenset(), ctx.path_classes(),
        None, ctx.roles(),
    )  # fmt: skip
    for field in written(node.body[0]) if node.body else ():
        value = left.get(field)
        if is_known(value):
            values[field] = value
        elif values.get(field) is None:  # nothing else gives it: the reading rests on this
            assumed.append(f"{source.file}:{source.line}: the runner may set {field} (undecided)")


def handed_on(ctx: Context, method: str) -> tuple[list[Flat], dict[str, Flat]]:
    """The arguments after the first (the GPU memory) that the runner's own call of `method`
    hands it from the server args, as paths of the flat store, positional and by keyword:
    0.5.3's `self.init_memory_pool(min_per_gpu_memory, server_args.max_running_requests,
    server_args.max_total_tokens)`, whose parameters default to None where the call is not
    read. Positional ones up to the first that is not such a path; the rest keep their
    defaults. Read once per tree: a launch's predictions (one per trial fraction and --tp)
    each ask."""
    kept: dict[str, tuple[list[Flat], dict[str, Flat]]] = ctx.index.kept("memory.handed", dict)
    if method not in kept:
        kept[method] = _call_arguments(ctx, method)
    return kept[method]


def _call_arguments(ctx: Context, method: str) -> tuple[list[Flat], dict[str, Flat]]:
    found = ctx.site(method)
    if found is None or found[1] is None:
        return [], {}
    parsed = parsed_with(ctx.index, found[0].rel, f".{method}(")
    if parsed is None:
        return [], {}
    near = syntax.lines_with(parsed.text, method)  # a call of it names it on one of its lines
    calls = [
        node
        for node in syntax.walk_over(parsed.tree, near)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and dotted(node.func.value) == "self"
    ]
    if len(calls) != 1:  # none, or several that may differ: the parameters' defaults
        return [], {}
    handed: list[Flat] = []
    for arg in calls[0].args[1:]:
        if (path := flat_path(arg)) is None:
            break
        handed.append(path)
    named = {
        k.arg: path
        for k in calls[0].keywords
        if k.arg is not None and (path := flat_path(k.value)) is not None
    }
    return handed, named
