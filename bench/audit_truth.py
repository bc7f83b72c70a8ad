"""The interface audit against a table built by reading SGLang's source by hand.

Why: the audit's tests assert mechanisms on a few classes; this measures it on every case of
a ground-truth table (`tests/fixtures/audit_truth/truth.json`, how it was built in `NOTES.md`
beside it): for six releases from 0.4.10.post2 to 0.5.23, each (model class, algorithm, role)
with the attributes the class lacks and the attribute path a delegation should forward to.

For each case the script runs `audit` (in this process, on the release downloaded by
`tests/sglang_releases.py`) and compares the error findings with the table:

    recall     found / what the table says is missing (an error on that attribute)
    precision  found / every error the audit reports (interface.missing, .stub, .signature)
    delegate   of the found ones, how many propose exactly the table's delegate (null included)

A finding naming alternatives (`set_embed_and_head or set_embed`) counts as the table's
attribute when it names it. Warnings are counted apart (a warning is not a verdict).

This is a measurement, not a test: it exits 0 whatever the figures, 2 when the table or a
release cannot be read.

    python bench/audit_truth.py [--truth PATH] [--release 0.5.3 ...] [--misses]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRUTH = REPO / "tests" / "fixtures" / "audit_truth" / "truth.json"
ERROR_IDS = ("interface.missing", "interface.stub", "interface.signature")

Key = tuple[str, str, str, str]  # class, algorithm, role, attribute


@dataclass
class Tally:
    truth: int = 0
    reported: int = 0
    found: int = 0
    delegates_right: int = 0
    warned: int = 0  # truly missing, reported as a warning only
    misses: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)
    wrong_delegates: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.truth += other.truth
        self.reported += other.reported
        self.found += other.found
        self.delegates_right += other.delegates_right
        self.warned += other.warned


def _ratio(a: int, b: int) -> str:
    return f"{a / b:7.1%}" if b else "    n/a"


def _alternatives(attribute: str) -> list[str]:
    return [a.strip() for a in attribute.split(" or ")]


def _matched(attribute: str, truth: dict[Key, str | None], base: tuple[str, str, str]) -> str:
    """The table's attribute a finding stands for: one of its alternatives the table lists as
    missing, else its first name (then a false error)."""
    names = _alternatives(attribute)
    return next((n for n in names if (*base, n) in truth), names[0])


def audit_release(version: str, cases: list[dict[str, object]], tally: Tally) -> None:
    from eaglebug.checks import InputError, TreeIndex, audit, locate
    from tests.sglang_releases import release

    index = TreeIndex(locate(str(release(version))), use_cache=False)
    truth: dict[Key, str | None] = {}
    for case in cases:
        for miss in case["missing"]:  # type: ignore[attr-defined]
            cls, algorithm, role = str(case["class"]), str(case["algorithm"]), str(case["role"])
            truth[(cls, algorithm, role, miss["attribute"])] = miss["delegate"]
    tally.truth += len(truth)
    reported: dict[Key, str | None] = {}
    warned: set[Key] = set()
    for case in cases:
        cls, algorithm, role = str(case["class"]), str(case["algorithm"]), str(case["role"])
        base = (cls, algorithm, role)
        target, draft = (cls, None) if role == "target" else (None, cls)
        try:
            result = audit(index, target, algorithm, draft)
        except InputError as exc:
            tally.false.append(f"{version} {cls} {algorithm} {role}: {exc}")
            continue
        for finding in result.findings:
            if finding.id not in ERROR_IDS or finding.role != role:
                continue
            name = _matched(finding.attribute or "", truth, base)
            if finding.severity == "error":
                reported.setdefault((*base, name), finding.delegate)
            elif finding.severity == "warning":
                warned.add((*base, name))
    tally.reported += len(reported)
    for said, delegate in sorted(reported.items()):
        where = f"{version} {_short(said)}"
        if said not in truth:
            tally.false.append(where)
            continue
        tally.found += 1
        if delegate == truth[said]:
            tally.delegates_right += 1
        else:
            tally.wrong_delegates.append(f"{where}: {delegate} (table: {truth[said]})")
    for lacking in sorted(truth):
        if lacking not in reported:
            tally.misses.append(f"{version} {_short(lacking)}")
            tally.warned += lacking in warned


def _short(key: Key) -> str:
    cls, algorithm, role, attribute = key
    return f"{cls.rsplit('.', 1)[-1]} {algorithm} {role}: {attribute}"


def _row(name: str, t: Tally, seconds: float | None) -> str:
    took = f"{seconds:7.1f}" if seconds is not None else ""
    return (
        f"{name:<14}{t.truth:>6}{t.reported:>9}{t.found:>7}"
        f"{_ratio(t.found, t.truth):>9}{_ratio(t.found, t.reported):>10}"
        f"{_ratio(t.delegates_right, t.found):>10}{t.warned:>8}{took:>8}"
    )


def _listing(title: str, lines: Iterable[str]) -> None:
    lines = list(lines)
    if lines:
        print(f"\n{title} ({len(lines)}):")
        for line in lines:
            print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--truth", type=Path, default=TRUTH, help="the ground-truth table")
    parser.add_argument("--release", action="append", help="only this release (repeatable)")
    parser.add_argument(
        "--misses", action="store_true", help="list misses, false errors and wrong delegates"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    try:
        table = json.loads(args.truth.read_text())
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the table {args.truth}: {exc}", file=sys.stderr)
        return 2
    releases: dict[str, dict[str, object]] = table["releases"]
    chosen = args.release or list(releases)
    header = (
        f"{'release':<14}{'truth':>6}{'reported':>9}{'found':>7}"
        f"{'recall':>9}{'precision':>10}{'delegate':>10}{'warned':>8}{'s':>8}"
    )
    print(header)
    total = Tally()
    tallies: list[tuple[str, Tally]] = []
    for version in chosen:
        tally = Tally()
        start = time.perf_counter()
        audit_release(version, releases[version]["cases"], tally)  # type: ignore[arg-type]
        print(_row(version, tally, time.perf_counter() - start), flush=True)
        total.add(tally)
        tallies.append((version, tally))
    print(_row("total", total, None))
    print(
        "\nrecall = found/truth, precision = found/reported (errors), delegate = found with "
        "the table's delegate path; warned = missed errors reported as warnings"
    )
    if args.misses:
        _listing("missed", (m for _, t in tallies for m in t.misses))
        _listing("false errors", (m for _, t in tallies for m in t.false))
        _listing("wrong delegates", (m for _, t in tallies for m in t.wrong_delegates))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
