"""GPUs of several nodes in the GPU panel: a header per node, rows keyed by node and index (GPU 0
of two hosts are two rows), a node that stopped reporting shown as stale with its age, and the
memory history kept per node's GPU."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)
from textual.widgets import Static  # noqa: TID251 (a UI test drives Textual)

from eaglebug.gpu.sampler import Sampler
from eaglebug.gpu.snapshot import BoxSnapshot, GpuSnapshot
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import EaglebugApp, build_app
from eaglebug.tui.widgets.gpu_panel import GpuPanel, GpuRow
from tests.test_tui import FAST, run, until

GIB = 1024**3


def session_of(tmp_path: Path, tp: int) -> Session:
    """A read-only session watching a server log that says `--tp <tp>`: how many GPUs the
    launch uses, so the panel knows whether they fit."""
    log = tmp_path / "server.log"
    log.write_text(f"[2026-01-30 10:36:00] server_args=ServerArgs(tp_size={tp})\n")
    return Session(SessionConfig(tmp_path / "work", log_path=log, readonly=True))


class TwoNodes:
    """A GPU source like the Prometheus one: two hosts, two GPUs each, node-b gone stale."""

    def __init__(self) -> None:
        self.stale = False
        self.used = 10 * GIB

    def sample(self) -> BoxSnapshot:
        gpus = []
        for host in ("node-a", "node-b"):
            for index in (0, 1):
                stale = self.stale and host == "node-b"
                gpus.append(
                    GpuSnapshot(
                        index=index,
                        name="NVIDIA H100 80GB HBM3",
                        uuid=f"GPU-{host}-{index}",
                        used_bytes=self.used + index * GIB if host == "node-a" else 2 * GIB,
                        total_bytes=80 * GIB,
                        host=host,
                        state="stale" if stale else "ok",
                        stale_s=40.0 if stale else None,
                    )
                )
        return BoxSnapshot(time.monotonic(), time.time(), gpus=tuple(gpus))

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "Prometheus http://127.0.0.1:9090, DCGM exporter"


def two_nodes_app(tmp_path: Path) -> tuple[TwoNodes, EaglebugApp]:
    """The app over two nodes of two GPUs. The sampler thread takes its first sample at start
    and then waits an hour: the test takes every later sample itself, so no sample of the
    thread races what the test changes."""
    source = TwoNodes()
    session = session_of(tmp_path, tp=4)
    return source, build_app(
        session, source, run_checks=False, **{**FAST, "sample_interval_s": 3600}
    )


async def four_rows(pilot: Pilot[None], app: EaglebugApp) -> GpuPanel:
    """The panel once it shows a row per GPU, as `x` asks: without it, whether the four rows
    fit (and so whether the panel shows a row per node instead) depends on when the first
    layout lands."""
    panel = app.main.query_one(GpuPanel)
    panel.every_gpu = True
    await until(pilot, lambda: len(panel.query(GpuRow)) == 4, "four GPU rows")
    return panel


def test_each_node_has_its_header_and_its_own_rows(tmp_path: Path) -> None:
    source, app = two_nodes_app(tmp_path)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        panel = await four_rows(pilot, app)
        keys = [row.key for row in panel.query(GpuRow)]
        assert keys == [("node-a", 0), ("node-a", 1), ("node-b", 0), ("node-b", 1)]
        headers = [str(h.render()) for h in panel.query(".gpu-node").results(Static)]
        assert headers == ["node-a · 2 GPUs", "node-b · 2 GPUs"]
        source.stale = True
        app.sampler.step()
        await until(
            pilot,
            lambda: "stale" in str(list(panel.query(".gpu-node").results(Static))[1].render()),
            "node-b's header to say stale",
        )
        b0 = next(r for r in panel.query(GpuRow) if r.key == ("node-b", 0))
        assert b0.has_class("stale")
        assert "stale 40 s" in str(b0.query_one(".gpu-text", Static).render())

    run(app, script)


def test_history_is_kept_per_node() -> None:
    source = TwoNodes()
    sampler = Sampler(source, interval_s=3600)
    sampler.step()
    source.used = 11 * GIB
    sampler.step()
    assert sampler.history(("node-a", 0)) == (10 * GIB, 11 * GIB)
    assert sampler.history(("node-b", 0)) == (2 * GIB, 2 * GIB)
    assert sampler.history(0) == ()  # this host has no GPU 0 here


class Fleet:
    """Three nodes of sixteen GPUs: more rows than a 40-line terminal's GPU panel holds."""

    def __init__(self, nodes: int = 3, per_node: int = 16) -> None:
        self.nodes = [f"node-{chr(ord('a') + n)}" for n in range(nodes)]
        self.per_node = per_node
        self.lost: tuple[str, int] | None = None

    def sample(self) -> BoxSnapshot:
        gpus = [
            GpuSnapshot(
                index=index,
                name="NVIDIA H100 80GB HBM3",
                uuid=f"GPU-{host}-{index}",
                used_bytes=(60 + index % 4) * GIB,
                total_bytes=80 * GIB,
                utilization_pct=50,
                host=host,
                state="lost" if (host, index) == self.lost else "ok",
            )
            for host in self.nodes
            for index in range(self.per_node)
        ]
        return BoxSnapshot(time.monotonic(), time.time(), gpus=tuple(gpus))

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "Prometheus http://127.0.0.1:9090, DCGM exporter"


def test_when_the_gpus_do_not_fit_each_node_is_one_row_and_x_shows_every_gpu(
    tmp_path: Path,
) -> None:
    from eaglebug.tui.widgets.gpu_panel import NodeRow

    source = Fleet()
    source.lost = ("node-b", 3)
    session = session_of(tmp_path, tp=16)
    app = build_app(session, source, run_checks=False, **FAST)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        panel = app.main.query_one(GpuPanel)

        def texts() -> list[str]:
            return [str(r.query_one(".gpu-text", Static).render()) for r in panel.query(NodeRow)]

        await until(pilot, lambda: len(texts()) == 3 and all(texts()), "one row per node")
        rows = panel.query_one("#gpu-rows")
        assert rows.has_class("by-node") and len(panel.query(GpuRow)) == 0
        texts = texts()
        assert texts[0].startswith("node-a ×16") and "60-63/80G" in texts[0]
        assert "1 lost" in texts[1] and "lost" not in texts[0]
        await pilot.press("x")
        await until(pilot, lambda: len(panel.query(GpuRow)) == 48, "every GPU's row")
        assert not rows.has_class("by-node")
        await pilot.press("x")
        await until(pilot, lambda: rows.has_class("by-node"), "the node rows again")

    run(app, script)


def test_gpus_that_fit_keep_their_own_rows(tmp_path: Path) -> None:
    source = Fleet(nodes=2, per_node=4)
    session = session_of(tmp_path, tp=8)
    app = build_app(session, source, run_checks=False, **FAST)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        panel = app.main.query_one(GpuPanel)
        await until(pilot, lambda: len(panel.query(GpuRow)) == 8, "eight GPU rows")
        assert not panel.query_one("#gpu-rows").has_class("by-node")

    run(app, script)


class ServingNodes(TwoNodes):
    """Two nodes, the first one's SGLang exporting its acceptance (as Prometheus gives it)."""

    def sample(self) -> BoxSnapshot:
        from dataclasses import replace

        from eaglebug.gpu.snapshot import Serving

        return replace(super().sample(), serving=(Serving("10.0.0.1:30000", 3.1, 0.7),))


def test_each_servers_acceptance_shows_in_the_gpu_panel(tmp_path: Path) -> None:
    session = session_of(tmp_path, tp=4)
    app = build_app(session, ServingNodes(), run_checks=False, **FAST)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        panel = app.main.query_one(GpuPanel)
        procs = panel.query_one("#gpu-procs", Static)
        await until(
            pilot,
            lambda: "SGLang 10.0.0.1:30000 accept 3.10 · 70%" in str(procs.render()),
            "the server's acceptance",
        )

    run(app, script)


def test_a_sample_that_reaches_rows_not_yet_composed_fills_them(tmp_path: Path) -> None:
    """Two samples handled before Textual composes the rows the first one mounted (a loaded
    machine, a burst of log lines in between): the second fills those rows, nothing raises,
    and each row ends on the newest sample."""
    source, app = two_nodes_app(tmp_path)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        panel = await four_rows(pilot, app)  # the first sample's rows
        source.used = 30 * GIB
        first = source.sample()
        source.used = 40 * GIB
        newest = source.sample()
        moved = replace(first, gpus=(*first.gpus, *other_host(first)))
        newer = replace(newest, gpus=(*newest.gpus, *other_host(newest)))
        panel.show(moved, {}, source.describe())  # mounts node-c's rows
        panel.show(newer, {}, source.describe())  # reaches them in the same tick
        rows = {row.key: row for row in panel.query(GpuRow)}
        assert ("node-c", 0) in rows

        def text(key: tuple[str, int]) -> str:
            return "".join(str(t.render()) for t in rows[key].query(".gpu-text").results(Static))

        await until(pilot, lambda: "40.0/80G" in text(("node-c", 0)), "node-c's row to fill")
        assert "40.0/80G" in text(("node-a", 0))
        assert not [n for n in notes if n.severity == "error"]

    run(app, script)


def other_host(snapshot: BoxSnapshot) -> tuple[GpuSnapshot, ...]:
    """Node-a's GPUs again as a third host's: rows the panel has not mounted yet."""
    return tuple(
        replace(g, host="node-c", uuid=f"GPU-node-c-{g.index}")
        for g in snapshot.gpus
        if g.host == "node-a"
    )
