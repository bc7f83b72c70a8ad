"""`eaglebug watch --log node0.log --log node1.log`: several nodes' logs followed as one.

The merger follows each node's log by offset and appends its new lines, tagged with the node,
to one file the TUI follows; the TUI's checks name the node behind in `log.rank_desync`. The
node logs are the ones `test_lognodes` builds from the repository's launch logs.
"""

from __future__ import annotations

from pathlib import Path

from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)

from eaglebug.logs.merge import LogMerger
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import build_app
from tests.test_gpu_nodes import TwoNodes
from tests.test_lognodes import node_logs  # noqa: F401 (the fixture)
from tests.test_tui import FAST, run, shown, until


def test_the_merger_tags_each_line_with_its_node_and_follows_growth(tmp_path: Path) -> None:
    a, b = tmp_path / "node0.log", tmp_path / "node1.log"
    a.write_text("[2026-01-30 10:36:03 TP0] Init torch distributed begin.\n")
    b.write_text("[2026-01-30 10:36:03 TP8] Init torch distributed begin.\npartial")
    merger = LogMerger([a, b], interval_s=3600)
    try:
        assert merger.step() == 2
        text = merger.path.read_text()
        assert "node0  | [2026-01-30 10:36:03 TP0]" in text
        assert "node1  | [2026-01-30 10:36:03 TP8]" in text and "partial" not in text
        with b.open("a") as grow:
            grow.write(" line\n")
        assert merger.step() == 1 and "node1  | partial line" in merger.path.read_text()
        assert merger.rank_nodes() == {"TP0": "node0", "TP8": "node1"}
        a.write_text("[2026-01-30 10:40:00 TP0] again\n")  # rotated: shorter, read from start
        assert merger.step() == 1 and "node0  | [2026-01-30 10:40:00 TP0] again" in (
            merger.path.read_text()
        )
        assert merger.tags == {"node0": str(a), "node1": str(b)}
        with b.open("a") as grow:  # a progress bar: each redraw keeps its node
            grow.write("Loading 1/2\rLoading 2/2\n")
        merger.step()
        assert b"node1  | Loading 1/2\rnode1  | Loading 2/2\n" in merger.path.read_bytes()
    finally:
        merger.stop()
    assert not merger.folder.exists()


def test_the_tui_names_the_node_behind(tmp_path: Path, node_logs: tuple[Path, Path]) -> None:  # noqa: F811
    merger = LogMerger(list(node_logs), interval_s=0.05)
    merger.start()
    session = Session(
        SessionConfig(
            tmp_path / "work",
            log_path=merger.path,
            readonly=True,
            rank_nodes=merger.rank_nodes,
        )
    )
    app = build_app(session, TwoNodes(), run_checks=False, **FAST)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        await until(
            pilot,
            lambda: any("log.rank_desync" in line for line in shown(app)),
            "the desync finding",
        )
        finding = next(f for f in app.main.log_findings if f.id == "log.rank_desync")
        assert "on node1" in finding.message

    try:
        run(app, script)
    finally:
        merger.stop()
    assert not merger.folder.exists()
