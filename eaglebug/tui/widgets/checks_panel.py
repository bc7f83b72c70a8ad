"""Checks: every finding from preflight and the log, by severity, with what is pending.

Within a severity the findings come in start-up order (what the launch would hit first, first),
each with the step it would stop at: the evidence screen says what a crash there costs.

A finding reads at a glance at the panel's width: where every finding's id, step and status fit
on one line (a wide or stacked panel), they stand on one line; otherwise (34 columns beside the
log) each finding's step and status go on a dim line of their own under its id, indented, so
no id or step is cut mid-phrase. While the checks run, the line above the list says which stage
runs and how many files are done of how many (`show_state`, from the main screen)."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from eaglebug.checks import SEVERITY_ORDER, Finding, FindingKey, Step
from eaglebug.tui.messages import FindingOpened

_ICON = {"error": ("✗", "bold red"), "warning": ("!", "yellow"), "info": ("·", "dim")}


def label(finding: Finding) -> str:
    """A finding's name in the list: an interface finding by its method, the draft's marked
    (the target and the draft often lack the same one: two rows that read the same else)."""
    if finding.id.startswith("interface.") and finding.attribute:
        return finding.attribute + (" (draft)" if finding.role == "draft" else "")
    if finding.id.startswith("log."):
        ranks = finding.ranks
        where = f" ({len(ranks)} ranks)" if len(ranks) > 1 else ""
        return f"{finding.id}{where}"
    return finding.id


def step_tag(step: Step) -> str:
    """Where the launch would stop, short: `at draft lm head`, `before draft load`."""
    name = step.label.replace("token map / lm head", "lm head")
    if step.role == "draft" and "draft" not in name:
        name = f"draft {name}"
    return f"at {name}" if step.within else f"before {name}"


def tag_of(finding: Finding) -> str:
    """The step shown beside a finding ("" for info, which stops nothing)."""
    if finding.step is None or finding.severity == "info":
        return ""
    return step_tag(finding.step)


INDENT = "  "  # a finding's second line starts under its id, past the icon
LIST_GUTTER = 2  # what the list takes of the panel's inner width (its padding, a scrollbar)


def entry(
    finding: Finding, status: str | None, *, column: int | None = None, stacked: bool = False
) -> Text:
    """A finding's option: its id, then its step and status on the same line (from `column`,
    so the steps of a list stand aligned; else after a `·`), or (`stacked`) on a dim line of
    their own under the id."""
    icon, style = _ICON[finding.severity]
    head = Text(f"{icon} ", style=style) + Text(label(finding))
    tag = tag_of(finding)
    pending = status is not None and "pending" in status
    mark = Text(status or "", style="italic cyan" if pending else "italic green")
    if stacked and (tag or mark):
        second = Text(INDENT) + Text(tag, style="dim")
        if mark:
            second += Text("  " if tag else "") + mark
        return head + Text("\n") + second
    if tag and column is not None:
        head += Text(" " * max(column - head.cell_len, 2)) + Text(tag, style="dim")
    elif tag:
        head += Text(f" · {tag}", style="dim")
    return head + Text("  ") + mark if mark else head


class ChecksPanel(Vertical):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "checks"
        self.findings: list[Finding] = []
        self.pending: dict[str, str] = {}
        self._statuses: dict[FindingKey, str] = {}
        self._layout: tuple[int | None, bool] | None = None  # as `_fit` chose it
        self._summary = ""  # the counts by severity, and what the next launch gets

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
        self._statuses = statuses
        self._list(listing)
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
        self._summary = summary
        self.show_state(state)

    def show_state(self, state: str) -> None:
        """The line above the list: how far the checks are, or how they went; the counts.

        A cold check says how far it is ten times a second; laying the screen out again for
        each was most of what the app did meanwhile, on the core the check runs on. So the
        screen is laid out again only when the new text takes another height than the one
        laid out (Textual's own measure of it, wrapped to the width it has)."""
        summary = self._summary
        shown = self.query_one("#checks-state", Static)
        shown.update(Text(f"{state}\n{summary}" if state else summary), layout=False)
        region = shown.content_region
        if region.width <= 0 or region.height != shown.get_content_height(
            self.size, self.app.size, region.width
        ):
            shown.refresh(layout=True)

    def _list(self, listing: OptionList) -> None:
        """The options: on one line each, their steps aligned, if that fits the list's width;
        else on one line each; else on two."""
        self._layout = layout = self._fit()
        column, stacked = layout
        listing.clear_options()
        for finding in self.findings:
            status = self._statuses.get(finding.key)
            listing.add_option(Option(entry(finding, status, column=column, stacked=stacked)))

    def _fit(self) -> tuple[int | None, bool]:
        """(the column the steps start at, or None; whether the findings take two lines)."""
        width = self._width()
        if width is None:
            return None, False
        findings, statuses = self.findings, self._statuses
        heads = [Text(f"{_ICON[f.severity][0]} {label(f)}").cell_len for f in findings if tag_of(f)]
        column = max(heads, default=0) + 2  # past the longest id that has a step
        for layout in ((column, False), (None, False)):
            if all(
                entry(f, statuses.get(f.key), column=layout[0]).cell_len <= width for f in findings
            ):
                return layout
        return None, True

    def _width(self) -> int | None:
        """The cells an option has on a line; None before the panel has its size."""
        inner = self.content_region.width
        return inner - LIST_GUTTER if inner > LIST_GUTTER else None

    def on_resize(self, event: events.Resize) -> None:
        """Side by side and stacked panels differ in width: lay the findings out again when
        the one-line form starts or stops fitting."""
        if self._fit() != self._layout:
            listing = self.query_one(OptionList)
            highlighted = listing.highlighted
            self._list(listing)
            listing.highlighted = highlighted

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
