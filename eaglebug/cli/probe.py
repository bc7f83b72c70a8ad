"""`eaglebug probe`: is speculative decoding working on a running server? A few fixed prompts.

It sends short, fixed prompts (deterministic: temperature 0) to the server's native `/generate`
(`srt/entrypoints/http_server.py:649` in 0.5.9), reads each answer's `meta_info`
(`spec_accept_length`, `spec_verify_ct`, `completion_tokens`: srt/managers/tokenizer_manager.py
`_calculate_spec_decoding_metrics`), and reports the acceptance length, tokens per second and the
speculative settings in force (`/server_info`, or `/get_server_info` on older releases). Bounded
in requests and in time; a server that is not up is one clear line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks import DEFAULT_RULES, InputError, Report, from_cumulative
from eaglebug.server.client import Client, cumulative_of

PROMPTS = (
    "Write a short poem about the sea.",
    "Explain in two sentences what a hash table is.",
    "List the first ten prime numbers, separated by commas.",
)
DEFAULT_PORT = 30000  # ServerArgs.port's default (srt/server_args.py) in 0.5.9 and 0.5.23
SETTINGS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
    "tp_size",
)


@dataclass(frozen=True)
class Sample:
    prompt: str
    tokens: int  # completion tokens
    verify_steps: int | None  # verify passes the target ran (spec_verify_ct)
    accept_length: float | None
    seconds: float


@dataclass(frozen=True)
class ProbeResult:
    url: str
    samples: tuple[Sample, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    server_info: Report | None = None  # acceptance from /server_info, across the probe

    @property
    def accept_length(self) -> float | None:
        """Tokens per verify step over every sample (the server's own `accept len`)."""
        steps = sum(s.verify_steps or 0 for s in self.samples)
        if steps > 0:
            return sum(s.tokens for s in self.samples if s.verify_steps) / steps
        return self.server_info.length if self.server_info else None

    @property
    def tokens_per_s(self) -> float:
        seconds = sum(s.seconds for s in self.samples)
        return sum(s.tokens for s in self.samples) / seconds if seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "accept_length": self.accept_length,
            "tokens_per_s": round(self.tokens_per_s, 1),
            "settings": self.settings,
            "requests": [
                {
                    "prompt": s.prompt,
                    "completion_tokens": s.tokens,
                    "spec_verify_ct": s.verify_steps,
                    "spec_accept_length": s.accept_length,
                    "seconds": round(s.seconds, 3),
                }
                for s in self.samples
            ],
        }


def url_of_launch(argv: Sequence[str]) -> str:
    """The loopback URL of a launch's own port (`--port`), whatever host it listens on."""
    port = DEFAULT_PORT
    words = list(argv)
    for i, word in enumerate(words):
        value = None
        if word == "--port" and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--port="):
            value = word.split("=", 1)[1]
        if value is not None:
            try:
                port = int(value)
            except ValueError:
                raise InputError(f"--port {value}: not a port in the launch command") from None
    return f"http://127.0.0.1:{port}"


def _server_info(client: Client) -> dict[str, Any] | None:
    for path in DEFAULT_RULES.server_info_paths:
        try:
            info = client.call(path)
        except InputError:
            continue
        if isinstance(info, dict):
            return info
    return None


def probe(
    url: str,
    prompts: Sequence[str] = PROMPTS,
    max_new_tokens: int = 64,
    timeout_s: float = 30.0,
    budget_s: float = 120.0,
) -> ProbeResult:
    """Send `prompts` one by one (stopping once `budget_s` is spent) and read what came back."""
    client = Client(url, timeout_s)
    before = _server_info(client)
    settings = {k: before[k] for k in SETTINGS if before and k in before}
    samples: list[Sample] = []
    started = time.monotonic()
    for prompt in prompts:
        if samples and time.monotonic() - started > budget_s:
            break
        t0 = time.monotonic()
        answer = client.call(
            "/generate",
            {
                "text": prompt,
                "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens},
            },
        )
        seconds = time.monotonic() - t0
        meta = answer.get("meta_info", {}) if isinstance(answer, dict) else {}
        if not isinstance(meta, dict):
            meta = {}
        samples.append(
            Sample(
                prompt,
                int(meta.get("completion_tokens", 0) or 0),
                int(meta["spec_verify_ct"]) if "spec_verify_ct" in meta else None,
                float(meta["spec_accept_length"]) if "spec_accept_length" in meta else None,
                seconds,
            )
        )
    after = _server_info(client)
    first, last = cumulative_of(before), cumulative_of(after)
    info = from_cumulative(first, last) if last is not None else None
    return ProbeResult(client.url, tuple(samples), settings, info)


def probe_command(args: Any) -> int:
    """`eaglebug probe`: the JSON or a few lines; exit 1 when the acceptance is low."""
    import sys
    from pathlib import Path

    from eaglebug.checks import THRESHOLD
    from eaglebug.server.state import load_state

    url = args.url
    if url is None:
        record = load_state(Path.cwd()).latest
        if record is None:
            raise InputError(
                "no launch recorded in this folder to probe", "pass --url http://127.0.0.1:PORT"
            )
        url = url_of_launch(record.argv)
    result = probe(
        url, PROMPTS[: args.requests], max_new_tokens=args.max_new_tokens, timeout_s=args.timeout
    )
    length = result.accept_length
    low = length is not None and length < (args.min_accept or THRESHOLD)
    if args.json:
        sys.stdout.write(json.dumps({**result.to_json(), "low": low}, indent=2) + "\n")
        return 1 if low else 0
    shown = f"{length:.2f}" if length is not None else "not reported (no speculative decoding?)"
    sys.stdout.write(f"{result.url}: accept length {shown}, {result.tokens_per_s:.1f} tokens/s\n")
    if result.settings:
        sys.stdout.write(
            "settings: " + ", ".join(f"{k}={v}" for k, v in result.settings.items()) + "\n"
        )
    if low:
        sys.stdout.write(
            "low: the draft's tokens are mostly rejected; `eaglebug preflight` checks the causes\n"
        )
    return 1 if low else 0
