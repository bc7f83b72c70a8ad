"""The eaglebug app: GPUs, the log and the checks of one launch, and the keys that act on them.

Blocking work (checks, git, process control, log reading, GPU sampling) runs in Textual
workers and threads; widgets only ever render snapshots posted to them as Messages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import get_current_worker

from eaglebug.checks.errors import InputError
from eaglebug.checks.findings import Finding
from eaglebug.checks.fixes import Choice, PatchFix
from eaglebug.gpu.sampler import Sampler
from eaglebug.gpu.source import GpuSource
from eaglebug.logfollow import LogFollower, LogLine, LogProgress, LogRestarted
from eaglebug.session import CheckResult, Session
from eaglebug.tui.messages import ChecksDone, GpuSampled, LogRead
from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.screens.diff import DiffModal
from eaglebug.tui.screens.evidence import EvidenceScreen
from eaglebug.tui.screens.guide import GuideScreen
from eaglebug.tui.screens.help import HelpScreen
from eaglebug.tui.widgets.checks_panel import ChecksPanel
from eaglebug.tui.widgets.gpu_panel import GpuPanel
from eaglebug.tui.widgets.header import PhaseHeader
from eaglebug.tui.widgets.log_panel import LogPanel

# Below this width the three panels stack instead of standing side by side.
NARROW_COLUMNS = 110
MUTATING = frozenset({"patch", "undo", "relaunch"})


class MainScreen(Screen[None]):
    """The one main screen: header, GPUs, log, checks. Modals stack above it."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.clock = clock

    def compose(self) -> ComposeResult:
        yield PhaseHeader(id="header", clock=self.clock)
        with Horizontal(id="main"):
            yield GpuPanel(id="gpus")
            yield LogPanel(id="log")
            yield ChecksPanel(id="checks")
        yield Footer()

    def on_mount(self) -> None:
        app = self.app
        assert isinstance(app, EaglebugApp)
        app.start()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW_COLUMNS, "narrow")


class EaglebugApp(App[None]):
    CSS_PATH = "eaglebug.tcss"
    TITLE = "eaglebug"
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
            "e",
            "first_error",
            "First error",
            tooltip="Jump to the first error in the log",
            id="first_error",
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
        session: Session,
        gpu_source: GpuSource,
        *,
        sample_interval_s: float = 1.0,
        follow_interval_s: float = 0.2,
        run_checks: bool = True,
        open_guide: bool = False,
        launch_when_clear: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.session = session
        self.gpu_source = gpu_source
        self.sampler = Sampler(gpu_source, interval_s=sample_interval_s, on_snapshot=self._sampled)
        self.follow_interval_s = follow_interval_s
        self.run_checks_on_start = run_checks
        self.open_guide_on_start = open_guide
        self.launch_when_clear = launch_when_clear
        self.check_result: CheckResult | None = None
        self.log_findings: list[Finding] = []
        self.milestones: list[str] = []
        self.guide_step = 0
        self._stopping = threading.Event()
        self._busy = ""
        self.main = MainScreen(clock)

    # -- layout -----------------------------------------------------------------------------
    def get_default_screen(self) -> Screen[None]:
        return self.main

    def start(self) -> None:
        """Once the main screen is up: the header, the feeds and the first checks."""
        header = self.main.query_one(PhaseHeader)
        header.badge = self.session.config.demo_label or (
            "read-only" if self.session.config.readonly else ""
        )
        self._show_launch()
        self.sampler.start()
        self.follow_log()
        if self.run_checks_on_start:
            self.call_after_refresh(self.recheck)  # after the first frame: it is CPU-heavy
        else:
            self._refresh_checks("")
        self.main.query_one("#checks-list").focus()

    @property
    def _winding_down(self) -> bool:
        """Shutdown has begun: the main screen's widgets may already be gone, so messages
        still arriving from the feeds and workers have nothing to update."""
        return not self.is_running or self._stopping.is_set()

    def on_unmount(self) -> None:
        self._stopping.set()
        self.sampler.stop()
        self.gpu_source.close()

    # -- feeds ------------------------------------------------------------------------------
    def _sampled(self, snapshot: object) -> None:
        """Called on the sampler's thread: hand the snapshot to the app as a Message."""
        if not self._stopping.is_set():
            self.post_message(GpuSampled(snapshot))  # type: ignore[arg-type]

    @on(GpuSampled)
    def _show_gpus(self, message: GpuSampled) -> None:
        if self._winding_down:
            return
        self.session.latest_gpus = message.snapshot
        histories = {
            g.index: [float(v) for v in self.sampler.history(g.index)]
            for g in message.snapshot.gpus
        }
        self.main.query_one(GpuPanel).show(message.snapshot, histories, self.gpu_source.describe())

    @work(thread=True, exclusive=True, group="log")
    def follow_log(self) -> None:
        """Read the current launch's log as it grows; switch to the new one on a relaunch."""
        from eaglebug.checks.logparse import LogAnalyzer  # after the first frame

        worker = get_current_worker()
        follower: LogFollower | None = None
        analyzer = LogAnalyzer()
        watching: Path | None = None
        while not worker.is_cancelled and not self._stopping.is_set():
            path = self.session.log_path()
            if path != watching:
                if follower is not None:
                    follower.close()
                watching = path
                follower = LogFollower(path, from_start=True) if path else None
                analyzer = LogAnalyzer()
                if path is not None:
                    self.post_message(
                        LogRead(
                            [], f"launch log {path.name}", None, "launching", None, [], str(path)
                        )
                    )
            if follower is None:
                self._stopping.wait(self.follow_interval_s)
                continue
            lines: list[str] = []
            restarted: str | None = None
            live: str | None = None
            for event in follower.poll():
                if isinstance(event, LogLine):
                    lines.append(event.text)
                    analyzer.feed(event.text, event.offset)
                elif isinstance(event, LogProgress):
                    live = event.text
                    analyzer.note_progress(event.text)
                elif isinstance(event, LogRestarted):
                    restarted = event.reason
                    if event.reason in {"truncated", "replaced"}:
                        analyzer.reset()
            if lines or restarted or live:
                progress = analyzer.progress
                phase = analyzer.phase
                self.session.record_phase(phase, analyzer.ready)
                self.post_message(
                    LogRead(
                        lines,
                        restarted,
                        live,
                        phase,
                        (progress.done, progress.total, progress.percent) if progress else None,
                        analyzer.findings(),
                        str(watching),
                    )
                )
                self.milestones = [m.label for m in analyzer.milestones]
            if not follower.behind:
                self._stopping.wait(self.follow_interval_s)
        if follower is not None:
            follower.close()

    @on(LogRead)
    def _show_log(self, message: LogRead) -> None:
        if self._winding_down:
            return
        self.main.query_one(LogPanel).add(message.lines, message.restarted, message.live_progress)
        header = self.main.query_one(PhaseHeader)
        news = message.restarted is not None or message.phase != header.phase
        header.phase = message.phase
        header.progress = message.progress
        # Most reads are just more lines: rebuild the checks (and reread the state file) only
        # when the launch or its findings changed, so a busy log costs no relayout per read.
        if news or message.findings != self.log_findings:
            self.log_findings = message.findings
            self._show_launch()
            self._refresh_checks(self._busy)

    def _show_launch(self) -> None:
        if self._winding_down:
            return
        header = self.main.query_one(PhaseHeader)
        record = self.session.current_launch()
        header.launch_number = record.number if record else None
        header.started_at = record.started_at if record else None
        state_ready = [
            r.ready_after_s
            for r in self.session.server.state().launches
            if r.ready_after_s is not None
        ]
        header.last_ready_s = state_ready[-1] if state_ready else None

    # -- checks -----------------------------------------------------------------------------
    def recheck(self) -> None:
        if self._winding_down:
            return
        self._busy = "running the checks…"
        self._refresh_checks(self._busy)
        self._run_checks()

    @work(thread=True, exclusive=True, group="checks")
    def _run_checks(self) -> None:
        try:
            result = self.session.run_checks()
        except InputError as exc:
            result = CheckResult(
                [], [], [], None, 0.0, f"{exc.message}" + (f" — {exc.hint}" if exc.hint else "")
            )
        self.post_message(ChecksDone(result))

    @on(ChecksDone)
    def _checks_done(self, message: ChecksDone) -> None:
        if self._winding_down:
            return
        self.check_result = message.result
        self._busy = ""
        state = message.result.error or f"checked in {message.result.took_s:.1f} s"
        self._refresh_checks(state)
        if message.result.error:
            self.notify(message.result.error, title="checks", severity="warning")
        if self.open_guide_on_start:
            self.open_guide_on_start = False
            self.action_guide()
        if self.launch_when_clear:
            self.launch_when_clear = False
            blockers = [f for f in message.result.findings if f.severity == "error"]
            if blockers:
                self.notify(
                    f"{len(blockers)} launch blocker(s): fix them (select, p) and press r to launch",
                    title="not launched",
                    severity="warning",
                )
            elif self.session.server.attached() is None:
                self._launch_now()

    @work(thread=True, exclusive=True, group="act")
    def _launch_now(self) -> None:
        try:
            _, _, record = self.session.relaunch()
        except InputError as exc:
            self.call_from_thread(
                self.notify, f"{exc.message}\n{exc.hint or ''}", title="launch", severity="error"
            )
            return
        self.call_from_thread(
            self.notify, f"launch {record.number} started (pid {record.pid})", title="launch"
        )
        self.call_from_thread(self._show_launch)

    def _refresh_checks(self, state: str) -> None:
        findings = list(self.check_result.findings if self.check_result else [])
        findings += self.session.resolve(self.log_findings)
        if not state and self.check_result is not None:
            state = self.check_result.error or f"checked in {self.check_result.took_s:.1f} s"
        self.main.query_one(ChecksPanel).show(
            findings, self.session.pending_env(), state, self.session.statuses(findings)
        )

    @on(ChecksPanel.Selected)
    def _open_evidence(self, message: ChecksPanel.Selected) -> None:
        self.push_screen(EvidenceScreen(message.finding, self.session.patch_for(message.finding)))

    # -- actions ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (self.session.config.readonly and action in MUTATING)

    @staticmethod
    def _when_yes(act: Callable[[], object]) -> Callable[[bool | None], None]:
        """A dialog callback that acts only on yes."""

        def answered(ok: bool | None) -> None:
            if ok:
                act()

        return answered

    def action_recheck(self) -> None:
        self.recheck()

    def action_patch(self) -> None:
        finding = self.main.query_one(ChecksPanel).current
        if finding is None:
            self.notify("select a check first (arrow keys)", severity="warning")
            return
        env = self.session.env_fix(finding)
        if env is not None:
            body = Text(f"Set {env.text()} for the next launch (r relaunches).\n\n")
            options = finding.fix.options if isinstance(finding.fix, Choice) else (env,)
            for option in options:
                body.append(f"{option.text()}: ", style="bold")
                body.append(f"{option.tradeoff}\n", style="dim")
            self.push_screen(
                ConfirmModal(f"next launch: {env.text()}", body, yes="Use it (y)"),
                self._when_yes(lambda: self._accept_env(env.variable, env.value)),
            )
            return
        patch = self.session.patch_for(finding)
        done = self.session.committed_fix(finding) if patch is None else None
        if done is not None:
            sha = (done.commit or "")[:10]
            self.notify(f"already fixed in commit {sha}; r relaunches to try it", title="fixed")
            return
        if patch is None or not patch.methods:
            reason = patch.refused.get(finding.attribute or "") if patch else None
            if reason is None and isinstance(finding.fix, PatchFix) and finding.fix.refused:
                reason = f"no automatic fix: {finding.fix.refused}"
            self.notify(
                reason or "no automatic fix for this check; Enter shows the evidence",
                severity="warning",
            )
            return
        self.push_screen(DiffModal(patch), self._when_yes(lambda: self._apply(patch)))

    @work(thread=True, exclusive=True, group="act")
    def _accept_env(self, name: str, value: str) -> None:
        self.session.accept_env(name, value)
        self.call_from_thread(
            self.notify, f"{name}={value} will be set for the next launch", title="pending"
        )
        self.call_from_thread(self.recheck)

    @work(thread=True, exclusive=True, group="act")
    def _apply(self, patch: object) -> None:
        try:
            applied = self.session.apply(patch)  # type: ignore[arg-type]
        except InputError as exc:
            self.call_from_thread(
                self.notify,
                f"{exc.message}\n{exc.hint or ''}",
                title="not applied",
                severity="error",
            )
            return
        sha = (applied.commit or "")[:10]
        text = f"committed {sha}: {applied.patch.short_class} delegates {', '.join(applied.patch.methods)}"
        self.call_from_thread(self.notify, text, title="patch applied")
        self.call_from_thread(self.recheck)

    def action_undo(self) -> None:
        self.push_screen(
            ConfirmModal(
                "undo", "Revert eaglebug's newest commit in the SGLang repository (git revert)?"
            ),
            self._when_yes(self._undo),
        )

    @work(thread=True, exclusive=True, group="act")
    def _undo(self) -> None:
        try:
            done = self.session.undo_last()
        except InputError as exc:
            self.call_from_thread(
                self.notify, f"{exc.message}\n{exc.hint or ''}", title="undo", severity="error"
            )
            return
        self.call_from_thread(
            self.notify, f"reverted {done.reverted[:10]} ({done.summary})", title="undone"
        )
        self.call_from_thread(self.recheck)

    def action_relaunch(self) -> None:
        record = self.session.current_launch()
        running = self.session.server.attached()
        pending = self.session.pending_env()
        body = Text()
        if running is not None:
            body.append(
                f"Stop launch {running.number} (pid {running.pid}) and its whole process tree, "
            )
            body.append("wait until its GPU memory is released, then ")
        body.append("launch again" if record else "Launch now")
        if pending:
            body.append(" with " + " ".join(f"{k}={v}" for k, v in pending.items()), style="bold")
        body.append("?")
        title = "relaunch" if record else "launch"
        self.push_screen(ConfirmModal(title, body), self._when_yes(self._relaunch))

    @work(thread=True, exclusive=True, group="act")
    def _relaunch(self) -> None:
        self.call_from_thread(
            self.notify, "stopping the old tree, then launching…", title="relaunch"
        )
        try:
            _stopped, holding, record = self.session.relaunch()
        except InputError as exc:
            self.call_from_thread(
                self.notify, f"{exc.message}\n{exc.hint or ''}", title="relaunch", severity="error"
            )
            return
        if holding:
            text = f"still holding GPU memory: {', '.join(map(str, holding))}"
            self.call_from_thread(self.notify, text, title="relaunch", severity="warning")
        self.call_from_thread(
            self.notify, f"launch {record.number} started (pid {record.pid})", title="relaunch"
        )
        self.call_from_thread(self._show_launch)
        self.call_from_thread(self.recheck)

    def action_first_error(self) -> None:
        if not self.main.query_one(LogPanel).jump_to_first_error():
            self.notify("no error in the log so far")

    def action_filter(self) -> None:
        self.main.query_one(LogPanel).open_filter()

    def action_help(self) -> None:
        groups: list[tuple[str, list[Binding]]] = [
            ("main screen", list(self._visible_bindings())),
            ("log panel", _bindings(LogPanel.BINDINGS)),
            ("dialogs", _bindings([*ConfirmModal.BINDINGS, *DiffModal.BINDINGS])),
            ("guide", _bindings(GuideScreen.BINDINGS)),
        ]
        self.push_screen(HelpScreen(groups))

    def _visible_bindings(self) -> Iterable[Binding]:
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            if self.session.config.readonly and binding.action in MUTATING:
                continue
            yield binding

    def action_guide(self) -> None:
        if self.check_result is None:
            self.notify("the checks are still running; try again in a moment")
            return

        def remember(step: int | None) -> None:
            self.guide_step = step or 0

        self.push_screen(
            GuideScreen(self.check_result, lambda: list(self.milestones), self.guide_step), remember
        )

    # -- command palette ------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("check: rerun", "Run the checks again", self.action_recheck)
        yield SystemCommand(
            "log: first error", "Jump to the first error in the log", self.action_first_error
        )
        yield SystemCommand(
            "log: filter", "Show only log lines containing a text", self.action_filter
        )
        yield SystemCommand("guide: open", "Guided mode", self.action_guide)
        if self.session.config.readonly:
            return
        finding = self.main.query_one(ChecksPanel).current
        if finding is not None and (
            self.session.patch_for(finding) or self.session.env_fix(finding)
        ):
            yield SystemCommand(
                "patch: apply", f"Fix {finding.attribute or finding.id}", self.action_patch
            )
        if self.session.server.state().patches:
            yield SystemCommand("patch: undo", "Revert eaglebug's newest commit", self.action_undo)
        if self.session.launch_words:
            yield SystemCommand(
                "server: relaunch", "Stop, wait for GPU memory, launch again", self.action_relaunch
            )


def _bindings(items: Iterable[object]) -> list[Binding]:
    return [b for b in items if isinstance(b, Binding)]


def build_app(session: Session, gpu_source: GpuSource, **options: object) -> EaglebugApp:
    """The one way the CLI, the demo and the tests make the app."""
    return EaglebugApp(session, gpu_source, **options)  # type: ignore[arg-type]
