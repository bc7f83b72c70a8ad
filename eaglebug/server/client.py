"""The launched server over HTTP: JSON calls through the one HTTP client (`eaglebug/net`: a
total deadline, a size cap), every failure a `ServerError` naming the server, and the
acceptance counters its `/server_info` holds, read with the one number reader.
"""

from __future__ import annotations

import json
from typing import Any

from eaglebug.checks import (
    DEFAULT_RULES,
    AcceptanceRules,
    InputError,
    NotJson,
    accept_length,
    int_value,
    strict_json,
)
from eaglebug.net.fetch import HttpFailure, checked_url, fetch

_NOT_SGLANG = "is this an SGLang server? (the port of --url, or of the launch recorded here)"
_START = "start it (eaglebug launch / the TUI), or pass --url of the running server"


class ServerError(InputError):
    """A call that got no usable answer; `kind` is `HttpFailure`'s (or `json`), `status` the
    HTTP error status when there was one (404: a route this server does not have)."""

    def __init__(self, message: str, hint: str | None, kind: str, status: int | None) -> None:
        super().__init__(message, hint)
        self.kind = kind
        self.status = status


class Client:
    """JSON over HTTP to one server, each call within its deadline."""

    def __init__(self, url: str, timeout_s: float) -> None:
        try:
            self.url = checked_url(url)
        except HttpFailure as exc:
            raise InputError(exc.message, "pass --url http://127.0.0.1:30000") from None
        self.timeout_s = timeout_s

    def call(
        self, path: str, payload: dict[str, Any] | None = None, timeout_s: float | None = None
    ) -> Any:
        """The JSON `path` answers (POSTed `payload`, if any), within `timeout_s` (default:
        the client's), or `ServerError`."""
        data = json.dumps(payload).encode() if payload is not None else None
        where = f"{self.url}{path}"
        try:
            answer = fetch(
                where,
                deadline_s=self.timeout_s if timeout_s is None else timeout_s,
                data=data,
                headers={"Content-Type": "application/json"} if data else None,
            )
        except HttpFailure as exc:
            raise self._error(where, exc) from None
        try:
            return strict_json(answer.body)
        except NotJson as exc:
            why = f"{where} did not answer JSON ({exc})"
            raise ServerError(why, _NOT_SGLANG, "json", None) from None

    def _error(self, where: str, exc: HttpFailure) -> ServerError:
        if exc.kind == "connect":
            return ServerError(
                f"no server answers at {self.url} ({exc.reason})", _START, exc.kind, None
            )
        if exc.kind == "deadline":
            return ServerError(
                exc.message,
                "is the server stuck or overloaded? its log says (eaglebug diagnose), or "
                "give it longer (--timeout)",
                exc.kind,
                None,
            )
        return ServerError(exc.message, _NOT_SGLANG, exc.kind, exc.status)


def cumulative_of(
    info: dict[str, Any] | None, rules: AcceptanceRules = DEFAULT_RULES
) -> tuple[float, int] | None:
    """(average accept length since start, verify steps since start) of DP rank 0; None when
    the server reports no reading (a string, a list, null, NaN or -3 is none)."""
    states = info.get("internal_states") if info else None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    average = accept_length(states[0].get(rules.server_info_key))
    steps = states[0].get("spec_total_num_forward_ct", states[0].get("spec_verify_ct"))
    if average is None:
        return None
    counted = int_value(steps, lo=0)
    return average, counted if counted is not None else 1
