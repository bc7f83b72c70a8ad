"""HTTP from outside, built for real (issue 24): every command that talks to a server eaglebug
did not write (`probe`, `gpus --prometheus`, the acceptance watch) goes through one client
(`eaglebug/net/fetch.py`) with a total deadline, a size cap and one-line errors.

The servers are real sockets on 127.0.0.1 (`tests/hostile_http.py`): an SSH banner on the port,
a trickle of one byte every half second, a server that never answers, 150 headers, a short
body, a chunk size that is not hex, 64 MB of answer. None of these may end in a traceback, an
`internal error`, a hang, or a read of the whole 64 MB.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from eaglebug.cli.probe import probe
from eaglebug.net.fetch import MAX_BYTES, Deadline, HttpFailure, fetch
from eaglebug.server.client import ServerError
from eaglebug.session.acceptwatch import AcceptanceWatch
from tests.clirun import cli, refused
from tests.hostile_http import HostileServer

BAD_SHAPES = {
    "ssh": ("protocol", "does not speak HTTP"),
    "headers150": ("protocol", "got more than 100 headers"),
    "short": ("protocol", "incomplete answer"),
    "badchunk": ("protocol", "incomplete answer"),
    "huge": ("size", f"more than {MAX_BYTES // 2**20} MB"),
}
BAD_URLS = {
    "http://127.0.0.1:abc": "Port could not be cast",
    "http://127.0.0.1:8000/\x1b[2Jx": "control character",
    "http://[::1": "Invalid IPv6 URL",
    "http://127.0.0.1:99999": "Port out of range",
    "ftp://127.0.0.1/": "http:// or https://",
    "http://": "no host",
}


@pytest.fixture(params=sorted(BAD_SHAPES))
def bad(request: pytest.FixtureRequest) -> Iterator[HostileServer]:
    with HostileServer(request.param) as server:
        yield server


def test_each_bad_answer_is_one_failure_of_its_kind(bad: HostileServer) -> None:
    kind, says = BAD_SHAPES[bad.shape]
    with pytest.raises(HttpFailure) as caught:
        fetch(f"{bad.url}/server_info", deadline_s=10.0)
    assert caught.value.kind == kind and says in caught.value.message
    assert "\n" not in caught.value.message


@pytest.mark.parametrize("shape", ["trickle", "silent"])
def test_a_trickle_or_silence_ends_at_the_deadline_not_per_read(shape: str) -> None:
    """The trickle sends a byte every 0.5 s for 60 s and then a whole answer: a client whose
    timeout is per read would get it (and this test would fail); the deadline ends it."""
    with HostileServer(shape) as server, pytest.raises(HttpFailure) as caught:
        fetch(f"{server.url}/generate", deadline_s=1.5)
    assert caught.value.kind == "deadline", caught.value.message
    assert "no whole answer within 1.5 s" in caught.value.message


@pytest.mark.parametrize("url", sorted(BAD_URLS))
def test_urls_no_request_can_go_to(url: str) -> None:
    with pytest.raises(HttpFailure) as caught:
        fetch(url, deadline_s=1.0)
    assert caught.value.kind == "url" and BAD_URLS[url] in caught.value.message
    assert "\x1b" not in caught.value.message


@pytest.mark.parametrize("url", sorted(BAD_URLS))
@pytest.mark.parametrize("command", ["probe --url", "gpus --prometheus"])
def test_the_cli_refuses_a_bad_url_in_one_line(
    capsys: pytest.CaptureFixture[str], command: str, url: str
) -> None:
    run = cli(capsys, *command.split(), url)
    refused(run, "not an http(s) URL")
    assert "\x1b" not in run.err  # an escape sequence in the URL is shown, not obeyed


@pytest.mark.parametrize("shape", sorted(BAD_SHAPES))
def test_probe_says_what_answered_in_one_line(
    capsys: pytest.CaptureFixture[str], shape: str
) -> None:
    with HostileServer(shape) as server:
        run = cli(capsys, "probe", "--url", server.url, "--timeout", "10")
    refused(run, server.url, BAD_SHAPES[shape][1])


@pytest.mark.parametrize("shape", sorted(BAD_SHAPES))
def test_gpus_says_what_answered_in_one_line(
    capsys: pytest.CaptureFixture[str], shape: str
) -> None:
    with HostileServer(shape) as server:
        run = cli(capsys, "gpus", "--prometheus", server.url)
    refused(run, f"Prometheus at {server.url}")
    if shape == "ssh":
        assert "not an HTTP status line: SSH-2.0-OpenSSH" in run.err


def test_probe_timeout_is_the_whole_probe(capsys: pytest.CaptureFixture[str]) -> None:
    """`--timeout 2` against a trickle: one request, ended at the deadline (not three prompts
    and two server-info routes, each allowed its own timeout: 90 s with the default)."""
    with HostileServer("trickle") as server:
        run = cli(capsys, "probe", "--url", server.url, "--timeout", "2")
    # what was left of the 2 s when the first request went (a loaded machine: 1.99 s)
    refused(run, "/server_info gave no whole answer within", "--timeout")
    assert server.paths == ["/server_info"]


def test_a_server_that_never_answers_ends_the_probe_at_its_first_request() -> None:
    with HostileServer("silent") as server, pytest.raises(ServerError) as caught:
        probe(server.url, timeout_s=1.0)
    assert caught.value.kind == "deadline"
    assert server.paths == ["/server_info"]


def test_the_deadline_is_shared_by_every_request() -> None:
    now = [100.0]
    deadline = Deadline(30.0, clock=lambda: now[0])
    now[0] += 12.5
    assert deadline.left() == 17.5
    now[0] += 40.0
    assert deadline.left() == 0.0
    with pytest.raises(HttpFailure) as caught:
        fetch("http://127.0.0.1:9/", deadline_s=deadline.left())
    assert caught.value.kind == "deadline"


# -- SGLang answering with what a count cannot be --------------------------------------------

META_VALUES = {
    "a string": '"12"',
    "a list": "[1, 2]",
    "null": "null",
    "NaN": "NaN",
    "1e400": "1e400",
    "-3": "-3",
    "a bool": "true",
}


def _sglang(meta_value: str) -> HostileServer:
    """An SGLang whose /generate's meta_info fields all hold `meta_value` (raw JSON text)."""

    def body(path: str) -> bytes:
        if path == "/generate":
            meta = ", ".join(
                f'"{key}": {meta_value}'
                for key in ("completion_tokens", "spec_verify_ct", "spec_accept_length")
            )
            return ('{"text": "x", "meta_info": {' + meta + "}}").encode()
        return (
            '{"speculative_algorithm": "EAGLE3", "internal_states": '
            '[{"avg_spec_accept_length": ' + meta_value + ', "spec_verify_ct": 5}]}'
        ).encode()

    return HostileServer("json", body)


@pytest.mark.parametrize("case", sorted(META_VALUES))
def test_meta_info_that_holds_no_count_is_not_reported(
    capsys: pytest.CaptureFixture[str], case: str
) -> None:
    with _sglang(META_VALUES[case]) as server:
        run = cli(capsys, "probe", "--url", server.url, "--requests", "1", "--json")
        text = cli(capsys, "probe", "--url", server.url, "--requests", "1")
    if case in {"NaN", "1e400"}:  # not JSON: the whole answer is refused, in one line
        refused(run, "did not answer JSON")
        refused(text, "did not answer JSON")
        return
    assert run.code == 0, run.err
    data = json.loads(run.out)  # JSON, whatever came in
    assert data["accept_length"] is None
    assert data["requests"][0]["spec_verify_ct"] is None
    assert data["requests"][0]["spec_accept_length"] is None
    assert "accept length not reported" in text.out


@pytest.mark.parametrize("case", sorted(META_VALUES))
def test_the_acceptance_watch_takes_no_reading_from_them(case: str) -> None:
    seen: list[object] = []
    with _sglang(META_VALUES[case]) as server:
        watch = AcceptanceWatch(seen.append, interval_s=60.0, timeout_s=30.0)
        watch.watch(server.url)
        snapshot = watch.poll()
    assert snapshot.reports == ()
    assert snapshot.state == ("no server" if case in {"NaN", "1e400"} else "polling")


def test_the_acceptance_watch_outlives_a_trickle() -> None:
    seen: list[object] = []
    with HostileServer("trickle") as server:
        watch = AcceptanceWatch(seen.append, interval_s=60.0, timeout_s=1.0)
        watch.watch(server.url)
        assert watch.poll().state == "no server"
