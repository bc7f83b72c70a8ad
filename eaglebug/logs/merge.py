"""Several nodes' logs as one live log, for `eaglebug watch --log node0.log --log node1.log`.

The TUI follows one log by offset (`logfollow`, `logindex`); a multi-node launch writes one per
node. A thread follows each node's log (new complete lines, by offset; a file that does not
exist yet is waited for, one that shrinks was rotated and is read again from its start) and
appends every line, in the order they arrive, to one merged file with its node's tag in front
(`node1  | [... TP8] ...`, the shape of a docker compose service name, which the log reader
strips and the log panel shows). Each node prints its own global ranks, so one analyzer reads
the merged lines; which node printed which rank is kept (`rank_nodes`) so findings can name
their nodes (`checks.lognodes.with_nodes`). The merged file lives in a scratch folder that goes
when the merger stops.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from eaglebug.checks import line_ranks, node_tag

INTERVAL_S = 0.2
_CHUNK = 1 << 20


class _Followed:
    def __init__(self, path: Path, tag: str) -> None:
        self.path = path
        self.tag = tag
        self.offset = 0
        self.partial = b""

    def new_lines(self) -> list[bytes]:
        try:
            size = self.path.stat().st_size
        except OSError:
            return []  # not there yet
        if size < self.offset:  # rotated or truncated: from its start again
            self.offset, self.partial = 0, b""
        if size == self.offset:
            return []
        with self.path.open("rb") as stream:
            stream.seek(self.offset)
            data = stream.read(_CHUNK)
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        return lines


class LogMerger:
    def __init__(self, paths: list[Path], interval_s: float = INTERVAL_S) -> None:
        self.followed = [_Followed(p, node_tag(p, i)) for i, p in enumerate(paths)]
        self.interval_s = interval_s
        self.folder = Path(tempfile.mkdtemp(prefix="eaglebug-nodes-"))
        self.path = self.folder / "nodes.log"
        self.path.touch()
        self._rank_nodes: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def rank_nodes(self) -> dict[str, str]:
        """The node of each rank seen so far (a copy: safe from any thread)."""
        with self._lock:
            return dict(self._rank_nodes)

    @property
    def tags(self) -> dict[str, str]:
        return {f.tag: str(f.path) for f in self.followed}

    def step(self) -> int:
        """Copy what every node's log gained since the last step; how many lines."""
        written = 0
        with self.path.open("ab") as out:
            for followed in self.followed:
                for raw in followed.new_lines():
                    line = raw.decode("utf-8", errors="replace").rstrip("\r")
                    self._note_ranks(line, followed.tag)
                    # A progress bar redraws itself after each \r: each redraw gets the tag.
                    tagged = "\r".join(f"{followed.tag}  | {part}" for part in line.split("\r"))
                    out.write(f"{tagged}\n".encode())
                    written += 1
            out.flush()
        return written

    def _note_ranks(self, line: str, tag: str) -> None:
        for rank in line_ranks(line):
            if rank not in self._rank_nodes:
                with self._lock:
                    self._rank_nodes[rank] = tag

    def start(self) -> None:
        self.step()
        self._thread = threading.Thread(target=self._run, name="log-merger", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.step()
            except OSError:
                continue  # a log that cannot be read this beat is read the next

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        shutil.rmtree(self.folder, ignore_errors=True)
