"""Numbers from the command line, validated where they are parsed.

argparse's `type=float` takes `nan`, `inf` and `-1` and `type=int` any size; what eaglebug
computes with them then fails far from the flag (`ValueError: cannot convert float NaN to
integer`). These converters read the flag with the one reader of numbers from outside
(`eaglebug/checks/contract/numbers.py`) and refuse such values at the flag, as argparse usage errors.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from eaglebug.checks import float_text, int_text

_INT_LIMIT = 2**31  # counts (GPUs, ranks) beyond this are typos, and C code would overflow


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 24 else f"{text[:12]!r}..."


def number(
    minimum: float | None = None, *, above: float | None = None, maximum: float | None = None
) -> Callable[[str], float]:
    """A finite float, `>= minimum` or `> above`, `<= maximum` when given."""

    def convert(text: str) -> float:
        value = float_text(text)
        if value is None:  # `lots`, `nan`, `inf`, `1e400`
            raise argparse.ArgumentTypeError(f"{_shown(text)}: expected a finite number")
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
        value = int_text(text)
        if value is None:
            if text.strip().lstrip("+-").isdigit():
                raise argparse.ArgumentTypeError(f"{text.strip()[:12]}...: too large")
            raise argparse.ArgumentTypeError(f"{_shown(text)}: expected a whole number")
        if not minimum <= value <= maximum:
            shown = text if len(text) <= 24 else f"{text[:12]}..."
            raise argparse.ArgumentTypeError(f"{shown}: must be from {minimum} to {maximum}")
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
