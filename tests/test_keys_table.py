"""The key tables of README.md and docs/tui.md are generated from the app's BINDINGS (STYLE.md
practice 7)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "keys_table.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eaglebug_keys_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


keys_table = _load()


@pytest.mark.parametrize("name", ["README.md", "docs/tui.md"])
def test_tables_are_generated_from_the_bindings(name: str) -> None:
    path, table = next((p, t) for p, t in keys_table.targets() if p == keys_table.ROOT / name)
    text = path.read_text(encoding="utf-8")
    assert text == keys_table.with_table(text, table), (
        f"{name}'s key table differs from the app's BINDINGS; "
        "run: python scripts/keys_table.py --write"
    )


def test_readme_holds_the_main_screen_and_the_reference_every_screen() -> None:
    (_, readme), (_, reference) = keys_table.targets()
    assert "| main screen | `p` |" in readme and "| guide |" not in readme
    assert "| main screen | `p` |" in reference and "| guide |" in reference


def test_every_binding_has_an_id_and_a_tooltip() -> None:
    seen: set[str] = set()
    for where, bindings in keys_table.key_groups():
        assert bindings, f"{where}: no bindings"
        for binding in bindings:
            assert binding.id, f"{where}: {binding.key} has no id"
            assert binding.tooltip, f"{where}: {binding.key} ({binding.id}) has no tooltip"
            assert binding.id not in seen, f"binding id {binding.id} is used twice"
            seen.add(binding.id)


def test_table_rows_name_every_key_once_per_screen() -> None:
    table = keys_table.render_table()
    rows = table.splitlines()[2:]
    groups = keys_table.key_groups()
    assert len(rows) <= sum(len(bindings) for _, bindings in groups)
    assert "| main screen | `p` |" in table
    assert "| main screen | `?` | Every key |" in table  # key_display wins over question_mark
    assert "| guide | `→` `n` `Space` | Next step |" in table
    assert "(not with `--readonly`)" in next(r for r in rows if r.startswith("| main screen | `r`"))


def test_markers_are_required_and_only_their_inside_changes() -> None:
    with pytest.raises(ValueError, match="markers"):
        keys_table.with_table("# no markers\n", "| table |\n")
    text = f"before\n{keys_table.START}\nold\n{keys_table.END}\nafter\n"
    assert keys_table.with_table(text, "| new |\n") == (
        f"before\n{keys_table.START}\n| new |\n{keys_table.END}\nafter\n"
    )
