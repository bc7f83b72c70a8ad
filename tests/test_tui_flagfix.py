"""A flag fix in the TUI: `p` on config.memory makes the flag pending, shown, and launched with.

The real 0.5.23 tree, the published Llama-3.1-8B + EAGLE-3 configs, one fake 80 GB H100
through NVML. `--mem-fraction-static 0.3` leaves a pool shorter than one 131072-token request;
`p`, `y` makes the fraction the tree's arithmetic asks for pending; the re-run checks read the
launch with it (the warning is gone, the check says pending); `r`, `y` launches with it, and the
state file records the flag as the launch's.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import psutil
from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)

from eaglebug.gpu.nvml_source import NvmlSource
from eaglebug.server.state import load_state
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import build_app
from eaglebug.tui.screens.confirm import ConfirmModal
from tests.configs import write_model
from tests.fake_nvml import FakeGpu, FakeNvml
from tests.live import session_pids
from tests.memconfigs import (
    EAGLE3_LLAMA31_8B,
    EAGLE3_LLAMA31_8B_BYTES,
    LLAMA31_8B,
    LLAMA31_8B_BYTES,
)
from tests.test_preflight import spec_pair
from tests.test_tui import FAST, answer, checks_settled, run, select, until

GIB = 1 << 30
MIB = 1 << 20


def test_p_sets_a_flag_fix_for_the_next_launch(sglang_0523: Path, tmp_path: Path) -> None:
    target = write_model(tmp_path / "target", LLAMA31_8B, total_size=LLAMA31_8B_BYTES)
    draft = write_model(tmp_path / "draft", EAGLE3_LLAMA31_8B, total_size=EAGLE3_LLAMA31_8B_BYTES)
    # A launch that exits at once (no SGLang here), checked as the real command.
    more = ("--context-length", "131072", "--mem-fraction-static", "0.3")
    words = [sys.executable, "-m", "sglang.launch_server", *spec_pair(target, draft, *more)]
    workdir = tmp_path / "work"
    workdir.mkdir()
    session = Session(SessionConfig(workdir, sglang=str(sglang_0523), launch_words=words))
    gpu = FakeGpu(name="NVIDIA H100 80GB HBM3", total_bytes=81559 * MIB, used_bytes=GIB)
    app = build_app(session, NvmlSource(nvml_module=FakeNvml([gpu])), **FAST)

    def memory_warning() -> bool:
        result = app.main.check_result
        return result is not None and any(
            f.id == "config.memory" and "fewer than one request" in f.message
            for f in result.findings
        )

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(pilot, lambda: session.latest_gpus is not None, "a GPU sample")
        await until(pilot, lambda: checks_settled(app), "the first checks")
        await pilot.press("a")  # re-check now that the GPU is known
        await until(pilot, memory_warning, "the memory warning", timeout_s=240)
        finding = await select(
            pilot,
            app,
            lambda f: f.id == "config.memory" and f.severity == "warning",
            "the memory check",
        )
        fix = session.flag_fix(finding)
        assert fix is not None and fix.flag == "--mem-fraction-static"
        assert float(fix.value or 0) > 0.3
        await pilot.press("p")
        await answer(pilot, app, ConfirmModal, "y")
        await until(
            pilot,
            lambda: load_state(workdir).pending_flags == {fix.flag: fix.value},
            "the flag to be pending",
        )
        # The re-run checks see the next launch: the pool now holds a full request.
        await until(
            pilot,
            lambda: checks_settled(app) and not memory_warning(),
            "the checks with the pending flag",
            timeout_s=240,
        )
        result = app.main.check_result
        assert result is not None and result.preflight is not None
        memory = next(f for f in result.findings if f.id == "config.memory")
        assert memory.to_json()["details"]["mem_fraction_static"] == float(fix.value or 0)
        # r, y: the launch runs with the flag, and the state file says so.
        await pilot.press("r")
        await answer(pilot, app, ConfirmModal, "y")
        await until(pilot, lambda: load_state(workdir).latest is not None, "the launch")
        latest = load_state(workdir).latest
        assert latest is not None
        assert latest.argv[-2:] == [fix.flag, fix.value]
        assert latest.argv.count("--mem-fraction-static") == 1
        assert latest.flag_additions == {fix.flag: fix.value}
        assert load_state(workdir).pending_flags == {}
        for pid in session_pids(latest.pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()

    run(app, script)
