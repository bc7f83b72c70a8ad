"""Checks: every finding from preflight and the log, by severity, with what is pending."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from eaglebug.checks.findings import SEVERITY_ORDER, Finding

_ICON = {"error": ("✗", "bold red"), "warning": ("!", "yellow"), "info": ("·", "dim")}


def label(finding: Finding) -> str:
    if finding.id.startswith("interface.") and finding.attribute:
        return finding.attribute
    if finding.id.startswith("log."):
        ranks = finding.details.get("ranks") or []
        where = f" ({len(ranks)} ranks)" if len(ranks) > 1 else ""
        return f"{finding.id}{where}"
    return finding.id


class ChecksPanel(Vertical):
    class Selected(Message):
        """The user opened a finding (Enter)."""

        def __init__(self, finding: Finding) -> None:
            super().__init__()
            self.finding = finding

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "checks"
        self.findings: list[Finding] = []
        self.pending: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Static("running the checks…", id="checks-state")
        yield OptionList(id="checks-list")

    def show(
        self,
        findings: list[Finding],
        pending: dict[str, str],
        state: str,
        fixed: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.pending = pending
        order = sorted(
            findings,
            key=lambda f: (
                SEVERITY_ORDER[f.severity],
                0 if f.id.startswith("log.") else 1,
                f.id,
                f.attribute or "",
            ),
        )
        self.findings = order
        listing = self.query_one(OptionList)
        highlighted = listing.highlighted
        listing.clear_options()
        for finding in order:
            icon, style = _ICON[finding.severity]
            text = Text(f"{icon} ", style=style) + Text(label(finding))
            env = finding.details.get("env_var")
            if finding.id in {"config.context_length", "log.context_length"} and (
                env in pending or (env is None and pending)
            ):
                text += Text("  pending: next launch", style="italic cyan")
            short = (finding.class_ or "").rsplit(".", 1)[-1]
            if finding.id.startswith("log.") and (short, finding.attribute or "") in fixed:
                text += Text("  fixed: relaunch", style="italic green")
            listing.add_option(Option(text))
        if order:
            listing.highlighted = min(highlighted or 0, len(order) - 1)
        counts = {s: sum(1 for f in order if f.severity == s) for s in ("error", "warning", "info")}
        words = {
            "error": ("error", "errors"),
            "warning": ("warning", "warnings"),
            "info": ("info", "info"),
        }
        summary = ", ".join(f"{n} {words[s][n != 1]}" for s, n in counts.items())
        if pending:
            summary += "  ·  next launch: " + " ".join(f"{k}={v}" for k, v in pending.items())
        self.query_one("#checks-state", Static).update(
            Text(f"{state}\n{summary}" if state else summary)
        )

    @property
    def current(self) -> Finding | None:
        index = self.query_one(OptionList).highlighted
        if index is None or not 0 <= index < len(self.findings):
            return None
        return self.findings[index]

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.findings):
            self.post_message(self.Selected(self.findings[event.option_index]))
