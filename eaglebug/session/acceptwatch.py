"""The acceptance watch: after `ready`, is the draft's work accepted? A thread that polls.

Shaped like the GPU `Sampler` and the `LaunchWatch`: a daemon thread, a callback, frozen
snapshots. It is told which server to watch (`watch(url)`: the launch's own port on the
loopback, once the launch is ready; `watch(None)` otherwise) and each beat asks that server
what SGLang reports: `/server_info`'s `internal_states[0].avg_spec_accept_length` (cumulative
since start, so each poll's report is the difference since the last: `from_cumulative`), or,
where the launch has `--enable-metrics`, the `/metrics` gauges. A poll that finds no new verify
steps adds nothing (an idle server says nothing about its draft). A server that is not up, or
goes away mid-poll, is a state of the snapshot (`no server`), never an exception; a route the
server does not have is not asked again until the watched URL changes.

The beat waits on an Event, so `watch()` and `close()` take effect at once; the tests call
`poll()` themselves, on their own thread, against a real HTTP server on the loopback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from eaglebug.checks import DEFAULT_RULES, AcceptanceRules, InputError, Report, from_cumulative
from eaglebug.checks import from_metrics as metrics_report
from eaglebug.logs.fold import METRICS_PATH  # the log panel folds what this watch asks
from eaglebug.net.fetch import HttpFailure, fetch
from eaglebug.server.client import Client, ServerError, cumulative_of

INTERVAL_S = 5.0
# Each request's whole deadline (eaglebug/net: a trickling answer cannot hold the beat longer);
# a server busy with a long prompt may be slow, not gone.
TIMEOUT_S = 2.0
KEEP = 60  # reports kept (the header's sparkline shows the newest)


@dataclass(frozen=True)
class AcceptanceSnapshot:
    url: str | None  # None: nothing watched (the launch is not ready)
    state: str  # idle | waiting | polling | no server
    reports: tuple[Report, ...] = ()  # oldest first
    source: str | None = None  # server_info | metrics: where the newest came from

    @property
    def latest(self) -> Report | None:
        return self.reports[-1] if self.reports else None


class AcceptanceWatch:
    def __init__(
        self,
        on_snapshot: Callable[[AcceptanceSnapshot], None],
        *,
        interval_s: float = INTERVAL_S,
        timeout_s: float = TIMEOUT_S,
        rules: AcceptanceRules = DEFAULT_RULES,
    ) -> None:
        self.on_snapshot = on_snapshot
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.rules = rules
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._url: str | None = None
        self._reports: list[Report] = []
        self._last_total: tuple[float, int] | None = None
        self._missing: set[str] = set()  # routes this server answered 404 to
        self._source: str | None = None

    # -- control (any thread) --------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="acceptance", daemon=True)
            self._thread.start()

    def close(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def watch(self, url: str | None) -> None:
        """Poll `url` from now on (None: stop); a new URL starts a new record."""
        with self._lock:
            if url == self._url:
                return
            self._url = url
            self._reports = []
            self._last_total = None
            self._missing = set()
            self._source = None
        self._publish("waiting" if url else "idle")
        self._wake.set()

    def add(self, report: Report) -> AcceptanceSnapshot:
        """A report from elsewhere (the probe's requests) joins the record."""
        with self._lock:
            self._reports = [*self._reports, report][-KEEP:]
            self._source = report.source
        return self._publish("polling")

    # -- the beat ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            if self._url is not None:
                self.poll()
            self._wake.wait(self.interval_s)

    def poll(self) -> AcceptanceSnapshot:
        """One look at the watched server; publishes and returns the snapshot."""
        with self._lock:
            url = self._url
        if url is None:
            return self._publish("idle")
        try:
            report = self._ask(url)
        except InputError:
            return self._publish("no server", url)
        with self._lock:
            if url != self._url:  # told to watch another server meanwhile
                return self._snapshot("waiting")
            if report is not None:
                self._reports = [*self._reports, report][-KEEP:]
                self._source = report.source
        return self._publish("polling", url)

    def _ask(self, url: str) -> Report | None:
        client = Client(url, self.timeout_s)
        for path in self.rules.server_info_paths:
            if path in self._missing:
                continue
            try:
                info = client.call(path)
            except ServerError as exc:
                if exc.status == 404:
                    self._missing.add(path)
                    continue
                raise
            total = cumulative_of(info if isinstance(info, dict) else None, self.rules)
            if total is None:
                break
            report = from_cumulative(self._last_total, total)
            self._last_total = total
            return report
        return self._from_metrics(url)

    def _from_metrics(self, url: str) -> Report | None:
        if METRICS_PATH in self._missing:
            return None
        try:
            answer = fetch(f"{url}{METRICS_PATH}", deadline_s=self.timeout_s)
        except HttpFailure as exc:
            if exc.kind == "status":
                self._missing.add(METRICS_PATH)
                return None
            raise InputError(exc.message) from None
        return metrics_report(answer.body.decode("utf-8", errors="replace"), self.rules)

    # -- snapshots -----------------------------------------------------------------------------
    def _snapshot(self, state: str, url: str | None = None) -> AcceptanceSnapshot:
        return AcceptanceSnapshot(url or self._url, state, tuple(self._reports), self._source)

    def _publish(self, state: str, url: str | None = None) -> AcceptanceSnapshot:
        with self._lock:
            snapshot = self._snapshot(state, url)
        self.on_snapshot(snapshot)
        return snapshot
