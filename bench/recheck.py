"""A re-check in the TUI: the session's second preflight, with and without the syntax trees it
kept from the first.

Why: the TUI checks the launch again after every flag, fix or relaunch, each time with a new
index (a fix changes the tree). The facts of unchanged files come from the store, but the
evaluator needs their syntax trees; the session keeps them across its checks, by the digest of
each file's bytes (`eaglebug/checks/source/trees.py`). This measures, in the same run, each side in a
fresh process and a fresh cache folder, what `Session.run_checks` does twice: the seed launch
(Kimi-K2.5 + EAGLE-3, --tp 8, as `preflight.py`) checked, then checked again with one more flag
(`--mem-fraction-static 0.8`: a new question, so no kept answer serves it). Timed: the second
check; best of N. A benchmark, not a test: exit 0 whatever the ratio, 1 when a side fails.

    python bench/recheck.py [--sglang PATH] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from audit_vs_grep import python_side
from preflight import preflight_argv, write_models
from report import table, timed_row
from second_release import release_tree

_SIDE = r"""
import json, sys, time
from eaglebug.checks import ParsedTrees, TreeIndex, locate, preflight
tree, words, shared = locate(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "shared"
trees = ParsedTrees() if shared else None
preflight(TreeIndex(tree, shared=trees), words, {})  # its index goes, as a session's does
start = time.perf_counter()
again = preflight(TreeIndex(tree, shared=trees), [*words, "--mem-fraction-static", "0.8"], {})
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "findings": len(again.findings),
                  "reused": trees.hits if trees else 0}))
"""


def side(tree: Path, words: list[str], shared: bool, scratch: Path) -> dict[str, float]:
    env = {**os.environ, "XDG_CACHE_HOME": tempfile.mkdtemp(dir=scratch)}
    args = [str(tree), json.dumps(words), "shared" if shared else "-"]
    result: dict[str, float] = python_side(_SIDE, args, "a re-check", env)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", type=Path, help="the tree (default: sglang 0.5.23)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per side (3)")
    args = parser.parse_args()
    tree = args.sglang or release_tree("0.5.23")
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        target, draft = write_models(scratch)
        argv = preflight_argv(tree, target, draft)
        words = argv[argv.index("--") + 1 :]
        plain, kept = [], []
        for _ in range(args.runs):  # interleaved: a busy moment falls on both sides
            plain.append(side(tree, words, False, scratch))
            kept.append(side(tree, words, True, scratch))
    if {r["findings"] for r in plain} != {r["findings"] for r in kept}:
        print("the two sides found different things", file=sys.stderr)
        return 1
    base = min(r["seconds"] for r in plain)
    best = min(kept, key=lambda r: r["seconds"])
    print(f"tree: {tree}\nruns: {args.runs} per side (best); the second check of a session")
    for line in table(
        [
            ("re-check, trees parsed again", f"{base:.3f} s", "the baseline", ""),
            timed_row("re-check, trees kept", best["seconds"], base, None, " the baseline"),
            ("trees taken over", f"{best['reused']:.0f}", "", ""),
        ]
    ):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
