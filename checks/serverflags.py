"""The launch flags an SGLang tree accepts, read statically from its own source.

Two shapes occur across releases: explicit `parser.add_argument("--model-path", "--model", ...)`
calls in `server_args.py` (0.5.9), and dataclass fields annotated `A[T, Arg(aliases=[...])]`
under `arg_groups/fields/` that a helper turns into flags (0.5.23: `model_path` becomes
`--model-path`). Both are read with `ast`, so a flag the tree does not know can be reported,
and a renamed one is never silently ignored.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from eaglebug.checks.classfacts import dotted
from eaglebug.checks.index import TreeIndex

# argparse actions that take no value on the command line.
_NO_VALUE_ACTIONS = frozenset(
    {"store_true", "store_false", "store_const", "count", "help", "version", "append_const"}
)
_FLAG_FILES = ("sglang/srt/server_args.py",)
_FLAG_FOLDERS = ("sglang/srt/arg_groups/",)


@dataclass(frozen=True)
class FlagSpec:
    options: tuple[str, ...]  # every spelling, e.g. ("--tensor-parallel-size", "--tp-size")
    dest: str
    nargs: str  # "0" (a switch), "1", "?", "*" or "+"
    file: str
    line: int
    value_type: str | None = None  # "int" | "float" when argparse converts the value


@dataclass(frozen=True)
class ServeFrontEnd:
    """What `sglang serve` does to argv before the server's parser sees it (sglang/cli/serve.py)."""

    positional_model: bool  # `sglang serve MODEL ...` means --model-path MODEL
    model_type_flag: bool  # `--model-type auto|llm|diffusion` is taken by serve itself


def serve_front_end(index: TreeIndex) -> ServeFrontEnd:
    rel = "sglang/cli/serve.py"
    if rel not in index.entries:
        return ServeFrontEnd(False, False)
    try:
        text = (index.tree.root / rel).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ServeFrontEnd(False, False)
    return ServeFrontEnd(
        "def _normalize_positional_model_path" in text, "def _extract_model_type_override" in text
    )


def _value_type(node: ast.expr | None) -> str | None:
    text = ast.unparse(node) if node is not None else ""
    for name in ("int", "float"):
        if text in {name, f"Optional[{name}]", f"{name} | None", f"List[{name}]", f"list[{name}]"}:
            return name
    return None


def _nargs_of(action: str | None, nargs: object, is_bool: bool = False) -> str:
    if action in _NO_VALUE_ACTIONS or (action is None and is_bool and nargs is None):
        return "0"
    if action is not None and "BooleanOptional" in action:
        return "0"
    if isinstance(nargs, int):
        return "1" if nargs == 1 else "+"
    if isinstance(nargs, str) and nargs in {"?", "*", "+"}:
        return nargs
    return "1"


def _constant(node: ast.expr | None) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if node is not None:
        return dotted(node)
    return None


def _argparse_dest(options: list[str]) -> str:
    longs = [o for o in options if o.startswith("--")]
    name = (longs or options)[0].lstrip("-")
    return name.replace("-", "_")


def _add_argument_calls(tree: ast.Module, rel: str) -> list[FlagSpec]:
    specs: list[FlagSpec] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        options = [
            a.value
            for a in node.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
        ]
        if not options:
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        action = _constant(keywords.get("action"))
        nargs = _constant(keywords.get("nargs"))
        dest = _constant(keywords.get("dest"))
        specs.append(
            FlagSpec(
                options=tuple(options),
                dest=dest if isinstance(dest, str) else _argparse_dest(options),
                nargs=_nargs_of(action if isinstance(action, str) else None, nargs),
                file=rel,
                line=node.lineno,
                value_type=_value_type(keywords.get("type")),
            )
        )
    return specs


def _annotated_fields(tree: ast.Module, rel: str) -> list[FlagSpec]:
    """Class fields `name: A[T, "help"]` or `name: A[T, Arg(...)]` (sglang >= 0.5.2x)."""
    specs: list[FlagSpec] = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            ann = stmt.annotation
            if not (
                isinstance(ann, ast.Subscript)
                and dotted(ann.value) in {"A", "Annotated", "typing.Annotated"}
                and isinstance(ann.slice, ast.Tuple)
                and len(ann.slice.elts) >= 2
            ):
                continue
            type_expr, meta = ann.slice.elts[0], ann.slice.elts[1]
            name = stmt.target.id
            keywords: dict[str, ast.expr] = {}
            if isinstance(meta, ast.Call) and dotted(meta.func) in {"Arg", "arg_utils.Arg"}:
                keywords = {k.arg: k.value for k in meta.keywords if k.arg}
            elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
                continue
            if _constant(keywords.get("no_cli")) is True:
                continue
            cli_name = _constant(keywords.get("cli_name"))
            options = [cli_name if isinstance(cli_name, str) else "--" + name.replace("_", "-")]
            aliases = keywords.get("aliases")
            if isinstance(aliases, (ast.List, ast.Tuple)):
                options += [
                    e.value
                    for e in aliases.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
            type_text = ast.unparse(type_expr)
            is_bool = type_text in {"bool", "Optional[bool]", "bool | None"}
            is_list = type_text.startswith(("List[", "list[", "Optional[List[", "Optional[list["))
            action = _constant(keywords.get("action"))
            nargs = _constant(keywords.get("nargs"))
            if is_list and nargs is None and _constant(keywords.get("type_parser")) is None:
                nargs = "+"
            specs.append(
                FlagSpec(
                    options=tuple(options),
                    dest=name,
                    nargs=_nargs_of(action if isinstance(action, str) else None, nargs, is_bool),
                    file=rel,
                    line=stmt.lineno,
                    value_type=(
                        None
                        if _constant(keywords.get("type_parser")) is not None
                        else _value_type(type_expr)
                    ),
                )
            )
    return specs


def server_flags(index: TreeIndex) -> list[FlagSpec]:
    """Every launch flag of the tree's `ServerArgs`, cached per source file."""
    specs: list[FlagSpec] = []
    for rel, entry in index.entries.items():
        if rel not in _FLAG_FILES and not rel.startswith(_FLAG_FOLDERS):
            continue
        cached = entry.derived.get("flags")
        if not isinstance(cached, list):
            parsed = index.parse_file(rel)
            if parsed is None:
                continue
            cached = _add_argument_calls(parsed[0], rel) + _annotated_fields(parsed[0], rel)
            index.remember(rel, "flags", cached)
        specs.extend(cached)
    return specs
