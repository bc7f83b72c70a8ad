"""The demo's story without a screen: what `eaglebug demo` does when there is no terminal.

The same scratch tree, stand-in server and session as the TUI demo, driven step by step and
narrated on stdout: preflight finds the blockers, the first launch crashes, the patches are
committed, the next launch crashes on the context length, the env fix is accepted, and the last
launch is ready. Useful in CI, over a pipe, and to see the loop at a glance.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from eaglebug.checks.logparse import LogAnalyzer, analyze_file
from eaglebug.demo.scenario import DemoScenario
from eaglebug.session import Session, SessionConfig

# How long one stand-in launch may take before the story gives up on it.
LAUNCH_TIMEOUT_S = 180.0


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _wait_for_end(session: Session, log: Path, timeout_s: float) -> LogAnalyzer:
    """Until the launch is ready or has crashed (or the process is gone)."""
    deadline = time.monotonic() + timeout_s
    while True:
        analyzer = analyze_file(log) if log.exists() else LogAnalyzer()
        record = session.current_launch()
        gone = record is not None and session.server.poll_exit(record) is not None
        if analyzer.phase in {"ready", "crashed"} or gone or time.monotonic() > deadline:
            return analyzer
        time.sleep(0.2)


def _launch(session: Session, step: str, say: Callable[[str], None]) -> LogAnalyzer:
    _, _, record = session.relaunch()
    say(f"\n{step}: launch {record.number} (pid {record.pid}), log {record.log}")
    analyzer = _wait_for_end(session, Path(record.log), LAUNCH_TIMEOUT_S)
    progress = analyzer.progress
    loaded = f", weights {progress.done}/{progress.total} shards" if progress else ""
    say(f"  phase: {analyzer.phase}{loaded}")
    for finding in analyzer.findings():
        ranks = finding.ranks
        say(f"  {finding.severity} {finding.id} ({len(ranks)} ranks): {finding.message}")
    session.record_phase(analyzer.phase, analyzer.ready)
    return analyzer


def run_story(
    fast: bool = True, root: Path | None = None, say: Callable[[str], None] = _say
) -> int:
    scenario = DemoScenario.prepare(root, fast=fast)
    say(f"eaglebug demo (no terminal: the story, narrated)\n{scenario.describe()}")
    session = Session(
        SessionConfig(
            workdir=scenario.workdir,
            sglang=str(scenario.sglang_root),
            launch_words=scenario.preflight_words,
            demo_label="demo",
            run_argv=scenario.launch_argv,
            run_env=scenario.env,
        )
    )
    try:
        checks = session.run_checks()
        errors = [f for f in checks.findings if f.severity == "error"]
        say(f"\npreflight: {len(errors)} launch blockers found before any launch")
        for finding in errors:
            say(f"  error {finding.id} {finding.attribute or ''}: {finding.message}")

        _launch(session, "without the fixes (what a user would hit first)", say)

        for patch in checks.patches:
            if patch.methods:
                applied = session.apply(patch)
                say(f"\npatched: commit {(applied.commit or '')[:10]} — {patch.short_class} delegates "
                    f"{', '.join(patch.methods)} to self.{patch.delegate}")  # fmt: skip
        _launch(session, "with the patches", say)

        context = next((f for f in session.run_checks().findings if session.env_fix(f)), None)
        if context is not None:
            fix = session.env_fix(context)
            assert fix is not None
            session.accept_env(fix.variable, fix.value)
            say(f"\naccepted for the next launch: {fix.text()}")
        final = _launch(session, "with every fix", say)
        record = session.current_launch()
        if final.ready and record is not None:
            took = time.time() - record.started_at
            say(
                f"\nready: launch {record.number} reached 'ready' in {took:.1f} s. The demo files stay in {scenario.root}"
            )
            return 0
        say("\nthe last launch did not reach ready")
        return 1
    finally:
        running = session.server.attached()
        if running is not None:
            session.server.stop(running, grace_s=5.0)
