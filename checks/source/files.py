"""The `.py` files of one SGLang tree: walked once, looked at as bytes, parsed on demand.

Speed comes from doing little: every runtime file is read once for the byte-level look
(`filefacts.prefilter`), and only the files an audit needs are parsed. What is learnt is kept
per file in the parse cache (`cache.py`), so a warm run only stats the tree. The walk happens
when something first needs the files: a run answered from `answers.py` never walks at all.

Work over many files (the byte-level look, parsing the consumer candidates, the flag search)
goes through a `Mapper`. The default maps in this process; the CLI hands in one that splits
the work with a helper process (`eaglebug/session/forkmap.py`), since `checks/` starts no process.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from eaglebug.checks.reach.consumers import Entry
from eaglebug.checks.source import cache
from eaglebug.checks.source.classfacts import ModuleFacts
from eaglebug.checks.source.facts import (
    RUNTIME,
    FileEntry,
    Parsed,
    analysed,
    learn,
    module_name,
    parse,
    prefilter,
)
from eaglebug.checks.source.fingerprint import Fingerprint
from eaglebug.checks.source.tree import SglangTree
from eaglebug.checks.source.walk import Listing, Stamp, list_tree

T = TypeVar("T")
R = TypeVar("R")

# Parsed trees kept in memory at once, counted by their source's size (a tree is ~10x that):
# enough that a file the audit comes back to (a worker, the audited class, a flag's file) is
# not parsed twice.
_AST_CACHE_BYTES = 6_000_000


class Mapper(Protocol):
    """Runs `job` over `items` and returns the results in order; `weights` (one per item, e.g.
    file sizes) say how to split the work fairly. Results must pickle if the work is split
    across processes."""

    def __call__(
        self, job: Callable[[T], R], items: Sequence[T], weights: Sequence[int]
    ) -> list[R]: ...


class InProcess:
    """The default `Mapper`: everything here, in order. `progress(done, total)`, when given,
    hears of each item done (a front end shows how far a cold run is: files done of total)."""

    def __init__(self, progress: Callable[[int, int], None] | None = None) -> None:
        self.progress = progress

    def __call__(
        self, job: Callable[[T], R], items: Sequence[T], weights: Sequence[int]
    ) -> list[R]:
        if self.progress is None:
            return [job(item) for item in items]
        done: list[R] = []
        for item in items:
            done.append(job(item))
            self.progress(len(done), len(items))
        return done


in_process = InProcess()


class SourceFiles:
    """File entries, module names and parsed trees of one tree, with the warnings they gave."""

    def __init__(
        self,
        tree: SglangTree,
        use_cache: bool,
        warnings: list[str],
        mapper: Mapper = in_process,
        listing: Callable[[], Listing] | None = None,
        parsed: Callable[[str], None] | None = None,
    ) -> None:
        """`listing`, when given, makes the walk (`walk.list_tree`) for this tree; `parsed`
        hears of each file parsed here (a front end counts them while a cold run parses)."""
        self.tree = tree
        self.listing = listing
        self.parsed = parsed
        self.use_cache = use_cache
        self.warnings = warnings
        self.mapper = mapper
        self._entries: dict[str, FileEntry] | None = None
        self._module_files: dict[str, str] = {}  # module name -> relative file
        self.fingerprint: Fingerprint | None = None
        self.walk_warnings: list[str] = []  # what the walk itself said (a FIFO, a folder)
        self.walk_said = False  # set when the answers said the walk's warnings already
        self.dirty = False
        self._sources: dict[str, bytes] = {}
        self._asts: OrderedDict[str, tuple[Parsed, int]] = OrderedDict()  # with its bytes
        self._ast_bytes = 0

    @property
    def entries(self) -> dict[str, FileEntry]:
        """Every `.py` file (relative path -> entry), in walk order; walked on first use."""
        if self._entries is None:
            self._entries = self._scan()
        return self._entries

    def walk(self) -> Fingerprint:
        """Walk the tree now (if not yet), and say what state it was found in."""
        self.entries  # noqa: B018
        assert self.fingerprint is not None
        return self.fingerprint

    @property
    def module_files(self) -> dict[str, str]:
        """Module name -> relative file, for every module of the tree."""
        self.entries  # noqa: B018  (the walk fills it)
        return self._module_files

    @property
    def scanned(self) -> bool:
        return self._entries is not None

    # -- the byte-level pass --------------------------------------------------------------
    def _scan(self) -> dict[str, FileEntry]:
        old = cache.load(self.tree.root).get("entries", {}) if self.use_cache else {}
        root = str(self.tree.root)
        listing = self.listing() if self.listing else list_tree(root, str(self.tree.package_dir))
        entries: dict[str, FileEntry] = {}
        stamps: list[Stamp] = []
        said: list[str | int] = []  # the walk's warnings, and (by index) the fresh files'
        fresh: list[tuple[str, str, int, int]] = []  # runtime files to look at as bytes
        for found in listing.found:
            if isinstance(found, str):
                said.append(found)
                self.walk_warnings.append(found)
                continue
            rel, size, mtime_ns = found
            previous = old.get(rel)
            if (
                isinstance(previous, FileEntry)
                and previous.size == size
                and previous.mtime_ns == mtime_ns
            ):
                entries[rel] = previous
            else:
                # Outside `sglang/srt/` (the frontend language, tests, benchmarks, kernels)
                # nothing touches a runner's model: parsed only if an import leads there.
                entries[rel] = FileEntry(size, mtime_ns, False, False, ())
                self.dirty = True
                if rel.startswith(RUNTIME):
                    said.append(len(fresh))
                    fresh.append((rel, f"{root}/{rel}", size, mtime_ns))
            stamps.append(found)
            self._module_files[module_name(rel)[0]] = rel
        # With work shared between processes, candidates are parsed where they are read (the
        # bytes need not travel back); here alone, they wait until someone asks (`parse_all`).
        look = _look if isinstance(self.mapper, InProcess) else _look_and_learn
        looked = self.mapper(look, fresh, [size for _, _, size, _ in fresh]) if fresh else []
        for (rel, _, _, _), (entry, data, _) in zip(fresh, looked, strict=True):
            entries[rel] = entry
            if data is not None:
                self._sources[rel] = data
        for item in said:  # in the order a walk that read as it went would have said them
            if isinstance(item, str):
                if not self.walk_said:
                    self.warnings.append(item)
            elif (why := looked[item][2]) is not None:
                self.warnings.append(f"{fresh[item][0]}: skipped, {why}")
        if len(old) != len(entries):
            self.dirty = True
        self.fingerprint = Fingerprint.of(list(listing.folders), stamps)
        return entries

    def save(self) -> None:
        if self.use_cache and self.dirty and self._entries is not None:
            cache.save(self.tree.root, self._entries)
            self.dirty = False

    # -- reading and parsing on demand ------------------------------------------------------
    def source(self, rel: str) -> bytes | None:
        data = self._sources.pop(rel, None)
        if data is not None:
            return data
        try:
            return (self.tree.root / rel).read_bytes()
        except OSError as exc:
            self.warnings.append(f"{rel}: skipped, cannot read ({exc.strerror})")
            return None

    def keep_source(self, rel: str, data: bytes) -> None:
        """Hold bytes already read, for the parse that follows."""
        self._sources[rel] = data

    def held(self, rel: str) -> bytes | None:
        """The bytes of a file held for its parse, if any (they stay held)."""
        return self._sources.get(rel)

    def peek(self, rel: str) -> Parsed | None:
        """A parsed tree still kept, without parsing (and without touching the LRU order)."""
        hit = self._asts.get(rel)
        return hit[0] if hit is not None else None

    def parse(self, rel: str) -> Parsed | None:
        """Parse one file; recent trees are kept, since summaries revisit them."""
        hit = self._asts.get(rel)
        if hit is not None:
            self._asts.move_to_end(rel)
            return hit[0]
        data = self.source(rel)
        if data is None:
            return None
        parsed = parse(rel, data)
        if self.parsed is not None:
            self.parsed(rel)
        if isinstance(parsed, str):
            self.skip(rel, parsed)
            return None
        self._asts[rel] = (parsed, len(data))
        self._ast_bytes += len(data)
        while self._ast_bytes > _AST_CACHE_BYTES and len(self._asts) > 1:
            _, (_, size) = self._asts.popitem(last=False)
            self._ast_bytes -= size
        return parsed

    def skip(self, rel: str, why: str) -> None:
        entry = self.entries[rel]
        if entry.error is None:
            entry.error = why
            self.dirty = True
        self.warnings.append(f"{rel}: skipped, {why}")

    def ensure_parsed(self, rel: str) -> FileEntry:
        entry = self.entries[rel]
        if entry.parsed:
            if entry.error and not any(w.startswith(f"{rel}:") for w in self.warnings):
                self.warnings.append(f"{rel}: skipped, {entry.error}")
            return entry
        entry.parsed = True
        self.dirty = True
        parsed = self.parse(rel)
        if parsed is not None:
            learn(entry, rel, parsed)
        return entry

    def parse_all(
        self, rels: Sequence[str], calls_in: Mapping[str, list[Entry]] | None = None
    ) -> None:
        """Parse these files' facts at once, through the mapper, with the parameter summaries
        that `calls_in` (calls into each file) will ask for. A file that does not parse is
        warned about when `ensure_parsed` reaches it, as if it were parsed there."""
        todo = [rel for rel in rels if not self.entries[rel].parsed]
        if len(todo) < 2 or isinstance(self.mapper, InProcess):
            return  # parsed one by one as they are reached, the trees kept for a revisit
        jobs = [
            (rel, self.entries[rel], self._sources.pop(rel, None), (calls_in or {}).get(rel, []))
            for rel in todo
        ]
        root = str(self.tree.root)
        done = self.mapper(
            lambda job: _analyse(root, *job), jobs, [self.entries[rel].size for rel in todo]
        )
        for rel, entry in zip(todo, done, strict=True):
            if entry is None:
                continue  # unreadable: `ensure_parsed` reads it again and says why
            self.entries[rel] = entry
            self.dirty = True

    def module_of(self, rel: str) -> tuple[str, bool]:
        return module_name(rel)

    def module(self, name: str) -> ModuleFacts | None:
        rel = self.module_files.get(name)
        if rel is None:
            return None
        return self.ensure_parsed(rel).facts

    def split_qualified(self, qualified: str) -> tuple[str, str] | None:
        """("pkg.module", "Rest.Of.Name") for the longest module prefix in the tree."""
        modules = self.module_files
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module in modules:
                return module, ".".join(parts[cut:])
        return None

    def remember(self, rel: str, key: str, value: object) -> None:
        """Keep a fact derived from one file in the cache, invalidated with the file."""
        self.entries[rel].derived[key] = value
        self.dirty = True

    def runtime_files(self) -> list[str]:
        """The runtime's files that parse (or have not been tried yet), in walk order."""
        return [rel for rel, e in self.entries.items() if rel.startswith(RUNTIME) and not e.error]


def read_file(path: str, size: int) -> bytes:
    """A file's bytes in as few calls as can be: one read when it is still `size` long (a
    regular file reads short only at its end)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        chunks = [data]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _look(job: tuple[str, str, int, int]) -> tuple[FileEntry, bytes | None, str | None]:
    """The byte-level look at one runtime file: its entry, its bytes if worth parsing, and
    why it could not be read."""
    _rel, path, size, mtime_ns = job
    try:
        data = read_file(path, size)
    except OSError as exc:
        entry = FileEntry(size, mtime_ns, False, False, (), error=str(exc), parsed=True)
        return entry, None, f"cannot read ({exc.strerror})"
    entry = prefilter(data, size, mtime_ns)
    return entry, (data if entry.consumer_candidate else None), None


def _look_and_learn(job: tuple[str, str, int, int]) -> tuple[FileEntry, None, str | None]:
    """The byte-level look at one runtime file, and for a consumer candidate its parse."""
    entry, data, why = _look(job)
    if data is None:
        return entry, None, why
    return analysed(entry, job[0], data), None, None


def _analyse(
    root: str, rel: str, entry: FileEntry, data: bytes | None, calls_in: list[Entry]
) -> FileEntry | None:
    if data is None:
        try:
            data = read_file(os.path.join(root, rel), entry.size)
        except OSError:
            return None
    return analysed(entry, rel, data, calls_in)
