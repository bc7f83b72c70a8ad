"""The README's key table, generated from the same `BINDINGS` the app and its help screen use.

    python scripts/readme_keys.py            print the table
    python scripts/readme_keys.py --write    put it into README.md, between the markers
    python scripts/readme_keys.py --check    exit 1 when README.md's table is out of date

`tests/test_readme_keys.py` runs the check, so a key added, renamed or re-described in `tui/`
fails the suite until the README says the same (STYLE.md practice 7).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from textual.binding import Binding  # noqa: TID251 (reads the Textual app's bindings)
from textual.keys import format_key  # noqa: TID251 (the footer's own key names)

from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.screens.diff import DiffModal
from eaglebug.tui.screens.evidence import EvidenceScreen
from eaglebug.tui.screens.guide import GuideScreen
from eaglebug.tui.screens.help import HelpScreen
from eaglebug.tui.screens.main import MUTATING, MainScreen
from eaglebug.tui.widgets.log_panel import LogPanel

README = Path(__file__).resolve().parents[1] / "README.md"
START = "<!-- keys:start -->"
END = "<!-- keys:end -->"
# Where a name reads better in prose than the footer's glyph or lower case.
KEY_NAMES = {"escape": "Esc", "enter": "Enter", "end": "End", "tab": "Tab", "space": "Space"}


def key_groups() -> list[tuple[str, list[Binding]]]:
    """Every screen's bindings, in the order the help screen lists them."""

    def bindings(items: Iterable[object]) -> list[Binding]:
        return [b for b in items if isinstance(b, Binding)]

    return [
        ("main screen", bindings(MainScreen.BINDINGS)),
        ("log panel", bindings(LogPanel.BINDINGS)),
        ("check evidence", bindings(EvidenceScreen.BINDINGS)),
        ("patch preview", bindings(DiffModal.BINDINGS)),
        ("yes/no dialog", bindings(ConfirmModal.BINDINGS)),
        ("guide", bindings(GuideScreen.BINDINGS)),
        ("help", bindings(HelpScreen.BINDINGS)),
    ]


def keys(binding: Binding) -> str:
    """`a` `b` for a binding of "a,b"; its key_display when it names one key."""
    names = [k.strip() for k in binding.key.split(",")]
    if binding.key_display and len(names) == 1:
        shown = [binding.key_display]
    else:
        shown = [KEY_NAMES.get(name, format_key(name)) for name in names]
    return " ".join(f"`{name}`" for name in shown)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(groups: list[tuple[str, list[Binding]]] | None = None) -> str:
    """The Markdown table: where, key(s), what it does (the binding's tooltip)."""
    rows: list[tuple[str, str, str]] = []  # (where, keys, what)
    for where, bindings in groups if groups is not None else key_groups():
        for binding in bindings:
            what = binding.tooltip or binding.description
            if where == "main screen" and binding.action in MUTATING:
                what += " (not with `--readonly`)"
            if rows and rows[-1][0] == where and rows[-1][2] == what:  # n and Esc: one row
                rows[-1] = (where, f"{rows[-1][1]} {keys(binding)}", what)
            else:
                rows.append((where, keys(binding), what))
    lines = ["| Where | Key | What it does |", "|---|---|---|"]
    lines += [f"| {where} | {key} | {_cell(what)} |" for where, key, what in rows]
    return "\n".join(lines) + "\n"


def with_table(readme: str, table: str) -> str:
    """`readme` with the text between the markers replaced by `table`."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md needs the markers {START} and {END}, in that order")
    return readme[: start + len(START)] + "\n" + table + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="update README.md")
    action.add_argument("--check", action="store_true", help="exit 1 if README.md differs")
    args = parser.parse_args(argv)
    table = render_table()
    if not (args.write or args.check):
        sys.stdout.write(table)
        return 0
    current = README.read_text(encoding="utf-8")
    try:
        wanted = with_table(current, table)
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.check:
        if wanted != current:
            sys.stderr.write(
                "error: README.md's key table is out of date\n"
                "hint: python scripts/readme_keys.py --write\n"
            )
            return 1
        return 0
    if wanted != current:
        README.write_text(wanted, encoding="utf-8")
        print(f"updated {README.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
