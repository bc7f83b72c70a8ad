"""Who a GPU process is: its name and command line through psutil, and its SGLang role.

SGLang names its workers with `setproctitle`: `sglang::scheduler_TP3` (one per rank, with
`_DP0`, `_PP1`, `_EP3` parts when those are in use), `sglang::detokenizer`,
`sglang::data_parallel_controller`, `sglang::tokenizer_worker:<pid>`; diffusion workers use
`sgl_diffusion::`. The process that started them keeps its command line
(`python -m sglang.launch_server ...` or `sglang serve ...`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

_TITLE = re.compile(r"\b(?:sglang|sgl_diffusion)::([A-Za-z0-9_]+)")
# (pattern over the joined command line, role); the first match wins. Named, because a
# process is told apart from its command line alone, often with no SGLang tree on the host.
_COMMANDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bsglang_router[./]launch_(?:server|router)\b"), "router"),
    (re.compile(r"\bsglang[./]launch_server\b"), "launcher"),
    (re.compile(r"\bsglang[./]bench_\w+"), "bench"),
)


@dataclass(frozen=True)
class ProcessInfo:
    """What psutil could read about one pid; `hidden` when it was not allowed to read it all."""

    name: str | None
    cmdline: tuple[str, ...] | None
    role: str | None
    hidden: bool


def sglang_role(name: str | None, cmdline: Sequence[str] | None) -> str | None:
    """The SGLang role of a process from its title or command line; None if not SGLang's.

    >>> sglang_role("sglang::schedul", ["sglang::scheduler_DP0_TP3"])
    'scheduler_DP0_TP3'
    >>> sglang_role("python3", ["python3", "-m", "sglang.launch_server", "--tp", "8"])
    'launcher'
    """
    words = list(cmdline or ())
    for text in (*words, name or ""):
        match = _TITLE.search(text)
        if match:
            return match.group(1)
    if len(words) >= 2 and os.path.basename(words[0]) == "sglang" and words[1] == "serve":
        return "launcher"
    joined = " ".join(words)
    for pattern, role in _COMMANDS:
        if pattern.search(joined):
            return role
    return None


def inspect_process(pid: int) -> ProcessInfo | None:
    """Name, command line and role of `pid`; None when the process no longer exists.

    A process of another user or container whose details psutil may not read is `hidden`:
    whatever could be read is kept, the rest is None.
    """
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:  # includes ZombieProcess: it holds no GPU memory any more
        return None
    except psutil.AccessDenied:
        return ProcessInfo(None, None, None, hidden=True)
    hidden = False
    name: str | None = None
    cmdline: tuple[str, ...] | None = None
    try:
        with proc.oneshot():
            try:
                name = str(proc.name())
            except psutil.AccessDenied:
                hidden = True
            try:
                cmdline = _trim(proc.cmdline())
            except psutil.AccessDenied:
                hidden = True
    except psutil.NoSuchProcess:
        return None
    return ProcessInfo(name, cmdline, sglang_role(name, cmdline), hidden)


def _trim(argv: Sequence[str]) -> tuple[str, ...]:
    """The command line without the empty padding `setproctitle` leaves after a title."""
    words = [str(word) for word in argv]
    while words and not words[-1].strip():
        words.pop()
    if len(words) == 1:
        words[0] = words[0].rstrip()
    return tuple(words)
