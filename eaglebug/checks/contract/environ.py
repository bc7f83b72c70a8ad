"""The shell's environment as a check takes it: without the variables that name a session.

Why: a preflight's answer depends on the environment (SGLang reads its `SGLANG_*` variables,
the Hugging Face cache's, any other it asks `os.getenv` for), so the CLI keeps a reply for
the environment it was made in (`cli/replies.py`). But a new SSH login or tmux pane differs
from the last in variables no launch reads: which connection, pane, terminal window, agent
socket. Keyed by them, every new pane paid a whole preflight again (1.2-1.5 s) for the same
answer.

`preflight` (`orchestrator.py`) leaves these variables out of the environment it reads, and
the CLI keys a reply by what is left: a verdict cannot depend on them. Evaluated SGLang code
that asks for one gets an unknown, as it does for any variable eaglebug does not know
(`pyeval/brains.py`), and a verdict resting on it says so, so a reply kept without them is
still the answer for every session. The names are the terminals' and shells' (OpenSSH, tmux,
screen, the common terminal emulators, bash), not SGLang's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SESSION_VARIABLES = frozenset(
    {
        # OpenSSH: the connection, its terminal, the forwarded agent
        "SSH_CLIENT",
        "SSH_CONNECTION",
        "SSH_TTY",
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "GPG_TTY",  # set to `$(tty)` by many shells' rc files
        # tmux and screen: the server, the pane, the window
        "TMUX",
        "TMUX_PANE",
        "STY",
        "WINDOW",
        # terminal emulators: the window or tab
        "WINDOWID",
        "TERM_SESSION_ID",
        "ITERM_SESSION_ID",
        "KITTY_WINDOW_ID",
        "KITTY_PID",
        "WEZTERM_PANE",
        "ALACRITTY_WINDOW_ID",
        "VSCODE_GIT_IPC_HANDLE",
        # the login session, and the shell's own bookkeeping
        "XDG_SESSION_ID",
        "OLDPWD",
        "SHLVL",
        "_",
    }
)


def launch_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the variables that name the session (`SESSION_VARIABLES`)."""
    return {name: value for name, value in environ.items() if name not in SESSION_VARIABLES}


_UUID = re.compile(r"GPU-[0-9A-Fa-f-]+")


def visible_devices(value: str) -> tuple[str, ...]:
    """The entries of a `CUDA_VISIBLE_DEVICES` value that can be valid, up to the first that
    cannot (CUDA stops there, the CUDA Programming Guide's "CUDA Environment Variables"):
    indices, UUIDs (`GPU-...`, a unique prefix will do), MIG instances (`MIG-...`); empty, none.
    A repeated entry is counted once: the count stays an upper bound whatever CUDA makes of it.
    Read by the launch's reading (`launch/devices.py`) and by the log's (`logs/results.py`)."""
    entries: list[str] = []
    for entry in value.split(","):
        entry = entry.strip()
        number = entry.isascii() and entry.isdigit()  # `isdigit` alone takes `²`
        if not (number or _UUID.fullmatch(entry) or entry.startswith("MIG-")):
            break
        if entry not in entries:
            entries.append(entry)
    return tuple(entries)
