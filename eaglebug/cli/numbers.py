"""Numbers from the command line, validated where they are parsed.

argparse's `type=float` takes `nan`, `inf` and `-1` and `type=int` any size; what eaglebug
computes with them then fails far from the flag (`ValueError: cannot convert float NaN to
integer`). These converters refuse such values at the flag, as argparse usage errors.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

_INT_LIMIT = 2**31  # counts (GPUs, ranks) beyond this are typos, and C code would overflow


def number(
    minimum: float | None = None, *, above: float | None = None, maximum: float | None = None
) -> Callable[[str], float]:
    """A finite float, `>= minimum` or `> above`, `<= maximum` when given."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{text}: must be at least {minimum:g}")
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"{text}: must be more than {above:g}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{text}: must be at most {maximum:g}")
        return value

    return convert


def count(minimum: int = 1, maximum: int = _INT_LIMIT) -> Callable[[str], int]:
    """A whole number in [minimum, maximum]."""

    def convert(text: str) -> int:
        stripped = text.strip()
        if len(stripped) > 12 or not stripped.lstrip("+-").isdigit():
            if stripped.lstrip("+-").isdigit():
                raise argparse.ArgumentTypeError(f"{text[:12]}...: too large")
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number")
        value = int(stripped)
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{text}: must be from {minimum} to {maximum}")
        return value

    return convert


def stall_limits(args: argparse.Namespace) -> dict[str, float]:
    """The stall limits the flags set, in seconds by phase."""
    limits: dict[str, float] = {}
    if getattr(args, "stall_loading_min", None):
        limits["loading"] = args.stall_loading_min * 60
    if getattr(args, "stall_graph_min", None):
        limits["cuda_graph"] = args.stall_graph_min * 60
    return limits
