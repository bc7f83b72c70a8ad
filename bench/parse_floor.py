"""The least a cold audit, a cold or a second-release preflight could take here: the bytes
and the syntax trees.

Why: issue 21 asks for a cold audit within 3x `grep -rn` over the tree, a cold preflight of the
seed launch within 5x, and the first preflight of a new release (after one of the old) within
2x. eaglebug's one evaluator reads SGLang's code as Python `ast` trees, so a run must at least
have the trees of the code it evaluates, and a tree in memory costs about a parse: loaded from
a cache instead (`pickle`, the cheapest way to rebuild Python objects), one takes 70-110% of
its parse (0.5.23's `model_runner.py`, 109 KB: parsed 17.7 ms, unpickled 12.4 ms). This
measures that floor, with everything else granted free:

    the files a preflight of the seed launch parses (one process, so every parse is seen),
    and which outermost function bodies of them it reads (its checks and the evaluator);
    the same for a cold audit of the seed's target class;
    a new interpreter importing eaglebug's engine (the CLI needs no less);
    the byte-level look at every runtime file (read, hashed for the per-file cache, searched
    for what the extractors want): a cold tree has no stamps, so no run of it can skip a file;
    a second release reads and hashes every file too, to know which it shares;
    their parse, whole files, split perfectly over this machine's cores;
    a "lazy" parse, for the lever of parsing a body only when read: each file's skeleton
    (its outermost function bodies left out) plus the bodies that were read, split as above.

Three scenarios: the cold audit and the first preflight (every file each parses), against
their cold goals; and a second release (only the files whose path and bytes the old release
lacks, since the per-file cache is keyed by them), against its goal. The floor grants the
evaluation, the cache writes and every other process start nothing (a second release its
look at the files it does not share too), and the split over cores no overhead: a run can
only be slower. A floor above a goal shows the goal cannot be reached on this machine
by an evaluator of `ast` trees, whatever is cached; below it, it says how much room is left.
The skeletons and bodies are the file's own bytes (`costs`); finding the bodies in them is
granted free, which makes the lazy floor lower still.

A benchmark, not a test: exit 0 whatever the ratios, 1 when the recorded preflight fails.

    python bench/parse_floor.py [--old 0.5.22] [--new 0.5.23] [--runs N]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from audit_vs_grep import COLD_GOAL as AUDIT_COLD_GOAL
from audit_vs_grep import audit_argv, audit_env, python_side, run_child, time_grep
from preflight import COLD_GOAL, preflight_argv, write_models
from report import table, timed_row
from second_release import GOAL as SECOND_GOAL
from second_release import release_options, release_tree

# Run in a child by the installed eaglebug: the seed preflight in one process (the forked
# helpers off, so every parse happens where it is seen), each parsed file's outermost
# function bodies watched for a read. Prints what was parsed and which bodies were read.
_RECORD = r"""
import ast, contextlib, io, json, sys
from eaglebug.session import forkmap
forkmap._Helper.start = classmethod(lambda cls, compute: None)  # every parse in this process
from eaglebug.checks.source import facts, files

read = {}  # rel -> the first lines of the bodies read

def watched(kind):
    class Watched(kind):
        @property
        def body(self):
            rel, line = self.__dict__["_where"]
            read.setdefault(rel, set()).add(line)
            return self.__dict__["_body"]

        @body.setter
        def body(self, value):
            self.__dict__["_body"] = value

    return Watched

WATCHED = {kind: watched(kind) for kind in (ast.FunctionDef, ast.AsyncFunctionDef)}

def outermost(node):
    for child in ast.iter_child_nodes(node):
        if type(child) in WATCHED:
            yield child
        elif not isinstance(child, ast.Lambda):
            yield from outermost(child)

parsed = []
original = facts.parse

def parse(rel, data):
    done = original(rel, data)
    if isinstance(done, facts.Parsed):
        parsed.append(rel)
        for fn in list(outermost(done.tree)):
            body = fn.__dict__.pop("body")
            fn.__class__ = WATCHED[type(fn)]
            fn.__dict__["_body"], fn.__dict__["_where"] = body, (rel, fn.lineno)
    return done

facts.parse = files.parse = parse
from eaglebug.cli.parser import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as end:
        code = end.code
print(json.dumps({"code": code, "parsed": parsed, "read": {k: sorted(v) for k, v in read.items()}}))
"""

_IMPORTS = "import eaglebug.cli.parser, eaglebug.checks.orchestrator"


def record(scratch: Path, argv: list[str], command: str) -> tuple[list[str], dict[str, set[int]]]:
    """The files a run of `argv` (`command` and its words) parses, and the first lines of
    the bodies it reads."""
    words = argv[argv.index(command) :]
    env = audit_env(scratch, scratch / f"cache-record-{command}")
    got = python_side(_RECORD, [json.dumps(words)], f"the recorded {command}", env)
    if got["code"] not in (0, 1):
        raise SystemExit(f"the recorded {command} exited {got['code']}")
    return list(dict.fromkeys(got["parsed"])), {k: set(v) for k, v in got["read"].items()}


# The byte-level look every cold run of a tree makes, in a new interpreter of the installed
# eaglebug: each runtime file read, hashed (the per-file cache is keyed by the hash) and looked
# at by the extractors (which files to parse). Prints the best CPU seconds of `runs`, of the
# whole look and of its reading and hashing alone.
_SCAN = r"""
import os, sys, time
import eaglebug.checks, eaglebug.checks.reach.consumers  # the extractors, registered
from eaglebug.checks.source.facts import RUNTIME, look
from eaglebug.checks.source.files import read_file
from eaglebug.checks.source.store import digest
from eaglebug.checks.source.walk import list_tree

root, top, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
best, best_read = float("inf"), float("inf")
for _ in range(runs):
    start = time.process_time()
    looked = 0.0
    for found in list_tree(root, top).found:
        if isinstance(found, str) or not found[0].startswith(RUNTIME):
            continue
        rel, size, mtime = found
        data = read_file(os.path.join(root, rel), size)
        key = digest(rel, data)
        at = time.process_time()
        look(data, len(data), mtime, key)
        looked += time.process_time() - at
    spent = time.process_time() - start
    best, best_read = min(best, spent), min(best_read, spent - looked)
print(best, best_read)
"""


def scan_seconds(tree: Path, runs: int, scratch: Path) -> tuple[float, float]:
    """The byte-level look at the tree's runtime files, and its reading and hashing alone
    (what a second release does for the files it shares): CPU seconds, best of `runs`."""
    env = audit_env(scratch, scratch / "cache-scan")
    argv = [sys.executable, "-c", _SCAN, str(tree), str(tree / "sglang"), str(runs)]
    whole, read = run_child(argv, env=env).stdout.decode().split()
    return float(whole), float(read)


def _best(runs: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def _parse(text: str | bytes, name: str) -> ast.Module:
    return compile(text, name, "exec", ast.PyCF_ONLY_AST)  # what `ast.parse` does


def _outermost(node: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield child
        elif not isinstance(child, ast.Lambda):
            yield from _outermost(child)


def costs(tree: Path, rel: str, read: set[int], runs: int) -> tuple[float, float]:
    """One file's parse, whole and lazy (skeleton + the bodies read), best of `runs` each.
    Both from the file's own bytes: the skeleton is the file with each outermost body's lines
    emptied (a `0` on its first), and a body read is its own lines, parsed alone under an
    `if 1:` at its own line numbers, as a lazy parser that keeps every position must."""
    data = (tree / rel).read_bytes()
    whole = _best(runs, lambda: _parse(data, rel))
    lines = data.split(b"\n")
    bodies = []
    for fn in list(_outermost(_parse(data, rel))):  # the lazy unit, as the recording watched
        head = fn.body[0]
        first = min([head.lineno, *(d.lineno for d in getattr(head, "decorator_list", ()))])
        last = fn.end_lineno or head.lineno
        if lines[first - 1][: head.col_offset].strip():
            continue  # the body on its header's line: nothing to leave out
        if fn.lineno in read:
            bodies.append(b"\n" * (first - 2) + b"if 1:\n" + b"\n".join(lines[first - 1 : last]))
        lines[first - 1 : last] = [b" " * head.col_offset + b"0"] + [b""] * (last - first)
    skeleton = b"\n".join(lines)
    lazy = _best(runs, lambda: _parse(skeleton, rel)) + sum(
        _best(runs, lambda b=b: _parse(b, rel)) for b in bodies
    )
    return whole, lazy


def start_and_imports(runs: int, scratch: Path) -> float:
    """A new interpreter importing the engine, from compiled bytecode (warmed once)."""
    argv = [sys.executable, "-c", _IMPORTS]
    env = audit_env(scratch, scratch / "cache-imports")
    run_child(argv, env=env, capture=False)
    return min(run_child(argv, env=env, capture=False).seconds for _ in range(runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    release_options(parser)
    parser.add_argument("--runs", type=int, default=3, help="best of N")
    args = parser.parse_args()
    old, new = release_tree(args.old), release_tree(args.new)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with tempfile.TemporaryDirectory(prefix="eaglebug-floor-") as scratch_name:
        scratch = Path(scratch_name)
        parsed, read = record(scratch, preflight_argv(new, *write_models(scratch)), "preflight")
        audited, audit_read = record(
            scratch, audit_argv(new, "KimiK25ForConditionalGeneration"), "audit"
        )
        grep_s = time_grep(new, args.runs)
        start_s = start_and_imports(args.runs, scratch)
        scan_s, hash_s = scan_seconds(new, args.runs, scratch)
    changed = [
        rel
        for rel in parsed
        if not (old / rel).is_file() or (old / rel).read_bytes() != (new / rel).read_bytes()
    ]
    per_file = {rel: costs(new, rel, read.get(rel, set()), args.runs) for rel in parsed}
    audit_file = {rel: costs(new, rel, audit_read.get(rel, set()), args.runs) for rel in audited}
    size = {rel: (new / rel).stat().st_size for rel in parsed}
    print(f"trees: {old} -> {new}")
    print(f"runs: {args.runs} (best time); cores: {cores} (the parse split perfectly over them)")
    print(
        f"the seed preflight parses {len(parsed)} files ({sum(size.values()) / 1e6:.1f} MB) "
        f"and reads {sum(map(len, read.values()))} outermost function bodies of them; "
        f"{len(changed)} ({sum(size[r] for r in changed) / 1e6:.1f} MB) differ from {args.old}"
    )
    print(
        f"the cold audit of KimiK25ForConditionalGeneration parses {len(audited)} files "
        f"({sum((new / r).stat().st_size for r in audited) / 1e6:.1f} MB) and reads "
        f"{sum(map(len, audit_read.values()))} outermost function bodies of them"
    )
    rows = [("grep -rn (best)", f"{grep_s:.3f} s", "the baseline", "")]
    rows.append(timed_row("interpreter + engine imports", start_s, grep_s, None))
    rows.append(timed_row("byte-level look, every runtime file (CPU)", scan_s, grep_s, None))
    rows.append(timed_row("  of which reading and hashing (CPU)", hash_s, grep_s, None))
    for label, costs_of, files, scanned, goal in (
        ("cold audit", audit_file, audited, scan_s, AUDIT_COLD_GOAL),
        ("first preflight", per_file, parsed, scan_s, COLD_GOAL),
        ("second release", per_file, changed, hash_s, SECOND_GOAL),
    ):
        whole = sum(costs_of[rel][0] for rel in files)
        lazy = sum(costs_of[rel][1] for rel in files)
        rows.append(timed_row(f"{label}: parse, whole files (CPU)", whole, grep_s, None))
        rows.append(timed_row(f"{label}: parse, lazy bodies (CPU)", lazy, grep_s, None))
        for kind, cpu in (("whole files", whole), ("lazy bodies", lazy)):
            floor = start_s + (scanned + cpu) / cores
            rows.append(timed_row(f"{label} floor, {kind}", floor, grep_s, goal))
    print("\n".join(table(rows)))
    print("(a PASS says the floor is under the goal: room left, not the goal met)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
