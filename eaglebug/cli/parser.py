"""The headless command line: `eaglebug audit|preflight|fix|undo ...`.

Exit codes for every command: 0 nothing at error severity, 1 errors found, 2 bad usage or
unreadable input, with a one-line reason on stderr and never a traceback. The commands and
their options are declared in `options.py`; this parses, runs and exits.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

from eaglebug.checks import InputError, one_line
from eaglebug.cli.options import COMMANDS, EXIT_USAGE, build_parser, write_error

# Commands that read a tree and print: bounded work, nothing to clean up once the answer is out.
_TREE_READERS = frozenset({"audit", "preflight", "matrix", "hook"})


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=words[0] if words and words[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return EXIT_USAGE
    if args.command not in _TREE_READERS:
        return _collected_rarely(args)
    program = _is_the_program(words)
    code = _uncollected(args, restore=not program)
    if program:
        _end_now(code)
    return code


def _collected_rarely(args: argparse.Namespace) -> int:
    """A short-lived process that builds many small objects: full collections only cost time
    (`session/collector.py`; restored afterwards, for callers such as tests that run main()
    in-process)."""
    from eaglebug.session.collector import few_collections

    with few_collections():
        return _run(args)


def _uncollected(args: argparse.Namespace, restore: bool) -> int:
    """An audit builds millions of objects (syntax trees) and no garbage cycles worth the
    collector's time: a third of parsing went to it. Memory is freed by reference counts.
    The collector is turned back on for in-process callers (`restore`); a process that ends
    right after never needs it (turned on, its first run would visit every object)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if enabled and restore:
            gc.enable()


def _is_the_program(words: list[str]) -> bool:
    """Was this interpreter started to run eaglebug with exactly these words (`python -m
    eaglebug ...` or the console script), rather than by a caller that imported the CLI (a
    test, a batch of runs in one interpreter, a notebook)? Read from its own command line."""
    started = sys.orig_argv
    if "-m" in started[:-1]:
        program = started[started.index("-m") + 1]
    elif len(started) > 1:
        program = os.path.basename(started[1])
    else:
        return False
    return program == "eaglebug" and sys.argv[1:] == words


def _end_now(code: int) -> None:
    """End the process once the answer is out, without tearing the interpreter down: freeing
    every object of a large audit one by one takes longer than a warm audit itself. Only for
    `_TREE_READERS` (their caches are written, any helper process reaped, no git, no server);
    if the output cannot be flushed, the normal exit reports it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _run(args: argparse.Namespace) -> int:
    try:
        code: int = args.run(args)
    except InputError as exc:
        write_error(exc)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # A bug in eaglebug, not in the input: exit 2 rather than 1 ("errors found").
        if os.environ.get("EAGLEBUG_DEBUG"):
            raise
        sys.stderr.write(f"error: internal error: {type(exc).__name__}: {one_line(str(exc))}\n")
        sys.stderr.write("hint: rerun with EAGLEBUG_DEBUG=1 for the traceback, and report it\n")
        return EXIT_USAGE
    return code
