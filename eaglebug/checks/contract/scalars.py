"""The JSON coders of plain values (None, bool, int, float, str, bytes, paths) and the error
every coder raises (`codec` builds the coders of containers, unions and dataclasses on these).

Why a module of their own: they need nothing of the coder registry, and each one is the whole
rule for its type, strict on the way in (a bool is not an int, an int is a float only where a
float is asked for), so that a file planted in a cache cannot pass for another shape.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

Json = Any  # a tree of dict, list, str, int, float, bool and None, as `json` reads it
Dec = Callable[[Json], Any]


class Invalid(ValueError):
    """The data is not a value of the kind asked for (a cache treats it as a miss)."""


def same(value: Any) -> Json:
    return value


def none(value: Any) -> Json:
    if value is not None:
        raise Invalid(f"expected None, got {type(value).__name__}")
    return None


def none_dec(data: Json) -> None:
    if data is not None:
        raise Invalid(f"expected null, got {type(data).__name__}")


def checked(kind: type) -> Dec:
    def dec(data: Json) -> Any:
        if type(data) is not kind:
            raise Invalid(f"expected {kind.__name__}, got {type(data).__name__}")
        return data

    return dec


def int_dec(data: Json) -> int:
    if type(data) is not int:
        raise Invalid(f"expected int, got {type(data).__name__}")
    return data


def float_enc(value: Any) -> Json:
    return float(typing.cast(float, value))


def float_dec(data: Json) -> float:
    if type(data) is float or type(data) is int:
        return float(data)
    raise Invalid(f"expected float, got {type(data).__name__}")


def bytes_enc(value: Any) -> Json:
    return bytes(value).hex()


def bytes_dec(data: Json) -> bytes:
    if type(data) is not str:
        raise Invalid(f"expected hex text, got {type(data).__name__}")
    try:
        value = bytes.fromhex(data)
    except ValueError as exc:
        raise Invalid(f"bad hex: {exc}") from None
    if 2 * len(value) != len(data):  # fromhex skips spaces: the written form has none
        raise Invalid("bad hex: spaces")
    return value


def path_dec(kind: type[PurePath]) -> Dec:
    def dec(data: Json) -> Any:
        if type(data) is not str:
            raise Invalid(f"expected a path, got {type(data).__name__}")
        return kind(data)

    return dec
