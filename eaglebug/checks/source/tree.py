"""Find the SGLang source tree to audit, from a path or from the environment, without importing it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import NamedTuple

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.inputs import regular_file

_HINT = (
    "point --sglang at an SGLang repository root, its python/ folder, or the sglang package folder"
)


class SglangTree(NamedTuple):
    """The `sglang` package folder; module names are relative to its parent."""

    package_dir: Path

    @property
    def root(self) -> Path:
        return self.package_dir.parent

    @property
    def version(self) -> str | None:
        """The release: an installed wheel's METADATA first (its version.py may say dev)."""
        for meta in sorted(self.root.glob("sglang-*.dist-info/METADATA")):
            if not regular_file(meta):
                continue
            try:
                with meta.open(encoding="utf-8", errors="replace") as handle:
                    for line in handle:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():
                            break
            except OSError:
                continue
        for name in ("version.py", "_version.py"):
            path = self.package_dir / name
            if not regular_file(path):
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            match = re.search(r"""__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""", text)
            if match:
                return match.group(1)
        return None

    def module_name(self, path: Path) -> tuple[str, bool]:
        """(dotted module name, is a package) for a .py file inside the tree."""
        rel = path.relative_to(self.root).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        return ".".join(parts), is_package

    def module_path(self, module: str) -> Path | None:
        base = self.root.joinpath(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def _package_in(path: Path) -> Path | None:
    for candidate in (path, path / "sglang", path / "python" / "sglang"):
        if candidate.name == "sglang" and (candidate / "srt").is_dir():
            return candidate
    return None


def locate(path: str | None) -> SglangTree:
    """The tree at `path`, or the `sglang` that `importlib.util.find_spec` finds (no import)."""
    if path is None:
        try:
            spec = importlib.util.find_spec("sglang")
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec else []
        for location in locations:
            found = _package_in(Path(location))
            if found:
                return SglangTree(found.resolve())
        raise InputError(
            "no SGLang source found: sglang is not importable from this Python",
            "pass --sglang PATH (" + _HINT.removeprefix("point --sglang at ") + ")",
        )
    given = Path(path).expanduser()
    if not given.exists():
        raise InputError(f"{path}: no such file or directory", _HINT)
    if not given.is_dir():
        raise InputError(f"{path}: is a file, not an SGLang source tree", _HINT)
    found = _package_in(given)
    if found is None:
        raise InputError(f"{path}: not an SGLang source tree (no sglang/srt/ inside)", _HINT)
    return SglangTree(found.resolve())
