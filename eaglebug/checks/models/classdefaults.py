"""What transformers' config class gives the keys a model's config.json leaves out.

Why: `save_pretrained` writes only what differs from the model's config class, so a published
config.json may name no context length or vocabulary at all (Gemma-3's text config names
neither), while SGLang reads them from the object transformers builds, the class's defaults
filled in. Where the launch's Python would find transformers (beside `sglang/` in
site-packages, or where `launch/sitepaths.py` finds its environment's site-packages for a
source checkout), the class is the one transformers' own `CONFIG_MAPPING_NAMES`
(`models/auto/configuration_auto.py`) names for the config's `model_type` (and for each
sub-config's, `text_config`'s), found by its `class` line among transformers' configuration
modules; each `__init__` parameter with a literal default that `__init__` keeps as it is
(`self.x = x`) fills the key config.json leaves out. Read with `ast`, never imported. A model
type SGLang builds with a config class of its own is left alone (`own`), unless that class is
transformers' own under another name (0.5.23 registers `DeepseekV3Config`'s subclass for a
Kimi-K2.5 EAGLE-3 draft's `kimi_k2`): then that class's defaults are read. A default that is
not a literal or that `__init__` transforms stays unknown.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.limits import SOURCE_FILE_BYTES
from eaglebug.checks.source import syntax

_AUTO = "transformers/models/auto/configuration_auto.py"
_SUB_CONFIGS = ("text_config", "language_config", "llm_config")


@dataclass(frozen=True)
class Supplied:
    """A config with the class defaults it left out, and which keys those were, from where."""

    config: dict[str, Any]
    keys: tuple[str, ...] = ()  # "text_config.max_position_embeddings"
    read_from: tuple[str, ...] = ()  # ".../transformers/models/gemma3/configuration_gemma3.py:91"


def with_class_defaults(
    config: Mapping[str, Any],
    roots: Sequence[Path],
    own: Callable[[str], bool],
    reuses: Callable[[str], str | None] = lambda model_type: None,
) -> Supplied:
    """`config` with what transformers' config classes give the keys it leaves out; `roots`:
    the folders the launch's Python looks in for packages (`launch/sitepaths.py`), the first
    holding transformers read; `own(model_type)`: does SGLang build that type with a config
    class of its own? `reuses(model_type)`: the transformers class that class is, under
    another name (it adds no `__init__`), whose defaults are then the ones."""
    root = next((r for r in roots if (r / _AUTO).is_file()), None)
    if root is None:
        return Supplied(dict(config))
    merged = dict(config)
    keys: list[str] = []
    where: list[str] = []
    parts: list[tuple[str, dict[str, Any]]] = [("", merged)]
    for name in _SUB_CONFIGS:
        if isinstance(merged.get(name), dict):
            merged[name] = dict(merged[name])
            parts.append((f"{name}.", merged[name]))
    for prefix, part in parts:
        model_type = part.get("model_type")
        if not isinstance(model_type, str):
            continue
        alias = reuses(model_type)
        if alias is None and own(model_type):
            continue
        found = _defaults(str(root), model_type, alias)
        if found is None:
            continue
        defaults, read_from = found
        missing = {k: v for k, v in defaults.items() if k not in part}
        if missing:
            part.update(missing)
            keys += [f"{prefix}{k}" for k in sorted(missing)]
            where.append(read_from)
    return Supplied(merged, tuple(keys), tuple(where)) if keys else Supplied(dict(config))


def _defaults(
    root: str, model_type: str, name: str | None = None
) -> tuple[dict[str, Any], str] | None:
    """The class's kept literal defaults and where the class is, or None (no transformers
    here, no such type, a class not found): transformers' class for `model_type`, or the
    class `name` (SGLang's alias of it), found under the type transformers maps it to."""
    auto = _parse(Path(root) / _AUTO)
    if auto is None:
        return None
    mapped = _mapping(auto, "CONFIG_MAPPING_NAMES")
    if name is not None:
        model_type = next((t for t, n in mapped.items() if n == name), model_type)
    else:
        name = mapped.get(model_type)
    if name is None:
        return None
    # Where transformers keeps the type's module (its own table of exceptions, else the type's
    # name) is only looked in first: the class is known by its `class` line.
    folder = _mapping(auto, "SPECIAL_MODEL_TYPE_TO_MODULE_NAME").get(
        model_type, model_type.replace("-", "_")
    )
    found = _class_file(root, name, folder)
    if found is None:
        return None
    path, tree = found
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _kept_defaults(node), f"{path}:{node.lineno}"
    return None


def _mapping(tree: ast.Module, name: str) -> dict[str, str]:
    """A module-level `NAME = OrderedDict([(key, value), ...])` of strings, as written."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id == name for t in targets)
        if named and isinstance(value, ast.Call) and value.args:
            try:
                pairs = ast.literal_eval(value.args[0])
            except (ValueError, SyntaxError, TypeError):
                return {}
            return {k: v for k, v in pairs if isinstance(k, str) and isinstance(v, str)}
    return {}


def _class_file(root: str, name: str, folder: str) -> tuple[str, ast.Module] | None:
    """The configuration module of transformers that defines `class <name>(`, parsed."""
    needle = f"\nclass {name}(".encode()
    models = Path(root) / "transformers" / "models"
    likely = sorted(models.glob(f"{folder}/configuration_*.py"))
    for path in [*likely, *sorted(models.glob("*/configuration_*.py"))]:
        try:
            if path.stat().st_size > SOURCE_FILE_BYTES or needle not in path.read_bytes():
                continue
        except OSError:
            continue
        tree = _parse(path)
        if tree is not None:
            return str(path), tree
    return None


def _parse(path: Path) -> ast.Module | None:
    """A module's tree, kept while the file's size and mtime hold (a long-lived process, the
    TUI's checks' worker, sees transformers installed or upgraded under it)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if st.st_size > SOURCE_FILE_BYTES:
        return None
    return _parsed(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _parsed(path: str, size: int, mtime_ns: int) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_bytes(), path)
    except (OSError, SyntaxError, ValueError):
        return None


def _kept_defaults(cls: ast.ClassDef) -> dict[str, Any]:
    """`__init__`'s parameters with a literal default (not None) that it stores as they come:
    `self.x = x` at its top level, the only write of `self.x` in it, and no write of `x`
    (a default `__init__` replaces or derives from stays unknown). A tuple as a list, as JSON
    has it."""
    init = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    if init is None:
        return {}
    args = init.args
    named = list(zip(args.args[len(args.args) - len(args.defaults) :], args.defaults, strict=True))
    named += [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    ]
    writes: dict[str, int] = {}  # "self.x" or "x" -> how many statements write it
    for node in ast.walk(init):
        for target in syntax.assigned(node):
            for name in ast.walk(target):
                written = _written(name)
                if written is not None:
                    writes[written] = writes.get(written, 0) + 1
    kept = {
        stmt.value.id
        for stmt in init.body
        if isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.value, ast.Name)
        and _written(stmt.targets[0]) == f"self.{stmt.value.id}"
        and writes.get(f"self.{stmt.value.id}") == 1
        and stmt.value.id not in writes
    }
    out: dict[str, Any] = {}
    for arg, default in named:
        if arg.arg not in kept:
            continue
        try:
            value = ast.literal_eval(default)
        except (ValueError, SyntaxError, TypeError):
            continue
        if value is not None:
            out[arg.arg] = _as_json(value)
    return out


def _written(node: ast.AST) -> str | None:
    """ "self.x" for `self.x`, "x" for a plain name, as an assignment's target."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}" if node.value.id == "self" else None
    return None


def _as_json(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value
