"""Audit and preflight, cold and warm, against an earlier commit of eaglebug in the same run.

Why: the one-engine rewrite (issue 20) must not make `audit` or `preflight` slower than the
code it replaced. Both versions are installed side by side from git (`pip install --no-deps
--target`, the base from a temporary worktree of `--base`), and each command runs as a separate
process with its own installation first on `PYTHONPATH`, alternating base and head run by run so
a busy machine slows both alike: cold runs get a fresh, empty cache folder each, warm runs share
one filled by an untimed run; best of N. The launch is the Kimi-K2.5 + EAGLE-3 seed scenario of
`preflight.py`. A benchmark, not a test: exit 0 whatever the ratios, 1 when a command fails.

    python bench/against_base.py [--base 7f704bf] [--sglang PATH] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from audit_vs_grep import AuditFailed, Run, audit_argv, default_tree, run_audit
from preflight import preflight_argv, write_models
from side_by_side import install_base_and_head


def on_path(site: Path, run: Callable[[], Run]) -> Run:
    """One timed command with `site` first on the import path (and nothing from the user)."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONNOUSERSITE")}
    os.environ["PYTHONPATH"], os.environ["PYTHONNOUSERSITE"] = str(site), "1"
    try:
        return run()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--base", default="7f704bf", help="the commit to compare with")
    parser.add_argument("--sglang", type=Path, metavar="PATH", help="SGLang tree (default: 0.5.23)")
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="timed runs (default 3)")
    args = parser.parse_args(argv)
    tree: Path = args.sglang.expanduser().resolve() if args.sglang else default_tree()
    with tempfile.TemporaryDirectory(prefix="eaglebug-base-") as tmp:
        scratch = Path(tmp)
        try:
            sites = install_base_and_head(args.base, scratch)
            target, draft = write_models(scratch)
            commands = {
                "audit": audit_argv(tree, "KimiK25ForConditionalGeneration"),
                "preflight": preflight_argv(tree, target, draft),
            }
            best: dict[tuple[str, str, str], float] = {}
            for name, command in commands.items():
                for who, site in sites.items():  # compile the bytecode, fill the warm caches
                    warm = scratch / f"warm-{who}-{name}"
                    warm.mkdir()
                    on_path(site, lambda c=command, w=warm: run_audit(c, scratch, w))
                for i in range(args.runs):
                    for who, site in sites.items():
                        cold = scratch / f"cold-{who}-{name}-{i}"
                        cold.mkdir()
                        made = on_path(site, lambda c=command, h=cold: run_audit(c, scratch, h))
                        key = (name, "cold", who)
                        best[key] = min(best.get(key, made.seconds), made.seconds)
                        shutil.rmtree(cold)
                        warm = scratch / f"warm-{who}-{name}"
                        made = on_path(site, lambda c=command, w=warm: run_audit(c, scratch, w))
                        key = (name, "warm", who)
                        best[key] = min(best.get(key, made.seconds), made.seconds)
        except AuditFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print(f"tree: {tree}\nbase: {args.base}   runs: {args.runs} (best of each, interleaved)")
    print(f"{'command':<12}{'cache':<7}{'base':>10}{'head':>10}{'head/base':>11}")
    for name in commands:
        for cache in ("cold", "warm"):
            base, head = best[(name, cache, "base")], best[(name, cache, "head")]
            print(f"{name:<12}{cache:<7}{base:>9.3f}s{head:>9.3f}s{head / base:>10.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
