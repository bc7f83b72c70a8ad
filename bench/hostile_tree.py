"""An SGLang tree with one 10 MB one-line module: the audit's time and memory next to the same
tree without it.

Why: a generated module (a table of numbers on one line) that the consumer scan selects took
5 GB and more than a minute to parse (issues 21, 24); the source limits
(`eaglebug/checks/contract/limits.py`) skip it with one warning. This copies the release's `.py` files
into a scratch folder twice, adds the module to one copy (`sglang/srt/layers/`, calling into
a runner's model so its bytes select it), and times a cold `eaglebug audit --json` of each
(fresh cache per run, best of N), with each run's peak RSS; the findings must be the same.

    audit with the module / audit without it     <= 2x
    peak RSS with the module                     <= 200 MB
    warning lines naming the module              exactly 1

A benchmark, not a test: exit 0 whatever the ratios, 1 only when a command fails outright.

    python bench/hostile_tree.py [--sglang PATH] [--runs N] [--size-mb 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from audit_vs_grep import (
    AuditFailed,
    audit_argv,
    default_tree,
    time_cold,
)
from report import rss_row, table, timed_row, verdict

GOAL = 2.0  # with / without
MODULE = "sglang/srt/layers/generated_table.py"


def write_one_line_module(path: Path, size: int) -> None:
    """A module the consumer scan selects by its bytes, then one line of numbers, written in
    pieces: this process stays small, and so do the audits forked from it (a child's peak RSS
    counts the pages it shared with its parent before `exec`)."""
    head = "def capture(model_runner): model_runner.model.set_eagle3_layers_to_capture(["
    piece = ",".join(str(i % 1000) for i in range(10_000)) + ","
    with path.open("w") as out:
        out.write(head)
        written = len(head)
        while written + len(piece) + 2 < size:
            out.write(piece)
            written += len(piece)
        out.write("0])")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--sglang", type=Path, metavar="PATH", help="SGLang tree (default: 0.5.23)")
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="timed runs (default 3)")
    parser.add_argument("--size-mb", type=float, default=10.0, help="the module's size (10)")
    args = parser.parse_args(argv)
    source: Path = args.sglang.expanduser().resolve() if args.sglang else default_tree()
    with tempfile.TemporaryDirectory(prefix="eaglebug-bench-") as tmp:
        scratch = Path(tmp)
        trees = {}
        for name in ("plain", "hostile"):
            tree = scratch / name
            shutil.copytree(
                source / "sglang",
                tree / "sglang",
                ignore=lambda _d, names: [
                    n for n in names if n.endswith((".so", ".pyc")) or n == "__pycache__"
                ],
            )
            trees[name] = tree
        write_one_line_module(trees["hostile"] / MODULE, int(args.size_mb * 1e6))
        runs = {}
        try:
            for name, tree in trees.items():
                argv_ = audit_argv(tree, "KimiK25ForConditionalGeneration")
                time_cold(argv_, 1, scratch)  # compiles the bytecode
                runs[name] = time_cold(argv_, args.runs, scratch)
        except AuditFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    plain_s = min(r.seconds for r in runs["plain"])
    hostile_s = min(r.seconds for r in runs["hostile"])
    rss = max(r.max_rss_mb for r in runs["hostile"])
    said = [
        line
        for line in runs["hostile"][0].stderr.decode(errors="replace").splitlines()
        if MODULE in line
    ]
    same = all(
        json.loads(r.stdout)["findings"] == json.loads(runs["plain"][0].stdout)["findings"]
        for r in runs["hostile"]
    )
    rows = [
        ("audit without the module", f"{plain_s:.3f} s", "the baseline", ""),
        timed_row("audit with it", hostile_s, plain_s, GOAL, against=""),
        rss_row("peak RSS with it", rss),
        ("warning lines naming it", str(len(said)), "exactly 1", verdict(len(said) == 1)),
        ("same findings", str(same), "True", verdict(same)),
    ]
    print(f"tree: {source} (+ a {args.size_mb:g} MB one-line module)\nruns: {args.runs}")
    print("\n".join(table(rows)))
    for line in said:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
