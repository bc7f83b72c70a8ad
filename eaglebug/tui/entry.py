"""The `eaglebug` command: the TUI modes, and everything else handed to the headless CLI.

eaglebug                       re-attach to the server launched from this folder
eaglebug -- LAUNCH COMMAND     preflight it, launch it when nothing blocks, watch it
eaglebug launch --tui -- ...   the same
eaglebug watch --log FILE      watch a log (and this host's GPUs) of a server started elsewhere
eaglebug demo                  the embedded default: the whole story, no GPU, no network
eaglebug guide                 guided mode over the launch recorded here
eaglebug audit|preflight|fix|undo|launch|stop|status|diagnose ...   headless (see --help)
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks import InputError
from eaglebug.cli import options as cli_options
from eaglebug.cli import parser as cli
from eaglebug.cli.numbers import count, number
from eaglebug.cli.numbers import stall_limits as limits_of

if TYPE_CHECKING:  # the session and the GPU sources load only for a TUI mode, so a headless
    # command (`eaglebug audit ...`) pays nothing for them at start-up
    from eaglebug.gpu.source import GpuSource
    from eaglebug.session.session import SessionConfig

TUI_MODES = {"demo", "watch", "guide"}


def _parser() -> argparse.ArgumentParser:
    p = cli_options.Parser(
        prog="eaglebug",
        description=__doc__,
        formatter_class=cli_options.RawDescriptionFormatter,
    )
    p.add_argument("mode", nargs="?", choices=sorted(TUI_MODES), help=argparse.SUPPRESS)
    p.add_argument(
        "--log",
        action="append",
        metavar="FILE",
        help="watch: the log file to follow; again for each node's log of a multi-node launch",
    )
    p.add_argument("--sglang", metavar="PATH", help="the SGLang tree the server runs")
    p.add_argument("--readonly", action="store_true", help="no patch, undo, relaunch or stop")
    p.add_argument(
        "--interval",
        type=number(above=0, maximum=3600),
        default=1.0,
        metavar="S",
        help="GPU sampling interval (floor 0.25 s)",
    )
    p.add_argument(
        "--simulate-gpus",
        type=count(1, 4096),
        metavar="N",
        help="show N simulated GPUs instead of NVML",
    )
    p.add_argument("--fast", action="store_true", help="demo: a launch takes seconds, not minutes")
    p.add_argument(
        "--scenario",
        choices=("seed", "silent"),
        default="seed",
        help="demo: seed (three crashes to ready, the default) or silent (ready, but the draft's "
        "tokens are all rejected)",
    )
    p.add_argument(
        "--headless",
        action="store_true",
        help="demo: narrate the story on stdout instead of the TUI (the default without a terminal)",
    )
    p.add_argument(
        "--prometheus",
        metavar="URL",
        help="every node's GPUs from this Prometheus (default: $EAGLEBUG_PROMETHEUS)",
    )
    p.add_argument(
        "--gpu-arch",
        metavar="SM",
        help="the GPUs' architecture for the attention checks (sm90, sm100, ...), when NVML cannot tell",
    )
    cli_options.stall_flags(p)  # the same limits `diagnose` takes, for the log.stalled warning
    return p


def _gpu_source(args: argparse.Namespace) -> GpuSource:
    """`eaglebug gpus`' rule: Prometheus (flag or env), simulated, else this host's NVML."""
    from eaglebug.cli.gpus import gpu_source

    return gpu_source(args.prometheus, args.simulate_gpus)


def run_tui(
    config: SessionConfig,
    source: GpuSource,
    interval_s: float,
    open_guide: bool = False,
    launch_when_clear: bool = False,
    stall_limits: dict[str, float] | None = None,
) -> int:
    import dataclasses  # not at the top: a headless command's kept reply never loads it

    from eaglebug.session.session import Session
    from eaglebug.tui.app import build_app

    app = build_app(
        Session(dataclasses.replace(config, checks_apart=True)),  # the screen keeps its core
        source,
        sample_interval_s=interval_s,
        open_guide=open_guide,
        launch_when_clear=launch_when_clear,
        stall_limits=stall_limits,
    )
    app.run()
    return app.return_code or 0


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    split = words.index("--") if "--" in words else len(words)
    options, launch_words = words[:split], words[split + 1 :]
    first = options[0] if options else None
    if first == "launch" and "--tui" in options:
        options = [w for w in options[1:] if w != "--tui"]
    elif first == "--version" or (
        first is not None and first not in TUI_MODES and not first.startswith("-")
    ):
        return cli.main(words)  # the headless commands
    args = _parser().parse_args(options)
    try:
        return _run_mode(args, launch_words)
    except InputError as exc:
        cli_options.write_error(exc)
        return cli_options.EXIT_USAGE


def _run_mode(args: argparse.Namespace, launch_words: list[str]) -> int:
    from eaglebug.checks import parse_gpu_arch
    from eaglebug.server.state import load_state
    from eaglebug.session.session import SessionConfig

    workdir = Path.cwd()
    if args.gpu_arch is not None:
        parse_gpu_arch(args.gpu_arch)  # a bad value stops here, in one line
    if args.mode == "demo":
        if args.headless or not (sys.stdin.isatty() and sys.stdout.isatty()):
            from eaglebug.demo.story import run_story

            return run_story(fast=args.fast or not args.headless, story=args.scenario)
        from eaglebug.demo import DemoScenario
        from eaglebug.session.forkmap import in_background

        # The scratch tree and its git repository are made in a helper while Textual loads
        # here: together they were a fifth of the time to the first paint.
        prepared = in_background(
            functools.partial(DemoScenario.prepare, fast=args.fast, story=args.scenario)
        )
        from eaglebug.tui.demo import run_demo

        return run_demo(
            fast=args.fast,
            interval_s=args.interval,
            readonly=args.readonly,
            stall_limits=limits_of(args),
            story=args.scenario,
            prepared=prepared,
        )
    if args.mode == "watch":
        if not args.log:
            raise InputError("watch needs --log FILE", "eaglebug watch --log /path/to/server.log")
        from eaglebug.cli.diagnose import ensure_text_log

        logs = [Path(log) for log in args.log]
        for log in logs:
            ensure_text_log(log)
        merger = None
        if len(logs) > 1:  # one log per node: followed together, tagged with the node
            from eaglebug.logs.merge import LogMerger

            merger = LogMerger(logs)
            merger.start()
        config = SessionConfig(
            workdir,
            args.sglang,
            [],
            merger.path if merger else logs[0],
            readonly=True,
            gpu_arch=args.gpu_arch,
            rank_nodes=merger.rank_nodes if merger is not None else None,
        )
        try:
            return run_tui(
                config,
                _gpu_source(args),
                args.interval,
                stall_limits=limits_of(args),
            )
        finally:
            if merger is not None:
                merger.stop()
    if not launch_words and load_state(workdir).latest is None:
        raise InputError(
            "no launch recorded in this folder (.eaglebug/state.json)",
            "eaglebug -- LAUNCH COMMAND, eaglebug watch --log FILE, or eaglebug demo",
        )
    if launch_words:  # a model package the launch names but its Python cannot find: say so now
        from eaglebug.server.pyenv import external_for_launch

        external_for_launch(launch_words, os.environ)
    config = SessionConfig(
        workdir, args.sglang, launch_words, None, readonly=args.readonly, gpu_arch=args.gpu_arch
    )
    return run_tui(
        config,
        _gpu_source(args),
        args.interval,
        open_guide=args.mode == "guide",
        launch_when_clear=bool(launch_words),
        stall_limits=limits_of(args),
    )
