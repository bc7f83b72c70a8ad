"""The one reader of numbers from outside: what each hostile form gives (None, never a raise)."""

from __future__ import annotations

import pytest

from eaglebug.checks.contract.numbers import (
    NotJson,
    float_text,
    float_value,
    int_text,
    int_value,
    strict_json,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("12", 12), (" -3 ", -3), ("+7", 7), ("9" * 5000, None), ("1e3", None), ("", None),
     ("0x10", None), ("１２", None), ("12abc", None)],
)  # fmt: skip
def test_int_text(text: str, expected: int | None) -> None:
    assert int_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.85", 0.85), ("1e3", 1000.0), ("7", 7.0), (".5", 0.5), ("nan", None), ("inf", None),
     ("1e400", None), ("-1e400", None), ("9" * 5000, None), ("1.2.3", None)],
)  # fmt: skip
def test_float_text(text: str, expected: float | None) -> None:
    assert float_text(text) == expected


def test_ranges() -> None:
    assert int_text("0", lo=1) is None
    assert int_text("65536", hi=65535) is None
    assert float_text("-80", lo=0) is None
    assert float_value(0.5, lo=0, hi=1) == 0.5


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (True, None), (3.0, 3), (3.5, None), (float("nan"), None), (float("inf"), None),
     (10**30, None), ("3", None), (None, None), ([3], None)],
)  # fmt: skip
def test_int_value(value: object, expected: int | None) -> None:
    assert int_value(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3.0), (0.25, 0.25), (False, None), (float("nan"), None), (float("-inf"), None),
     (10**30, None), ("1.0", None)],
)  # fmt: skip
def test_float_value(value: object, expected: float | None) -> None:
    assert float_value(value) == expected


@pytest.mark.parametrize(
    "text", ["NaN", '{"a": Infinity}', '{"a": -Infinity}', "1" * 5000, "[" * 100000, "{", ""]
)
def test_strict_json_refuses(text: str) -> None:
    with pytest.raises(NotJson):
        strict_json(text)


def test_strict_json_reads_json() -> None:
    assert strict_json(b'{"a": [1, 2.5, null, "x"]}') == {"a": [1, 2.5, None, "x"]}
