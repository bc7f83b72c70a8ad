"""A real TCP server on 127.0.0.1 that answers HTTP requests badly, on purpose.

Each shape is what a user can meet on a shared box: another daemon on the port (an SSH banner),
a proxy that trickles its answer one byte every half second, a server that never answers, 150
headers, a body shorter than its Content-Length, a chunk size that is not hex, an answer larger
than any JSON eaglebug reads; or plain HTTP with a body a test chooses (Prometheus answering
`"data": null`, SGLang's `meta_info` holding NaN). Threads and sockets only: the client under
test is eaglebug's own, unmocked.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

TRICKLE_EVERY_S = 0.5
# The trickle stops after this many bytes and closes, a complete answer: a client without a
# deadline then gets an answer (and the test that expects a deadline fails) instead of hanging.
TRICKLE_BYTES = 120


def _ok_head(length: int | None, extra: str = "") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{size}{extra}\r\n".encode()


@dataclass
class HostileServer:
    """Serves `shape` to every connection; `body(path)` gives the JSON of the `json` shape."""

    shape: str
    body: Callable[[str], bytes] = lambda path: b"{}"
    paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        hostile = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                hostile._serve(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_request(self, conn: socket.socket) -> str:
        """The request's path (its head and body are read, so the client is not blocked)."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return ""
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
        parts = lines[0].split(" ")
        path = parts[1] if len(parts) > 1 else ""
        self.paths.append(path)
        return path

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.shape == "ssh":  # sshd speaks first, before any request
                conn.sendall(b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n")
                self._stop.wait(5)
                return
            path = self._read_request(conn)
            if self.shape == "silent":
                self._stop.wait(600)
            elif self.shape == "trickle":
                conn.sendall(_ok_head(TRICKLE_BYTES))
                for _ in range(TRICKLE_BYTES):
                    if self._stop.wait(TRICKLE_EVERY_S):
                        return
                    conn.sendall(b" ")
            elif self.shape == "headers150":
                extra = "".join(f"X-Header-{i}: {i}\r\n" for i in range(150))
                conn.sendall(_ok_head(2, extra) + b"{}")
            elif self.shape == "short":
                conn.sendall(_ok_head(100) + b'{"data": ')
            elif self.shape == "badchunk":
                conn.sendall(_ok_head(None, "Transfer-Encoding: chunked\r\n") + b"zz\r\n{}\r\n")
            elif self.shape == "huge":
                size = 64 * 2**20
                conn.sendall(_ok_head(size))
                block = b" " * 2**20
                for _ in range(size // len(block)):
                    conn.sendall(block)
            elif self.shape == "json":
                data = self.body(path)
                conn.sendall(_ok_head(len(data)) + data)
            else:
                raise ValueError(f"unknown shape {self.shape!r}")
        except OSError:
            pass  # the client went away: what a deadline does
        finally:
            conn.close()
