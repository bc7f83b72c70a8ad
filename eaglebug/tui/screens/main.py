"""The main screen: header, GPUs, log, checks; its keys, and the handlers of every feed.

It renders what the feeds publish (GPU snapshots, the launch watch's snapshots, the
controller's events) and turns keys into dialogs (`tui.screens.dialogs`) whose yes goes to the
controller. It never acts itself and never blocks: what reads the session on this thread is
`reported`, so a corrupt state file is a notification, not an exit. The evidence, guide and
help screens load when first opened, not before the first frame.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from textual import events, on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer

from eaglebug.checks import Finding
from eaglebug.session.acceptwatch import AcceptanceSnapshot
from eaglebug.session.checking import CheckResult
from eaglebug.session.controller import (
    ActionDone,
    ChecksFinished,
    ChecksRequested,
    Controller,
    Note,
)
from eaglebug.session.problems import Problem
from eaglebug.session.progress import CheckProgress
from eaglebug.tui.messages import (
    CheckProgressed,
    ControllerReported,
    FindingOpened,
    GpuSampled,
    WatchUpdated,
)
from eaglebug.tui.runner import reported, show_problem
from eaglebug.tui.screens import dialogs
from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.screens.diff import DiffModal
from eaglebug.tui.screens.serving import ServingParts
from eaglebug.tui.widgets.checks_panel import ChecksPanel
from eaglebug.tui.widgets.gpu_panel import GpuPanel
from eaglebug.tui.widgets.header import PhaseHeader
from eaglebug.tui.widgets.log_panel import LogPanel

if TYPE_CHECKING:
    pass

# Below this width the three panels stack instead of standing side by side; from it up to
# ROOMY_COLUMNS the GPUs and checks are narrow (no sparklines) so the log gets most of the width.
NARROW_COLUMNS = 110
ROOMY_COLUMNS = 200
MUTATING = frozenset({"patch", "undo", "relaunch", "stop"})
CHECKING = "running the checks…"


class MainScreen(ServingParts):
    """The one main screen. Modals stack above it."""

    BINDINGS = [
        Binding(
            "p",
            "patch",
            "Patch",
            tooltip="Preview the selected check's fix; apply it on confirm (one commit)",
            id="patch",
        ),
        Binding(
            "u", "undo", "Undo", tooltip="Revert eaglebug's last commit (git revert)", id="undo"
        ),
        Binding(
            "r",
            "relaunch",
            "Relaunch",
            tooltip="Stop the server tree, wait for its GPU memory, launch again",
            id="relaunch",
        ),
        Binding("a", "recheck", "Re-check", tooltip="Run the checks again", id="recheck"),
        Binding(
            "s",
            "probe",
            "Probe",
            tooltip="Send a few short prompts to the ready server: acceptance length and tokens/s",
            id="probe",
        ),
        Binding(
            "e",
            "first_error",
            "Crash line",
            tooltip="Jump to the line the launch crashed on (else the first error in the log)",
            id="first_error",
        ),
        Binding(
            "f",
            "fold",
            "Fold",
            tooltip="Show every line as printed (each rank's copy, each update of a progress "
            "bar, eaglebug's polls of the server), or fold them again",
            id="fold",
        ),
        Binding(
            "w",
            "wrap",
            "Wrap",
            show=False,
            tooltip="Wrap long log lines, or cut them at the edge and scroll sideways",
            id="wrap",
        ),
        Binding(
            "x",
            "gpu_rows",
            "GPUs/nodes",
            show=False,
            tooltip="Show every GPU, or one row per node (when the GPUs do not all fit)",
            id="gpu_rows",
        ),
        Binding(
            "slash",
            "filter",
            "Filter",
            key_display="/",
            tooltip="Show only log lines containing a text",
            id="filter",
        ),
        Binding(
            "g",
            "guide",
            "Guide",
            tooltip="Guided mode: what EAGLE-3 needs, each fix, the launch",
            id="guide",
        ),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Every key", id="help"),
        Binding(
            "tab",
            "focus_next",
            "Next panel",
            show=False,
            tooltip="Move focus to the next panel",
            id="focus_next",
        ),
        Binding("q", "quit", "Quit", tooltip="Quit; a launched server keeps running", id="quit"),
    ]

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        *,
        run_checks: bool = True,
        open_guide: bool = False,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.run_checks_on_start = run_checks
        self.open_guide_on_start = open_guide
        self.check_result: CheckResult | None = None  # the newest published result
        self.check_generation = 0  # ... and its generation
        # How far a run got, by its generation (only the newest run's is shown).
        self.check_progress: tuple[int, CheckProgress] | None = None
        self.log_findings: tuple[Finding, ...] = ()
        self.runtime_findings: tuple[Finding, ...] = ()  # the acceptance watchdog's
        self.milestones: tuple[str, ...] = ()
        self.guide_step = 0

    # -- what it renders ------------------------------------------------------------------------
    @property
    def controller(self) -> Controller:
        return self.eaglebug.controller

    @property
    def checking(self) -> bool:
        """A run of the checks newer than the one shown is queued or running."""
        return self.check_generation < self.controller.requested_generation

    def compose(self) -> ComposeResult:
        yield PhaseHeader(id="header", clock=self.clock)
        with Horizontal(id="main"):
            yield GpuPanel(id="gpus")
            yield LogPanel(id="log")
            yield ChecksPanel(id="checks")
        yield Footer()

    def on_mount(self) -> None:
        config = self.session.config
        header = self.query_one(PhaseHeader)
        header.badge = config.demo_label or ("read-only" if config.readonly else "")
        self.eaglebug.start_feeds()
        if self.run_checks_on_start:
            self.call_after_refresh(self.recheck)  # after the first frame: it is CPU-heavy
        else:
            self.refresh_checks()
        self.query_one("#checks-list").focus()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW_COLUMNS, "narrow")
        self.set_class(event.size.width >= ROOMY_COLUMNS, "roomy")

    # -- the checks -----------------------------------------------------------------------------
    def recheck(self) -> None:
        if self.eaglebug.winding_down:
            return
        self.controller.request_checks()
        self.refresh_checks()

    def _checks_done(self, generation: int, result: CheckResult) -> None:
        if generation != self.controller.requested_generation:
            return  # superseded while it was on its way here: the newer one follows
        self.check_result, self.check_generation = result, generation
        self.refresh_checks()
        self.eaglebug.launch_watch.republish()  # log findings resolve against this result
        if result.error:
            self.notify(result.error, title="checks", severity="warning")
        if self.open_guide_on_start:
            self.open_guide_on_start = False
            self.action_guide()

    @reported("checks")
    def refresh_checks(self) -> None:
        result = self.check_result
        findings = [
            *(result.findings if result else []),
            *self.log_findings,
            *self.runtime_findings,
        ]
        session = self.session
        self.query_one(ChecksPanel).show(
            findings, session.pending_env(), self._check_state(), session.statuses(findings)
        )

    def _check_state(self) -> str:
        """What the line above the checks says: how far a run is, or how the last one went."""
        result = self.check_result
        if self.checking:
            progress = self.check_progress
            if progress is not None and progress[0] == self.controller.requested_generation:
                return f"{CHECKING} {progress[1].text()}"
            return CHECKING
        if result is not None:
            return result.error or f"checked in {result.took_s:.1f} s"
        return ""

    # -- keys -----------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (self.session.config.readonly and action in MUTATING)

    def _ask(self, step: dialogs.Ask | dialogs.Say) -> None:
        """Show the dialog; a yes hands its action to the controller."""
        if isinstance(step, dialogs.Say):
            self.notify(step.text, title=step.title, severity=step.severity)
            return
        action = step.action

        def answered(yes: bool | None) -> None:
            if yes:
                self.controller.submit(action)

        self.app.push_screen(step.screen, answered)

    def action_recheck(self) -> None:
        self.recheck()

    @reported("patch")
    def action_patch(self) -> None:
        self._ask(dialogs.fix(self.session, self.query_one(ChecksPanel).current))

    def action_undo(self) -> None:
        self._ask(dialogs.undo())

    @reported("relaunch")
    def action_relaunch(self) -> None:
        self._ask(dialogs.relaunch(self.session, self._expected_to_fail()))

    def _expected_to_fail(self) -> list[Finding]:
        """The last check's errors that stand (no fix pending for the next launch), in launch
        order; none while a check runs (its result may be about to change)."""
        result = self.check_result
        if self.checking or result is None:
            return []
        done = self.session.statuses(list(result.findings))  # pending or fixed
        return [f for f in result.findings if f.severity == "error" and f.key not in done]

    def action_first_error(self) -> None:
        self.query_one(LogPanel).jump_to_error()

    def action_fold(self) -> None:
        self.query_one(LogPanel).toggle_fold()

    def action_wrap(self) -> None:
        self.query_one(LogPanel).toggle_wrap()

    def action_gpu_rows(self) -> None:
        self.query_one(GpuPanel).toggle_rows()

    def action_filter(self) -> None:
        self.query_one(LogPanel).open_filter()

    def action_focus_next(self) -> None:
        self.focus_next()

    def action_quit(self) -> None:
        self.app.exit()

    def action_help(self) -> None:
        from eaglebug.tui.screens.guide import GuideScreen
        from eaglebug.tui.screens.help import HelpScreen

        def bindings(items: Iterable[object]) -> list[Binding]:
            return [b for b in items if isinstance(b, Binding)]

        readonly = self.session.config.readonly
        mine = [b for b in bindings(self.BINDINGS) if not (readonly and b.action in MUTATING)]
        self.app.push_screen(
            HelpScreen(
                [
                    ("main screen", mine),
                    ("log panel", bindings(LogPanel.BINDINGS)),
                    ("dialogs", bindings([*ConfirmModal.BINDINGS, *DiffModal.BINDINGS])),
                    ("guide", bindings(GuideScreen.BINDINGS)),
                ]
            )
        )

    def action_guide(self) -> None:
        from eaglebug.tui.screens.guide import GuideScreen

        result = self.check_result
        if result is None:
            self.notify("the checks are still running; try again in a moment")
            return

        def remember(step: int | None) -> None:
            self.guide_step = step or 0

        def acceptance() -> tuple[AcceptanceSnapshot | None, list[Finding]]:
            return self.query_one(PhaseHeader).acceptance, list(self.runtime_findings)

        screen = GuideScreen(result, lambda: list(self.milestones), self.guide_step, acceptance)
        self.app.push_screen(screen, remember)

    # -- the command palette --------------------------------------------------------------------
    @reported("command palette")
    def commands(self) -> list[SystemCommand]:
        """What the palette offers on top of Textual's own: only what applies now."""
        out = [
            SystemCommand("check: rerun", "Run the checks again", self.action_recheck),
            SystemCommand(
                "log: crash line",
                "Jump to the line the launch crashed on (else the first error)",
                self.action_first_error,
            ),
            SystemCommand(
                "log: fold",
                "Fold or unfold what repeats: each rank's copy, a bar's updates, eaglebug's polls",
                self.action_fold,
            ),
            SystemCommand("log: wrap lines", "Wrap long lines or cut them", self.action_wrap),
            SystemCommand(
                "log: filter", "Show only log lines containing a text", self.action_filter
            ),
            SystemCommand("guide: open", "Guided mode", self.action_guide),
        ]
        if self.query_one(PhaseHeader).phase == "ready":
            out.append(
                SystemCommand(
                    "server: probe", "Acceptance length and tokens/s now", self.action_probe
                )
            )
        session = self.session
        if session.config.readonly:
            return out
        finding = self.query_one(ChecksPanel).current
        if finding is not None and (
            session.patch_for(finding) or session.env_fix(finding) or session.flag_fix(finding)
        ):
            label = f"Fix {finding.attribute or finding.id}"
            out.append(SystemCommand("patch: apply", label, self.action_patch))
        state = session.server.state()
        if state.patches:
            out.append(
                SystemCommand("patch: undo", "Revert eaglebug's newest commit", self.action_undo)
            )
        if session.launch_words:
            out.append(
                SystemCommand(
                    "server: relaunch",
                    "Stop, wait for GPU memory, launch again",
                    self.action_relaunch,
                )
            )
        if state.latest is not None:
            out.append(SystemCommand("server: stop", "Stop the server tree", self.action_stop))
        return out

    @reported("stop")
    def action_stop(self) -> None:
        self._ask(dialogs.stop(self.session))

    # -- handlers: the feeds and the checks list ---------------------------------------------
    @on(GpuSampled)
    def _show_gpus(self, message: GpuSampled) -> None:
        if self.eaglebug.winding_down:
            return
        app = self.eaglebug
        latest = self.session.latest_gpus
        if latest is not None and message.snapshot.taken_at_s < latest.taken_at_s:
            return  # an older sample that arrived late (the thread's, after one asked for now)
        self.session.latest_gpus = message.snapshot
        histories = {
            g.key: [float(v) for v in app.sampler.history(g.key)] for g in message.snapshot.gpus
        }
        self.query_one(GpuPanel).show(message.snapshot, histories, app.gpu_source.describe())

    @on(WatchUpdated)
    def _show_watch(self, message: WatchUpdated) -> None:
        if self.eaglebug.winding_down:
            return
        snap = message.snapshot
        logs = self.query_one(LogPanel)
        logs.add(snap.parts, snap.live)
        logs.show_crash(snap.findings)
        header = self.query_one(PhaseHeader)
        header.launch_number = snap.launch_number
        self.query_one(GpuPanel).show_launch(snap.gpus)
        header.started_at = snap.started_at  # before the phase: a new launch restarts the clock
        header.last_ready_s = snap.last_ready_s
        header.phase = snap.phase
        header.bar = snap.bar
        self.milestones = snap.milestones
        self.watch_acceptance(snap.phase, snap.launch_number)
        restarted = any(part.restart is not None for part in snap.parts)
        # Most snapshots are just more lines: rebuild the checks (and reread the state file)
        # only when the launch or its findings changed, so a busy log costs no relayout.
        if restarted or snap.findings != self.log_findings:
            self.log_findings = snap.findings
            self.refresh_checks()

    @on(ControllerReported)
    def _show_controller(self, message: ControllerReported) -> None:
        if self.eaglebug.winding_down:
            return
        match message.event:
            case Note(title=title, text=text, severity=severity):
                self.notify(text, title=title, severity=severity)
            case Problem() as problem:
                show_problem(self.app, problem)
            case ChecksRequested():
                self.refresh_checks()
            case ChecksFinished(generation=generation, result=result):
                self._checks_done(generation, result)
            case ActionDone():
                self.refresh_checks()  # what is pending or fixed may have changed

    @on(CheckProgressed)
    def _show_check_progress(self, message: CheckProgressed) -> None:
        """Which stage of the checks runs, and how many files are done of how many."""
        if self.eaglebug.winding_down:
            return
        event = message.event
        if event.generation != self.controller.requested_generation:
            return  # an older run, about to be dropped
        self.check_progress = (event.generation, event.progress)
        if self.checking:
            self.query_one(ChecksPanel).show_state(self._check_state())

    @on(FindingOpened)
    @reported("evidence")
    def _open_evidence(self, message: FindingOpened) -> None:
        from eaglebug.tui.screens.evidence import EvidenceScreen

        self.app.push_screen(
            EvidenceScreen(message.finding, self.session.patch_for(message.finding))
        )
