"""Yes/no for anything that writes, commits, kills or relaunches: y, n, or Escape."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmModal(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", tooltip="Go ahead", id="confirm.yes"),
        Binding("n", "answer(False)", "No", tooltip="Leave everything as it is", id="confirm.no"),
        Binding(
            "escape",
            "answer(False)",
            "Cancel",
            tooltip="Leave everything as it is",
            id="confirm.cancel",
        ),
    ]

    def __init__(self, title: str, body: str | Text, yes: str = "Yes (y)") -> None:
        super().__init__(classes="modal")
        self.title_text = title
        self.body = body
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(self.title_text, style="bold"), classes="dialog-title")
            yield Static(self.body, classes="dialog-body")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.yes, variant="primary", id="yes")
                yield Button("No (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
