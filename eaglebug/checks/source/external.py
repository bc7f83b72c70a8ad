"""Out-of-tree model packages: where the server's Python finds one, and how the tree loads it.

SGLang's model registry reads `SGLANG_EXTERNAL_MODEL_PACKAGE` (`sglang/srt/models/registry.py`
in every release the tests read: 0.5.9 registers it after the built-ins with `overwrite=True`,
0.5.22+ puts it in first and later merges the built-ins under it): every module of that
package that exports an `EntryClass` is a model, and its classes override the built-in ones of
the same name. So a wrapper that lives in a user's own package is what a launch loads.

The package is located as the server's Python would find it, with
`importlib.machinery.PathFinder.find_spec` over the launch's `PYTHONPATH` and then this
interpreter's path: located, never imported. How the tree loads it (whether it overrides,
which modules count) is read from the tree's own registry, so a release without the mechanism
says so instead of pretending.
"""

from __future__ import annotations

import importlib.machinery
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from eaglebug.checks.contract.errors import InputError

if TYPE_CHECKING:  # the findings load only when one is made: a kept reply needs none
    from eaglebug.checks.contract.findings import Finding
    from eaglebug.checks.source.index import TreeIndex

ENV_VAR = "SGLANG_EXTERNAL_MODEL_PACKAGE"
REGISTRY = "sglang/srt/models/registry.py"
_HINT = (
    "put the folder that holds the package on the launch's PYTHONPATH "
    "(PYTHONPATH=/path/to/folder in front of the command), or pass --external-models PATH"
)


class ExternalPackage(NamedTuple):
    """A model package outside the SGLang tree: its import name, the path entry it was found
    under (module names and file paths are relative to it), and how it was named."""

    name: str  # dotted, as the environment variable gives it
    root: Path  # the sys.path entry that holds it
    package_dir: Path
    named_by: str  # "SGLANG_EXTERNAL_MODEL_PACKAGE=my_models" or "--external-models PATH"

    @property
    def prefix(self) -> str:
        """Its files' paths relative to `root` start with this."""
        return self.name.replace(".", "/") + "/"

    def owns(self, rel: str) -> bool:
        return rel.startswith(self.prefix)

    def owns_module(self, module: str) -> bool:
        return module == self.name or module.startswith(self.name + ".")

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "package_dir": str(self.package_dir),
            "named_by": self.named_by,
        }


def find_package(name: str, search_path: Sequence[str], named_by: str) -> ExternalPackage:
    """The package `name` as `import name` would find it on `search_path` (not imported)."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        raise InputError(f"{named_by}: {name!r} is not a Python package name", _HINT)
    locations: Sequence[str] | None = list(search_path)
    spec = None
    for depth in range(len(parts)):
        try:
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), locations)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise InputError(
                f"{named_by}: package {name!r} not found on the launch's PYTHONPATH "
                "or this Python's path",
                _HINT,
            )
        locations = spec.submodule_search_locations
        if locations is None:
            raise InputError(
                f"{named_by}: {'.'.join(parts[: depth + 1])!r} is a module "
                f"({spec.origin}), not a package: SGLang lists the modules of a package",
                "make it a folder with an __init__.py that holds the model modules",
            )
    assert locations is not None
    package_dir = Path(next(iter(locations))).resolve()
    return ExternalPackage(name, package_dir.parents[len(parts) - 1], package_dir, named_by)


def package_at(given: str, search_path: Sequence[str]) -> ExternalPackage:
    """`--external-models PATH` (a package folder), or a package name to find."""
    named_by = f"--external-models {given}"
    if not given.strip():
        raise InputError(
            f"--external-models {given!r}: names no package",
            "pass the package's folder or its import name, or leave the flag out",
        )
    path = Path(given).expanduser()
    try:
        is_dir = path.is_dir()
        has_init = is_dir and (path.resolve() / "__init__.py").is_file()
    except OSError as exc:  # the folder or its parent without read permission
        raise InputError(
            f"{named_by}: cannot read the package folder ({exc.strerror})",
            "the server's Python could not import it either: fix its permissions (chmod a+rx)",
        ) from None
    if is_dir:
        path = path.resolve()
        if not has_init:
            raise InputError(
                f"{named_by}: not a package (no __init__.py in {path})",
                "pass the package folder, the one with __init__.py and the model modules",
            )
        if not path.name.isidentifier():
            raise InputError(
                f"{named_by}: {path.name!r} cannot be imported (not a Python name)",
                "rename the folder to a valid Python package name",
            )
        return ExternalPackage(path.name, path.parent, path, named_by)
    if path.exists():
        raise InputError(f"{named_by}: is a file, not a package folder", _HINT)
    if os.sep in given or given.endswith(".py"):
        raise InputError(f"{named_by}: no such folder", _HINT)
    return find_package(given, search_path, named_by)


def launch_search_path(
    env: Mapping[str, str], python_path: Sequence[str], cwd: str, module_launch: bool
) -> list[str]:
    """Where the server's Python looks for packages: the current folder for `python -m`,
    the launch's `PYTHONPATH`, then the interpreter's own path."""
    found: list[str] = [cwd] if module_launch else []
    for entry in env.get("PYTHONPATH", "").split(os.pathsep):
        if entry or env.get("PYTHONPATH"):
            found.append(os.path.join(cwd, entry) if entry else cwd)
    found += [p for p in python_path if p]
    return list(dict.fromkeys(found))


class ExternalRule(NamedTuple):
    """How the audited tree loads an external package (read from its registry)."""

    read_from: str  # where the registry reads the variable, `file:line`
    overrides: bool  # its classes replace built-in ones of the same name
    override_from: str  # `file:line` of the statement that decides it
    top_level_only: bool  # only the package's own modules, not its subpackages'


def registry_rule(index: TreeIndex) -> ExternalRule | None:
    """The registry's handling of `SGLANG_EXTERNAL_MODEL_PACKAGE`, or None when the tree has
    none (then the variable does nothing there)."""
    return index.answer("external_rule", ExternalRule | None, lambda: _read_rule(index))


def _read_rule(index: TreeIndex) -> ExternalRule | None:
    import ast  # only when the rule is not a kept answer (a warm preflight reads this module)

    from eaglebug.checks.source import syntax

    if REGISTRY not in index.entries:
        return None
    parsed = index.parse_file(REGISTRY)
    if parsed is None:
        return None
    reads: ast.If | None = None
    for stmt in parsed.tree.body:
        if isinstance(stmt, ast.If) and ENV_VAR in ast.unparse(stmt.test):
            reads = stmt
            break
    if reads is None:
        return None
    overrides, where = False, reads.lineno
    for node in syntax.walk(reads):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "register":
            for keyword in node.keywords:
                if keyword.arg == "overwrite" and isinstance(keyword.value, ast.Constant):
                    overrides, where = bool(keyword.value.value), node.lineno
        elif isinstance(func, ast.Attribute) and func.attr == "update":
            overrides, where = True, node.lineno  # `models.update(external)` replaces names
    # Built-ins merged in later (0.5.22+: `import_model_classes(...) | self.models`): the
    # right-hand side of `|` wins, so the external ones stay only if they are on the right.
    for node in syntax.walk(parsed.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            right, left = ast.unparse(node.right), ast.unparse(node.left)
            if right == "self.models" and "import_model_classes" in left:
                overrides, where = True, node.lineno
            elif left == "self.models" and "import_model_classes" in right:
                overrides, where = False, node.lineno
    top_level = "iter_modules" in parsed.text and "walk_packages" not in parsed.text
    return ExternalRule(f"{REGISTRY}:{reads.lineno}", overrides, f"{REGISTRY}:{where}", top_level)


def ignored_package(package: ExternalPackage) -> Finding:
    """The launch names a package, but this tree's registry never reads the variable."""
    from eaglebug.checks.contract.evidence import ConfigEvidence
    from eaglebug.checks.contract.findings import Finding
    from eaglebug.checks.contract.fixes import AdviceFix

    return Finding(
        id="config.external_models",
        severity="warning",
        message=(
            f"{package.named_by}: this SGLang tree's model registry does not read {ENV_VAR}, "
            f"so the server will not load {package.name}; its classes were not audited"
        ),
        fix=AdviceFix(
            "use a release whose sglang/srt/models/registry.py reads it, or add the model "
            "to the tree itself (an EntryClass under sglang/srt/models/)"
        ),
        evidence=ConfigEvidence.of({"package": str(package.package_dir)}, read_from=REGISTRY),
    )
