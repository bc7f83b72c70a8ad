"""Three-valued truth: True, False, or None where it is not known (a test on a value the
reading cannot know).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

Tri: TypeAlias = bool | None  # None: unknown


def tri_not(value: Tri) -> Tri:
    return None if value is None else not value


def tri_and(values: Iterable[Tri]) -> Tri:
    """False if any is False, else unknown if any is unknown, else True (Kleene)."""
    seen = list(values)
    return False if False in seen else (None if None in seen else True)


def tri_or(values: Iterable[Tri]) -> Tri:
    """True if any is True, else unknown if any is unknown, else False (Kleene)."""
    seen = list(values)
    return True if True in seen else (None if None in seen else False)
