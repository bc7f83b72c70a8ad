"""How long a full `eaglebug audit` takes next to `grep -rn` over the same SGLang tree.

Why: DESIGN.md promises that auditing a ~4,700-file SGLang tree stays within a small multiple
of grepping it. Absolute seconds mean little across machines, so this measures the baseline
(grep) and the audit in the same run, on the same tree, with the page cache warm for both, and
reports ratios against the goals of the speed issue:

    cold audit (empty parse cache) <= 3x grep
    warm audit (cache filled)      <= 0.35x grep
    peak RSS of an audit process   <= 200 MB

Both sides are separate processes, so the audit's interpreter start-up counts just as grep's
process start does. As in a real install, the audit runs from compiled bytecode: the children
write it under a scratch `PYTHONPYCACHEPREFIX` (never into the repository, and even where
`PYTHONDONTWRITEBYTECODE` is set), and one untimed audit compiles it before anything is timed.
The children run the `eaglebug` that the Python running this script has installed: for
figures as a user gets them, run it with a venv that holds a plain (not editable) install,
e.g. `python -m venv V && V/bin/pip install . && V/bin/python bench/audit_vs_grep.py`.
Peak RSS comes from `os.wait4` on each audit child. An extra row, for information only, times
grep over the `.py` files alone: a wheel may ship large binaries (0.5.23 has ~45 MB of `.so`)
that plain grep reads and the audit never does.

This is a benchmark, not a test: it exits 0 whether or not the goals are met, and 1 only when
the audit itself fails (exit code 2, or JSON that does not parse).

    python bench/audit_vs_grep.py [--sglang PATH] [--runs N] [--model-class NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from report import rss_row, table, timed_row

REPO = Path(__file__).resolve().parent.parent
DEFAULT_VERSION = "0.5.23"
DEFAULT_CLASS = "KimiK25ForConditionalGeneration"
NEEDLE = "get_embed_and_head"

COLD_GOAL = 3.0  # cold audit seconds / grep seconds (issue 21)
WARM_GOAL = 0.35  # warm audit seconds / grep seconds


class AuditFailed(Exception):
    """The audit exited 2 or printed JSON that does not parse."""


@dataclass(frozen=True)
class Run:
    seconds: float
    exit_code: int
    max_rss_mb: float
    stdout: bytes
    stderr: bytes


def default_tree() -> Path:
    """The unpacked 0.5.23 release, downloaded once by the test helper if missing."""
    sys.path.insert(0, str(REPO))
    from tests.sglang_releases import release

    return release(DEFAULT_VERSION)


def _rss_mb(ru_maxrss: int) -> float:
    # Linux reports kilobytes, macOS bytes.
    return ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else ru_maxrss / 1024


def run_child(argv: list[str], env: dict[str, str] | None = None, capture: bool = True) -> Run:
    """Run one process to completion: wall seconds, exit code, its own peak RSS, its output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        target_out = out if capture else subprocess.DEVNULL
        target_err = err if capture else subprocess.DEVNULL
        start = time.perf_counter()
        # From the file system's root: `python -m eaglebug` puts its working folder first on
        # the path, and from the repository that would be the source folder, not the install.
        proc = subprocess.Popen(argv, stdout=target_out, stderr=target_err, env=env, cwd=os.sep)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: keep Popen from waiting
        out.seek(0)
        err.seek(0)
        return Run(seconds, proc.returncode, _rss_mb(usage.ru_maxrss), out.read(), err.read())


def time_grep(tree: Path, runs: int, only_py: bool = False) -> float:
    """Best of `runs` after one warm-up, which also fills the page cache for the audit."""
    argv = ["grep", "-rn", *(["--include=*.py"] if only_py else []), NEEDLE, str(tree)]
    run_child(argv, capture=False)
    return min(run_child(argv, capture=False).seconds for _ in range(runs))


def eaglebug_command() -> list[str]:
    """The console script installed beside this Python, as a user runs it; else `-m eaglebug`
    (which also imports `runpy`, a few milliseconds that a warm run notices)."""
    script = Path(sys.executable).parent / "eaglebug"
    return [str(script)] if script.exists() else [sys.executable, "-m", "eaglebug"]


def python_side(script: str, args: list[str], what: str, env: dict[str, str] | None = None) -> Any:
    """One side of an in-process comparison: `script` run by this Python with the installed
    eaglebug (from `/`, not the repository's source folder), its last stdout line as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        cwd="/",
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"{what} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.splitlines()[-1])


def audit_argv(tree: Path, model_class: str) -> list[str]:
    return [
        *eaglebug_command(),
        "audit",
        "--sglang",
        str(tree),
        "--model-class",
        model_class,
        "--json",
    ]


def audit_env(scratch: Path, cache_home: Path) -> dict[str, str]:
    """The parse cache in `cache_home`; bytecode cached under `scratch` like an installed package."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    env["XDG_CACHE_HOME"] = str(cache_home)
    return env


def run_audit(argv: list[str], scratch: Path, cache_home: Path) -> Run:
    result = run_child(argv, env=audit_env(scratch, cache_home))
    lines = result.stderr.decode(errors="replace").strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    last = (errors or lines or ["nothing on stderr"])[-1]
    if result.exit_code not in (0, 1):
        raise AuditFailed(f"audit exited {result.exit_code}: {last}")
    try:
        json.loads(result.stdout)
    except ValueError as exc:
        raise AuditFailed(
            f"audit (exit {result.exit_code}) printed JSON that does not parse ({exc}); stderr: {last}"
        ) from exc
    return result


def time_cold(argv: list[str], runs: int, scratch: Path, prefix: str = "") -> list[Run]:
    """Each run with its own fresh, empty cache folder (`prefix` tells two sides' apart)."""
    results = []
    for i in range(runs):
        home = scratch / f"{prefix}cold-{i}"
        home.mkdir()
        results.append(run_audit(argv, scratch, home))
        shutil.rmtree(home)
    return results


def warm_up(argv: list[str], scratch: Path) -> None:
    """One untimed audit: compiles the bytecode and fills the parse cache the warm runs reuse."""
    home = scratch / "warm"
    home.mkdir()
    run_audit(argv, scratch, home)


def time_warm(argv: list[str], runs: int, scratch: Path) -> list[Run]:
    """Every run reuses the parse cache that `warm_up` filled."""
    return [run_audit(argv, scratch, scratch / "warm") for _ in range(runs)]


def report(
    tree: Path, runs: int, grep_s: float, grep_py_s: float, cold: list[Run], warm: list[Run]
) -> str:
    cold_s = min(r.seconds for r in cold)
    warm_s = min(r.seconds for r in warm)
    cold_rss = max(r.max_rss_mb for r in cold)
    warm_rss = max(r.max_rss_mb for r in warm)
    rows = [
        ("grep -rn (best)", f"{grep_s:.3f} s", "the baseline", ""),
        (
            "grep -rn --include=*.py",
            f"{grep_py_s:.3f} s",
            f"info: cold {cold_s / grep_py_s:.2f}x, warm {warm_s / grep_py_s:.2f}x",
            "",
        ),
        timed_row("audit cold (best)", cold_s, grep_s, COLD_GOAL),
        timed_row("audit warm (best)", warm_s, grep_s, WARM_GOAL),
        rss_row("peak RSS cold (max)", cold_rss),
        rss_row("peak RSS warm (max)", warm_rss),
    ]
    lines = [
        f"tree: {tree}",
        f"runs: {runs} (best time, worst RSS); audit exit code {cold[0].exit_code}",
    ]
    return "\n".join(lines + table(rows))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument(
        "--sglang",
        type=Path,
        metavar="PATH",
        help=f"SGLang tree to audit and grep (default: the {DEFAULT_VERSION} release)",
    )
    parser.add_argument(
        "--runs", type=int, default=5, metavar="N", help="timed runs per side (default 5)"
    )
    parser.add_argument(
        "--model-class",
        default=DEFAULT_CLASS,
        metavar="NAME",
        help=f"class to audit (default {DEFAULT_CLASS})",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tree: Path = args.sglang.expanduser().resolve() if args.sglang else default_tree()
    audit = audit_argv(tree, args.model_class)
    grep_s = time_grep(tree, args.runs)
    grep_py_s = time_grep(tree, args.runs, only_py=True)
    try:
        with tempfile.TemporaryDirectory(prefix="eaglebug-bench-") as scratch:
            warm_up(audit, Path(scratch))
            cold = time_cold(audit, args.runs, Path(scratch))
            warm = time_warm(audit, args.runs, Path(scratch))
    except AuditFailed as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    print(report(tree, args.runs, grep_s, grep_py_s, cold, warm))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
