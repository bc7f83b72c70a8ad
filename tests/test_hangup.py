"""The hang-up watch: a terminal that closes is noticed with no signal, a pipe is not watched."""

from __future__ import annotations

import os
import pty
import threading
import tty

from eaglebug.tui.hangup import watch_hangup


def test_a_closed_terminal_is_noticed_and_nothing_is_read_from_it() -> None:
    master, slave = pty.openpty()
    tty.setraw(slave)  # as the app's driver sets it: a key is readable without a newline
    gone = threading.Event()
    try:
        thread = watch_hangup(slave, gone.set)
        assert thread is not None
        os.write(master, b"q")  # a key the app has yet to read
        assert not gone.wait(0.2)  # input is not a hang-up
        assert os.read(slave, 1) == b"q"  # and the watch read none of it
        os.close(master)
        master = -1
        assert gone.wait(30)
        thread.join(30)
        assert not thread.is_alive()  # it ends once it has said so
    finally:
        if master >= 0:
            os.close(master)
        os.close(slave)


def test_what_is_not_a_terminal_is_not_watched() -> None:
    read, write = os.pipe()
    try:
        assert watch_hangup(read, lambda: None) is None
    finally:
        os.close(read)
        os.close(write)
