"""The commands over the launches made from this folder: `launch`, `stop` and `status`.

Why apart from `commands.py`: they read no SGLang tree; they drive `eaglebug.server`'s
launcher and its state file (`.eaglebug/state.json`), and each prints one launch per line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eaglebug.checks import InputError
from eaglebug.cli.commands import launch_words
from eaglebug.cli.output import safe, write_json

EXIT_OK, EXIT_FINDINGS = 0, 1


def launch_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict  # here: a warm `audit` that loads this module never needs it

    from eaglebug.server.launcher import Server

    words = launch_words(args)
    if not words:
        raise InputError(
            "no launch command given", "eaglebug launch -- python -m sglang.launch_server ..."
        )
    from eaglebug.checks import env_and_argv

    env, argv = env_and_argv(words)
    record = Server(Path.cwd()).launch(argv, env)
    if args.json:
        write_json(asdict(record))
    else:
        sys.stdout.write(
            f"launch {record.number}: pid {record.pid}, log {record.log}\n"
            "it keeps running when this shell or SSH session ends; `eaglebug stop` stops it\n"
        )
    return EXIT_OK


def stop_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from eaglebug.server.launcher import Server

    server = Server(Path.cwd())
    record = server.attached()
    if record is None:
        raise InputError(
            "no running server launched from this folder", "`eaglebug status` lists past launches"
        )
    result = server.stop(record, grace_s=args.grace)
    if args.json:
        write_json({"launch": record.number, **asdict(result)})
    else:
        sys.stdout.write(
            f"launch {record.number} stopped: {len(result.terminated)} exited on SIGTERM, "
            f"{len(result.killed)} needed SIGKILL\n"
        )
        if result.survivors:
            sys.stdout.write(f"still running: {', '.join(map(str, result.survivors))}\n")
    return EXIT_FINDINGS if result.survivors else EXIT_OK


def status_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from eaglebug.server.launcher import Server

    server = Server(Path.cwd())
    state = server.state()
    rows = []
    for record in state.launches:
        left = server.processes(record)
        rows.append(
            {
                **asdict(record),
                "alive": bool(left),
                "root_alive": server.root_alive(record),
                "processes": left,
            }
        )
    if args.json:
        write_json(
            {
                "launches": rows,
                "pending_env": state.pending_env,
                "pending_flags": state.pending_flags,
            }
        )
        return EXIT_OK
    if not rows:
        sys.stdout.write("no launches recorded in this folder (.eaglebug/state.json)\n")
        return EXIT_OK
    for row in rows:
        if row["root_alive"]:
            alive = "running"
        elif row["alive"]:
            count = len(row["processes"])
            alive = (
                f"{row['outcome']}, but {count} of its processes still run "
                "(`eaglebug stop` stops them)"
            )
        elif row["outcome"] in {"running", "ready"}:
            alive = "exited"  # it ended while no eaglebug was watching
        else:
            alive = row["outcome"]
        ready = (
            f", ready after {row['ready_after_s']:.0f} s"
            if row["ready_after_s"] is not None
            else ""
        )
        sys.stdout.write(  # the log's path is the state file's text: written safe
            f"launch {row['number']}: {alive}{ready}, pid {row['pid']}, log {safe(row['log'])}\n"
        )
    return EXIT_OK
