"""Rendering helpers shared by the screens."""

from __future__ import annotations

from rich.console import RenderableType


def syntax(code: str, lexer: str, **options: object) -> RenderableType:
    """Highlighted code; Pygments loads on first use, not with the app (first paint)."""
    from rich.syntax import Syntax

    return Syntax(code, lexer, **options)  # type: ignore[arg-type]
