"""The demo's story without a screen: what `eaglebug demo` does when there is no terminal.

The same scratch tree, stand-in server and session as the TUI demo, driven step by step and
narrated on stdout: preflight finds the blockers, the first launch crashes, the patches are
committed, the next launch crashes on the context length, the env fix is accepted, and the last
launch is ready. Useful in CI, over a pipe, and to see the loop at a glance.

The silent story (`--scenario silent`) starts where that one ends, with one mistake left that
crashes nothing: `--speculative-algorithm EAGLE` for an EAGLE-3 draft. Preflight flags it, the
launch is ready anyway, the probe measures an acceptance of 1.0 (runtime.low_acceptance, naming
the flagged cause), the flag fix is made pending, and the relaunch accepts about three tokens.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from eaglebug.checks import LogAnalyzer, analyze_file
from eaglebug.demo.scenario import DemoScenario
from eaglebug.session.session import Session, SessionConfig

# How long one stand-in launch may take before the story gives up on it.
LAUNCH_TIMEOUT_S = 180.0


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _wait_for_end(session: Session, log: Path, timeout_s: float) -> LogAnalyzer:
    """Until the launch is ready or has crashed (or the process is gone). A process seen gone
    after its log was read may have written its last lines (the crash) in between: the log is
    read once more then, whole, so what the launch said is never lost to a busy machine."""
    deadline = time.monotonic() + timeout_s
    while True:
        analyzer = analyze_file(log) if log.exists() else LogAnalyzer()
        record = session.current_launch()
        gone = record is not None and session.server.poll_exit(record) is not None
        if gone and log.exists():
            return analyze_file(log)
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


def _acceptance(session: Session, say: Callable[[str], None]) -> float | None:
    """Probe the ready server (its own port on the loopback) and say what the watchdog says."""
    from eaglebug.checks import Report, low_acceptance
    from eaglebug.cli.probe import probe, url_of_launch

    record = session.current_launch()
    if record is None:
        return None
    result = probe(url_of_launch(record.argv), max_new_tokens=64, timeout_s=30.0)
    reports = [Report(s.accept_length, None, "probe") for s in result.samples if s.accept_length]
    length = result.accept_length
    say(
        f"  probe: accept length {length:.2f}, {result.tokens_per_s:.0f} tokens/s"
        if length
        else "  probe: no acceptance reported"
    )
    checks = session.last
    flags = [w for w in session.launch_words if w.startswith("--")]
    low = low_acceptance(reports, checks.findings if checks else None, flags)
    if low is not None:
        say(f"  {low.severity} {low.id}: {low.message}")
    return length


def _silent(session: Session, say: Callable[[str], None]) -> int:
    from eaglebug.checks import flag_of

    checks = session.run_checks()
    errors = [f for f in checks.findings if f.severity == "error"]
    say(f"\npreflight: {len(errors)} problem(s), none of which crashes the launch")
    for finding in errors:
        say(f"  error {finding.id}: {finding.message}")
    if not _launch(session, "as given", say).ready:
        say("\nthe launch did not reach ready")
        return 1
    before = _acceptance(session, say)
    fix = next((flag_of(f.fix) for f in errors if flag_of(f.fix) is not None), None)
    if fix is None:
        say("\nno flag fix to try")
        return 1
    session.accept_flag(fix.flag, fix.value or "")
    say(f"\naccepted for the next launch: {fix.text()}")
    if not _launch(session, "with the flag fix", say).ready:
        say("\nthe relaunch did not reach ready")
        return 1
    after = _acceptance(session, say)
    if before is not None and after is not None and after > before:
        say(f"\nthe speed-up is back: {before:.2f} -> {after:.2f} tokens per verify step")
        return 0
    say("\nthe acceptance did not improve")
    return 1


def run_story(
    fast: bool = True,
    root: Path | None = None,
    say: Callable[[str], None] = _say,
    story: str = "seed",
) -> int:
    scenario = DemoScenario.prepare(root, fast=fast, story=story)
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
        if story == "silent":
            return _silent(session, say)
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
