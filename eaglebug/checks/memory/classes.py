"""The config class the audited tree registers for a model's `model_type`.

SGLang loads a config.json into its own class where it registers one (`_CONFIG_REGISTRY`:
`srt/hf_transformers_utils.py` in 0.5.2, `utils/hf_transformers_utils.py` in 0.5.9,
`utils/hf_transformers/common.py` in 0.5.23); the hybrid-model predicates test for those
classes, and the state sizes are their properties. The
registry's class names are read with `ast`; a byte search of `configs/` for the quoted
`model_type` finds the module that defines the class. The evaluator then makes the object from
config.json with the class's own `__init__` (`memory/hybrid.py`). A tree answer per model_type.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain

from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import class_string, module_imports
from eaglebug.checks.source.facts import Parsed, module_name
from eaglebug.checks.source.index import TreeIndex, parsed_with

_REGISTRY = b"_CONFIG_REGISTRY"
_CONFIGS = "sglang/srt/configs/"


@dataclass(frozen=True)
class ConfigClass:
    """The config class the tree registers for one `model_type`."""

    model_type: str
    qualname: str  # "" when the tree registers none for this model_type
    class_from: str  # file:line of that class
    registry_from: str  # file:line of the tree's registry of config classes
    # transformers' class it is under another `model_type`, adding no `__init__` of its own
    # (0.5.23's `_KimiK2ConfigAlias(DeepseekV3Config)`), else ""
    reuses: str = ""


def model_objects(index: TreeIndex, config: Mapping[str, object]) -> ConfigClass:
    """The tree's config class for this config.json's `model_type` (a keyed tree answer)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        return ConfigClass("", "", "", "")
    return index.answer_for(
        "memory_objects:",
        [model_type],
        ConfigClass,
        lambda: _model_objects(index, model_type),
        keep=8,
    )


def _parsed_with(index: TreeIndex, folder: str, word: bytes) -> Iterator[tuple[str, Parsed]]:
    """The `.py` files under `folder` whose bytes hold `word`, parsed (a byte prefilter; the
    index's parse cache and limits serve it, as every other reader)."""
    needle = word.decode()
    for rel in sorted(index.entries):
        if (
            rel.startswith(folder)
            and rel.endswith(".py")
            and (parsed := parsed_with(index, rel, needle)) is not None
        ):
            yield rel, parsed


def _registry(index: TreeIndex) -> tuple[set[str], str]:
    """The class names `_CONFIG_REGISTRY` is built from, and where: under `utils/` (0.5.3
    on), else anywhere in `srt/` (0.5.2's `srt/hf_transformers_utils.py`)."""
    utils = "sglang/srt/utils/"
    for rel, parsed in chain(
        _parsed_with(index, utils, _REGISTRY),
        (
            (r, p)
            for r, p in _parsed_with(index, "sglang/srt/", _REGISTRY)
            if not r.startswith(utils)
        ),
    ):
        names: set[str] = set()
        line = 0
        for node in syntax.statements(parsed.tree):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(ast.unparse(t).startswith("_CONFIG_REGISTRY") for t in targets):
                line = line or node.lineno
                names.update(n.id for n in syntax.walk(node.value) if isinstance(n, ast.Name))
        if names:
            return names, f"{rel}:{line}"
    return set(), ""


def _model_objects(index: TreeIndex, model_type: str) -> ConfigClass:
    registered, registry_from = _registry(index)
    quoted = (f'"{model_type}"').encode()
    registry_file = registry_from.rpartition(":")[0]
    beside = parsed_with(index, registry_file, quoted.decode()) if registry_file else None
    found = chain(
        _parsed_with(index, _CONFIGS, quoted),
        [(registry_file, beside)] if beside is not None else [],  # classes made beside it
    )
    for rel, parsed in found:
        for node in syntax.statements(parsed.tree):  # also under `try:` (an optional import)
            if (
                isinstance(node, ast.ClassDef)
                and node.name in registered
                and class_string(node, "model_type") == model_type
            ):
                module, is_package = module_name(rel)
                qualname = f"{module}.{node.name}"
                imports = module_imports(parsed.tree, module, is_package)
                reuses = _transformers_class(imports, node)
                return ConfigClass(
                    model_type, qualname, f"{rel}:{node.lineno}", registry_from, reuses
                )
    return ConfigClass(model_type, "", "", registry_from)


def _transformers_class(imports: dict[str, str], cls: ast.ClassDef) -> str:
    """The transformers class `cls` is, under another name: its one base is imported from
    transformers (or a module of it; `imports`, the module's) and it defines no `__init__`;
    "" otherwise. Class attributes it adds (0.5.23's `_DeepseekV4ConfigAlias` has a dozen) are
    not read as defaults: a key config.json leaves out that only they give stays unknown."""
    if len(cls.bases) != 1 or not isinstance(cls.bases[0], ast.Name):
        return ""
    if any(isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in cls.body):
        return ""
    target = imports.get(cls.bases[0].id, "")
    return target.rpartition(".")[2] if target.split(".")[0] == "transformers" else ""
