"""`eaglebug demo`: the embedded default, wired to the app.

A scratch SGLang-shaped tree in a git repository, 8 simulated GPUs whose memory and load follow
what the stand-in server reports, and the stand-in server itself, which imports that tree and fails
the way a real SGLang does until the fixes are applied. The header says it is a demo.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eaglebug.demo.memfile import load_curve, memory_curve, memory_path
from eaglebug.demo.scenario import DemoScenario
from eaglebug.gpu.simulated import SimulatedSource
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import EaglebugApp, build_app


def demo_session(
    scenario: DemoScenario, readonly: bool = False, checks_apart: bool = False
) -> Session:
    config = SessionConfig(
        workdir=scenario.workdir,
        sglang=str(scenario.sglang_root),
        launch_words=scenario.preflight_words,
        readonly=readonly,
        demo_label="DEMO · simulated GPUs · stand-in server",
        run_argv=scenario.launch_argv,
        run_env=scenario.env,
        checks_apart=checks_apart,
    )
    return Session(config)


def demo_gpus(session: Session, scenario: DemoScenario) -> SimulatedSource:
    def current_report() -> Path | None:
        log = session.log_path()
        return memory_path(log) if log else None

    return SimulatedSource(
        gpus=scenario.tp,
        total_bytes=scenario.gpu_bytes,
        curve=memory_curve(current_report),
        load=load_curve(current_report),  # busy as the stand-in's phase says, as memory is
        processes=False,
        label="demo",
    )


def demo_app(
    scenario: DemoScenario,
    readonly: bool = False,
    interval_s: float = 1.0,
    stall_limits: dict[str, float] | None = None,
    checks_apart: bool = False,
) -> EaglebugApp:
    """`checks_apart`: the checks in a worker process, as `eaglebug demo` runs them."""
    session = demo_session(scenario, readonly, checks_apart)
    return build_app(
        session,
        demo_gpus(session, scenario),
        sample_interval_s=interval_s,
        stall_limits=stall_limits,
    )


def run_demo(
    fast: bool = False,
    interval_s: float = 1.0,
    readonly: bool = False,
    stall_limits: dict[str, float] | None = None,
    story: str = "seed",
    prepared: Callable[[], DemoScenario] | None = None,
) -> int:
    """The demo in the TUI; `prepared` gives its scenario where one is being made already
    (by a helper, while this module loaded)."""
    scenario = prepared() if prepared is not None else DemoScenario.prepare(fast=fast, story=story)
    app = demo_app(scenario, readonly, interval_s, stall_limits, checks_apart=True)
    app.run()
    # A real server outlives eaglebug; the demo's stand-in is a toy, so it ends with the demo.
    running = app.session.server.attached()
    if running is not None:
        app.session.server.stop(running, grace_s=5.0)
    if app.hung_up:  # no terminal to print to
        return app.return_code or 0
    print(f"demo files: {scenario.root}\n{scenario.describe()}")
    return 0
