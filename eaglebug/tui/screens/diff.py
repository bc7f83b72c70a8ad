"""The patch as a diff; y applies it (one commit), n or Escape leaves the file alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from eaglebug.tui.render import syntax

if TYPE_CHECKING:
    from eaglebug.checks import Patch


class DiffModal(ModalScreen[bool]):
    BINDINGS = [
        Binding(
            "y", "answer(True)", "Apply", tooltip="Write the patch and commit it", id="diff.apply"
        ),
        Binding(
            "n", "answer(False)", "Cancel", tooltip="Leave the file as it is", id="diff.cancel"
        ),
        Binding(
            "escape", "answer(False)", "Cancel", tooltip="Leave the file as it is", id="diff.escape"
        ),
    ]

    def __init__(self, patch: Patch) -> None:
        super().__init__(classes="modal")
        self.patch = patch

    def compose(self) -> ComposeResult:
        patch = self.patch
        with Vertical(classes="dialog wide"):
            yield Static(
                Text(
                    f"patch {patch.short_class}: delegate {', '.join(patch.methods)} to self.{patch.delegate}",
                    style="bold",
                ),
                classes="dialog-title",
            )
            notes = [f"note: {n}" for n in patch.notes]
            notes += [f"not delegated: {m}: {why}" for m, why in patch.refused.items()]
            if notes:
                yield Static(Text("\n".join(notes), style="yellow"), classes="dialog-body")
            with VerticalScroll(classes="diff-scroll"):
                yield Static(syntax(patch.diff(), "diff", theme="ansi_dark", word_wrap=False))
            yield Static(
                Text(f"y: write {patch.file} and commit it (one commit, undo with u)", style="dim"),
                classes="dialog-body",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Apply and commit (y)", variant="primary", id="yes")
                yield Button("Cancel (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
