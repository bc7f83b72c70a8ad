"""The headless commands and their options, as argparse declares them.

Each command's options are built by its own function, and `build_parser(only=...)` builds one
command: a warm audit answers in less time than argparse takes to build every subcommand's
options (its help formatters and gettext lookups). `parser.py` runs what this parses.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eaglebug import __version__
from eaglebug.checks import InputError, one_line
from eaglebug.cli import commands, launches
from eaglebug.cli.numbers import count, number

EXIT_USAGE = 2
FORMATS = ("text", "md", "json", "html", "sarif")  # matrix's


if TYPE_CHECKING:
    from typing import TypeAlias

    Subparsers: TypeAlias = "argparse._SubParsersAction[Parser]"


def _columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` gives it ($COLUMNS, else the
    terminal of stdout, else 80), without importing `shutil`: argparse's formatter imports it
    (and `bz2`, `lzma`, `fnmatch` with it) for every parser built, ~5 ms of a warm reply."""
    columns = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class Formatter(argparse.HelpFormatter):
    """argparse's help, sized to the terminal by `_columns`."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(prog, indent_increment, max_help_position, width or _columns() - 2)


class RawDescriptionFormatter(Formatter, argparse.RawDescriptionHelpFormatter):
    """The same, with the description printed as written."""


class Parser(argparse.ArgumentParser):
    """argparse, but its usage errors follow the `error:` / `hint:` convention, exit 2, and
    its help is sized without `shutil` (`Formatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        write_error(InputError(message, f"run `{self.prog} --help` for usage"))
        raise SystemExit(EXIT_USAGE)


def write_error(exc: InputError) -> None:
    """The `error:` line and the `hint:` line, each one line whatever the message holds."""
    sys.stderr.write(f"error: {one_line(exc.message)}\n")
    if exc.hint:
        sys.stderr.write(f"hint: {one_line(exc.hint)}\n")


def _tree_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sglang",
        metavar="PATH",
        help="SGLang repo root, its python/ folder, or the sglang package "
        "(default: the importable sglang, else the one the launch's python imports)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the parse cache")
    p.add_argument(
        "--external-models",
        metavar="PATH",
        help="an out-of-tree model package (its folder, or its name on the Python path) that "
        "SGLANG_EXTERNAL_MODEL_PACKAGE would load; its classes override built-in ones",
    )


def _format_flag(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    p.add_argument(
        "--format",
        choices=formats,
        default="text",
        help="output format (default text; --json is --format json; sarif: SARIF 2.1.0 for "
        "code-scanning tools)",
    )


def _class_flags(p: argparse.ArgumentParser, required: bool) -> None:
    which = p.add_mutually_exclusive_group(required=required)
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
        help="EAGLE3 (default), EAGLE, NEXTN, STANDALONE, or any member of the tree's SpeculativeAlgorithm",
    )
    p.add_argument(
        "--draft-class", metavar="NAME", help="also audit this draft model class in the draft role"
    )


def stall_flags(p: argparse.ArgumentParser) -> None:
    """How long a launch may stay silent in one phase before it counts as stalled."""
    p.add_argument(
        "--stall-loading-min",
        type=number(above=0, maximum=24 * 60),
        metavar="MIN",
        help="minutes without a new line while loading weights (default 10)",
    )
    p.add_argument(
        "--stall-graph-min",
        type=number(above=0, maximum=24 * 60),
        metavar="MIN",
        help="minutes without a new line while capturing CUDA graphs (default 5)",
    )


def _audit_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "audit",
        help="which attributes the speculative workers need that a model class lacks",
        description="Read an SGLang source tree (never importing it), find every place the "
        "runtime touches a runner's model object, and report what the model class lacks.",
    )
    _tree_flag(p)
    _format_flag(p, ("text", "json", "sarif"))
    _class_flags(p, required=True)
    p.set_defaults(run=commands.audit_command)


def _preflight_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "preflight",
        help="every launch blocker of one launch command, before the first launch",
        description="Parse the exact launch command (flags as the SGLang tree defines them), read "
        "the target and draft configs, audit both classes and check the configs against each "
        "other and the GPUs.",
        usage="eaglebug preflight [--sglang PATH] [--json | --format FMT] [--gpu-mem-gib N] "
        "[--gpu-free-gib N] [--gpu-arch SM] -- LAUNCH COMMAND...",
    )
    _tree_flag(p)
    _format_flag(p, ("text", "json", "sarif"))
    p.add_argument(
        "--gpu-mem-gib",
        type=number(above=0, maximum=1e6),
        metavar="N",
        help="memory per GPU in GiB, when NVML cannot tell",
    )
    p.add_argument(
        "--gpu-free-gib",
        type=number(above=0, maximum=1e6),
        metavar="N",
        help="free memory per GPU before the load in GiB (default: NVML's least free now)",
    )
    p.add_argument(
        "--gpu-arch",
        metavar="SM",
        help="the GPUs' architecture (sm90, sm100, sm120, or 9.0), when NVML cannot tell",
    )
    p.add_argument("launch", nargs=argparse.REMAINDER, help="the launch command, after --")
    p.set_defaults(run=commands.preflight_command)


def _fix_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "fix",
        help="generate the missing delegation methods; --apply writes and commits them",
        description="Select classes like `audit` (--model-class/--model-path, --draft-class) or "
        "like `preflight` (-- LAUNCH COMMAND). Without --apply, print each class's patch as a "
        "diff and exit 1 if there is something to fix. With --apply, write it atomically, verify "
        "it, and make one git commit per class in the repository that holds the file.",
        usage="eaglebug fix [--sglang PATH] (--model-class NAME | --model-path DIR | -- LAUNCH...) "
        "[--algorithm ALGO] [--draft-class NAME] [--apply] [--no-commit] [--json]",
    )
    _tree_flag(p)
    _class_flags(p, required=False)
    p.add_argument("--apply", action="store_true", help="write the patches and commit each")
    p.add_argument(
        "--no-commit", action="store_true", help="with --apply: write without a git commit"
    )
    p.add_argument(
        "launch", nargs=argparse.REMAINDER, help="a launch command after --, instead of a class"
    )
    p.set_defaults(run=commands.fix_command)


def _matrix_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "matrix",
        help="every registered class x every speculative algorithm x role of a release: "
        "supported, missing what, or not applicable",
        description="Audit every class the tree's EntryClass registry exports, under every "
        "speculative algorithm the tree defines, as target and (where the class can be one) as "
        "draft. With --compare NEW: what changed from this tree to NEW (exit 1 on a class that "
        "lost support).",
    )
    p.add_argument(
        "--sglang",
        metavar="TREE",
        required=True,
        help="SGLang repo root, its python/ folder, or the sglang package (the old tree with "
        "--compare)",
    )
    p.add_argument(
        "--compare", metavar="NEW", help="another tree (a newer release, a pull request's checkout)"
    )
    _format_flag(p, FORMATS)
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the parse cache")
    p.set_defaults(run=_matrix)


def _hook_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "hook",
        help="the pre-commit hook: audit the model classes defined in FILES, every algorithm",
        description="Audit the registered classes defined in the given files (pre-commit passes "
        "the staged ones) under every speculative algorithm and role. Exit 1 where a class lacks "
        "a method an inner object provides (the one-line reasons and the `eaglebug fix` "
        "command); a method nothing provides is a note unless --strict.",
    )
    p.add_argument("--sglang", metavar="TREE", default=".", help="the SGLang checkout (default: .)")
    p.add_argument(
        "--algorithm",
        action="append",
        metavar="ALGO",
        help="only this algorithm (again for more; default: every one the tree defines)",
    )
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the parse cache")
    p.add_argument(
        "--strict",
        action="store_true",
        help="also fail where no inner object provides the missing method (by default a note: "
        "the class does not implement that algorithm)",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="the files to look at")
    p.set_defaults(run=_hook)


def _launch_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "launch",
        help="start the server detached (survives this shell), output to a new log per launch",
        usage="eaglebug launch [--json] -- LAUNCH COMMAND...",
    )
    p.add_argument("--json", action="store_true", help="print the launch record as JSON")
    p.add_argument("launch", nargs=argparse.REMAINDER, help="the launch command, after --")
    p.set_defaults(run=launches.launch_command)


def _stop_parser(sub: Subparsers) -> None:
    p = sub.add_parser("stop", help="stop the server launched here: the whole process tree")
    p.add_argument(
        "--grace",
        type=number(minimum=0, maximum=86400),
        default=10.0,
        metavar="S",
        help="seconds from SIGTERM to SIGKILL",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=launches.stop_command)


def _status_parser(sub: Subparsers) -> None:
    p = sub.add_parser("status", help="launches recorded in this folder and whether they run")
    p.add_argument("--json", action="store_true", help="print the launches as JSON")
    p.set_defaults(run=launches.status_command)


def _diagnose_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "diagnose",
        help="read a server log: the launch phase, loading progress and failures",
        description="Phase, progress and failure findings (one per failure, whatever the "
        "number of ranks printing it) from an SGLang server log.",
    )
    p.add_argument(
        "--log",
        required=True,
        action="append",
        metavar="FILE",
        help="the server's log file; again for each node's log of a multi-node launch",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--sglang",
        metavar="PATH",
        help="the SGLang tree the launch ran: its memory arithmetic's prediction beside the log's",
    )
    stall_flags(p)
    p.add_argument(
        "--min-accept",
        type=number(above=0, maximum=64),
        metavar="LEN",
        help="acceptance length below which speculative decoding counts as not working "
        "(default 1.2)",
    )
    p.set_defaults(run=_diagnose)


def _gpus_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "gpus",
        help="one look at the GPUs: this host's (NVML) or every node's (Prometheus)",
        description="The GPUs a launch runs on, headless: NVML on this host, every node's through "
        "Prometheus (DCGM exporter or nvitop-exporter series), or simulated ones.",
    )
    p.add_argument(
        "--prometheus",
        metavar="URL",
        help="Prometheus that scrapes the nodes' GPU exporters (default: $EAGLEBUG_PROMETHEUS)",
    )
    p.add_argument(
        "--simulate-gpus", type=count(1, 4096), metavar="N", help="N simulated GPUs instead"
    )
    p.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    p.set_defaults(run=_gpus)


def _probe_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "probe",
        help="a few fixed prompts to a running server: its acceptance length and speed",
        description="Is speculative decoding working? Sends a few short fixed prompts to the "
        "server (its native /generate), reads each answer's spec_accept_length and "
        "spec_verify_ct, and the speculative settings in force from /server_info.",
    )
    p.add_argument("--url", metavar="URL", help="the server (default: the launch recorded here)")
    p.add_argument(
        "--requests", type=count(1, 3), default=3, metavar="N", help="prompts to send (1-3)"
    )
    p.add_argument(
        "--max-new-tokens", type=count(1, 2048), default=64, metavar="N", help="per prompt"
    )
    p.add_argument(
        "--timeout",
        type=number(above=0, maximum=600),
        default=30.0,
        metavar="S",
        help="seconds for the whole probe, every request and answer (default 30)",
    )
    p.add_argument(
        "--min-accept",
        type=number(above=0, maximum=64),
        metavar="LEN",
        help="acceptance length below which it counts as not working (default 1.2)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=_probe)


def _undo_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "undo", help="revert eaglebug's newest fix commit (git revert, never a reset)"
    )
    p.add_argument(
        "--repo", metavar="PATH", default=".", help="the repository (default: the current folder)"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=commands.undo_command)


COMMANDS: dict[str, Callable[[Subparsers], None]] = {
    "audit": _audit_parser,
    "preflight": _preflight_parser,
    "fix": _fix_parser,
    "matrix": _matrix_parser,
    "hook": _hook_parser,
    "launch": _launch_parser,
    "stop": _stop_parser,
    "status": _status_parser,
    "diagnose": _diagnose_parser,
    "gpus": _gpus_parser,
    "probe": _probe_parser,
    "undo": _undo_parser,
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with `only` the root and that one command: building every
    subcommand's options costs more than a warm audit's own work (argparse, gettext)."""
    parser = Parser(
        prog="eaglebug",
        description="Find, fix and watch what breaks when a model meets SGLang speculative decoding.",
    )
    parser.add_argument("--version", action="version", version=f"eaglebug {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, add in COMMANDS.items():
        if only is None or name == only:
            add(sub)
    return parser


def _matrix(args: argparse.Namespace) -> int:
    from eaglebug.cli.matrix import matrix_command

    return matrix_command(args)


def _hook(args: argparse.Namespace) -> int:
    from eaglebug.cli.matrix import hook_command

    return hook_command(args)


def _probe(args: argparse.Namespace) -> int:
    from eaglebug.cli.probe import probe_command  # HTTP only: no engine, libcst or git

    return probe_command(args)


def _gpus(args: argparse.Namespace) -> int:
    from eaglebug.cli.gpus import gpus_command  # no engine, libcst or git for a GPU look

    return gpus_command(args)


def _diagnose(args: argparse.Namespace) -> int:
    from eaglebug.cli.diagnose import diagnose_command  # no libcst or git for a log read

    return diagnose_command(args)
