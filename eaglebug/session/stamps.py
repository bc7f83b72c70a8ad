"""What a preflight's answer depends on besides the SGLang tree: the question, and the model
folders it read, stamped.

Why here: a whole preflight answer is kept, by the headless CLI (`cli/replies.py`) and by the
TUI's checks' worker (`keptchecks.py`), under the question it answered (`question`) and
reused only while the folders it read are as they were (an edited `config.json` is read
afresh). Both key and check it the same way, from here; this module imports nothing but `os`
at first, so a kept CLI reply is served without loading the engine.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eaglebug.checks import ModelSource


# A launch through these reads files besides its words (a compose file, a manifest).
_FILE_READERS = ("compose", "--env-file")
_KUBECTL = ("kubectl", "oc", "microk8s", "k3s")


def question(
    words: Sequence[str],
    environ: Mapping[str, str],
    gpu: Sequence[object] | None,
    capability: object,
    calibration: object,
) -> list[object]:
    """A preflight's question besides the tree (and the model package, keyed by its files):
    the launch, the folder its relative paths start from, the environment as preflight reads
    it (without the variables that name a shell session: a new pane asks the same question),
    the files the launch names that say more of it (a compose file, a manifest, an env
    file: by their content), the GPUs (bytes, free bytes, count and where each figure came
    from), their compute capability and the last launch's measured memory (as JSON)."""
    from eaglebug.checks import launch_environ

    started = launch_environ(environ)
    files: list[str] = []
    if any(  # else none: skip the import
        os.path.basename(w) in _KUBECTL or any(k in w for k in _FILE_READERS) for w in words
    ):
        from eaglebug.checks import launch_files

        files = launch_files(words, started)
    return [
        list(words),
        os.getcwd(),
        sorted(started.items()),
        [(path, file_digest(path)) for path in files],
        list(gpu) if gpu is not None else None,
        capability,
        calibration,
    ]


def file_digest(path: str) -> str | None:
    """A small file's content as a digest (a compose file, an env file: a few KiB), read as
    the launch's reading reads it (`read_named`: a FIFO is never waited on); None where that
    reading refuses it (the answer is then an input error, never kept)."""
    import hashlib  # only where a launch names such a file

    from eaglebug.checks import InputError, read_named

    try:
        data = read_named(Path(path), "a file the launch names")
    except InputError:
        return None
    return hashlib.blake2b(data, digest_size=16).hexdigest()


FolderStamp = tuple[str, int, tuple[tuple[str, int, int], ...]]  # path, mtime (-1: absent), entries


def folder_stamp(path: Path | str) -> FolderStamp:
    """A folder's state: its mtime and each direct entry's size and mtime; a file's, its own
    size and mtime (absent: -1, either)."""
    try:
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            return (str(path), st.st_mtime_ns, (("", st.st_size, st.st_mtime_ns),))
        mtime = st.st_mtime_ns
        with os.scandir(path) as it:
            entries = sorted((e.name, *_size_mtime(e)) for e in it)
    except OSError:
        return (str(path), -1, ())
    return (str(path), mtime, tuple(entries))


def _size_mtime(entry: os.DirEntry[str]) -> tuple[int, int]:
    try:
        st = entry.stat()
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def unchanged(stamps: tuple[FolderStamp, ...]) -> bool:
    """Every folder as its stamp says."""
    return all(folder_stamp(stamp[0]) == stamp for stamp in stamps)


def model_folders(
    *sources: ModelSource | None,
    roots: Sequence[str | Path] = (),
    chosen_by: Sequence[str | Path] = (),
) -> tuple[FolderStamp, ...] | None:
    """The model folders a preflight read, to check before its answer is reused; None when a
    model came from (or was missed in) the Hugging Face cache, whose layout is not stamped.
    `roots`: where the launch's Python looks for transformers, whose config classes give what
    a config.json leaves out (`classdefaults.py`): its folder in each (installed, upgraded or
    removed) and those of the classes read are stamped too; `chosen_by`: the files (and
    folders) that chose the launch's Python (pyenv's version files, its `versions/`), another
    choice another answer."""
    stamps = [folder_stamp(Path(root) / "transformers") for root in roots]
    stamps += [folder_stamp(folder) for folder in chosen_by]
    read = {w.rpartition(":")[0] for s in sources if s is not None for w in s.class_defaults_from}
    stamps += [folder_stamp(Path(path).parent) for path in sorted(read)]
    for source in sources:
        if source is None:
            continue
        if source.path is not None and source.how == "local folder":
            stamps.append(folder_stamp(source.path))
        elif source.how == "no such local folder":
            stamps.append(folder_stamp(Path(source.given).expanduser()))
        else:
            return None
    return tuple(stamps)
