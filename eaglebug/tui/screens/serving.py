"""What the main screen does once the server serves: the acceptance it reads, the probe.

A part of `MainScreen` (its base), kept apart so each file stays one subject: the acceptance
watch's snapshots go to the header and, through `low_acceptance`, to the checks as
`runtime.low_acceptance`; `s` runs the probe on a guarded worker against the ready server's own
port on the loopback, and its report joins the watch's record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual import on
from textual.screen import Screen

from eaglebug.checks import Finding, InputError, Report, low_acceptance
from eaglebug.session.checking import CheckResult
from eaglebug.session.session import Session
from eaglebug.tui.messages import AcceptanceSampled, ProbeFinished
from eaglebug.tui.runner import reported, run_guarded
from eaglebug.tui.widgets.header import PhaseHeader

if TYPE_CHECKING:
    from eaglebug.tui.app import EaglebugApp


class ServingParts(Screen[None]):
    check_result: CheckResult | None = None  # the main screen's newest checks
    runtime_findings: tuple[Finding, ...] = ()  # the acceptance watchdog's
    _url_of: int | None = -1  # the launch whose server URL `_url` is
    _url: str | None = None

    @property
    def eaglebug(self) -> EaglebugApp:
        return cast("EaglebugApp", self.app)  # the only app these screens are pushed on

    @property
    def session(self) -> Session:
        return self.eaglebug.session

    def refresh_checks(self) -> None:
        """The main screen's: the checks list, rebuilt."""
        raise NotImplementedError

    @on(AcceptanceSampled)
    def _show_acceptance(self, message: AcceptanceSampled) -> None:
        if self.eaglebug.winding_down:
            return
        snap = message.snapshot
        self.query_one(PhaseHeader).acceptance = snap
        result = self.check_result
        words = self.session.launch_words
        finding = low_acceptance(
            snap.reports,
            result.findings if result is not None else None,
            [w for w in words if w.startswith("--")] if words else None,
        )
        found = (finding,) if finding is not None else ()
        if found != self.runtime_findings:
            self.runtime_findings = found
            self.refresh_checks()

    def watch_acceptance(self, phase: str, launch_number: int | None) -> None:
        """Poll the launch's server while it is ready; its URL is read once per launch (the
        watch's snapshots come several times a second, the state file need not)."""
        if phase != "ready":
            self.eaglebug.accept_watch.watch(None)
            return
        if self._url_of != launch_number:
            self._url_of, self._url = launch_number, self._server_url()
        self.eaglebug.accept_watch.watch(self._url)

    def _server_url(self) -> str | None:
        """The loopback URL of the recorded launch's own port; None when nothing was
        launched from here (a log watched read-only) or its port cannot be read."""
        from eaglebug.cli.probe import url_of_launch

        latest = self.session.server.state().latest
        if latest is None:
            return None
        try:
            return url_of_launch(latest.argv)
        except InputError:
            return None

    @reported("probe")
    def action_probe(self) -> None:
        url = self._server_url()
        if url is None or self.query_one(PhaseHeader).phase != "ready":
            self.notify("the probe needs a ready server launched from here", title="probe")
            return
        self.notify(f"probing {url}…", title="probe")
        run_guarded(self, lambda: self._probe(url), "probe", group="probe")

    def _probe(self, url: str) -> None:
        """On a worker thread (`run_guarded`: a server that is gone, or any failure, is a
        notification): a few short prompts, bounded in requests and time."""
        from eaglebug.cli.probe import PROMPTS, probe

        result = probe(url, PROMPTS[:2], max_new_tokens=48, timeout_s=30.0)
        length = result.accept_length
        if length is None:
            self.post_message(ProbeFinished(f"{url}: no acceptance reported", "warning"))
            return
        self.eaglebug.accept_watch.add(Report(length, None, "probe"))
        text = f"accept length {length:.2f}, {result.tokens_per_s:.1f} tokens/s"
        self.post_message(ProbeFinished(text, "information"))

    @on(ProbeFinished)
    def _show_probe(self, message: ProbeFinished) -> None:
        if not self.eaglebug.winding_down:
            self.notify(message.text, title="probe", severity=message.severity)
