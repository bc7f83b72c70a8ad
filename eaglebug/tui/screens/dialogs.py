"""What each mutating key asks before it acts, and the action a yes hands to the controller.

`p` on a finding: an env or flag fix is a yes/no with each option's trade-off, a patch is its diff, an
already committed fix or one without an automatic fix is a sentence instead. `u` and `r` are a
yes/no saying exactly what they will do. Nothing here acts: the screen submits the action.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen

from eaglebug.checks import Choice, EnvFix, Finding, FlagFix, PatchFix
from eaglebug.session.controller import (
    AcceptEnv,
    AcceptFlag,
    Action,
    ApplyPatch,
    Relaunch,
    Stop,
    Undo,
)
from eaglebug.session.session import Session
from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.screens.diff import DiffModal
from eaglebug.tui.widgets.checks_panel import label, tag_of


@dataclass(frozen=True)
class Ask:
    """A dialog; `action` runs when it is answered yes."""

    screen: ModalScreen[bool]
    action: Action


@dataclass(frozen=True)
class Say:
    """No dialog: a sentence instead (nothing to do, or nothing automatic)."""

    text: str
    title: str = ""
    severity: SeverityLevel = "warning"


def fix(session: Session, finding: Finding | None) -> Ask | Say:
    """What `p` does for the selected finding."""
    if finding is None:
        return Say("select a check first (arrow keys)")
    env = session.env_fix(finding)
    if env is not None:
        screen = _next_launch(finding, env, f"Set {env.text()} for the next launch")
        return Ask(screen, AcceptEnv(env.variable, env.value))
    flag = session.flag_fix(finding)
    if flag is not None:
        screen = _next_launch(finding, flag, f"Launch with {flag.text()} next time")
        return Ask(screen, AcceptFlag(flag.flag, flag.value or ""))
    patch = session.patch_for(finding)
    done = session.committed_fix(finding) if patch is None else None
    if done is not None:
        sha = (done.commit or "")[:10]
        return Say(f"already fixed in commit {sha}; r relaunches to try it", "fixed", "information")
    if patch is None or not patch.methods:
        reason = patch.refused.get(finding.attribute or "") if patch else None
        if reason is None and isinstance(finding.fix, PatchFix) and finding.fix.refused:
            reason = f"no automatic fix: {finding.fix.refused}"
        return Say(reason or "no automatic fix for this check; Enter shows the evidence")
    return Ask(DiffModal(patch), ApplyPatch(patch))


def _next_launch(finding: Finding, chosen: EnvFix | FlagFix, said: str) -> ConfirmModal:
    """The yes/no of a fix for the next launch: what it does, and each option's trade-off
    (the one chosen alone, or every option of a choice)."""
    body = Text(f"{said} (r relaunches).\n\n")
    options = finding.fix.options if isinstance(finding.fix, Choice) else (chosen,)
    for option in options:
        body.append(f"{option.text()}: ", style="bold")
        body.append(f"{option.tradeoff}\n", style="dim")
    return ConfirmModal(f"next launch: {chosen.text()}", body, yes="Use it (y)")


def undo() -> Ask:
    body = "Revert eaglebug's newest commit in the SGLang repository (git revert)?"
    return Ask(ConfirmModal("undo", body), Undo())


def relaunch(session: Session, expected: Sequence[Finding] = ()) -> Ask:
    """`r`: stop what runs (saying which launch), wait for its GPU memory, launch again.
    `expected`: the checks' errors that no fix pending for the next launch answers, in the
    order the launch meets them: a launch they stop wastes its weight load, so the dialog
    says so before the yes."""
    record = session.current_launch()
    running = session.server.attached()
    pending = session.pending_env()
    flags = session.pending_flags()
    body = Text()
    if running is not None:
        body.append(
            f"Stop launch {running.number} (pid {running.pid}) and its whole process tree, "
        )
        body.append("wait until its GPU memory is released, then ")
    body.append("launch again" if record else "Launch now")
    if pending:
        body.append(" with " + " ".join(f"{k}={v}" for k, v in pending.items()), style="bold")
    if flags:
        words = " ".join(f"{k} {v}".strip() for k, v in flags.items())
        body.append((" and " if pending else " with ") + words, style="bold")
    body.append("?")
    yes = "Yes (y)"
    if expected:
        body.append("\n\n")
        _expected(body, expected)
        body.append("p on a check applies its fix; Enter shows why.", style="dim")
        yes = "Launch anyway (y)"
    return Ask(ConfirmModal("relaunch" if record else "launch", body, yes=yes), Relaunch())


def _expected(body: Text, errors: Sequence[Finding]) -> None:
    """What the checks' standing errors say of this launch: the first with a step is where it
    is expected to stop; the others are named (`config.algorithm_mismatch` lets it run, with
    no speed-up: its evidence says so, not the dialog)."""
    stopping = [f for f in errors if f.step is not None]
    running = [f for f in errors if f.step is None]
    if stopping:
        first = stopping[0]
        which = f" ({len(stopping)} errors), first" if len(stopping) > 1 else ":"
        body.append("The checks expect it to fail", style="bold red")
        body.append(f"{which} {label(first)} {tag_of(first)}".rstrip() + ".\n")
    if running:
        names = ", ".join(label(f) for f in running)
        more = "also " if stopping else ""
        errors_word = f"{len(running)} errors" if len(running) > 1 else "an error"
        body.append(f"The checks {more}found {errors_word}", style="bold red")
        body.append(f": {names}.\n")


def stop(session: Session) -> Ask | Say:
    """The palette's `server: stop`: which launch, and that its whole tree goes."""
    running = session.server.attached()
    if running is None:
        return Say("no server is running", "stop", "information")
    body = f"Stop launch {running.number} (pid {running.pid}) and its whole process tree?"
    return Ask(ConfirmModal("stop", body), Stop())
