"""GPU panel: one row per GPU (memory bar, utilisation, temperature, power, memory sparkline)
and the processes holding GPU memory with their SGLang role. No driver, lost GPUs and nodes that
stopped reporting (stale, from Prometheus) are states. With GPUs of several nodes, each node
gets a header line above its rows; when they do not all fit the panel (two nodes of 8 in a
short pane, a fleet of 64), each node is one summary row instead (memory range, mean
utilisation, lost and stale GPUs, the node's mean memory sparkline), and `x` shows every GPU
again (or goes back to the summaries). Hosts, instances and process names are outside text
(Prometheus labels, whatever a process calls itself): drawn through `one_line`, never obeyed as
escape sequences."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Sparkline, Static

from eaglebug.checks import one_line
from eaglebug.gpu.snapshot import BoxSnapshot, GpuSnapshot

GIB = 1024**3
_BAR = 10
_WAITING = "waiting for the first sample…"


def _bar(fraction: float) -> Text:
    filled = min(max(round(fraction * _BAR), 0), _BAR)
    style = "red" if fraction > 0.92 else "yellow" if fraction > 0.75 else "green"
    return Text("█" * filled, style=style) + Text("░" * (_BAR - filled), style="dim")


def gpu_line(gpu: GpuSnapshot) -> Text:
    line = Text(f"{gpu.index} ", style="bold")
    if gpu.state == "lost":
        return line + Text("lost — the driver no longer answers for this GPU", style="bold red")
    if gpu.state == "stale":
        age = f" {gpu.stale_s:.0f} s" if gpu.stale_s is not None else ""
        used = f" {gpu.used_bytes / GIB:5.1f}/{(gpu.total_bytes or 1) / GIB:.0f}G"
        return line + Text(f"stale{age}{used} (its node stopped reporting)", style="yellow")
    total = gpu.total_bytes or 1
    line += _bar(gpu.used_bytes / total)
    line.append(f" {gpu.used_bytes / GIB:5.1f}/{total / GIB:.0f}G")
    util = f"{gpu.utilization_pct:3.0f}%" if gpu.utilization_pct is not None else " n/a"
    temp = f"{gpu.temperature_c:3.0f}°" if gpu.temperature_c is not None else " n/a"
    power = f"{gpu.power_mw / 1000:4.0f}W" if gpu.power_mw is not None else "  n/a"
    line.append(f" {util} {temp} {power}", style="dim")
    return line


def node_line(host: str, gpus: list[GpuSnapshot]) -> Text:
    """One node's GPUs on one line: `node-a ×8 ███░░ 61-70/80G  45%  1 lost`."""
    line = Text(f"{one_line(host) or 'this host'} ×{len(gpus)} ", style="bold")
    live = [g for g in gpus if g.state == "ok"]
    if live:
        fraction = sum(g.used_fraction for g in live) / len(live)
        line += _bar(fraction)
        low, high = min(g.used_bytes for g in live) / GIB, max(g.used_bytes for g in live) / GIB
        total = max(g.total_bytes for g in live) / GIB
        line.append(
            f" {low:.0f}-{high:.0f}/{total:.0f}G"
            if high - low >= 1
            else f" {high:.0f}/{total:.0f}G"
        )
        utils = [g.utilization_pct for g in live if g.utilization_pct is not None]
        if utils:
            line.append(f" {sum(utils) / len(utils):3.0f}%", style="dim")
    lost = sum(1 for g in gpus if g.state == "lost")
    stale = [g for g in gpus if g.state == "stale"]
    if lost:
        line.append(f" {lost} lost", style="bold red")
    if stale:
        ages = [g.stale_s for g in stale if g.stale_s is not None]
        age = f" {max(ages):.0f} s" if ages else ""
        line.append(f" {len(stale)} stale{age}", style="yellow")
    return line


def _mean(histories: list[list[float]]) -> list[float]:
    histories = [h for h in histories if h]
    if not histories:
        return []
    width = min(len(h) for h in histories)
    return [sum(h[-width + i] for h in histories) / len(histories) for i in range(width)]


def _row_parts() -> tuple[Static, Sparkline]:
    """A row's text and sparkline, made with the row: the next sample may reach a row the
    panel has mounted but Textual has not composed yet, and must find them."""
    return Static(classes="gpu-text"), Sparkline([0.0], classes="gpu-spark")


class NodeRow(Horizontal):
    """A node's GPUs in one row, when the panel shows nodes rather than GPUs."""

    def __init__(self, host: str) -> None:
        super().__init__(classes="node-row")
        self.host = host
        self._text, self._spark = _row_parts()

    def compose(self) -> ComposeResult:
        yield self._text
        yield self._spark

    def show(self, gpus: list[GpuSnapshot], history: list[float]) -> None:
        self._text.update(node_line(self.host, gpus), layout=False)
        self._spark.data = history or [0.0]


class GpuRow(Horizontal):
    def __init__(self, key: tuple[str, int]) -> None:
        super().__init__(classes="gpu-row")
        self.key = key
        self._shown: Text | None = None
        self._text, self._spark = _row_parts()

    def compose(self) -> ComposeResult:
        yield self._text
        yield self._spark

    def show(self, gpu: GpuSnapshot, history: list[float], elsewhere: bool = False) -> None:
        """`elsewhere`: a GPU of this host the launch does not see (dimmed)."""
        line = gpu_line(gpu)
        if line != self._shown:  # one line of a fixed width: never a relayout
            self._shown = line
            self._text.update(line, layout=False)
        self._spark.data = history or [0.0]
        self.set_class(gpu.state == "lost", "lost")
        self.set_class(gpu.state == "stale", "stale")
        self.set_class(elsewhere, "elsewhere")


class GpuPanel(Vertical):
    """Rendered from frozen snapshots only; the sampler thread never touches it. `x` (a key
    of the main screen) calls `toggle_rows`."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.every_gpu: bool | None = None  # None: by node only when the GPUs do not fit
        self._node_rows: dict[str, NodeRow] = {}
        self._last: tuple[BoxSnapshot, dict[tuple[str, int], list[float]], str] | None = None
        self.border_title = "GPUs"
        self._rows: dict[tuple[str, int], GpuRow] = {}
        self._node_headers: dict[str, Static] = {}  # a header per node, once there are several
        self._procs: Text | None = None
        self._unavailable: str | None = _WAITING
        # NVML's numbers of this host's GPUs the launch sees, where it narrows them (the launch
        # watch's `WatchSnapshot.gpus`): the others are dimmed. None: every GPU.
        self.launch_gpus: frozenset[int] | None = None

    def compose(self) -> ComposeResult:
        yield Static(_WAITING, id="gpu-state")
        yield Vertical(id="gpu-rows")
        yield Static(id="gpu-procs")

    def show(
        self,
        snapshot: BoxSnapshot,
        histories: dict[tuple[str, int], list[float]],
        source: str,
    ) -> None:
        # Each sample comes every second: change only what changed (setting a border subtitle
        # repaints the whole panel, updating an auto-height Static relayouts the screen).
        source = one_line(source)  # a Prometheus URL from the environment: outside text
        if self.border_subtitle != source:
            self.border_subtitle = source
        title = "GPUs"
        if self.launch_gpus is not None:
            title = f"GPUs · launch on {','.join(map(str, sorted(self.launch_gpus))) or 'none'}"
        if self.border_title != title:
            self.border_title = title
        if snapshot.unavailable != self._unavailable:
            self._unavailable = snapshot.unavailable
            state = self.query_one("#gpu-state", Static)
            if snapshot.unavailable:
                state.update(Text(one_line(snapshot.unavailable), style="bold yellow"))
            state.display = bool(snapshot.unavailable)
        self._last = (snapshot, histories, source)
        rows = self.query_one("#gpu-rows", Vertical)
        hosts = sorted({gpu.host or "" for gpu in snapshot.gpus})
        by_node = self._by_node(snapshot, len(hosts))
        rows.set_class(by_node, "by-node")
        for host in hosts if by_node else ():
            gpus = [g for g in snapshot.gpus if (g.host or "") == host]
            node = self._node_rows.get(host)
            history = _mean([histories.get(g.key, []) for g in gpus])
            if node is None:
                node = self._node_rows[host] = NodeRow(host)
                rows.mount(node)
                node.call_after_refresh(self._show_latest)
            else:
                node.show(gpus, history)
        for gpu in snapshot.gpus if not by_node else ():
            if len(hosts) > 1:
                self._node_header(rows, gpu.host or "", snapshot)
            row = self._rows.get(gpu.key)
            if row is None:
                row = self._rows[gpu.key] = GpuRow(gpu.key)
                rows.mount(row)
                row.call_after_refresh(self._show_latest)
            else:
                mine = self.launch_gpus
                elsewhere = mine is not None and gpu.host is None and gpu.index not in mine
                row.show(gpu, histories.get(gpu.key, []), elsewhere)
        procs = Text()
        for proc in sorted(snapshot.processes, key=lambda p: (p.gpu_index, p.pid))[:12]:
            used = f"{proc.used_bytes / GIB:5.1f}G" if proc.used_bytes is not None else "  n/a"
            who = (
                "(hidden: another user or container)"
                if proc.hidden
                else one_line(proc.role or proc.name or "?")  # any process may name itself
            )
            procs.append(
                f"{proc.gpu_index} {proc.pid:>7} {used} {who}\n", style="dim" if proc.hidden else ""
            )
        for serving in snapshot.serving:  # each node's SGLang, from its own /metrics
            if serving.accept_length is not None:
                rate = (
                    f" · {100 * serving.accept_rate:.0f}%"
                    if serving.accept_rate is not None
                    else ""
                )
                procs.append(
                    f"SGLang {one_line(serving.instance)} accept "
                    f"{serving.accept_length:.2f}{rate}\n"
                )
        if procs != self._procs:
            self._procs = procs
            self.query_one("#gpu-procs", Static).update(procs)

    def show_launch(self, gpus: frozenset[int] | None) -> None:
        """The GPUs the current launch sees changed (a relaunch, a new command): dim the others
        now, not at the next sample."""
        if gpus != self.launch_gpus:
            self.launch_gpus = gpus
            self._show_latest()

    def _show_latest(self) -> None:
        """A row mounted by one sample is first filled after its refresh, by then perhaps
        behind a newer sample: it shows the newest one the panel has, never the one it was
        mounted with."""
        if self._last is not None:
            self.show(*self._last)

    def _by_node(self, snapshot: BoxSnapshot, hosts: int) -> bool:
        """One row per node: as `x` asked, else when the GPUs of several nodes do not fit."""
        if hosts < 2:
            return False
        if self.every_gpu is not None:
            return not self.every_gpu
        if self.content_size.height <= 0:
            return False  # not laid out yet
        room = self.content_size.height - self.query_one("#gpu-procs", Static).size.height
        state = self.query_one("#gpu-state", Static)
        room -= state.size.height if state.display else 0
        return len(snapshot.gpus) + hosts > room

    def toggle_rows(self) -> None:
        if self._last is None:
            return
        snapshot, histories, source = self._last
        hosts = len({gpu.host or "" for gpu in snapshot.gpus})
        self.every_gpu = self._by_node(snapshot, hosts)
        self.show(snapshot, histories, source)

    def _node_header(self, rows: Vertical, host: str, snapshot: BoxSnapshot) -> None:
        """`node-a · 8 GPUs` (and `stale` when all of them are), mounted before its rows."""
        gpus = [g for g in snapshot.gpus if (g.host or "") == host]
        stale = all(g.state == "stale" for g in gpus)
        text = Text(f"{one_line(host) or 'this host'} · {len(gpus)} GPUs", style="bold")
        if stale:
            text.append("  stale", style="yellow")
        header = self._node_headers.get(host)
        if header is None:
            header = self._node_headers[host] = Static(text, classes="gpu-node")
            rows.mount(header)
        else:
            header.update(text)
