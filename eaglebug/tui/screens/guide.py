"""Guided mode: what EAGLE-3 needs from a target, the checks, each fix and why, the launch, and
once it is ready whether the draft's tokens are accepted.

Every step is built from this session's real results (the audited tree's call sites, the
preflight findings, the patches, the live milestones), not from canned text. The step the user
reached is kept by the app, so `g` resumes where they left off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from eaglebug.checks import THRESHOLD, Finding, RuntimeEvidence, env_of, flag_of, one_line
from eaglebug.session.acceptwatch import AcceptanceSnapshot
from eaglebug.session.checking import CheckResult
from eaglebug.tui.render import syntax

if TYPE_CHECKING:
    from eaglebug.checks import Patch


def _needs(result: CheckResult) -> RenderableType:
    parts: list[RenderableType] = [
        Text(
            "SGLang's speculative workers call methods on the *outer* model object. For EAGLE-3 "
            "the target must capture aux hidden states (set_eagle3_layers_to_capture) and share "
            "its embedding and LM head with the draft (get_embed_and_head / set_embed_and_head).\n"
        )
    ]
    for report in result.reports:
        parts.append(
            Text(f"{report.ref.facts.name} ({report.role}) — {report.ref.file}", style="bold")
        )
        for attribute, provider in report.provided:
            if provider.kind in {"nn.Module", "object"}:
                continue
            where = f"{provider.file}:{provider.line}" if provider.file else provider.owner
            parts.append(
                Text(f"  ✓ {attribute}", style="green")
                + Text(f"  from {provider.owner.rsplit('.', 1)[-1]} ({where})", style="dim")
            )
        for finding in report.findings:
            if finding.severity == "info" or finding.attribute is None:
                continue
            parts.append(
                Text(f"  ✗ {finding.attribute}", style="bold red")
                + Text("  called at:", style="dim")
            )
            for site in finding.call_sites[:4]:
                parts.append(Text(f"      {site.file}:{site.line}  {site.code}", style="cyan"))
    return Group(*parts)


def _checks(result: CheckResult) -> RenderableType:
    errors = [f for f in result.findings if f.severity == "error"]
    parts: list[RenderableType] = [
        Text(
            f"Preflight read the launch command and found {len(errors)} launch blocker(s); "
            "by hand each one costs a full model load before it shows.\n"
        )
    ]
    for finding in errors:
        parts.append(
            Text(f"✗ {finding.id}", style="bold red") + Text(f"  {one_line(finding.message)}")
        )
    if not errors:
        parts.append(Text("✓ nothing blocks this launch", style="green"))
    return Group(*parts)


def _launch_fix(finding: Finding) -> RenderableType:
    """A fix that changes the launch (a flag, an env var), not the code."""
    fix = flag_of(finding.fix) or env_of(finding.fix)
    parts: list[RenderableType] = [Text(f"Why: {one_line(finding.message)}\n")]
    if fix is not None:
        parts.append(Text("The fix: ", style="bold") + Text(fix.text(), style="green"))
        if fix.tradeoff:
            parts.append(Text(f"  {fix.tradeoff}", style="dim"))
    parts.append(
        Text(
            "\nOn the main screen, select the finding and press p: it becomes pending for the "
            "next launch (nothing is written to your files); r relaunches with it.",
            style="dim",
        )
    )
    return Group(*parts)


def _working(snapshot: AcceptanceSnapshot | None, runtime: list[Finding]) -> RenderableType:
    parts: list[RenderableType] = [
        Text(
            "A ready server can still have lost its speed-up: the target verifies every token, "
            "so the answers stay right, and the only symptom is an acceptance length near 1.0 "
            f"(an EAGLE-3 draft trained for its target accepts about 2.5-4). Below {THRESHOLD:g} "
            "for three reports in a row is runtime.low_acceptance. s runs the probe.\n"
        )
    ]
    latest = snapshot.latest if snapshot is not None else None
    if latest is None:
        state = snapshot.state if snapshot is not None and snapshot.url else "not ready yet"
        parts.append(Text(f"  acceptance: {state}", style="dim"))
    else:
        style = "bold red" if latest.length < THRESHOLD else "bold green"
        parts.append(
            Text("  acceptance now: ")
            + Text(f"{latest.length:.2f}", style=style)
            + Text(
                f"  ({latest.source}, {len(snapshot.reports) if snapshot else 0} reports)",
                style="dim",
            )
        )
    for finding in runtime:
        evidence = finding.evidence
        parts.append(
            Text(f"\n✗ {finding.id}", style="bold red") + Text(f"  {one_line(finding.message)}")
        )
        if isinstance(evidence, RuntimeEvidence):
            for cause in evidence.causes:
                mark, style = {True: ("✗", "red"), False: ("✓", "green"), None: ("?", "dim")}[
                    cause.flagged
                ]
                parts.append(
                    Text(f"  {mark} {cause.text}", style=style)
                    + Text(f"  ({cause.check})", style="dim")
                )
    return Group(*parts)


class GuideScreen(ModalScreen[int]):
    BINDINGS = [
        Binding("right,n,space", "step(1)", "Next", tooltip="Next step", id="guide.next"),
        Binding("left,b", "step(-1)", "Back", tooltip="Previous step", id="guide.back"),
        Binding(
            "escape,q,g",
            "close",
            "Close",
            tooltip="Back to the main screen (g resumes here)",
            id="guide.close",
        ),
    ]

    def __init__(
        self,
        result: CheckResult,
        milestones: Callable[[], list[str]],
        start: int = 0,
        acceptance: Callable[[], tuple[AcceptanceSnapshot | None, list[Finding]]] | None = None,
    ) -> None:
        super().__init__(classes="modal")
        self.result = result
        self.milestones = milestones
        self.acceptance = acceptance or (lambda: (None, []))
        self.steps: list[tuple[str, Callable[[], RenderableType]]] = [
            ("What EAGLE-3 needs from your target", lambda: _needs(result)),
            ("What preflight found", lambda: _checks(result)),
        ]
        for patch in result.patches:
            if patch.methods:
                self.steps.append((f"Fix: {patch.short_class}", self._patch_step(patch)))
        for finding in result.findings:
            if finding.severity == "error" and (flag_of(finding.fix) or env_of(finding.fix)):
                self.steps.append((f"Fix: {finding.id}", self._launch_fix_step(finding)))
        self.steps.append(("The launch, as it happens", self._launch))
        self.steps.append(
            ("After ready: is the draft accepted?", lambda: _working(*self.acceptance()))
        )
        self.index = min(max(start, 0), len(self.steps) - 1)

    def _launch_fix_step(self, finding: Finding) -> Callable[[], RenderableType]:
        return lambda: _launch_fix(finding)

    def _patch_step(self, patch: Patch) -> Callable[[], RenderableType]:
        return lambda: self._patch(patch)

    def _patch(self, patch: Patch) -> RenderableType:
        reasons = [f for f in patch.fixes if f.severity == "error"] or list(patch.fixes)
        why = "\n".join(f"• {f.attribute}: {one_line(f.message)}" for f in reasons)
        parts: list[RenderableType] = [
            Text(f"Why: {why}\n"),
            syntax(patch.diff(), "diff", theme="ansi_dark"),
            Text(
                "\nOn the main screen, select the finding and press p to preview and apply this as one commit.",
                style="dim",
            ),
        ]
        return Group(*parts)

    def _launch(self) -> RenderableType:
        seen = self.milestones()
        lines = [Text("Milestones of the current launch (updates live):\n")]
        lines += [Text(f"  ✓ {m}", style="green") for m in seen] or [
            Text("  (no launch yet: press r on the main screen)", style="dim")
        ]
        return Group(*lines)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Static(id="guide-title", classes="dialog-title")
            with VerticalScroll():
                yield Static(id="guide-body")
            yield Static(Text("← back · → next · Esc close", style="dim"))

    def on_mount(self) -> None:
        self.render_step()
        self.set_interval(1.0, self._refresh_live)

    def _refresh_live(self) -> None:
        if self.index >= len(self.steps) - 2:  # the launch and the acceptance update live
            self.render_step()

    def render_step(self) -> None:
        title, build = self.steps[self.index]
        dots = " ".join("●" if i == self.index else "○" for i in range(len(self.steps)))
        self.query_one("#guide-title", Static).update(
            Text(f"Step {self.index + 1} of {len(self.steps)}  {dots}\n", style="bold")
            + Text(title, style="bold underline")
        )
        self.query_one("#guide-body", Static).update(build())

    def action_step(self, delta: int) -> None:
        self.index = min(max(self.index + delta, 0), len(self.steps) - 1)
        self.render_step()

    def action_close(self) -> None:
        self.dismiss(self.index)
