"""One working session on the box: the checks, the fixes and the launches, without any UI.

The TUI (and the demo) drive everything through this object from Textual workers; it never
imports Textual. Blocking calls (preflight, git, process control) are plain methods here.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks.errors import InputError
from eaglebug.checks.findings import Finding
from eaglebug.checks.launch import env_and_argv
from eaglebug.gpu.snapshot import BoxSnapshot
from eaglebug.proctree import StopResult
from eaglebug.server import Server, wait_gpu_released
from eaglebug.state import LaunchRecord, PatchRecord, load_state

if TYPE_CHECKING:  # the engine, libcst and GitPython load when first used, after first paint
    from eaglebug.checks.audit import ClassReport
    from eaglebug.checks.delegation import Patch
    from eaglebug.checks.preflight import GpuMemory, PreflightResult
    from eaglebug.checks.tree import SglangTree
    from eaglebug.fixing import Applied, Undone

# The env-var fix of config.context_length, accepted for the next launch.
CONTEXT_FINDING = "config.context_length"
CONTEXT_FINDINGS = frozenset({CONTEXT_FINDING, "log.context_length"})


@dataclass
class CheckResult:
    """What the last run of the checks found, with the patches that would fix it."""

    findings: list[Finding]
    reports: list[ClassReport]
    patches: list[Patch]
    preflight: PreflightResult | None
    took_s: float
    error: str | None = None


@dataclass
class SessionConfig:
    workdir: Path
    sglang: str | None = None
    launch_words: list[str] = field(default_factory=list)  # empty: nothing to launch
    log_path: Path | None = None  # watch an existing log instead of a launch's own
    readonly: bool = False
    demo_label: str | None = None  # "demo: ..." when this is the embedded default
    # What actually runs, when it is not the checked command itself (the demo's stand-in
    # server is checked as `python -m sglang.launch_server ...` but runs as itself).
    run_argv: list[str] = field(default_factory=list)
    run_env: dict[str, str] = field(default_factory=dict)


class Session:
    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.server = Server(config.workdir)
        self._tree: SglangTree | None = None
        self.last: CheckResult | None = None
        self.latest_gpus: BoxSnapshot | None = None  # kept current by the UI's sampler

    # -- what is being watched ------------------------------------------------------------
    @property
    def launch_words(self) -> list[str]:
        """The command to (re)launch: as given, else the last launch recorded here."""
        if self.config.launch_words:
            return list(self.config.launch_words)
        record = load_state(self.config.workdir).latest
        if record is None:
            return []
        return [f"{k}={v}" for k, v in record.env_additions.items()] + list(record.argv)

    def tree(self) -> SglangTree:
        from eaglebug.checks.tree import locate

        if self._tree is None:
            self._tree = locate(self.config.sglang)
        return self._tree

    def current_launch(self) -> LaunchRecord | None:
        return load_state(self.config.workdir).latest

    def log_path(self) -> Path | None:
        if self.config.log_path is not None:
            return self.config.log_path
        record = self.current_launch()
        return Path(record.log) if record else None

    def pending_env(self) -> dict[str, str]:
        return dict(load_state(self.config.workdir).pending_env)

    # -- checks ---------------------------------------------------------------------------
    def run_checks(self) -> CheckResult:
        """Preflight of the launch command (with accepted env fixes), and the patches for it."""
        started = time.monotonic()
        words = self.launch_words
        if not words:
            result = CheckResult([], [], [], None, 0.0, "no launch command: nothing to check")
            self.last = result
            return result
        from eaglebug.checks.delegation import plan_patches
        from eaglebug.checks.index import TreeIndex
        from eaglebug.checks.preflight import preflight

        index = TreeIndex(self.tree())
        # What the next launch will see: this environment, what the current launch was given
        # (its env fixes were consumed from `pending_env` when it started), and what is pending.
        record = self.current_launch()
        launched = record.env_additions if record is not None else {}
        environ = {**os.environ, **launched, **self.pending_env()}
        flight = preflight(index, words, environ, self._gpu_memory())
        patches = plan_patches(index, flight.reports)
        result = CheckResult(
            flight.findings, flight.reports, patches, flight, time.monotonic() - started
        )
        self.last = result
        return result

    def _gpu_memory(self) -> GpuMemory | None:
        from eaglebug.checks.preflight import GpuMemory

        snapshot = self.latest_gpus
        if snapshot is None or not snapshot.gpus:
            return None
        smallest = min(g.total_bytes for g in snapshot.gpus)
        return GpuMemory(smallest, f"{len(snapshot.gpus)} x {snapshot.gpus[0].name}")

    def patch_for(self, finding: Finding) -> Patch | None:
        """The patch that fixes a finding; a log's AttributeError maps to its interface fix."""
        if self.last is None or not finding.attribute:
            return None
        wanted = finding.class_ or ""
        for patch in self.last.patches:
            same_class = (
                patch.class_name == wanted or patch.short_class == wanted.rsplit(".", 1)[-1]
            )
            if same_class and finding.attribute in (*patch.methods, *patch.refused):
                return patch
        return None

    def committed_fix(self, finding: Finding) -> PatchRecord | None:
        """An eaglebug commit that already added what a (log) finding says is missing."""
        short = (finding.class_ or "").rsplit(".", 1)[-1]
        for record in reversed(load_state(self.config.workdir).patches):
            if (
                record.class_name.rsplit(".", 1)[-1] == short
                and finding.attribute in record.methods
            ):
                return record
        return None

    # -- fixes ----------------------------------------------------------------------------
    def _refuse_if_readonly(self, what: str) -> None:
        if self.config.readonly:
            raise InputError(f"read-only session: {what} is disabled", "restart without --readonly")

    def apply(self, patch: Patch) -> Applied:
        self._refuse_if_readonly("applying a patch")
        last = self.last
        target = (
            next((r.ref.qualname for r in last.reports if r.role == "target"), None)
            if last
            else None
        )
        draft = (
            next((r.ref.qualname for r in last.reports if r.role == "draft"), None)
            if last
            else None
        )
        algorithm = last.preflight.algorithm if last and last.preflight else None

        def reaudit() -> list[Finding]:
            if algorithm is None:
                return []
            from eaglebug.checks.audit import audit
            from eaglebug.checks.index import TreeIndex

            return audit(TreeIndex(self.tree()), target, algorithm, draft).findings

        from eaglebug.fixing import apply_patch

        applied = apply_patch(patch, commit=True, reaudit=reaudit)
        with self.server.editing() as state:
            state.patches.append(
                PatchRecord(
                    patch.file, patch.class_name, list(patch.methods), applied.commit, time.time()
                )
            )
        return applied

    def undo_last(self) -> Undone:
        self._refuse_if_readonly("undo")
        from eaglebug.fixing import undo

        return undo(self.tree().root)

    def env_fix(self, finding: Finding) -> tuple[str, str] | None:
        """The env var a finding's fix sets for the next launch (the context-length override)."""
        if finding.id not in CONTEXT_FINDINGS or finding.severity != "error":
            return None
        name = finding.details.get("env_var")
        if not name and self.last is not None:  # the log's refusal: the checked rule names it
            name = next(
                (f.details.get("env_var") for f in self.last.findings if f.id == CONTEXT_FINDING),
                None,
            )
        if not name:
            found = re.search(r"\b(SGLANG_\w*CONTEXT\w*)=1", f"{finding.fix} {finding.message}")
            name = found.group(1) if found else None
        return (str(name), "1") if name else None

    def accept_env(self, name: str, value: str) -> None:
        self._refuse_if_readonly("changing the next launch")
        with self.server.editing() as state:
            state.pending_env[name] = value

    # -- the server -------------------------------------------------------------------------
    def relaunch(
        self, wait_gpu_s: float = 120.0
    ) -> tuple[StopResult | None, list[int], LaunchRecord]:
        """Stop the running tree, wait for its GPU memory, launch anew with pending env fixes."""
        self._refuse_if_readonly("relaunching")
        words = self.launch_words
        if not words:
            raise InputError("no launch command to run", "start eaglebug with -- LAUNCH COMMAND")
        stopped = None
        holding: list[int] = []
        running = self.server.attached()
        if running is not None:
            stopped = self.server.stop(running)
            pids = {*stopped.terminated, *stopped.killed, running.pid}
            holding = wait_gpu_released(pids, self._gpu_holders, timeout_s=wait_gpu_s)
        previous = self.current_launch()
        # Env fixes accepted for an earlier launch stay part of the launch from then on.
        env = dict(previous.env_additions) if previous is not None else {}
        if self.config.run_argv:
            env.update(self.config.run_env)
            env.update(env_and_argv(words)[0])
            argv = list(self.config.run_argv)
        else:
            words_env, argv = env_and_argv(words)
            env.update(words_env)
        record = self.server.launch(argv, env)
        return stopped, holding, record

    def _gpu_holders(self) -> list[int]:
        snapshot = self.latest_gpus
        return [p.pid for p in snapshot.processes] if snapshot else []

    def stop(self) -> StopResult | None:
        self._refuse_if_readonly("stopping the server")
        running = self.server.attached()
        return self.server.stop(running) if running else None

    def record_phase(self, phase: str, ready: bool) -> None:
        """Remember how far the current launch got (and its time to ready)."""
        record = self.current_launch()
        if record is None or record.phase == phase:
            return
        changes: dict[str, object] = {"phase": phase}
        if ready and record.ready_after_s is None:
            changes["ready_after_s"] = time.time() - record.started_at
            changes["outcome"] = "ready"
        if phase == "crashed":
            changes["outcome"] = "crashed"
        self.server.update(record.number, **changes)
