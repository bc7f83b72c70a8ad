"""A finding's evidence: call sites with code, guards, the inherited-from chain, the delegate, the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from eaglebug.checks import Finding, one_line
from eaglebug.cli.view import Line, evidence_lines, fix_lines
from eaglebug.tui.render import syntax

if TYPE_CHECKING:
    from eaglebug.checks import Patch


def _render(lines: list[Line]) -> list[RenderableType]:
    """Each line as Text; a run of code lines as one highlighted block."""
    out: list[RenderableType] = []
    code: list[str] = []

    def flush() -> None:
        if code:
            out.append(syntax("\n".join(code), "python", theme="ansi_dark"))
            code.clear()

    for line in lines:  # the tree's code, a config's strings: terminal-safe (`one_line`)
        if line.code:
            code.append("  " * line.indent + one_line(line.text))
            continue
        flush()
        pad = Text("  " * line.indent)
        label, text = one_line(line.label), one_line(line.text)
        out.append(pad + Text(label, style=line.label_style) + Text(text, style=line.style))
    flush()
    return out


def evidence(finding: Finding, patch: Patch | None) -> Group:
    """The finding's view (`eaglebug.cli.view`, as the CLI prints it) under a headline."""
    parts: list[RenderableType] = [
        Text(
            f"{finding.severity}  {finding.id}",
            style="bold red" if finding.severity == "error" else "bold",
        ),
        Text(one_line(finding.message)),
    ]
    if finding.class_:
        parts.append(Text(f"class: {finding.class_}  ({finding.role} role)", style="dim"))
    evidence_part = evidence_lines(finding)
    if evidence_part:
        parts.append(Text(""))
        parts += _render(evidence_part)
    fix_part = fix_lines(finding)
    if fix_part:
        parts.append(Text(""))
        parts += _render(fix_part)
    if patch is not None and patch.methods:
        parts.append(Text(f"\np: preview the patch of {patch.file} and apply it", style="dim"))
    return Group(*parts)


class EvidenceScreen(ModalScreen[None]):
    BINDINGS = [
        Binding(
            "escape,q,enter",
            "close",
            "Close",
            tooltip="Back to the main screen",
            id="evidence.close",
        ),
    ]

    def __init__(self, finding: Finding, patch: Patch | None) -> None:
        super().__init__(classes="modal")
        self.finding = finding
        self.patch = patch

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"), VerticalScroll():
            yield Static(evidence(self.finding, self.patch))

    def action_close(self) -> None:
        self.dismiss(None)
