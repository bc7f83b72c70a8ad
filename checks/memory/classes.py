"""The config class the audited tree registers for a model's `model_type`, and what it reaches.

SGLang loads a config.json into its own class where it registers one (`_CONFIG_REGISTRY`,
`utils/hf_transformers_utils.py` in 0.5.9, `utils/hf_transformers/common.py` in 0.5.23); the
hybrid-model predicates test for those classes, and the state sizes are their properties.
The registry's class names are read with `ast`; a byte search of `configs/` for the quoted
`model_type` finds the one module to parse, whose classes are kept whole, with the classes
it imports from the tree (their modules parsed too: `configs/mamba_utils.py`) and the
functions they call, taken one block each (`memimports`). A tree answer per model_type.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping

from eaglebug.checks.memory.imports import block_of, called_names, class_string, imports_of
from eaglebug.checks.memory.rules import flag_env
from eaglebug.checks.pyeval.memobjects import Block, ObjectSources
from eaglebug.checks.source.facts import Parsed
from eaglebug.checks.source.index import TreeIndex, parsed_with

_REGISTRY = b"_CONFIG_REGISTRY"
_CONFIGS = "sglang/srt/configs/"
_DEPTH = 3
_ENV_READ = re.compile(rb"envs\.(SGLANG_\w+)\.get\(")  # the variables a block reads


def model_objects(index: TreeIndex, config: Mapping[str, object]) -> ObjectSources:
    """The tree's config class for this config.json's `model_type` (a keyed tree answer)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        return ObjectSources("", "", "", "")
    return index.answer_for(
        "memory_objects:",
        [model_type],
        ObjectSources,
        lambda: _model_objects(index, model_type),
        keep=8,
    )


def _parsed_with(index: TreeIndex, folder: str, word: bytes) -> Iterator[tuple[str, Parsed]]:
    """The `.py` files under `folder` whose bytes hold `word`, parsed (a byte prefilter; the
    index's parse cache and limits serve it, as every other reader)."""
    needle = word.decode()
    for rel in sorted(index.entries):
        if rel.startswith(folder) and (parsed := parsed_with(index, rel, needle)) is not None:
            yield rel, parsed


def _registry(index: TreeIndex) -> tuple[set[str], str]:
    """The class names `_CONFIG_REGISTRY` is built from, and where."""
    for rel, parsed in _parsed_with(index, "sglang/srt/utils/", _REGISTRY):
        names: set[str] = set()
        line = 0
        for node in ast.walk(parsed.tree):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(ast.unparse(t).startswith("_CONFIG_REGISTRY") for t in targets):
                line = line or node.lineno
                names.update(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))
        if names:
            return names, f"{rel}:{line}"
    return set(), ""


def _model_objects(index: TreeIndex, model_type: str) -> ObjectSources:
    registered, registry_from = _registry(index)
    quoted = (f'"{model_type}"').encode()
    for rel, parsed in _parsed_with(index, _CONFIGS, quoted):
        for node in parsed.tree.body:
            if (
                isinstance(node, ast.ClassDef)
                and node.name in registered
                and class_string(node, "model_type") == model_type
            ):
                classes, functions = _closure(index, rel)
                where = f"{rel}:{node.lineno}"
                read = {
                    m.group(1).decode()
                    for b in classes + functions
                    for m in _ENV_READ.finditer(b.text.encode())
                }
                flags = tuple(
                    (name, variable, at)
                    for name, (variable, at) in sorted(flag_env(index, read).items())
                )
                return ObjectSources(
                    model_type, node.name, where, registry_from, classes, functions, flags
                )
    return ObjectSources(model_type, "", "", registry_from)


def _module_blocks(index: TreeIndex, rel: str) -> tuple[list[Block], list[Block], set[str]]:
    """A module's top-level classes and functions, and the names its blocks use."""
    parsed = index.parse_file(rel)
    if parsed is None:
        return [], [], set()
    lines = parsed.text.splitlines(keepends=True)
    classes: list[Block] = []
    functions: list[Block] = []
    used: set[str] = set()
    for node in parsed.tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _literal(node.value)
        ):  # `MAMBA = "M"`: a module constant the class's methods compare with
            constant = Block(node.targets[0].id, rel, node.lineno, ast.unparse(node.value))
            functions.append(constant)
            continue
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            continue
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        text = "".join(lines[start - 1 : node.end_lineno or node.lineno])
        block = Block(node.name, rel, start, text)
        (classes if isinstance(node, ast.ClassDef) else functions).append(block)
        used.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    return classes, functions, used


def _closure(index: TreeIndex, rel: str) -> tuple[tuple[Block, ...], tuple[Block, ...]]:
    """The config module's blocks, the tree modules whose classes it imports (whole), and
    the imported functions they use (one block each, a few levels deep)."""
    classes, functions, used = _module_blocks(index, rel)
    parsed = index.parse_file(rel)
    imports = imports_of(parsed.tree) if parsed is not None else {}
    seen_modules = {rel}
    todo: list[tuple[str, str, int]] = [
        (module, name, 0) for local, (module, name) in imports.items() if local in used
    ]
    seen: set[tuple[str, str]] = set()
    defined = {b.name for b in classes + functions}
    while todo:
        module, name, depth = todo.pop(0)
        if (module, name) in seen or name in defined:
            continue
        seen.add((module, name))
        found = block_of(index, module, name)
        if found is None:
            continue
        file, line, text = found
        if text.startswith("class ") and file not in seen_modules:
            seen_modules.add(file)
            more_classes, more_functions, more_used = _module_blocks(index, file)
            classes.extend(more_classes)
            functions.extend(more_functions)
            defined.update(b.name for b in more_classes + more_functions)
            more = index.parse_file(file)
            if more is not None and depth < _DEPTH:
                todo.extend(
                    (m, n, depth + 1)
                    for local, (m, n) in imports_of(more.tree).items()
                    if local in more_used
                )
        elif text.startswith("def "):
            functions.append(Block(name, file, line, text))
            defined.add(name)
            if depth < _DEPTH:
                called = called_names(text)
                todo.extend((module, n, depth + 1) for n in sorted(called - defined))
    return tuple(classes), tuple(functions)


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True
