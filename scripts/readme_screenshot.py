"""The README's screenshot of the silent demo: ready, nothing accepted, the watchdog's finding.

    python scripts/readme_screenshot.py [--out docs/silent-demo.svg]

Runs the real app on the real silent demo (fast knob), waits for `runtime.low_acceptance`,
selects it, and saves the screen as SVG (Textual's own screenshot).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from eaglebug.demo import DemoScenario
from eaglebug.tui.app import build_app
from eaglebug.tui.demo import demo_gpus, demo_session
from eaglebug.tui.screens.confirm import ConfirmModal

DEADLINE_S = 60.0


async def _until(pilot, condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs/silent-demo.svg")
    args = parser.parse_args()
    scenario = DemoScenario.prepare(Path(tempfile.mkdtemp()) / "demo", fast=True, story="silent")
    session = demo_session(scenario)
    app = build_app(session, demo_gpus(session, scenario), accept_interval_s=0.2)

    async def run() -> None:
        async with app.run_test(size=(130, 36)) as pilot:
            await _until(pilot, lambda: app.main.check_result is not None, "the checks")
            await pilot.press("r")
            await _until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the dialog")
            await pilot.press("y")
            await _until(
                pilot,
                lambda: any(f.id == "runtime.low_acceptance" for f in app.main.runtime_findings),
                "the watchdog",
            )
            await pilot.pause(1.0)
            Path(args.out).write_text(
                app.export_screenshot(title="eaglebug demo --scenario silent")
            )
            running = session.server.attached()
            if running is not None:
                session.server.stop(running, grace_s=5.0)

    asyncio.run(run())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
