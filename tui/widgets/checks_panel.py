"""Checks: every finding from preflight and the log, by severity, with what is pending.

Within a severity the findings come in start-up order (what the launch would hit first, first),
each with the step it would stop at: the evidence screen says what a crash there costs."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from eaglebug.checks import SEVERITY_ORDER, Finding, FindingKey, Step
from eaglebug.tui.messages import FindingOpened

_ICON = {"error": ("✗", "bold red"), "warning": ("!", "yellow"), "info": ("·", "dim")}


def label(finding: Finding) -> str:
    if finding.id.startswith("interface.") and finding.attribute:
        return finding.attribute
    if finding.id.startswith("log."):
        ranks = finding.ranks
        where = f" ({len(ranks)} ranks)" if len(ranks) > 1 else ""
        return f"{finding.id}{where}"
    return finding.id


def step_tag(step: Step) -> str:
    """The step, short: `lm head (draft)`, `before CUDA graphs`."""
    name = step.label.replace("token map / lm head", "lm head")
    role = " (draft)" if step.role == "draft" else ""
    return f"{name}{role}" if step.within else f"before {name}{role}"


class ChecksPanel(Vertical):
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
        statuses: dict[FindingKey, str] | None = None,
    ) -> None:
        """List the findings; the highlight stays on the same finding (by key), wherever
        new findings land in the list."""
        self.pending = pending
        statuses = statuses or {}
        order = sorted(
            findings,
            key=lambda f: (
                SEVERITY_ORDER[f.severity],
                0 if f.id.startswith("log.") else 1,
                f.step is None,
                f.step.order if f.step is not None else 0,
                f.id,
                f.attribute or "",
            ),
        )
        listing = self.query_one(OptionList)
        before = self.current
        position = listing.highlighted
        self.findings = order
        listing.clear_options()
        for finding in order:
            icon, style = _ICON[finding.severity]
            text = Text(f"{icon} ", style=style) + Text(label(finding))
            if finding.step is not None and finding.severity != "info":
                text += Text(f" · {step_tag(finding.step)}", style="dim")
            status = statuses.get(finding.key)
            if status:
                text += Text(
                    f"  {status}", style="italic cyan" if "pending" in status else "italic green"
                )
            listing.add_option(Option(text))
        if order:
            keys = [f.key for f in order]
            if before is not None and before.key in keys:
                listing.highlighted = keys.index(before.key)
            else:
                listing.highlighted = min(position or 0, len(order) - 1)
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
            self.post_message(FindingOpened(self.findings[event.option_index]))
