"""The headless command line: `eaglebug audit ...` (more commands land with their issues).

Exit codes for every command: 0 nothing at error severity, 1 errors found, 2 bad usage or
unreadable input, with a one-line reason on stderr and never a traceback.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import sys
from collections.abc import Sequence

from eaglebug import __version__
from eaglebug.checks.audit import audit, find_class
from eaglebug.checks.errors import InputError
from eaglebug.checks.findings import has_errors
from eaglebug.checks.index import TreeIndex
from eaglebug.checks.launch import split_words
from eaglebug.checks.modelconfig import architecture, read_config
from eaglebug.checks.preflight import GpuMemory, preflight
from eaglebug.checks.tree import locate
from eaglebug.interpreter import sglang_of
from eaglebug.nvml import smallest_gpu_memory
from eaglebug.report import audit_json, print_audit, print_preflight

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse, but its usage errors follow the `error:` / `hint:` convention, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message}\nhint: run `{self.prog} --help` for usage\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="eaglebug",
        description="Find, fix and watch what breaks when a model meets SGLang speculative decoding.",
    )
    parser.add_argument("--version", action="version", version=f"eaglebug {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser(
        "audit",
        help="static audit: which attributes the speculative workers need that a model class lacks",
        description=(
            "Read an SGLang source tree (never importing it), find every place the runtime "
            "touches a runner's model object, and report what the model class lacks."
        ),
    )
    p.add_argument(
        "--sglang",
        metavar="PATH",
        help="SGLang repo root, its python/ folder, or the sglang package (default: the importable sglang)",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--model-class",
        metavar="NAME",
        help="the target model class, e.g. KimiK25ForConditionalGeneration",
    )
    which.add_argument(
        "--model-path",
        metavar="DIR",
        help="a model folder; config.json's architectures[0] names the class",
    )
    p.add_argument(
        "--algorithm",
        default="EAGLE3",
        metavar="ALGO",
        help="EAGLE3 (default), EAGLE, NEXTN or STANDALONE",
    )
    p.add_argument(
        "--draft-class", metavar="NAME", help="also audit the draft model class in the draft role"
    )
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument(
        "--no-cache", action="store_true", help="ignore and do not write the parse cache"
    )
    p.set_defaults(run=_cmd_audit)

    p = sub.add_parser(
        "preflight",
        help="every launch blocker of one launch command, before the first launch",
        description=(
            "Parse the exact launch command (flags as the SGLang tree defines them), read the "
            "target and draft configs, audit both classes and check the configs against each "
            "other and the GPUs."
        ),
        usage="eaglebug preflight [--sglang PATH] [--json] [--gpu-mem-gib N] -- LAUNCH COMMAND...",
    )
    p.add_argument(
        "--sglang",
        metavar="PATH",
        help="the SGLang tree the server runs (default: the importable sglang, else the launch's python's)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--gpu-mem-gib",
        type=float,
        metavar="N",
        help="GPU memory per GPU in GiB, when NVML cannot tell",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="ignore and do not write the parse cache"
    )
    p.add_argument("launch", nargs=argparse.REMAINDER, help="the launch command, after --")
    p.set_defaults(run=_cmd_preflight)
    return parser


def _cmd_audit(args: argparse.Namespace) -> int:
    tree = locate(args.sglang)
    index = TreeIndex(tree, use_cache=not args.no_cache)
    class_name = args.model_class
    if args.model_path:
        config = read_config(args.model_path)
        arch = architecture(config, f"{args.model_path}/config.json")
        exported = index.exporters_of(arch)
        if not exported:
            names = sorted(index.registry())
            import difflib

            close = difflib.get_close_matches(arch, names, n=3, cutoff=0.6)
            hint = (
                f"closest registered: {', '.join(close)}"
                if close
                else "is the model supported by this SGLang version?"
            )
            raise InputError(
                f"architecture {arch!r} is not registered by any EntryClass in this tree", hint
            )
        class_name = exported[0].qualname
    else:
        find_class(index, class_name)  # fail early, before the consumer scan, on a typo
    result = audit(index, class_name, args.algorithm, args.draft_class)
    for warning in result.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if args.json:
        sys.stdout.write(json.dumps(audit_json(result), indent=2) + "\n")
    else:
        print_audit(result)
    return EXIT_FINDINGS if has_errors(result.findings) else EXIT_OK


def _cmd_preflight(args: argparse.Namespace) -> int:
    words = list(args.launch)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise InputError(
            "no launch command given",
            "eaglebug preflight -- python -m sglang.launch_server --model-path ...",
        )
    sglang = args.sglang
    if sglang is None and importlib.util.find_spec("sglang") is None:
        launch_words = split_words(words)
        program = next((w for w in launch_words if "=" not in w), "")
        sglang = sglang_of(program)
    tree = locate(sglang)
    index = TreeIndex(tree, use_cache=not args.no_cache)
    gpu = None
    if args.gpu_mem_gib is not None:
        if args.gpu_mem_gib <= 0:
            raise InputError(f"--gpu-mem-gib {args.gpu_mem_gib:g}: must be positive")
        gpu = GpuMemory(int(args.gpu_mem_gib * 1024**3), "--gpu-mem-gib")
    else:
        found = smallest_gpu_memory()
        if found is not None:
            gpu = GpuMemory(*found)
    result = preflight(index, words, os.environ, gpu)
    for warning in result.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        print_preflight(result)
    return EXIT_FINDINGS if has_errors(result.findings) else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return EXIT_USAGE
    # A short-lived process that builds many small objects: full collections only cost time.
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    try:
        code: int = args.run(args)
    except InputError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        if exc.hint:
            sys.stderr.write(f"hint: {exc.hint}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # A bug in eaglebug, not in the input: exit 2 rather than 1 ("errors found").
        if os.environ.get("EAGLEBUG_DEBUG"):
            raise
        sys.stderr.write(f"error: internal error: {type(exc).__name__}: {exc}\n")
        sys.stderr.write("hint: rerun with EAGLEBUG_DEBUG=1 for the traceback, and report it\n")
        return EXIT_USAGE
    return code
