"""The helpers the memory functions import from elsewhere in the tree, taken one by one.

The cell size of a sparse-attention model reads `DSATokenToKVPool.quant_block_size` (0.5.23;
`NSATokenToKVPool` in 0.5.9) and calls `ceil_div` from `utils/common.py`: files of 5,000 and
more lines of which one class or one function matters. Rather than parse those files, the
import (`from sglang.srt.mem_cache.memory_pool import DSATokenToKVPool`) names the module,
a byte search finds the top-level `def` / `class` in it, and only that block is parsed: a
function joins the evaluated ones, a class gives its class-level constants
(`quant_block_size = 128`, `index_k_with_scale_buffer_dtype = torch.uint8`).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Mapping

from eaglebug.checks.pyeval.memeval import Evaluator, Ref, Unknown
from eaglebug.checks.source.index import TreeIndex


def sglang_imports(node: ast.ImportFrom) -> dict[str, tuple[str, str]]:
    """Local name -> (module, name) for one absolute `from sglang... import` line."""
    if node.level or not node.module or not node.module.startswith("sglang."):
        return {}
    return {alias.asname or alias.name: (node.module, alias.name) for alias in node.names}


def imports_of(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """The module-level imports (and those under a module-level `if`, `TYPE_CHECKING`);
    a function's own are read with its body."""
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        inner = node.body if isinstance(node, (ast.If, ast.Try)) else [node]
        for stmt in inner:
            if isinstance(stmt, ast.ImportFrom):
                for name, target in sglang_imports(stmt).items():
                    out.setdefault(name, target)
    return out


def block_of(index: TreeIndex, module: str, name: str) -> tuple[str, int, str] | None:
    """The top-level `def name` / `class name` of `module`: (file, first line, text)."""
    for rel in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"):
        if rel not in index.entries:
            continue
        try:
            data = (index.tree.root / rel).read_bytes()
        except OSError:
            return None
        for head in (b"\ndef " + name.encode() + b"(", b"\nclass " + name.encode()):
            at = data.find(head)
            if at < 0:
                continue
            text = data[at + 1 :].decode("utf-8", errors="replace")
            line = data[: at + 1].count(b"\n") + 1
            return rel, line, _block(text)
    return None


def _block(text: str) -> str:
    """The lines of one top-level statement: up to the next line at column 0."""
    lines = text.splitlines(keepends=True)
    end = len(lines)
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() and not line[0].isspace() and not line.startswith(("#", ")")):
            end = i
            break
    return "".join(lines[:end])


def _head(text: str) -> str:
    """A class's lines before its first method: where its constants are (a 5,000-line class
    is not parsed for them)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines[1:], start=1):
        stripped = line.lstrip()
        if stripped.startswith(("def ", "async def ", "@")) and line[0].isspace():
            return "".join(lines[:i]) + line[: len(line) - len(stripped)] + "pass\n"
    return text


def class_constants(rel: str, line: int, text: str) -> dict[str, object]:
    """`Class.attr` -> value for the class body's plain assignments (a dtype stays a Ref)."""
    try:
        module = ast.parse(textwrap.dedent(_head(text)))
    except SyntaxError:
        return {}
    node = module.body[0] if module.body else None
    if not isinstance(node, ast.ClassDef):
        return {}
    ast.increment_lineno(module, line - 1)
    constants = Evaluator({}, {})
    out: dict[str, object] = {}
    for stmt in node.body:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            continue
        value: object = (
            Ref(ast.unparse(stmt.value))
            if isinstance(stmt.value, ast.Attribute)
            else constants.constant(stmt.value, rel)
        )
        if not isinstance(value, Unknown):
            out[f"{node.name}.{stmt.targets[0].id}"] = value
    return out


def imported_blocks(
    index: TreeIndex,
    wanted: Iterable[tuple[str, set[str]]],
    imports: Mapping[str, dict[str, tuple[str, str]]],
    defined: set[str],
) -> tuple[list[tuple[str, str, int, str]], dict[str, object]]:
    """For each kept function (its file, the names it uses): the imported functions it needs
    that the memory files do not define, as (name, file, line, text), and the constants of
    the imported classes it reads. A function taken this way brings the functions of its
    own module that it calls (`get_glm_dsa_layer_split_effective_num_layers` ->
    `is_glm_dsa_cache_layer_split_enabled`), a few levels deep."""
    functions: list[tuple[str, str, int, str]] = []
    constants: dict[str, object] = {}
    seen: set[tuple[str, str]] = set()
    todo = [
        (target, 0)
        for rel, used in wanted
        for name in sorted(used - defined)
        if (target := imports.get(rel, {}).get(name)) is not None
    ]
    known = set(defined)
    while todo:
        target, depth = todo.pop(0)
        if target in seen:
            continue
        seen.add(target)
        found = block_of(index, *target)
        if found is None:
            continue
        file, line, text = found
        if text.startswith("class "):
            constants.update(class_constants(file, line, text))
        elif text.startswith("def "):
            functions.append((target[1], file, line, text))
            known.add(target[1])
            if depth < _DEPTH:
                todo.extend(((target[0], n), depth + 1) for n in sorted(called_names(text) - known))
    return functions, constants


_DEPTH = 3


def called_names(text: str) -> set[str]:
    """The plain names a function's text calls (`f(...)`)."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return set()
    return {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def class_string(cls: ast.ClassDef, name: str) -> str | None:
    """A class body's `name = "literal"` (`model_type = "qwen3_next"`, `_NS_PATH = ...`)."""
    for stmt in cls.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            return stmt.value.value
    return None
