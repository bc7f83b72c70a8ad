"""Process trees of the shapes that escape a naive `stop`, for the stop tests.

    python tests/process_shapes.py SHAPE READY_FILE

Each shape builds its tree, writes the pids of every process it made (one per line) to
READY_FILE once the shape is in place (the test waits for that file, never for a time), and
then stays as the shape says:

- setsid-grandchild: a child forks a grandchild and exits; the grandchild, once reparented,
  calls setsid() (a new session and process group) and runs on. The root runs on.
- fork-on-term: a child that, on SIGTERM, forks a new process (which ignores SIGTERM) and exits.
- orphans: two children that ignore SIGHUP; the root exits, leaving them.
- stubborn: a child that ignores SIGTERM; the root runs on.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def forever() -> None:
    while True:
        signal.pause()


def report(ready: Path, pids: list[int]) -> None:
    tmp = ready.with_suffix(".tmp")
    tmp.write_text("".join(f"{pid}\n" for pid in pids))
    os.replace(tmp, ready)


def wait_for(path: Path) -> list[int]:
    while not path.exists():
        time.sleep(0.01)
    return [int(line) for line in path.read_text().split()]


def setsid_grandchild(ready: Path) -> None:
    handoff = ready.with_name(ready.name + ".grandchild")
    if os.fork() == 0:  # the child
        parent = os.getpid()
        if os.fork() == 0:  # the grandchild
            while os.getppid() == parent:  # until the child has exited and we are reparented
                time.sleep(0.01)
            os.setsid()
            report(handoff, [os.getpid()])
            forever()
        os._exit(0)
    os.wait()
    report(ready, [os.getpid(), *wait_for(handoff)])
    forever()


def fork_on_term(ready: Path) -> None:
    child = os.fork()
    if child == 0:

        def on_term(signum: int, frame: object) -> None:
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                report(ready.with_name(ready.name + ".forked"), [os.getpid()])
                forever()
            os._exit(0)

        signal.signal(signal.SIGTERM, on_term)
        forever()
    report(ready, [os.getpid(), child])
    forever()


def orphans(ready: Path) -> None:
    children = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            forever()
        children.append(pid)
    report(ready, children)
    os._exit(0)


def stubborn(ready: Path) -> None:
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        forever()
    report(ready, [os.getpid(), child])
    forever()


SHAPES = {
    "setsid-grandchild": setsid_grandchild,
    "fork-on-term": fork_on_term,
    "orphans": orphans,
    "stubborn": stubborn,
}

if __name__ == "__main__":
    SHAPES[sys.argv[1]](Path(sys.argv[2]))
