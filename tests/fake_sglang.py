"""A real HTTP server on the loopback that answers as SGLang does, for the probe and the
acceptance watch: `/generate` with `meta_info.spec_accept_length`, `spec_verify_ct`,
`completion_tokens`; `/server_info` with the speculative settings and
`internal_states[0].avg_spec_accept_length` (cumulative since start) and `spec_verify_ct`;
`/metrics` (the `sglang:spec_accept_length` gauge) when asked for.
"""

from __future__ import annotations

import json
import threading
from dataclasses import KW_ONLY, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(eq=False)
class FakeSglang:
    """Answers `max_new_tokens` tokens per request in steps of `accept` tokens; after
    `stop_after` requests it drops the connection. Serves on a free port from construction."""

    accept: float
    stop_after: int | None = None
    _: KW_ONLY
    server_info: bool = True  # answers /server_info (and /get_server_info)
    metrics: bool = False  # answers /metrics
    requests: list[dict[str, Any]] = field(default_factory=list, init=False)
    verify_steps: int = field(default=0, init=False)
    tokens: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/metrics" and fake.metrics:
                    length = fake.tokens / fake.verify_steps if fake.verify_steps else 0.0
                    body = (
                        "# TYPE sglang:spec_accept_length gauge\n"
                        f'sglang:spec_accept_length{{model_name="m"}} {length}\n'
                    ).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if self.path not in {"/server_info", "/get_server_info"} or not fake.server_info:
                    self.send_error(404)
                    return
                average = fake.tokens / fake.verify_steps if fake.verify_steps else 0.0
                self._send(
                    {
                        "speculative_algorithm": "EAGLE3",
                        "speculative_num_steps": 3,
                        "speculative_eagle_topk": 1,
                        "speculative_num_draft_tokens": 4,
                        "tp_size": 8,
                        "internal_states": [
                            {"avg_spec_accept_length": average, "spec_verify_ct": fake.verify_steps}
                        ],
                    }
                )

            def do_POST(self) -> None:
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.generate(payload, self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def generate(self, payload: dict[str, Any], handler: Any) -> None:
        """One /generate: tokens in steps of `accept` (or a dropped connection)."""
        self.requests.append(payload)
        if self.stop_after is not None and len(self.requests) > self.stop_after:
            handler.connection.close()  # the server died mid-probe
            return
        tokens = int(payload["sampling_params"]["max_new_tokens"])
        steps = max(1, round(tokens / self.accept))
        self.tokens += tokens
        self.verify_steps += steps
        meta = {
            "completion_tokens": tokens,
            "spec_verify_ct": steps,
            "spec_accept_length": tokens / steps,
        }
        handler._send({"text": "x" * tokens, "meta_info": meta})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
