"""Every key, generated from the same BINDINGS the app uses (nothing to keep in sync)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

_KEY_NAMES = {
    "escape": "Esc",
    "enter": "Enter",
    "question_mark": "?",
    "slash": "/",
    "right": "→",
    "left": "←",
    "space": "Space",
    "tab": "Tab",
    "end": "End",
}


def key_text(binding: Binding) -> str:
    """`escape,q,g` -> `Esc q g`: every key a binding answers to, as a person types it."""
    if binding.key_display:
        return binding.key_display
    return " ".join(_KEY_NAMES.get(k.strip(), k.strip()) for k in binding.key.split(","))


def key_table(groups: Iterable[tuple[str, Iterable[Binding]]]) -> Table:
    table = Table(box=None, show_header=False, padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for title, bindings in groups:
        table.add_row(f"[underline]{title}[/]", "")
        for binding in bindings:
            table.add_row(key_text(binding), binding.tooltip or binding.description)
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close", tooltip="Back", id="help.close")
    ]

    def __init__(self, groups: list[tuple[str, list[Binding]]]) -> None:
        super().__init__(classes="modal")
        self.groups = groups

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(
                "[bold]eaglebug keys[/]  (Ctrl+P: command palette)", classes="dialog-title"
            )
            with VerticalScroll():
                yield Static(key_table(self.groups), id="key-table")

    def action_close(self) -> None:
        self.dismiss(None)
