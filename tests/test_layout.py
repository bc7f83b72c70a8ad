"""The package's shape: the engine's facade is complete and loads what it names, and the
cache's code stamp sees an edit in any subfolder (modules live in subpackages now)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import eaglebug.checks
from eaglebug.checks.source import cache


def _type_checking_names() -> dict[str, tuple[str, str]]:
    tree = ast.parse(Path(eaglebug.checks.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If))
    out: dict[str, tuple[str, str]] = {}
    for stmt in block.body:
        assert isinstance(stmt, ast.ImportFrom) and stmt.module
        for alias in stmt.names:
            out[alias.asname or alias.name] = (stmt.module, alias.name)
    return out


def test_the_facade_types_what_it_exports() -> None:
    """mypy reads the TYPE_CHECKING block, the runtime reads `_EXPORTS`: they must agree."""
    assert _type_checking_names() == eaglebug.checks._EXPORTS
    assert sorted(eaglebug.checks.__all__) == sorted(eaglebug.checks._EXPORTS)


@pytest.mark.parametrize("name", sorted(eaglebug.checks._EXPORTS))
def test_each_facade_name_is_the_engine_object(name: str) -> None:
    module, attribute = eaglebug.checks._EXPORTS[name]
    assert getattr(eaglebug.checks, name) is getattr(importlib.import_module(module), attribute)


def test_an_unknown_facade_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        eaglebug.checks.nothing_here  # noqa: B018


def test_the_code_stamp_sees_an_edit_in_a_subfolder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "checks" / "memory" / "deeper"
    deep.mkdir(parents=True)
    module = deep / "plan.py"
    module.write_text("X = 1\n")
    monkeypatch.setattr(cache, "_code_folders", lambda: [str(tmp_path)])
    monkeypatch.setattr(cache, "_code", [])
    before = cache.code_stamp()
    module.write_text("X = 22\n")  # another size: a new stamp whatever the clock's resolution
    monkeypatch.setattr(cache, "_code", [])
    assert cache.code_stamp() != before


def test_the_code_stamp_covers_the_installed_engine() -> None:
    folders = cache._code_folders()
    assert any(Path(f, "checks", "source", "cache.py").is_file() for f in folders)
    assert any(Path(f, "cli").is_dir() for f in folders)  # the CLI renders cached answers
