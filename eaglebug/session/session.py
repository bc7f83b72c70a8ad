"""One working session on the box: the checks, the fixes and the launches, without any UI.

The TUI (and the demo) drive everything through this object: its actions and checks from the
controller's one worker (`eaglebug.session.controller`), its log from the launch watch's thread
(`eaglebug.session.watch`); it never imports Textual. Blocking calls (preflight, git, process
control) are plain methods here.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks import (
    SWITCH,
    EnvFix,
    Finding,
    FindingKey,
    FlagFix,
    InputError,
    PatchFix,
    env_of,
    flag_of,
    with_flags,
)
from eaglebug.gpu.snapshot import BoxSnapshot
from eaglebug.server.launcher import Server, wait_gpu_released
from eaglebug.server.proctree import StopResult
from eaglebug.server.state import LaunchRecord, PatchRecord, load_state
from eaglebug.session.checking import (
    AuditRequest,
    CheckRequest,
    CheckResult,
    Checks,
    HereChecks,
    Progress,
)

if TYPE_CHECKING:  # the engine, libcst and GitPython load when first used, after first paint
    from eaglebug.checks import GpuArch, GpuMemory, HostGpu, Patch, SglangTree
    from eaglebug.git.fixing import Applied, Undone

# What a log finding is the runtime face of: its fix is the preflight finding's fix.
SEE_ALSO = {
    "log.missing_interface_method": "interface.missing",
    "log.context_length": "config.context_length",
}
PENDING, FIXED = "pending: next launch", "fixed: relaunch"


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
    gpu_arch: str | None = (
        None  # --gpu-arch, for the attention checks; else NVML's (not the demo's)
    )
    # Several nodes' logs merged into `log_path` (`eaglebug.logs.merge`): the node of each rank
    # so far, from the merger, so the log's findings name their nodes.
    rank_nodes: Callable[[], dict[str, str]] | None = None
    # The checks in a worker process of their own (`checkprocess.py`): the TUI's way; the
    # tests' sessions check in their own process unless they ask.
    checks_apart: bool = False


class Session:
    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.server = Server(config.workdir)
        self._tree: SglangTree | None = None
        self.checks: Checks = HereChecks()
        if config.checks_apart:
            from eaglebug.session.checkprocess import ProcessChecks

            self.checks = ProcessChecks()
        self.last: CheckResult | None = None
        self.latest_gpus: BoxSnapshot | None = None  # kept current by the UI's sampler
        self._nvml_arch: tuple[GpuArch | None] | None = None  # NVML's answer, once asked
        # the current launch's GPUs, by what they were worked out from (`launch_gpus`)
        self._launch_gpus: tuple[object, frozenset[int] | None] | None = None

    # -- what is being watched ------------------------------------------------------------
    @property
    def launch_words(self) -> list[str]:
        """The command to (re)launch: as given, else the last launch recorded here."""
        if self.config.launch_words:
            return list(self.config.launch_words)
        record = load_state(self.config.workdir).latest
        return _typed(record) if record is not None else []

    def tree(self) -> SglangTree:
        from eaglebug.checks import locate

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

    def pending_flags(self) -> dict[str, str]:
        return dict(load_state(self.config.workdir).pending_flags)

    def next_flags(self) -> dict[str, str]:
        """The flag fixes the next launch runs with: the current launch's and the pending."""
        state = load_state(self.config.workdir)
        launched = state.latest.flag_additions if state.latest is not None else {}
        return {**launched, **state.pending_flags}

    # -- checks ---------------------------------------------------------------------------
    def run_checks(self, progress: Progress | None = None) -> CheckResult:
        """Preflight of the launch command (with accepted env fixes), and the patches for it;
        `progress` hears which stage runs and how many of the tree's files are done."""
        started = time.monotonic()
        base = self.launch_words
        words = with_flags(base, self.next_flags()) if base else base
        if not words:
            result = CheckResult([], [], [], None, 0.0, "no launch command: nothing to check")
            self.last = result
            return result
        self.checks.start()
        calibrating: list[str] = []
        checked = self.checks.check(self._request(words, base, calibrating), progress)
        flight = checked.flight
        flight.warnings.extend(calibrating)  # figures of the last launch that were passed over
        result = CheckResult(
            flight.findings, flight.reports, checked.patches, flight, time.monotonic() - started
        )
        self.last = result
        return result

    def _request(self, words: list[str], base: list[str], calibrating: list[str]) -> CheckRequest:
        """What the check reads besides the tree, gathered here: the engine (perhaps in
        another process) reads no state file and asks no GPU."""
        # What the next launch will see: this environment, what the current launch was given
        # (its env fixes were consumed from `pending_env` when it started), and what is pending.
        record = self.current_launch()
        launched = record.env_additions if record is not None else {}
        environ = {**os.environ, **launched, **self.pending_env()}
        from eaglebug.server.calibration import measured_for
        from eaglebug.server.pyenv import external_for_launch

        return CheckRequest(
            self.tree(),
            words,
            environ,
            self._gpu_memory(),
            self._gpu_arch(),
            external_for_launch(words, environ),  # where the launch's python finds it
            measured_for(self.config.workdir, base, calibrating),
        )

    def close(self) -> None:
        """End what the session runs apart (the checks' worker); a launch outlives it."""
        self.checks.close()

    def _gpu_arch(self) -> GpuArch | None:
        """--gpu-arch, else this host's GPUs through NVML (the demo's GPUs are simulated)."""
        from eaglebug.checks import GpuArch, parse_gpu_arch

        if self.config.gpu_arch is not None:
            return parse_gpu_arch(self.config.gpu_arch)
        if self.config.demo_label is not None:
            return None
        if self._nvml_arch is None:  # asked once: a box's GPUs do not change architecture
            from eaglebug.gpu.nvml import compute_capability

            found = compute_capability()
            self._nvml_arch = (GpuArch(*found) if found else None,)
        return self._nvml_arch[0]

    def _gpu_memory(self) -> GpuMemory | None:
        from eaglebug.checks import GpuMemory

        snapshot = self.latest_gpus
        if snapshot is None or not snapshot.gpus:
            return None
        smallest = min(g.total_bytes for g in snapshot.gpus)
        free = min(g.total_bytes - g.used_bytes for g in snapshot.gpus)
        return GpuMemory(
            smallest,
            f"{len(snapshot.gpus)} x {snapshot.gpus[0].name}",
            free,
            "NVML",
            len(snapshot.gpus),
            _host_gpus(snapshot),
        )

    def launch_gpus(self, record: LaunchRecord | None) -> frozenset[int] | None:
        """NVML's numbers of this host's GPUs that a launch (`record`, the current one as the
        watch read it; None: the command given) sees, where its words narrow them
        (`CUDA_VISIBLE_DEVICES`, `--gpus`: `checks.launch_gpus`): the launch watch tells its
        stall by their memory and the GPU panel dims the others. None: every GPU, or not
        known which."""
        snapshot = self.latest_gpus
        words = _typed(record) if record is not None else list(self.config.launch_words)
        if snapshot is None or not words:
            return None
        # each beat asks: worked out again only for another command or other GPUs
        key = (tuple(words), tuple((g.index, g.uuid, g.name, g.host) for g in snapshot.gpus))
        if self._launch_gpus is None or self._launch_gpus[0] != key:
            from eaglebug.checks import launch_gpus

            self._launch_gpus = (key, launch_gpus(words, os.environ, _host_gpus(snapshot)))
        return self._launch_gpus[1]

    # -- findings by key ---------------------------------------------------------------------
    def resolve(self, log_findings: list[Finding]) -> list[Finding]:
        """Log findings in the audited tree's terms: the class an AttributeError names as the
        tree's qualified class, and the fix of the preflight finding it is the runtime face of
        (the interface patch, the context-length choice with the tree's own env var)."""
        return [self._resolve(f) for f in log_findings]

    def _resolve(self, finding: Finding) -> Finding:
        if finding.class_ and "." not in finding.class_:
            qualified = self._qualified(finding.class_)
            if qualified:
                finding = dataclasses.replace(finding, class_=qualified)
        see = SEE_ALSO.get(finding.id)
        if see is None or self.last is None:
            return finding
        for checked in self.last.findings:
            if checked.id != see or checked.fix is None:
                continue
            same = (
                checked.class_ == finding.class_ and checked.attribute == finding.attribute
                if see == "interface.missing"
                else checked.role == finding.role
            )
            if same:
                return dataclasses.replace(finding, fix=checked.fix, delegate=checked.delegate)
        return finding

    def _qualified(self, short: str) -> str | None:
        if self.last is not None:
            for report in self.last.reports:
                if report.ref.facts.name == short:
                    return report.ref.qualname
        # The launch watch resolves on its own thread: while a check runs it does not wait
        # for it (the short name stays until it republishes after the checks).
        return self.checks.class_named(short)

    def patch_for(self, finding: Finding) -> Patch | None:
        """The patch that carries a finding's fix (the class and the method, both exact)."""
        fix = finding.fix
        if self.last is None or not isinstance(fix, PatchFix):
            return None
        for patch in self.last.patches:
            if patch.class_name == fix.class_ and fix.attribute in (*patch.methods, *patch.refused):
                return patch
        return None

    def committed_fix(self, finding: Finding) -> PatchRecord | None:
        """An eaglebug commit that already added what a finding says is missing."""
        for record in reversed(load_state(self.config.workdir).patches):
            if finding.key.text() in record.keys or (
                record.class_name == finding.class_ and finding.attribute in record.methods
            ):
                return record
        return None

    def statuses(self, findings: list[Finding]) -> dict[FindingKey, str]:
        """What has been done about each finding: an env fix pending, a patch committed."""
        state = load_state(self.config.workdir)
        out: dict[FindingKey, str] = {}
        for finding in findings:
            env = env_of(finding.fix)
            flag = flag_of(finding.fix)
            env_pending = env is not None and state.pending_env.get(env.variable) == env.value
            flag_pending = flag is not None and state.pending_flags.get(flag.flag) == (
                flag.value or SWITCH
            )
            if env_pending or flag_pending:
                out[finding.key] = PENDING
            elif finding.id.startswith("log.") and any(
                r.class_name == finding.class_ and finding.attribute in r.methods
                for r in state.patches
            ):
                out[finding.key] = FIXED
        return out

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
        external = last.preflight.external if last and last.preflight else None

        def reaudit() -> list[Finding]:
            if algorithm is None:
                return []
            # the launch's package too; the trees of the checks that found what this fixes
            return self.checks.reaudit(
                AuditRequest(self.tree(), external, target, algorithm, draft)
            )

        from eaglebug.git.fixing import apply_patch

        applied = apply_patch(patch, commit=True, reaudit=reaudit)
        with self.server.editing() as state:
            state.patches.append(
                PatchRecord(
                    patch.file,
                    patch.class_name,
                    list(patch.methods),
                    applied.commit,
                    time.time(),
                    [f.key.text() for f in patch.fixes],
                )
            )
        return applied

    def undo_last(self) -> Undone:
        self._refuse_if_readonly("undo")
        from eaglebug.git.fixing import undo

        return undo(self._undo_repo())

    def _undo_repo(self) -> Path:
        """Where the newest patch was committed: the SGLang tree's repository, or that of the
        out-of-tree model package whose file it patched."""
        patches = load_state(self.config.workdir).patches
        last = self.last
        external = last.preflight.external if last is not None and last.preflight else None
        if patches and external is not None and external.owns(patches[-1].file):
            return external.root / patches[-1].file
        return self.tree().root

    def env_fix(self, finding: Finding) -> EnvFix | None:
        """The env var a finding's fix sets for the next launch (alone or as an option)."""
        if finding.severity != "error":
            return None
        return env_of(finding.fix)

    def accept_env(self, name: str, value: str) -> None:
        self._refuse_if_readonly("changing the next launch")
        with self.server.editing() as state:
            state.pending_env[name] = value

    def flag_fix(self, finding: Finding) -> FlagFix | None:
        """The launch flag a finding's fix sets for the next launch (where no env fix does)."""
        if finding.severity == "info" or env_of(finding.fix) is not None:
            return None
        return flag_of(finding.fix)

    def accept_flag(self, flag: str, value: str) -> None:
        self._refuse_if_readonly("changing the next launch")
        with self.server.editing() as state:
            state.pending_flags[flag] = value

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
        from eaglebug.checks import env_and_argv  # the flag tables load when first used

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
        flags = self.next_flags()
        argv = with_flags(argv, flags)  # the demo's stand-in takes SGLang's own flags too
        record = self.server.launch(argv, env, flags)
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
        from eaglebug.server.calibration import figures_to_keep

        figures = figures_to_keep(record)  # the memory lines so far, kept beyond the log
        if figures is not None:
            changes["memory"] = figures
        self.server.update(record.number, **changes)


def _typed(record: LaunchRecord) -> list[str]:
    """A recorded launch as its command was typed: its `VAR=value` words, then its argv."""
    return [f"{k}={v}" for k, v in record.env_additions.items()] + list(record.argv)


def _host_gpus(snapshot: BoxSnapshot) -> tuple[HostGpu, ...]:
    """This host's GPUs by NVML's numbers, with their free memory now (another node's GPU 0,
    from Prometheus, is not a launch's here)."""
    from eaglebug.checks import HostGpu

    return tuple(
        HostGpu(g.index, g.uuid, g.name, g.total_bytes, g.total_bytes - g.used_bytes)
        for g in snapshot.gpus
        if g.host is None
    )
