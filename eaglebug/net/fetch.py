"""The one HTTP client for servers outside eaglebug: a launched SGLang (`probe`, the acceptance
watch) and Prometheus (`gpus --prometheus`, the TUI's GPU panel).

What answers on a port may be anything: an SSH daemon (a banner, not a status line), a proxy
that sends its headers and then one byte every half second, 150 headers, a body shorter than
its Content-Length, a chunk size that is not hex, 300 MB of JSON. So every request here has

- a total deadline: a watchdog thread shuts the connection's socket down when it passes, which
  ends any read in progress (a timeout per read would let a trickle run forever);
- a cap on the body it reads (`MAX_BYTES`);
- one exception, `HttpFailure`, with a one-line message and its kind (a bad URL, nothing
  answers, the deadline, not HTTP, an HTTP error status, too large), never http.client's own.

It is urllib underneath (proxies from the environment and redirects behave as before); the
watchdog reaches the sockets through urllib's connection classes.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eaglebug.checks import one_line

MAX_BYTES = (
    4 * 2**20
)  # a Prometheus answer for a thousand GPUs, or SGLang's /metrics, is under 1 MB
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


class HttpFailure(Exception):
    """A request that gave no usable answer; `message` is one line naming the URL.

    kind: `url` (not a URL a request can go to), `connect` (nothing answers: refused,
    unresolvable, closed without a word), `deadline`, `protocol` (what answered is not HTTP, or
    broke off), `status` (an HTTP error status: `status` holds it), `size` (over the cap)."""

    def __init__(self, message: str, kind: str, reason: str, status: int | None = None) -> None:
        super().__init__(one_line(message))
        self.message = one_line(message)
        self.kind = kind
        self.reason = one_line(reason)
        self.status = status


def checked_url(url: str) -> str:
    """`url` without a trailing `/`, if a request can go to it: http or https, a host, a port
    in range, no control character or space (urllib would drop a tab or newline unseen, and
    http.client refuses the rest with an exception of its own); else `HttpFailure` (`url`)."""

    def bad(why: str) -> HttpFailure:
        return HttpFailure(f"{url!r}: not an http(s) URL ({why})", "url", why)

    if any(not ch.isprintable() or ch.isspace() for ch in url):
        raise bad("it holds a control character or a space")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # a ValueError for `:abc` or `:99999`
    except ValueError as exc:
        raise bad(str(exc)) from None
    if parts.scheme not in {"http", "https"}:
        raise bad("it must start with http:// or https://")
    if not parts.hostname:
        raise bad("no host")
    if port == 0:
        raise bad("port 0")
    return url.rstrip("/")


class Deadline:
    """The time left of a budget that several requests share (`probe`'s `--timeout`)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds

    def left(self) -> float:
        return max(0.0, self._end - self._clock())


def fetch(
    url: str,
    *,
    deadline_s: float,
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    max_bytes: int = MAX_BYTES,
) -> Answer:
    """One request (POST when `data` is given), its whole answer within `deadline_s` seconds
    and `max_bytes` bytes, or `HttpFailure`."""
    checked_url(url)
    if deadline_s <= 0:
        raise HttpFailure(f"{url}: no time left for a request", "deadline", "no time left")
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}))
    watchdog = _Watchdog(deadline_s)
    opener = urllib.request.build_opener(_HTTPHandler(watchdog), _HTTPSHandler(watchdog))
    watchdog.start()
    try:
        with opener.open(request, timeout=deadline_s) as response:
            status = int(response.status)
            body = _read_capped(response, max_bytes)
    except urllib.error.HTTPError as exc:
        exc.close()
        watchdog.finish()
        code = exc.code
        raise HttpFailure(f"{url} answered HTTP {code}", "status", f"HTTP {code}", code) from None
    except (http.client.HTTPException, OSError, ValueError) as exc:
        if watchdog.finish() or _timed_out(exc):
            raise _late(url, deadline_s) from None
        raise _failure(url, exc) from None
    if watchdog.finish():  # a read cut short by the watchdog can end without an exception
        raise _late(url, deadline_s)
    if len(body) > max_bytes:
        raise HttpFailure(
            f"{url} answered more than {_size(max_bytes)}", "size", f"over {_size(max_bytes)}"
        )
    return Answer(status, body)


def _read_capped(response: Any, max_bytes: int) -> bytes:
    """At most `max_bytes + 1` bytes, in chunks (never one buffer of the cap's size); a body
    that ends before its Content-Length is `IncompleteRead` (http.client's `read(n)` does not
    say so itself)."""
    parts: list[bytes] = []
    total = 0
    while total <= max_bytes:
        chunk = response.read(min(_CHUNK, max_bytes + 1 - total))
        if not chunk:
            left = response.length  # what the Content-Length still promised
            if isinstance(left, int) and left > 0:
                raise http.client.IncompleteRead(b"".join(parts), left)
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def _size(n: int) -> str:
    return f"{n / 2**20:g} MB" if n >= 2**20 else f"{n} bytes"


def _late(url: str, deadline_s: float) -> HttpFailure:
    shown = f"{deadline_s:.3g}"  # what is left of a shared deadline: 2.99999 s is "3 s"
    return HttpFailure(f"{url} gave no whole answer within {shown} s", "deadline", f"{shown} s")


def _timed_out(exc: BaseException) -> bool:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return isinstance(reason, (TimeoutError, socket.timeout))


def _failure(url: str, exc: BaseException) -> HttpFailure:
    """What went wrong, in one line, by the exception's kind."""
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, BaseException):
            return _failure(url, reason)
        return HttpFailure(f"nothing answers at {url} ({reason})", "connect", str(reason))
    if isinstance(exc, http.client.RemoteDisconnected):
        why = "it closed the connection without an answer"
        return HttpFailure(f"nothing answers at {url} ({why})", "connect", why)
    if isinstance(exc, http.client.BadStatusLine):
        why = f"not an HTTP status line: {str(exc)[:60]}"
        return HttpFailure(f"{url} does not speak HTTP ({why})", "protocol", why)
    if isinstance(exc, http.client.IncompleteRead):
        why = f"the answer broke off after {len(exc.partial)} bytes"
        return HttpFailure(f"{url} sent an incomplete answer ({why})", "protocol", why)
    if isinstance(exc, http.client.InvalidURL | UnicodeError):
        return HttpFailure(f"{url!r}: not an http(s) URL ({exc})", "url", str(exc))
    if isinstance(exc, http.client.HTTPException):
        why = str(exc) or type(exc).__name__
        return HttpFailure(f"{url} sent an answer that is not HTTP ({why})", "protocol", why)
    if isinstance(exc, OSError):
        why = exc.strerror or str(exc) or type(exc).__name__
        return HttpFailure(f"nothing answers at {url} ({why})", "connect", why)
    return HttpFailure(f"{url!r}: not an http(s) URL ({exc})", "url", str(exc))


class _Watchdog:
    """Shuts down every socket of one request when its deadline passes (from its own timer
    thread: a read blocked in another thread then returns at once)."""

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._expired = False
        self._done = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def start(self) -> None:
        self._timer.start()

    def attach(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            expired = self._expired
        if expired:
            _shut(sock)

    def finish(self) -> bool:
        """Stop watching; whether the deadline had passed by then."""
        self._timer.cancel()
        with self._lock:
            self._done = True
            return self._expired

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self._expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    # The plain socket's shutdown, under TLS too: the read in progress sees the end. A socket
    # already closed has nothing to end.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watched(http.client.HTTPConnection):
    """A connection whose socket the watchdog can shut once it is open (plain or TLS: the
    TLS connection below is this one with `HTTPSConnection`'s handshake)."""

    def __init__(self, *args: Any, watchdog: _Watchdog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._watchdog = watchdog

    def connect(self) -> None:
        super().connect()
        assert self.sock is not None
        self._watchdog.attach(self.sock)


class _WatchedTls(_Watched, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_Watched, watchdog=self._watchdog), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(
            functools.partial(_WatchedTls, watchdog=self._watchdog),
            req,
            context=self._context,  # type: ignore[attr-defined]
        )
