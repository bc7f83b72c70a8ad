"""The files of an out-of-tree model package, as the class index reads them.

A user's model package is a handful of files, so it is walked whole (each file stat'ed: its
stamp is part of every answer about classes, see `stamp_key`) and parsed when a class in it is
first asked for. Module names and paths are relative to the path entry the package was found
under, as Python names them (`my_models.kimi`, `my_models/kimi.py`).
"""

from __future__ import annotations

import zlib

from eaglebug.checks.source.classfacts import ModuleFacts
from eaglebug.checks.source.external import ExternalPackage, ExternalRule
from eaglebug.checks.source.facts import FileEntry, Parsed, learn, module_name, parse
from eaglebug.checks.source.files import read_file
from eaglebug.checks.source.walk import Stamp, list_tree


class PackageFiles:
    """One external package: its modules, parsed on demand, and the warnings they gave."""

    def __init__(self, package: ExternalPackage, warnings: list[str]) -> None:
        self.package = package
        self.warnings = warnings
        listing = list_tree(str(package.root), str(package.package_dir))
        self.stamps = sorted(found for found in listing.found if not isinstance(found, str))
        warnings.extend(found for found in listing.found if isinstance(found, str))
        self.module_files = {module_name(rel)[0]: rel for rel, _, _ in self.stamps}
        self._sizes = {rel: size for rel, size, _ in self.stamps}
        self._facts: dict[str, ModuleFacts | None] = {}
        self._parsed: dict[str, Parsed | None] = {}
        self._errors: dict[str, str] = {}

    @property
    def stamp_key(self) -> str:
        """What answers about classes depend on: the package and its files' sizes and mtimes."""
        return _key(self.package, self.stamps)

    def owns(self, rel: str) -> bool:
        return rel in self._sizes

    def parse(self, rel: str) -> Parsed | None:
        if rel not in self._parsed:
            self._parsed[rel] = None
            try:
                data = read_file(str(self.package.root / rel), self._sizes[rel])
            except OSError as exc:
                self._skip(rel, f"cannot read ({exc.strerror})")
                return None
            parsed = parse(rel, data)
            if isinstance(parsed, str):
                self._skip(rel, parsed)
                return None
            self._parsed[rel] = parsed
        return self._parsed[rel]

    def _skip(self, rel: str, why: str) -> None:
        self._errors[rel] = why
        self.warnings.append(f"{self.package.root / rel}: skipped, {why}")

    def facts(self, rel: str) -> ModuleFacts | None:
        if rel not in self._facts:
            parsed = self.parse(rel)
            if parsed is None:
                self._facts[rel] = None
            else:
                entry = FileEntry(self._sizes[rel], 0, None, False, ())
                learn(entry, rel, parsed)
                self._facts[rel] = entry.facts
        return self._facts[rel]

    def module(self, name: str) -> ModuleFacts | None:
        rel = self.module_files.get(name)
        return self.facts(rel) if rel is not None else None

    def split_qualified(self, qualified: str) -> tuple[str, str] | None:
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module in self.module_files:
                return module, ".".join(parts[cut:])
        return None

    def class_files(self) -> list[tuple[str, ModuleFacts]]:
        """Every module that parses, with its facts (the package is small: all of them)."""
        out = []
        for rel, _, _ in self.stamps:
            facts = self.facts(rel)
            if facts is not None:
                out.append((rel, facts))
        return out

    def errors(self) -> dict[str, str]:
        self.class_files()
        return dict(self._errors)

    def entry_modules(self, rule: ExternalRule | None) -> list[tuple[str, ModuleFacts]]:
        """The modules whose `EntryClass` the registry reads: with `pkgutil.iter_modules`
        (every release so far) only the package's own modules, not its subpackages'."""
        depth = self.package.name.count(".") + 2  # parts of `pkg/module.py`
        found = []
        for rel, facts in self.class_files():
            if not facts.entry_classes or rel.endswith("/__init__.py"):
                continue
            if rule is not None and rule.top_level_only and rel.count("/") + 1 != depth:
                continue
            found.append((rel, facts))
        return found


def _key(package: ExternalPackage, stamps: list[Stamp]) -> str:
    digest = zlib.crc32(repr(stamps).encode())
    return f"|external:{package.name}@{package.package_dir}:{digest:08x}"


def stamp_key(package: ExternalPackage) -> str:
    """The package's state (each file's size and mtime), without reading a file: part of
    the key of every answer that depends on its classes."""
    listing = list_tree(str(package.root), str(package.package_dir))
    return _key(package, sorted(f for f in listing.found if not isinstance(f, str)))
