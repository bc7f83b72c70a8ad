"""How long `eaglebug matrix` takes for a whole release, beside the baseline of auditing every
cell one by one, in the same run.

Why: issue 23 asks for a whole release (hundreds of classes) in well under a minute on 2 cores.
Measured:
- the whole release: `eaglebug matrix --format json` as a separate process (what a user or CI
  runs), wall seconds and peak RSS (issue 21: at most 200 MB), in a scratch cache: cold
  (nothing cached), with the parse cache warm but no kept answers (the files' facts known,
  every cell audited again), and all warm (the matrix read back);
- the ratio on a sample of classes, each side in its own process after the index and the
  consumer scan are built: the baseline calls `eaglebug.checks.audit` once per class and
  algorithm (target role), the way a script looping over `eaglebug audit` would; the matrix
  computes the same cells (and the draft roles) with its shared per-class work.

A benchmark, not a test: it prints the figures and exits 0; 1 only if a run fails.

    python bench/matrix_speed.py [--sglang PATH] [--sample N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from audit_vs_grep import eaglebug_command, python_side, run_child  # bench/ is on the path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_VERSION = "0.5.23"

_SIDE = r"""
import json, sys, time
from eaglebug.checks import TreeIndex, audit, locate, support_matrix
from eaglebug.checks.matrix.table import registered
from eaglebug.checks.matrix.roles import read_roles
from eaglebug.checks.reach.resolve import consumers
from eaglebug.checks.speculative.algorithms import algorithm_facts
tree, side, sample = sys.argv[1], sys.argv[2], int(sys.argv[3])
index = TreeIndex(locate(tree), use_cache=False)
consumers(index)
entries = registered(index)[:sample]
algorithms = read_roles(index, algorithm_facts(index)).algorithms
start = time.perf_counter()
if side == "baseline":
    cells = 0
    for _, ref in entries:
        for algorithm in algorithms:
            audit(index, ref.qualname, algorithm)
            cells += 1
else:
    files = sorted({ref.file for _, ref in entries})
    matrix = support_matrix(index, files=files)
    cells = sum(1 for _, c in matrix.cells() if c.role == "target" and c.status != "n/a")
print(json.dumps({"seconds": time.perf_counter() - start, "cells": cells}))
"""


def default_tree() -> Path:
    sys.path.insert(0, str(REPO))
    from tests.sglang_releases import release

    return release(DEFAULT_VERSION)


def side(tree: Path, name: str, sample: int) -> dict[str, float]:
    result: dict[str, float] = python_side(_SIDE, [str(tree), name, str(sample)], name)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sglang", type=Path, help=f"the tree (default: sglang {DEFAULT_VERSION})")
    parser.add_argument("--sample", type=int, default=30, help="classes for the ratio (30)")
    args = parser.parse_args()
    tree = args.sglang or default_tree()
    argv = [*eaglebug_command(), "matrix", "--sglang", str(tree), "--format", "json"]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        seconds, peaks = [], []
        for step in ("cold", "parse cache warm", "warm"):
            if step == "parse cache warm":
                for kept in Path(cache, "eaglebug").glob("answers-*"):
                    kept.unlink()
            whole = run_child(argv, env=env)
            seconds.append(f"{whole.seconds:.1f} s {step}")
            peaks.append(f"{whole.max_rss_mb:.0f} MB {step}")
            if whole.exit_code != 0:
                print(whole.stderr.decode(errors="replace"), file=sys.stderr)
                return 1
    data = json.loads(whole.stdout)
    print(
        f"whole release ({tree}): {len(data['rows'])} classes x {len(data['algorithms'])} "
        f"algorithms, {sum(data['counts'].values())} cells: {', '.join(seconds)} (one process each)"
    )
    print(f"peak RSS (the process and its helpers, os.wait4; goal <= 200 MB): {', '.join(peaks)}")
    baseline = side(tree, "baseline", args.sample)
    matrix = side(tree, "matrix", args.sample)
    per_base = baseline["seconds"] / max(1, baseline["cells"])
    per_matrix = matrix["seconds"] / max(1, matrix["cells"])
    print(
        f"sample of {args.sample} classes: audit() per cell {baseline['seconds']:.1f} s for "
        f"{baseline['cells']:.0f} cells ({1000 * per_base:.1f} ms each); matrix "
        f"{matrix['seconds']:.1f} s for {matrix['cells']:.0f} target cells plus draft roles "
        f"({1000 * per_matrix:.1f} ms each); ratio matrix/baseline per cell "
        f"{per_matrix / per_base:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
