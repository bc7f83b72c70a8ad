"""How much of a preflight a second release could reuse: the files it parses, and how many are
byte-identical in the release before.

Why: the facts store keys each file's facts by its bytes (`eaglebug/checks/source/store.py`), so a file
that did not change between releases is never learnt again. The speed issue asks for the first
preflight after an upgrade (0.5.22 to 0.5.23) at 2x grep, and `second_release.py` measures
that; this says what any reuse by content can reach at best. It runs one cold preflight of the
new release (the seed launch of `preflight.py`) in a child process whose `ast.parse` records
each file it parses and the seconds it took, then compares each of those files' bytes with the
old release's. Files that changed are parsed and evaluated again whatever is kept.

    python bench/release_overlap.py [--old 0.5.22] [--new 0.5.23] [--top N]

A measurement, not a test: exit 0, 1 only when the preflight fails outright.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from preflight import preflight_argv, write_models
from second_release import release_options, release_tree

# Runs in the child: eaglebug's own `main`, with ast.parse recording (file, seconds).
_CHILD = """
import ast, json, sys, time
seen = []
parse = ast.parse
def recording(source, filename="<unknown>", *args, **kwargs):
    start = time.perf_counter()
    tree = parse(source, filename, *args, **kwargs)
    seen.append((str(filename), time.perf_counter() - start))
    return tree
ast.parse = recording
from eaglebug.tui.entry import main
out, sys.argv = sys.argv[1], ["eaglebug", *sys.argv[2:]]
try:
    code = main()
except SystemExit as exc:
    code = exc.code
with open(out, "w") as f:
    json.dump({"code": code, "seen": seen}, f)
"""


def parsed_files(tree: Path, scratch: Path) -> tuple[int, dict[str, float]]:
    """The preflight's exit code, and seconds of parsing by file (relative to the tree)."""
    target, draft = write_models(scratch)
    argv = preflight_argv(tree, target, draft)
    words = argv[argv.index("preflight") :]
    out = scratch / "seen.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(scratch / "cache")  # cold: nothing kept
    subprocess.run(
        [sys.executable, "-c", _CHILD, str(out), *words],
        env=env,
        cwd=os.sep,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    data = json.loads(out.read_text())
    seconds: dict[str, float] = {}
    for name, took in data["seen"]:
        if name.startswith("<"):
            continue  # a snippet, not a file
        rel = os.path.relpath(name, tree) if os.path.isabs(name) else name
        seconds[rel] = seconds.get(rel, 0.0) + took
    return int(data["code"] or 0), seconds


def same_bytes(old: Path, new: Path, rel: str) -> bool:
    try:
        return (old / rel).read_bytes() == (new / rel).read_bytes()
    except OSError:
        return False  # new in this release


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    release_options(parser)
    parser.add_argument("--top", type=int, default=12, metavar="N", help="changed files listed")
    args = parser.parse_args(argv)
    old, new = release_tree(args.old), release_tree(args.new)
    with tempfile.TemporaryDirectory(prefix="eaglebug-bench-") as tmp:
        code, seconds = parsed_files(new, Path(tmp))
    if code not in (0, 1):
        print(f"error: the preflight exited {code}", file=sys.stderr)
        return 1
    changed = {rel: s for rel, s in seconds.items() if not same_bytes(old, new, rel)}
    total, lost = sum(seconds.values()), sum(changed.values())
    every = [p for p in new.rglob("*.py") if p.is_file()]
    differ = sum(1 for p in every if not same_bytes(old, new, str(p.relative_to(new))))
    print(f"{args.old} -> {args.new}: {differ} of {len(every)} .py files differ or are new")
    print(
        f"the cold preflight of {args.new} parses {len(seconds)} files in {total:.2f} s; "
        f"{len(seconds) - len(changed)} are byte-identical in {args.old} "
        f"({total - lost:.2f} s of parsing a second release can skip), "
        f"{len(changed)} changed ({lost:.2f} s, {lost / total:.0%}: parsed and evaluated again)"
    )
    print(f"the changed files that take longest to parse (of {len(changed)}):")
    for rel, took in sorted(changed.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {took * 1000:6.1f} ms  {rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
