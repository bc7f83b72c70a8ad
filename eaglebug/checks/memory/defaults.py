"""What the tree defaults a field to, where the launch does not say: the server-args classes'
`name: T = default` (0.5.23's `Arg(..., fallback=...)` too), a class body's literal field
defaults, and a constructor's literal parameter defaults (`self.x = x` with `x=None`), read
with `ast` (a default written as arithmetic of literals, `8 * 1024`, through the evaluator's
operators).
"""

from __future__ import annotations

import ast

from eaglebug.checks.pyeval import ops
from eaglebug.checks.pyeval.budget import Budget
from eaglebug.checks.pyeval.values import is_known
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import class_string
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.initfacts import self_assignment

ARGS_FILES = ("sglang/srt/server_args.py",)


_ARGS_FOLDER = "sglang/srt/arg_groups/fields/"


def server_defaults(index: TreeIndex) -> dict[str, object]:
    """`name: T = default` of the server-args classes (0.5.9's `ServerArgs`, 0.5.23's field
    groups): what a flag the launch does not give is, for the arithmetic."""
    out: dict[str, object] = {}
    rels = [r for r in sorted(index.entries) if r in ARGS_FILES or r.startswith(_ARGS_FOLDER)]
    for rel in rels:
        parsed = index.parse_file(rel)
        if parsed is None:
            continue
        for cls in parsed.tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            # A nested namespace (0.5.23: `_NS_PATH = "exec.mamba"`; 0.5.17: the field's own
            # `NS("exec.mamba")`) is read as `get_exec().mamba.x`: its fields under the path
            # below the top-level bag too.
            shared = (class_string(cls, "_NS_PATH") or "").partition(".")[2]
            for stmt in cls.body:
                if not (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.value is not None
                ):
                    continue
                inner = _namespace(stmt.annotation) or shared
                # 0.5.23's `Arg(..., fallback=0.8)` is what an unset field answers; a None
                # default is the field's value (the flat store drops it where the caller
                # gives the object's parts: `cuda_graph_config.decode.max_bs`).
                value = _literal(stmt.value)
                if value is None:
                    value = _fallback(stmt.annotation)
                if value is None or isinstance(value, (bool, int, float, str)):
                    out.setdefault(stmt.target.id, value)
                    if inner:
                        out.setdefault(f"{inner}.{stmt.target.id}", value)
    return out


def _fallback(annotation: ast.expr) -> object:
    """The `fallback=` of a field's `Arg(...)` metadata (`A[Optional[float], Arg(...)]`)."""
    for node in syntax.walk(annotation):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Arg":
            for keyword in node.keywords:
                if keyword.arg == "fallback":
                    return _literal(keyword.value)
    return None


def _namespace(annotation: ast.expr) -> str:
    """The path below the top-level bag of a field's `NS("exec.mamba")` metadata (`mamba`)."""
    for node in syntax.walk(annotation):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "NS"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            return node.args[0].value.partition(".")[2]
    return ""


def _literal(node: ast.expr) -> object:
    """A literal default (`0.88`, `"auto"`, `-1`, `1 << 20`); None when not one."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _arithmetic(node)
    return value


def _arithmetic(node: ast.expr) -> object:
    """A default written as arithmetic of literals (`8 * 1024`)."""
    if isinstance(node, ast.BinOp):
        left, right = _literal(node.left), _literal(node.right)
        if isinstance(left, (int, float)) and isinstance(right, (int, float)):
            made = ops.binop(node.op, left, right, Budget(), "a field default")
            return made if is_known(made) else None
    return None


def field_defaults(tree: ast.Module) -> dict[str, dict[str, object]]:
    """A class body's `name: T = <literal>` (a dataclass's field defaults: the configurator's
    `extra_mamba_cache_bytes_per_req: int = 0`), by class."""
    out: dict[str, dict[str, object]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, (bool, int, float, str))
            ):
                out.setdefault(cls.name, {})[stmt.target.id] = stmt.value.value
    return out


def constructor_defaults(tree: ast.Module, name: str) -> dict[str, object]:
    """`self.x = x` in class `name`'s `__init__` where the parameter `x` has a literal default
    (`req_to_token_pool: Optional[ReqToTokenPool] = None`): the field as the target's worker,
    which passes none of them, leaves it (the draft's worker passes the target's pools)."""
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == name):
            continue
        init = next(
            (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
        )
        if init is None:
            return {}
        spec = init.args
        positional = [*spec.posonlyargs, *spec.args]
        tail = positional[len(positional) - len(spec.defaults) :]
        given = dict(zip([a.arg for a in tail], spec.defaults, strict=True))
        given.update(
            {a.arg: d for a, d in zip(spec.kwonlyargs, spec.kw_defaults, strict=True) if d}
        )
        out: dict[str, object] = {}
        for stmt in init.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name):
                attr = self_assignment(stmt)
                default = given.get(stmt.value.id)
                if attr is not None and isinstance(default, ast.Constant):
                    out[attr] = default.value
        return out
    return {}
