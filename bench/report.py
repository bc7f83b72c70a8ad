"""The benchmarks' report: rows of what was measured, its figure, the goal and a verdict,
printed as aligned columns. Times are ratios to a baseline measured in the same run, so the
verdicts travel between machines."""

from __future__ import annotations

RSS_GOAL_MB = 200.0  # peak RSS of one audit or preflight process

Row = tuple[str, str, str, str]  # what, figure, goal, verdict


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def timed_row(
    what: str, seconds: float, base_s: float, goal: float | None, against: str = " grep"
) -> Row:
    """A time as a ratio to the baseline's from the same run: against `goal` (the most that
    ratio may be) with a verdict, or, with no goal, for information."""
    ratio = seconds / base_s
    if goal is None:
        return (what, f"{seconds:.3f} s", f"info: {ratio:.2f}x", "")
    return (
        what,
        f"{seconds:.3f} s",
        f"<= {goal:g}x{against}: {ratio:.2f}x",
        verdict(ratio <= goal),
    )


def rss_row(what: str, rss_mb: float) -> Row:
    """A peak RSS against the benchmarks' one memory goal."""
    return (what, f"{rss_mb:.0f} MB", f"<= {RSS_GOAL_MB:g} MB", verdict(rss_mb <= RSS_GOAL_MB))


def table(rows: list[Row]) -> list[str]:
    """The benchmarks' report rows (what, figure, goal, verdict) as aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
