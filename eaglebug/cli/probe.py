"""`eaglebug probe`: is speculative decoding working on a running server? A few fixed prompts.

It sends short, fixed prompts (deterministic: temperature 0) to the server's native `/generate`
(`srt/entrypoints/http_server.py:649` in 0.5.9), reads each answer's `meta_info`
(`spec_accept_length`, `spec_verify_ct`, `completion_tokens`: srt/managers/tokenizer_manager.py
`_calculate_spec_decoding_metrics`), and reports the acceptance length, tokens per second and the
speculative settings in force (`/server_info`, or `/get_server_info` on older releases). Bounded
in requests and in time; a server that is not up is one clear line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks import (
    DEFAULT_RULES,
    InputError,
    Report,
    accept_length,
    from_cumulative,
    int_text,
    int_value,
)
from eaglebug.net.fetch import Deadline
from eaglebug.server.client import Client, ServerError, cumulative_of

PROMPTS = (
    "Write a short poem about the sea.",
    "Explain in two sentences what a hash table is.",
    "List the first ten prime numbers, separated by commas.",
)
DEFAULT_PORT = 30000  # ServerArgs.port's default (srt/server_args.py) in 0.5.9 and 0.5.23
DEFAULT_TIMEOUT_S = 30.0  # the whole probe: every request, answers included
# A live server answers /server_info at once; one that does not within this is not answering,
# and the probe says so without spending the rest of its time on /generate.
INFO_TIMEOUT_S = 10.0
# The settings the probe reports, read from the server's own /server_info at run time (a table
# of what to show, not of SGLang's behaviour; the server may run a tree eaglebug cannot see).
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
            found = int_text(value, lo=1, hi=65535)
            if found is None:
                shown = value if len(value) <= 24 else f"{value[:20]}..."
                raise InputError(f"--port {shown}: not a port in the launch command")
            port = found
    return f"http://127.0.0.1:{port}"


def _server_info(client: Client, deadline: Deadline) -> dict[str, Any] | None:
    """The server's `/server_info` (or its older name), None when it has neither; a server
    that does not answer at all ends the probe here (its other routes would not answer)."""
    for path in DEFAULT_RULES.server_info_paths:
        try:
            info = client.call(path, timeout_s=min(INFO_TIMEOUT_S, deadline.left()))
        except ServerError as exc:
            if exc.kind in {"connect", "deadline"}:
                raise
            continue  # a route this server lacks (404), or one that answers something else
        if isinstance(info, dict):
            return info
    return None


def _sample(prompt: str, answer: Any, seconds: float) -> Sample:
    """One answer's figures, read with the one number reader: a string, a list, null or -3
    where a count belongs is not reported (None), never a crash."""
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    if not isinstance(meta, dict):
        meta = {}
    return Sample(
        prompt,
        int_value(meta.get("completion_tokens"), lo=0) or 0,
        int_value(meta.get("spec_verify_ct"), lo=0),
        accept_length(meta.get("spec_accept_length")),
        seconds,
    )


def probe(
    url: str,
    prompts: Sequence[str] = PROMPTS,
    max_new_tokens: int = 64,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    clock: Callable[[], float] = time.monotonic,
) -> ProbeResult:
    """Send `prompts` one by one and read what came back, all within `timeout_s` seconds (one
    deadline for every request: a server that trickles its answers, or never answers, cannot
    hold the probe longer). Prompts that did not get their answer in time after the first are
    left out; what did is the result."""
    client = Client(url, timeout_s)
    deadline = Deadline(timeout_s, clock)
    before = _server_info(client, deadline)
    settings = {k: before[k] for k in SETTINGS if before and k in before}
    samples: list[Sample] = []
    for prompt in prompts:
        if samples and deadline.left() <= 0:
            break
        started = clock()
        payload = {
            "text": prompt,
            "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens},
        }
        try:
            answer = client.call("/generate", payload, timeout_s=deadline.left())
        except ServerError as exc:
            if samples and exc.kind == "deadline":
                break
            raise
        samples.append(_sample(prompt, answer, clock() - started))
    after = _server_info(client, deadline) if deadline.left() > 0 else None
    first, last = cumulative_of(before), cumulative_of(after)
    info = from_cumulative(first, last) if last is not None else None
    return ProbeResult(client.url, tuple(samples), settings, info)


def probe_command(args: Any) -> int:
    """`eaglebug probe`: the JSON or a few lines; exit 1 when the acceptance is low."""
    import sys
    from pathlib import Path

    from eaglebug.checks import THRESHOLD
    from eaglebug.cli.output import safe, write_json
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
        write_json({**result.to_json(), "low": low})
        return 1 if low else 0
    shown = f"{length:.2f}" if length is not None else "not reported (no speculative decoding?)"
    sys.stdout.write(f"{result.url}: accept length {shown}, {result.tokens_per_s:.1f} tokens/s\n")
    if result.settings:  # the server's own words: shown, never obeyed by the terminal
        settings = ", ".join(f"{k}={v}" for k, v in result.settings.items())
        sys.stdout.write(f"settings: {safe(settings)}\n")
    if low:
        sys.stdout.write(
            "low: the draft's tokens are mostly rejected; `eaglebug preflight` checks the causes\n"
        )
    return 1 if low else 0
