"""The launched server over HTTP: JSON calls with a timeout, every failure an `InputError`
naming the server, and the acceptance counters its `/server_info` holds.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from eaglebug.checks import DEFAULT_RULES, AcceptanceRules, InputError


class Client:
    """JSON over HTTP with a timeout; every failure is an `InputError` naming the server."""

    def __init__(self, url: str, timeout_s: float) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in {"http", "https"} or not parsed.netloc:
            raise InputError(f"{url!r}: not an http(s) URL", "pass --url http://127.0.0.1:30000")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def call(self, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            headers={"Content-Type": "application/json"} if data else {},
            method="POST" if data else "GET",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise InputError(
                f"{self.url}{path} answered HTTP {exc.code}", "is this an SGLang server?"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InputError(
                f"no server answers at {self.url} ({reason})",
                "start it (eaglebug launch / the TUI), or pass --url of the running server",
            ) from None
        except (ValueError, UnicodeDecodeError):
            raise InputError(f"{self.url}{path} did not answer JSON") from None


def cumulative_of(
    info: dict[str, Any] | None, rules: AcceptanceRules = DEFAULT_RULES
) -> tuple[float, int] | None:
    """(average accept length since start, verify steps since start) of DP rank 0."""
    states = info.get("internal_states") if info else None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    average = states[0].get(rules.server_info_key)
    steps = states[0].get("spec_total_num_forward_ct", states[0].get("spec_verify_ct"))
    if not isinstance(average, (int, float)):
        return None
    return float(average), int(steps) if isinstance(steps, (int, float)) else 1
