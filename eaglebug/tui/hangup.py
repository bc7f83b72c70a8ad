"""Notice a terminal that is gone, even when no SIGHUP says so.

A dropped SSH connection or a closed pane normally sends SIGHUP, whose default action ends
the app. It does not always arrive: a process started under `nohup` (or by anything else
that ignores SIGHUP) inherits the ignoring, and a process that is not in the terminal's
foreground group gets none. Textual's input thread then reads end-of-file in a loop at 100 %
of a core, for ever, on the GPU box (Textualize/textual#6690, open). A hung-up terminal
reports POLLHUP on its file descriptor, and `poll` reports that whatever events were asked
for; a thread blocked in `poll` with no events asked reads nothing Textual should read and
costs nothing until the terminal is gone.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable

GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


def watch_hangup(fd: int, on_hangup: Callable[[], None]) -> threading.Thread | None:
    """Call `on_hangup` once, on a daemon thread, when the terminal on `fd` hangs up; None
    (nothing watched) when `fd` is not a terminal: a pipe hangs up when its writer ends,
    which is not a terminal going away."""
    if not os.isatty(fd):
        return None
    poller = select.poll()
    poller.register(fd, 0)  # no events asked: only hang-up and errors wake it

    def wait() -> None:
        while True:  # poll retries by itself on a signal (PEP 475)
            if any(mask & GONE for _fd, mask in poller.poll()):
                on_hangup()
                return

    thread = threading.Thread(target=wait, name="terminal-hangup", daemon=True)
    thread.start()
    return thread
