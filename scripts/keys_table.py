"""The key tables of the docs, generated from the same `BINDINGS` the app and its help screen use.

    python scripts/keys_table.py            print the full table
    python scripts/keys_table.py --write    put the tables into their files, between the markers
    python scripts/keys_table.py --check    exit 1 when a file's table is out of date

README.md holds the main screen's keys (what a newcomer needs); docs/tui.md holds every
screen's. `tests/test_keys_table.py` runs the check, so a key added, renamed or re-described in
`eaglebug/tui/` fails the suite until the docs say the same (STYLE.md practice 7).
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

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TUI_DOC = ROOT / "docs" / "tui.md"
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


def render_table(groups: list[tuple[str, list[Binding]]] | None = None, ids: bool = False) -> str:
    """The Markdown table: where, key(s), what it does (the binding's tooltip), and with `ids`
    each binding's id (what the command palette and the tests name it by)."""
    rows: list[tuple[str, str, str, str]] = []  # (where, keys, what, ids)
    for where, bindings in groups if groups is not None else key_groups():
        for binding in bindings:
            what = binding.tooltip or binding.description
            if where == "main screen" and binding.action in MUTATING:
                what += " (not with `--readonly`)"
            name = f"`{binding.id}`"
            if rows and rows[-1][0] == where and rows[-1][2] == what:  # n and Esc: one row
                last = rows[-1]
                rows[-1] = (where, f"{last[1]} {keys(binding)}", what, f"{last[3]} {name}")
            else:
                rows.append((where, keys(binding), what, name))
    if ids:
        lines = ["| Where | Key | What it does | Id |", "|---|---|---|---|"]
        lines += [f"| {w} | {k} | {_cell(what)} | {i} |" for w, k, what, i in rows]
    else:
        lines = ["| Where | Key | What it does |", "|---|---|---|"]
        lines += [f"| {w} | {k} | {_cell(what)} |" for w, k, what, _ in rows]
    return "\n".join(lines) + "\n"


def targets() -> list[tuple[Path, str]]:
    """Each file with a key table, and the table it holds: the main screen's keys in the
    README, every screen's in the TUI reference."""
    groups = key_groups()
    return [(README, render_table(groups[:1])), (TUI_DOC, render_table(groups, ids=True))]


def with_table(text: str, table: str) -> str:
    """`text` with the text between the markers replaced by `table`."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the file needs the markers {START} and {END}, in that order")
    return text[: start + len(START)] + "\n" + table + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="update the files")
    action.add_argument("--check", action="store_true", help="exit 1 if a file differs")
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        sys.stdout.write(render_table())
        return 0
    stale = []
    for path, table in targets():
        current = path.read_text(encoding="utf-8")
        try:
            wanted = with_table(current, table)
        except ValueError as exc:
            sys.stderr.write(f"error: {path.relative_to(ROOT)}: {exc}\n")
            return 2
        if wanted == current:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(wanted, encoding="utf-8")
            print(f"updated {path.relative_to(ROOT)}")
    if stale:
        sys.stderr.write(
            f"error: the key table of {', '.join(stale)} is out of date\n"
            "hint: python scripts/keys_table.py --write\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
