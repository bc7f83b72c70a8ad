"""Numbers from outside eaglebug: a log line, config.json, the state file, a server's or
Prometheus's JSON. Every one is read here, once, and is either a finite number in its range or
None: never a `ValueError` from a 5,000-digit integer (Python's 4,300-digit limit), an
`OverflowError` from `1e400` turned into an int, a NaN that compares false with everything, or
a bool taken for an integer. Callers treat None as "not given" and say so where it matters.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeVar

# More digits than any count or size SGLang prints (a byte count of a 1 PB pool has 16).
MAX_DIGITS = 24
_INT_RE = re.compile(rf"[+-]?[0-9]{{1,{MAX_DIGITS}}}")  # ASCII digits only: not `１２`
_FLOAT_RE = re.compile(
    rf"[+-]?(?:[0-9]{{1,{MAX_DIGITS}}}(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{{1,3}})?"
)


def int_text(text: str, *, lo: int | None = None, hi: int | None = None) -> int | None:
    """A whole number written as text (`12`, `-3`), in [lo, hi]; None otherwise."""
    stripped = text.strip()
    if len(stripped) > MAX_DIGITS + 1 or not _INT_RE.fullmatch(stripped):
        return None
    return _bounded(int(stripped), lo, hi)


def float_text(text: str, *, lo: float | None = None, hi: float | None = None) -> float | None:
    """A finite number written as text (`0.85`, `1e3`, `7`), in [lo, hi]; None otherwise
    (`nan`, `inf`, `1e400`, a 5,000-digit mantissa)."""
    stripped = text.strip()
    if len(stripped) > MAX_DIGITS + 8 or not _FLOAT_RE.fullmatch(stripped):
        return None
    value = float(stripped)
    if not math.isfinite(value):
        return None
    return _bounded(value, lo, hi)


def int_value(value: object, *, lo: int | None = None, hi: int | None = None) -> int | None:
    """A whole number from parsed data (JSON, a state file): an int (not a bool), or a float
    with no fraction; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if abs(value) >= 10**MAX_DIGITS:
            return None
        return _bounded(value, lo, hi)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        if abs(value) >= 10**MAX_DIGITS:
            return None
        return _bounded(int(value), lo, hi)
    return None


def float_value(value: object, *, lo: float | None = None, hi: float | None = None) -> float | None:
    """A finite number from parsed data: an int or a float (not a bool, NaN or infinite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and abs(value) >= 10**MAX_DIGITS:
        return None
    number = float(value)
    if not math.isfinite(number):
        return None
    return _bounded(number, lo, hi)


class NotJson(ValueError):
    """JSON eaglebug refuses: not JSON, or a NaN / Infinity / over-long number in it."""


def _refuse_constant(name: str) -> Any:
    raise NotJson(f"{name} is not a JSON number")


def _capped_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise NotJson(f"a {len(text.lstrip('-'))}-digit number")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotJson(f"{text[:12]}{'...' if len(text) > 12 else ''} is out of a float's range")
    return value


def strict_json(text: str | bytes) -> Any:
    """`json.loads`, refusing what JSON does not allow but Python's reader takes (NaN,
    Infinity, `1e400` read as infinity) and integers too long to be a count; every failure is
    `NotJson`. For what eaglebug's own peers send: a server's answers, the state file."""
    try:
        return json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_int=_capped_int,
            parse_float=_finite_float,
        )
    except NotJson:
        raise
    except (ValueError, RecursionError) as exc:
        raise NotJson(_why(exc)) from None


def python_json(text: str | bytes) -> Any:
    """JSON as Python's own reader takes it, NaN, Infinity and `1e400` included: a model's
    `config.json`, which SGLang reads through transformers with that reader, so a NaN in a key
    nobody reads does not stop a launch and must not stop a preflight. Only what that reader
    refuses fails (a 5,000-digit integer: Python's 4,300-digit limit), as `NotJson`; every
    number read out of it still goes through `int_value` / `float_value`."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise NotJson(_why(exc)) from None


def _why(exc: ValueError | RecursionError) -> str:
    """What was wrong, in the words of the JSON, not of Python's reader."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if "digits" in str(exc):  # Python's limit on the digits of an integer it converts
        return "an integer of more than 4,300 digits"
    return str(exc)


_N = TypeVar("_N", int, float)


def _bounded(value: _N, lo: float | None, hi: float | None) -> _N | None:
    if lo is not None and value < lo:
        return None
    if hi is not None and value > hi:
        return None
    return value
