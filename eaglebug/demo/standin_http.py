"""The stand-in server's HTTP side: SGLang's routes on the loopback, answering as 0.5.9 does.

`/health`, `/generate` (each answer's `meta_info` has `completion_tokens`, `spec_verify_ct` and
`spec_accept_length`, as `tokenizer_manager._calculate_spec_decoding_metrics` fills them),
`/server_info` and `/get_server_info` (every server argument, as SGLang sends them, and
`internal_states[0].avg_spec_accept_length`, cumulative since start), and `/metrics` when the
launch has `--enable-metrics` (`sglang:spec_accept_length`, `sglang:spec_accept_rate`). Each
generation also logs the decode line SGLang prints (`Decode batch, ... accept len: X.XX, accept
rate: Y.YY, ...`), so the log and the routes agree.

How many draft tokens are accepted is not typed in per scenario: it follows from what the tree
and the configs set up (`expected_accept_length`): an EAGLE-3 draft fed the target's aux hidden
states accepts about three tokens per step; one run as plain EAGLE (no aux states captured),
or whose aux layer ids miss the target's layers, accepts none beyond the verified one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCHEDULER_LOGGER = "sglang.srt.managers.scheduler"
ACCESS_LOGGER = "uvicorn.access"
WORKING_ACCEPT = 3.2  # an EAGLE-3 draft trained for its target: ~3 tokens per verify step
SILENT_ACCEPT = 1.0  # only the target's own token: no speed-up


def expected_accept_length(
    algorithm: str | None, draft_config: Mapping[str, Any], target_layers: int | None
) -> float:
    """What the draft accepts given how it is run: the cause of a silent draft, not a knob."""
    if not algorithm:
        return SILENT_ACCEPT
    architectures = draft_config.get("architectures") or [""]
    eagle3_draft = "eagle3" in str(architectures[0]).lower()
    if algorithm.upper() == "EAGLE" and eagle3_draft:
        return SILENT_ACCEPT  # plain EAGLE captures no aux hidden states for an EAGLE-3 head
    eagle_config = draft_config.get("eagle_config") or {}
    ids = eagle_config.get("eagle_aux_hidden_state_layer_ids") if eagle_config else None
    if isinstance(ids, list) and target_layers and any(int(i) >= target_layers for i in ids):
        return SILENT_ACCEPT  # the draft reads hidden states the target never captures
    return WORKING_ACCEPT


@dataclass
class Serving:
    """The counters behind the routes: every request adds its tokens and verify steps."""

    server_args: Any
    accept_length: float
    tokens: int = 0
    verify_steps: int = 0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def generate(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        params = payload.get("sampling_params") or {}
        wanted = params.get("max_new_tokens", 16) if isinstance(params, Mapping) else 16
        tokens = max(1, int(wanted) if isinstance(wanted, (int, float)) else 16)
        steps = max(1, round(tokens / self.accept_length))
        with self.lock:
            self.tokens += tokens
            self.verify_steps += steps
            self.requests += 1
        length = tokens / steps
        rate = (length - 1) / max(int(getattr(self.server_args, "speculative_num_steps", 3)), 1)
        logging.getLogger(SCHEDULER_LOGGER).info(
            f"Decode batch, #running-req: 1, #token: {tokens}, token usage: 0.00, "
            f"accept len: {length:.2f}, accept rate: {rate:.2f}, cuda graph: True, "
            f"gen throughput (token/s): {40 * length:.2f}, #queue-req: 0, "
        )
        meta = {"completion_tokens": tokens, "spec_verify_ct": steps, "spec_accept_length": length}
        return {"text": "x" * tokens, "meta_info": meta}

    def server_info(self) -> dict[str, Any]:
        with self.lock:
            average = self.tokens / self.verify_steps if self.verify_steps else 0.0
            steps = self.verify_steps
        # SGLang's /server_info: every server argument, as `dataclasses.asdict` gives them
        # (srt/entrypoints/http_server.py:593-606, 0.5.9), and the internal states.
        info = dataclasses.asdict(self.server_args)
        info["internal_states"] = [{"avg_spec_accept_length": average, "spec_verify_ct": steps}]
        return info

    def metrics(self) -> str:
        with self.lock:
            length = self.tokens / self.verify_steps if self.verify_steps else 0.0
        steps = max(int(getattr(self.server_args, "speculative_num_steps", 3)), 1)
        rate = (length - 1) / steps if length else 0.0
        labels = '{model_name="demo"}'
        return (
            "# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.\n"
            "# TYPE sglang:spec_accept_length gauge\n"
            f"sglang:spec_accept_length{labels} {length:.4f}\n"
            "# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding.\n"
            "# TYPE sglang:spec_accept_rate gauge\n"
            f"sglang:spec_accept_rate{labels} {rate:.4f}\n"
        )


def start_http(serving: Serving, host: str, port: int) -> ThreadingHTTPServer:
    """Serve the routes on (host, port) from a daemon thread; OSError when the port is taken."""
    metrics_on = bool(getattr(serving.server_args, "enable_metrics", False))

    class Handler(BaseHTTPRequestHandler):
        def _send(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, value: object) -> None:
            self._send(json.dumps(value).encode(), "application/json")

        def do_GET(self) -> None:
            if self.path in {"/health", "/health_generate"}:
                self._send(b"", "text/plain")
            elif self.path in {"/server_info", "/get_server_info"}:
                self._json(serving.server_info())
            elif self.path == "/metrics" and metrics_on:
                self._send(serving.metrics().encode(), "text/plain; version=0.0.4")
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            if self.path != "/generate":
                self.send_error(404)
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                payload = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self.send_error(400)
                return
            self._json(serving.generate(payload if isinstance(payload, dict) else {}))

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            host, port = self.client_address[:2]
            status = f"{code} OK" if str(code) == "200" else str(code)
            logging.getLogger(ACCESS_LOGGER).info(
                f'INFO:     {host}:{port} - "{self.requestline}" {status}'
            )

        def log_message(self, format: str, *args: object) -> None:
            pass  # errors are answered with their status; the access line says the rest

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
