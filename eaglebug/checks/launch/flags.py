"""The launch flags an SGLang tree accepts, read statically from its own source.

Two shapes occur across releases: explicit `parser.add_argument("--model-path", "--model", ...)`
calls in `server_args.py` (0.5.9), and dataclass fields annotated `A[T, Arg(aliases=[...])]`
under `arg_groups/fields/` that a helper turns into flags (0.5.23: `model_path` becomes
`--model-path`). Both are read with `ast`, so a flag the tree does not know can be reported,
and a renamed one is never silently ignored.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.facts import MISSING, Fact

if TYPE_CHECKING:  # parsing a launch (`launch.py`) needs the flag shapes, not the index
    from eaglebug.checks.source.facts import Parsed
    from eaglebug.checks.source.index import TreeIndex

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
    # A function of the tree that converts the value (`type=human_readable_int`, 0.5.23's
    # `type_parser=`), as written in `file`: the launch's value is what it returns.
    parser: str | None = None
    # A tree-defined action class given without nargs=: its own __init__ default decides.
    custom_action: str | None = None


@dataclass(frozen=True)
class ServeFrontEnd:
    """What `sglang serve` does to argv before the server's parser sees it (sglang/cli/serve.py)."""

    positional_model: bool  # `sglang serve MODEL ...` means --model-path MODEL
    model_type_flag: bool  # `--model-type auto|llm|diffusion` is taken by serve itself


def serve_front_end(index: TreeIndex) -> ServeFrontEnd:
    """What this tree's `sglang serve` takes for itself (a tree answer)."""
    return index.answer("serve_front_end", ServeFrontEnd, lambda: _serve_front_end(index))


def _serve_front_end(index: TreeIndex) -> ServeFrontEnd:
    rel = "sglang/cli/serve.py"
    # Read through the tree's files: within the caps, and outside the runtime, so the
    # answers' fingerprint must keep its stamps (`SourceFiles.read_here`).
    data = index.files.source(rel) if rel in index.entries else None
    if data is None:
        return ServeFrontEnd(False, False)
    text = data.decode("utf-8", errors="replace")
    return ServeFrontEnd(
        "def _normalize_positional_model_path" in text, "def _extract_model_type_override" in text
    )


def _value_type(node: ast.expr | None) -> str | None:
    text = ast.unparse(node) if node is not None else ""
    for name in ("int", "float"):
        if text in {name, f"Optional[{name}]", f"{name} | None", f"List[{name}]", f"list[{name}]"}:
            return name
    return None


def _parser_of(node: ast.expr | None) -> str | None:
    """The name of a converting function given as `type=` / `type_parser=` (not a builtin)."""
    text = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    return text if text and text not in {"int", "float", "str", "bool"} else None


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


def annotated_parts(annotation: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """The type and the first metadata of a field annotated `Annotated[type, meta, ...]` (or
    through its alias `A[...]`), else None: how ServerArgs' fields carry their flags."""
    if not (
        isinstance(annotation, ast.Subscript)
        and dotted(annotation.value) in {"A", "Annotated", "typing.Annotated"}
        and isinstance(annotation.slice, ast.Tuple)
        and len(annotation.slice.elts) >= 2
    ):
        return None
    return annotation.slice.elts[0], annotation.slice.elts[1]


def _add_argument_calls(tree: ast.Module, rel: str) -> list[FlagSpec]:
    specs: list[FlagSpec] = []
    for node in syntax.walk(tree):
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
        custom = (
            action
            if isinstance(action, str)
            and not isinstance(keywords.get("action"), ast.Constant)
            and "nargs" not in keywords
            else None
        )
        specs.append(
            FlagSpec(
                options=tuple(options),
                dest=dest if isinstance(dest, str) else _argparse_dest(options),
                nargs=_nargs_of(action if isinstance(action, str) else None, nargs),
                file=rel,
                line=node.lineno,
                value_type=_value_type(keywords.get("type")),
                custom_action=custom,
                parser=_parser_of(keywords.get("type")),
            )
        )
    return specs


def _statements(tree: ast.Module) -> Iterator[ast.AST]:
    """`ast.walk` (breadth first, in the same order) over statements only: classes are never
    inside an expression, so their relative order is the same, found without visiting every
    expression node."""
    todo: deque[ast.AST] = deque([tree])
    while todo:
        node = todo.popleft()
        for name in node._fields:
            field = getattr(node, name, None)
            if isinstance(field, list):
                todo.extend(
                    item
                    for item in field
                    if isinstance(item, (ast.stmt, ast.excepthandler, ast.match_case))
                )
        yield node


def _annotated_fields(tree: ast.Module, rel: str) -> list[FlagSpec]:
    """Class fields `name: A[T, "help"]` or `name: A[T, Arg(...)]` (sglang >= 0.5.2x)."""
    specs: list[FlagSpec] = []
    for cls in (n for n in _statements(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            annotated = annotated_parts(stmt.annotation)
            if annotated is None:
                continue
            type_expr, meta = annotated
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
                    value_type=(None if "type_parser" in keywords else _value_type(type_expr)),
                    parser=_parser_of(keywords.get("type_parser")),
                )
            )
    return specs


def server_flags(index: TreeIndex) -> list[FlagSpec]:
    """Every launch flag of the tree's `ServerArgs` (a tree answer, and cached per file)."""
    return index.answer("server_flags", list[FlagSpec], lambda: _server_flags(index))


def flag_files(index: TreeIndex) -> list[str]:
    """The files that declare the tree's server args (its flags and its fields), walk order."""
    return [rel for rel in index.entries if rel in _FLAG_FILES or rel.startswith(_FLAG_FOLDERS)]


# Learnt from each of those files in one pass and kept with its facts (by its bytes): its flags,
# and its fields' literal defaults (read by `args/resolution.py`), so that no file is parsed
# twice for them (the parent's bounded tree cache does not hold all ~90 between the two).
FLAGS: Fact[list[FlagSpec]] = Fact("flags", list[FlagSpec])
FIELD_DEFAULTS: Fact[dict[str, Any]] = Fact("field_defaults", dict[str, Any])


def _server_flags(index: TreeIndex) -> list[FlagSpec]:
    from eaglebug.checks.source.files import read_file

    files = index.files
    rels = flag_files(index)
    todo = [
        rel
        for rel in rels
        if MISSING in (index.recall(rel, FLAGS), index.recall(rel, FIELD_DEFAULTS))
    ]
    root = str(index.tree.root)

    def job(rel: str) -> tuple[list[FlagSpec], dict[str, Any]] | str | None:
        """The file's flags and field defaults; or why it does not parse; None if it cannot
        be read here."""
        parsed: Parsed | str | None = files.peek(rel)
        if parsed is None:
            try:
                data = files.held(rel) or read_file(f"{root}/{rel}", files.entries[rel].size)
            except OSError:
                return None
            parsed = files.parse_bytes(rel, data)
        return parsed if isinstance(parsed, str) else _learnt(parsed, rel)

    # 0.5.23 declares its flags over ~90 files: parsed together, through the index's mapper.
    done = files.mapper(job, todo, [files.entries[rel].size for rel in todo])
    for rel, result in zip(todo, done, strict=True):
        if isinstance(result, str):
            files.skip(rel, result)
            continue
        if result is None:  # unreadable: read (and warned about) here, as one by one
            parsed = files.parse(rel)
            if parsed is None:
                continue
            result = _learnt(parsed, rel)
        index.remember(rel, FLAGS, result[0])
        index.remember(rel, FIELD_DEFAULTS, result[1])
    specs: list[FlagSpec] = []
    for rel in rels:
        cached = index.recall(rel, FLAGS)
        if cached is not MISSING:
            specs.extend(cached)
    switches = _switch_actions(index, {s.custom_action for s in specs if s.custom_action})
    return [
        dataclasses.replace(s, nargs="0") if s.custom_action in switches and s.nargs == "1" else s
        for s in specs
    ]


def _switch_actions(index: TreeIndex, names: set[str]) -> set[str]:
    """The action classes of the tree whose `__init__` defaults `nargs` to 0 (switches, such as
    0.5.14's `DeprecatedStoreTrueAction(..., nargs=0, ...)`)."""
    found: set[str] = set()
    for name in names:
        short = name.rsplit(".", 1)[-1]
        for ref in index.classes_named(short):
            method = ref.facts.methods.get("__init__")
            parsed = index.parse_file(ref.file) if method is not None else None
            if method is None or parsed is None:
                continue
            init = next(
                (
                    n
                    for n in syntax.walk(parsed.tree)
                    if isinstance(n, ast.FunctionDef) and n.lineno == method.line
                ),
                None,
            )
            if init is not None and _default_of(init, "nargs") == 0:
                found.add(name)
    return found


def _default_of(fn: ast.FunctionDef, param: str) -> object:
    """A parameter's default, when it is a constant (None otherwise)."""
    positional = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    with_default = positional[len(positional) - len(fn.args.defaults) :]
    defaults = dict(zip(with_default, fn.args.defaults, strict=True))
    for arg, default in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True):
        if default is not None:
            defaults[arg.arg] = default
    node = defaults.get(param)
    return node.value if isinstance(node, ast.Constant) else None


def field_defaults_in(tree: ast.Module) -> dict[str, Any]:
    """Each class field's literal default in one file (`name: T = 8`), the first one kept."""
    out: dict[str, Any] = {}
    for cls in (n for n in syntax.statements(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.value is not None
            ):
                try:
                    value = ast.literal_eval(stmt.value)
                except (ValueError, SyntaxError, TypeError):
                    continue
                out.setdefault(stmt.target.id, value)
    return out


def _learnt(parsed: Parsed, rel: str) -> tuple[list[FlagSpec], dict[str, Any]]:
    """What the flags' pass learns from one file: its flags, its fields' defaults."""
    return _flag_specs(parsed, rel), field_defaults_in(parsed.tree)


def _flag_specs(parsed: Parsed, rel: str) -> list[FlagSpec]:
    add_argument = _add_argument_calls(parsed.tree, rel) if "add_argument" in parsed.text else []
    return add_argument + _annotated_fields(parsed.tree, rel)
