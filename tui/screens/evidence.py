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

from eaglebug.checks.findings import Finding
from eaglebug.tui.render import syntax

if TYPE_CHECKING:
    from eaglebug.checks.delegation import Patch


def evidence(finding: Finding, patch: Patch | None) -> Group:
    parts: list[RenderableType] = []
    head = Text(
        f"{finding.severity}  {finding.id}",
        style="bold red" if finding.severity == "error" else "bold",
    )
    parts.append(head)
    parts.append(Text(finding.message))
    if finding.class_:
        parts.append(Text(f"class: {finding.class_}  ({finding.role} role)", style="dim"))
    raw_sites = finding.details.get("sites")
    sites: list[dict[str, object]] = raw_sites if isinstance(raw_sites, list) else []
    by_site = {(s["file"], s["line"]): s for s in sites}
    if finding.call_sites:
        parts.append(Text("\ncall sites", style="bold underline"))
    for site in finding.call_sites:
        parts.append(Text(f"{site.file}:{site.line}", style="cyan") + Text(f"  {site.code}"))
        extra = by_site.get((site.file, site.line), {})
        guards = extra.get("guards")
        if isinstance(guards, list) and guards:
            parts.append(Text(f"    when {' and '.join(map(str, guards))}", style="dim"))
        via = extra.get("via")
        if isinstance(via, list) and via:
            parts.append(Text(f"    reached via {', '.join(map(str, via))}", style="dim"))
    ranks = finding.details.get("ranks")
    if ranks:
        parts.append(Text(f"\nranks: {', '.join(map(str, ranks))}", style="dim"))
    chain = finding.details.get("chain")
    if chain:
        parts.append(Text("\ninherited from: " + " → ".join(chain), style="dim"))
    if finding.delegate:
        inner = ", ".join(
            str(c).rsplit(".", 1)[-1] for c in finding.details.get("delegate_class", [])
        )
        parts.append(Text(f"\ndelegate: self.{finding.delegate} ({inner})", style="green"))
    for assumption in finding.details.get("assumed", []):
        parts.append(Text(f"assumed: {assumption}", style="dim"))
    options = finding.details.get("options")
    if isinstance(options, dict):
        parts.append(Text("\nfix, either:", style="bold underline"))
        for option, tradeoff in options.items():
            parts.append(Text(f"  {option}", style="green") + Text(f"  {tradeoff}", style="dim"))
    elif patch is not None and finding.attribute in patch.refused:
        parts.append(
            Text(f"\nno automatic fix: {patch.refused[finding.attribute]}", style="yellow")
        )
    elif finding.fix:
        parts.append(Text("\nfix", style="bold underline"))
        parts.append(
            syntax(finding.fix, "python", theme="ansi_dark")
            if "\n" in finding.fix
            else Text(finding.fix, style="green")
        )
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
