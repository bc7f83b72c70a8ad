"""A user upgrades SGLang: how long the first preflight of the new release takes next to grep.

Why: the facts store keys each file's facts by the hash of its path and bytes
(`eaglebug/checks/source/store.py`), so what a second release shares with the first is not learnt
again (issue 21). How much that is, `release_overlap.py` says: from 0.5.22 to 0.5.23, 1,897
of 4,719 files changed, among them most of what a preflight parses (scheduler, model config,
server arguments), which is parsed and evaluated again whatever is kept. This measures, in the same run and on the same
machine, as separate processes from compiled bytecode (the helpers of `audit_vs_grep.py`):

    grep -rn over the new tree                                   the baseline
    preflight of the new release, fresh cache                    cold, for reference
    preflight of the new release after one of the old release    <= 2x grep (the goal)
    the same for `audit`                                         information
    preflight of a copy of the new release after one of it       information
    the same copy again, every file's mtime changed (a reinstall) information

Each "second" run gets a fresh cache folder filled by one untimed run of the old release (the
same seed launch: Kimi-K2.5 + EAGLE-3, --tp 8, as `preflight.py`); best of N, worst RSS. The
last two rows are the same files elsewhere (a second venv with the same release) and installed
again (`pip install --force-reinstall`): they take over the answers made for that content
(`eaglebug/checks/source/content.py`), each pair with its own fresh cache too.
A benchmark, not a test: exit 0 whatever the ratios, 1 when a command fails outright or the
timed preflight says a check of it is incomplete (`preflight.complete`).

    python bench/second_release.py [--old 0.5.22] [--new 0.5.23] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from audit_vs_grep import (
    REPO,
    AuditFailed,
    Run,
    audit_argv,
    run_audit,
    time_cold,
    time_grep,
)
from preflight import complete, preflight_argv, write_models
from report import rss_row, table, timed_row

GOAL = 2.0  # second-release preflight seconds / grep seconds


def release_tree(version: str) -> Path:
    """The unpacked release, downloaded once by the test helper if missing."""
    sys.path.insert(0, str(REPO))
    from tests.sglang_releases import release

    return release(version)


def release_options(parser: argparse.ArgumentParser) -> None:
    """--old and --new: the release a user had, and the one they upgrade to."""
    parser.add_argument("--old", default="0.5.22", help="the release first audited")
    parser.add_argument("--new", default="0.5.23", help="the release upgraded to")


def _second(old: list[str], new: list[str], runs: int, scratch: Path, tag: str) -> list[Run]:
    """`new` after `old`, each pair with its own fresh cache."""
    results = []
    for i in range(runs):
        home = scratch / f"{tag}-{i}"
        home.mkdir()
        run_audit(old, scratch, home)
        results.append(run_audit(new, scratch, home))
        shutil.rmtree(home)
    return results


def _same_content(
    original: list[str], copy: list[str], tree: Path, runs: int, scratch: Path
) -> tuple[list[Run], list[Run]]:
    """`copy` (the release in another folder) after `original`; then again after every `.py`
    file of the copy got a new mtime, as a reinstall gives them."""
    elsewhere, reinstalled = [], []
    for i in range(runs):
        home = scratch / f"content-{i}"
        home.mkdir()
        run_audit(original, scratch, home)
        elsewhere.append(run_audit(copy, scratch, home))
        for path in tree.rglob("*.py"):
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        reinstalled.append(run_audit(copy, scratch, home))
        shutil.rmtree(home)
    return elsewhere, reinstalled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    release_options(parser)
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="timed runs (default 3)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    old_tree, new_tree = release_tree(args.old), release_tree(args.new)
    grep_s = time_grep(new_tree, args.runs)
    with tempfile.TemporaryDirectory(prefix="eaglebug-bench-") as tmp:
        scratch = Path(tmp)
        target, draft = write_models(scratch)
        flights = [preflight_argv(t, target, draft) for t in (old_tree, new_tree)]
        audits = [audit_argv(t, "KimiK25ForConditionalGeneration") for t in (old_tree, new_tree)]
        try:
            warm = scratch / "compile"
            warm.mkdir()
            for argv_ in (*flights, *audits):  # compiles the bytecode
                run_audit(argv_, scratch, warm)
            cold = time_cold(flights[1], args.runs, scratch, "preflight-")
            second = _second(*flights, args.runs, scratch, "preflight")
            audit_cold = time_cold(audits[1], args.runs, scratch, "audit-")
            audit_second = _second(*audits, args.runs, scratch, "audit")
            copy = scratch / "copy"  # the release elsewhere (its kernels' binaries left out)
            shutil.copytree(new_tree, copy, ignore=shutil.ignore_patterns("*.so"))
            elsewhere, reinstalled = _same_content(
                flights[1], preflight_argv(copy, target, draft), copy, args.runs, scratch
            )
        except AuditFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    best = {name: min(r.seconds for r in rs) for name, rs in (
        ("cold", cold), ("second", second), ("audit_cold", audit_cold),
        ("audit_second", audit_second), ("elsewhere", elsewhere), ("reinstalled", reinstalled),
    )}  # fmt: skip
    runs_all = (*cold, *second, *audit_cold, *audit_second, *elsewhere, *reinstalled)
    rss = max(r.max_rss_mb for r in runs_all)
    rows = [
        ("grep -rn (best)", f"{grep_s:.3f} s", "the baseline", ""),
        timed_row("preflight cold (best)", best["cold"], grep_s, None),
        timed_row(f"preflight {args.new} after {args.old}", best["second"], grep_s, GOAL),
        timed_row("audit cold (best)", best["audit_cold"], grep_s, None),
        timed_row(f"audit {args.new} after {args.old}", best["audit_second"], grep_s, None),
        timed_row(f"preflight {args.new} in another folder", best["elsewhere"], grep_s, None),
        timed_row("  the same, reinstalled", best["reinstalled"], grep_s, None),
        rss_row("peak RSS (max)", rss),
    ]
    print(f"old: {old_tree}\nnew: {new_tree}\nruns: {args.runs} (best time, worst RSS)")
    print("\n".join(table(rows)))
    return complete(second[0].stdout)


if __name__ == "__main__":
    raise SystemExit(main())
