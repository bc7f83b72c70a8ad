"""Whole replies of the headless CLI, kept with the tree's answers (`eaglebug/checks/source/answers.py`).

Why: a warm `audit --json` or `preflight --json` should cost about a stat of the tree. The
engine's own answers already make it cheap to recompute, but loading the engine and the
renderers is most of a warm run; a reply kept here is printed without importing either.

A reply is kept under a key made of everything the command's answer depends on besides the
tree (the tree itself is the answers' fingerprint): the tree's folder and version, the
arguments, and for preflight the environment (without the variables that name a shell
session: a new pane gets the kept reply), the GPU memory and the model folders it read.
Folders are checked again before a reply is reused (their own mtime and each entry's size and
mtime), so an edited `config.json` is read afresh. Every format is kept: JSON and SARIF as
they are; the text report as Rich rendered it, which depends on the terminal it is printed
on, so the key holds that terminal too (`terminal`). The text report is what a person types
the command for: kept, a warm one costs what a warm `--json` does, not a rerun of the
memory stage.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from typing import NamedTuple

from eaglebug.checks import NO_ANSWER as MISSING
from eaglebug.checks import Answers
from eaglebug.session.stamps import FolderStamp, unchanged


class Reply(NamedTuple):
    warnings: tuple[str, ...]  # said on stderr, `warning: ` first, before the answer
    stdout: str
    code: int
    folders: tuple[FolderStamp, ...] = ()  # what the answer read outside the tree


_PREFIX = "reply:"


def key(command: str, parts: Iterable[object]) -> str:
    return f"{_PREFIX}{command}:{json.dumps(list(parts), default=str)}"


def terminal() -> list[object]:
    """What Rich reads, to render the text report, that is not in the environment (which a
    text reply's key holds whole): whether stdout is a terminal and its encoding, each
    standard stream's terminal size, the platform. Read without importing Rich."""
    stdout = sys.stdout
    try:
        tty = stdout.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or not a file
        tty = None
    facts: list[object] = [sys.platform, tty, getattr(stdout, "encoding", None)]
    for fd in (0, 1, 2):
        try:
            facts.append(tuple(os.get_terminal_size(fd)))
        except (OSError, ValueError):
            facts.append(None)
    return facts


def kept(answers: Answers, reply_key: str) -> Reply | None:
    """The reply kept under this key, if the folders it read are as they were."""
    value = answers.get(reply_key, [], Reply)
    if value is MISSING or not isinstance(value, Reply):
        return None
    if not unchanged(value.folders):
        return None
    return value


# Replies kept per command and tree: a preflight's key holds the environment (all but the
# session's variables, `contract/environ.py`), which may differ on every run, so the oldest
# are let go.
_KEPT = 8


def keep(answers: Answers, reply_key: str, reply: Reply) -> None:
    answers.put(reply_key, reply, [], Reply)
    command = reply_key[: reply_key.index(":", len(_PREFIX)) + 1]  # "reply:preflight:"
    answers.drop_oldest(command, _KEPT)
    answers.save()


def say(reply: Reply) -> int:
    """Print a reply as the command that made it printed it."""
    for warning in reply.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    sys.stdout.write(reply.stdout)
    return reply.code
