"""The README's key table is the one generated from the app's BINDINGS (STYLE.md practice 7)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "readme_keys.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eaglebug_readme_keys", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


readme_keys = _load()


def test_readme_table_is_generated_from_the_bindings() -> None:
    readme = readme_keys.README.read_text(encoding="utf-8")
    wanted = readme_keys.with_table(readme, readme_keys.render_table())
    assert readme == wanted, (
        "README.md's key table differs from the app's BINDINGS; "
        "run: python scripts/readme_keys.py --write"
    )


def test_every_binding_has_an_id_and_a_tooltip() -> None:
    seen: set[str] = set()
    for where, bindings in readme_keys.key_groups():
        assert bindings, f"{where}: no bindings"
        for binding in bindings:
            assert binding.id, f"{where}: {binding.key} has no id"
            assert binding.tooltip, f"{where}: {binding.key} ({binding.id}) has no tooltip"
            assert binding.id not in seen, f"binding id {binding.id} is used twice"
            seen.add(binding.id)


def test_table_rows_name_every_key_once_per_screen() -> None:
    table = readme_keys.render_table()
    rows = table.splitlines()[2:]
    groups = readme_keys.key_groups()
    assert len(rows) <= sum(len(bindings) for _, bindings in groups)
    assert "| main screen | `p` |" in table
    assert "| main screen | `?` | Every key |" in table  # key_display wins over question_mark
    assert "| guide | `→` `n` `Space` | Next step |" in table
    assert "(not with `--readonly`)" in next(r for r in rows if r.startswith("| main screen | `r`"))


def test_markers_are_required_and_only_their_inside_changes() -> None:
    with pytest.raises(ValueError, match="markers"):
        readme_keys.with_table("# no markers\n", "| table |\n")
    text = f"before\n{readme_keys.START}\nold\n{readme_keys.END}\nafter\n"
    assert readme_keys.with_table(text, "| new |\n") == (
        f"before\n{readme_keys.START}\n| new |\n{readme_keys.END}\nafter\n"
    )
