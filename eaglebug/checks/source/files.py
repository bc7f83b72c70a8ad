"""The `.py` files of one SGLang tree: walked once, looked at as bytes, parsed on demand.

Speed comes from doing little: every runtime file is read once for the byte-level look
(`facts.look`), and only the files a check needs are parsed. What is learnt is kept per file
in the facts store (`store.py`), by the hash of the file's bytes, so a warm run only stats the
tree, and another release or checkout reads and hashes its files but parses only those it does
not share. The walk happens when something first needs the files: a run answered from
`answers.py` never walks at all. A file over the limits (`contract/limits.py`) is skipped
with a warning that names it, unread when its size says so.

Work over many files (the byte-level look, parsing what the extractors want, the flag
search) goes through a `Mapper` (`mapper.py`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from eaglebug.checks.contract.limits import PARSED_SOURCE_BYTES, SOURCE_FILE_BYTES
from eaglebug.checks.source.classfacts import ModuleFacts
from eaglebug.checks.source.facts import (
    MISSING,
    RUNTIME,
    Fact,
    FileEntry,
    Missing,
    Parsed,
    analysed,
    learn,
    look,
    look_more,
    module_name,
    over_limit,
    parse,
    pending,
)
from eaglebug.checks.source.fingerprint import Fingerprint
from eaglebug.checks.source.mapper import InProcess, Mapper, in_process
from eaglebug.checks.source.store import Stamps, Store, digest, load_stamps, save_stamps
from eaglebug.checks.source.tree import SglangTree
from eaglebug.checks.source.trees import ParsedTrees, kept_in_process
from eaglebug.checks.source.walk import Listing, Stamp, list_tree

T = TypeVar("T")
R = TypeVar("R")
Asked = Mapping[str, Mapping[str, Sequence[Any]]]  # file -> extractor -> what it is asked


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
        shared: ParsedTrees | None = None,
    ) -> None:
        """`listing`, when given, makes the walk (`walk.list_tree`) for this tree; `parsed`
        hears of each file parsed here (a front end counts them while a cold run parses);
        `shared`, the trees kept across indexes (`trees.py`; else `kept_in_process()`)."""
        self.tree = tree
        self.listing = listing
        self.parsed = parsed
        self.shared = shared if shared is not None else kept_in_process()
        self.use_cache = use_cache
        self.warnings = warnings
        self.mapper = mapper
        self._entries: dict[str, FileEntry] | None = None
        self._module_files: dict[str, str] = {}  # module name -> relative file
        self.fingerprint: Fingerprint | None = None
        self.walk_warnings: list[str] = []  # what the walk itself said (a FIFO, a folder)
        self.walk_said = False  # set when the answers said the walk's warnings already
        self.looked: set[str] = set()  # the files this run looked into (`read_here`)
        self._store: Store | None = None
        self._stamps: Stamps = {}
        self._sources: dict[str, bytes] = {}
        self._asts: OrderedDict[str, tuple[Parsed, int]] = OrderedDict()  # with its bytes
        self._ast_bytes = 0
        self.kept_bytes = PARSED_SOURCE_BYTES  # their budget, by source (the matrix's is less)
        self._pid = os.getpid()  # a helper forked off keeps no trees (they die with it)

    @property
    def entries(self) -> dict[str, FileEntry]:
        """Every `.py` file (relative path -> entry), in walk order; walked on first use."""
        if self._entries is None:
            self._entries = self._scan()
        return self._entries

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.use_cache)
        return self._store

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
        stamps = self._stamps = load_stamps(self.tree.root) if self.use_cache else {}
        store = self.store
        root = str(self.tree.root)
        listing = self.listing() if self.listing else list_tree(root, str(self.tree.package_dir))
        entries: dict[str, FileEntry] = {}
        said: list[str | int] = []  # the walk's warnings, and (by index) the fresh files'
        fresh: list[tuple[str, str, int, int]] = []  # runtime files to read and look at
        file_stamps: list[Stamp] = []
        for found in listing.found:
            if isinstance(found, str):
                said.append(found)
                self.walk_warnings.append(found)
                continue
            rel, size, mtime_ns = found
            file_stamps.append(found)
            self._module_files[module_name(rel)[0]] = rel
            known = stamps.get(rel)
            entry = None
            if known is not None and known[:2] == (size, mtime_ns):
                entry = store.entry(known[2], mtime_ns)
            if entry is None:
                entry = FileEntry(size, mtime_ns, None, False, ())
                if (why := over_limit(size)) is not None:
                    entry.error, entry.parsed = why, True  # said when the file is reached
                    if rel.startswith(RUNTIME):  # said now, as the walk's own warnings are
                        line = f"{rel}: skipped, {why}"
                        said.append(line)
                        self.walk_warnings.append(line)
                elif rel.startswith(RUNTIME):
                    # Outside `sglang/srt/` (the frontend language, tests, benchmarks,
                    # kernels) nothing touches a runner's model: read only if an import
                    # leads there.
                    said.append(len(fresh))
                    fresh.append((rel, f"{root}/{rel}", size, mtime_ns))
            entries[rel] = entry
        # With work shared between processes, the files extractors want are parsed where
        # they are read (the bytes need not travel back); here alone, they wait until
        # someone asks.
        learn_now = not isinstance(self.mapper, InProcess)

        def job(item: tuple[str, str, int, int]) -> _Looked:
            return _look(item, store, self.parse_bytes if learn_now else None)

        looked = self.mapper(job, fresh, [size for _, _, size, _ in fresh]) if fresh else []
        for (rel, _, _, mtime_ns), (entry, key, data, _) in zip(fresh, looked, strict=True):
            found_entry = entry if entry is not None else store.entry(key or "", mtime_ns)
            if found_entry is None:  # the record vanished or does not decode: read again
                found_entry, key, data, _ = _look((rel, f"{root}/{rel}", 0, mtime_ns), None, None)
                assert found_entry is not None
            entries[rel] = found_entry
            if data is not None:
                self._sources[rel] = data
        for item in said:  # in the order a walk that read as it went would have said them
            if isinstance(item, str):
                if not self.walk_said:
                    self.warnings.append(item)
            elif (why := looked[item][3]) is not None:
                self.warnings.append(f"{fresh[item][0]}: skipped, {why}")
        self.fingerprint = Fingerprint.of(list(listing.folders), file_stamps)
        return entries

    def save(self) -> None:
        """Keep what this run learnt: the store's records, and this tree's stamps."""
        if not self.use_cache or self._entries is None:
            return
        self.store.save(self._entries.values())
        stamps = {
            rel: (e.size, e.mtime_ns, e.digest)
            for rel, e in self._entries.items()
            if e.digest is not None
        }
        if stamps != self._stamps:
            save_stamps(self.tree.root, stamps)
            self._stamps = stamps

    def read_here(self, rel: str) -> bool:
        """Can what this run computed depend on this file's bytes? The runtime's files, whose
        facts every index reads, and any other that this run looked into (the answers'
        fingerprint keeps their stamps: `Fingerprint.narrowed`)."""
        return rel.startswith(RUNTIME) or rel in self.looked

    def own_trees(self) -> None:
        """This process (a helper working ahead, `ahead.py`) keeps the trees it parses."""
        self._pid = os.getpid()

    # -- reading and parsing on demand ------------------------------------------------------
    def source(self, rel: str) -> bytes | None:
        self.looked.add(rel)
        data = self._sources.pop(rel, None)
        if data is not None:
            return data
        entry = self.entries.get(rel)
        if entry is not None and (why := over_limit(entry.size)) is not None:
            self.skip(rel, why)
            return None
        try:
            return read_file(str(self.tree.root / rel), entry.size if entry else 0)
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
        parsed = self.parse_bytes(rel, data)
        if self.parsed is not None:
            self.parsed(rel)
        if isinstance(parsed, str):
            self.skip(rel, parsed)
            return None
        return parsed

    def parse_bytes(self, rel: str, data: bytes) -> Parsed | str:
        """A file's tree from bytes read already (or why it does not parse): the kept tree,
        else parsed and kept. Work over many files (`mapper`) parses through here, so the
        trees this process parses serve the readers that come after (one parse per file);
        a forked helper keeps none (they die with it) but takes the shared ones it inherited."""
        hit = self._asts.get(rel)
        if hit is not None:
            return hit[0]
        key = digest(rel, data) if self.shared is not None else ""
        if os.getpid() != self._pid:
            kept = self.shared.peek(key) if self.shared is not None else None
            return kept if kept is not None else parse(rel, data)
        kept = self.shared.get(key) if self.shared is not None else None
        parsed = kept if kept is not None else parse(rel, data)
        if isinstance(parsed, str):
            return parsed
        if self.shared is not None and kept is None:
            self.shared.put(key, parsed, len(data))
        self._asts[rel] = (parsed, len(data))
        self._ast_bytes += len(data)
        while self._ast_bytes > self.kept_bytes and len(self._asts) > 1:
            _, (_, size) = self._asts.popitem(last=False)
            self._ast_bytes -= size
        return parsed

    def let_go_trees(self) -> None:
        self._asts.clear()
        self._ast_bytes = 0

    def skip(self, rel: str, why: str) -> None:
        entry = self.entries[rel]
        if entry.error is None:
            entry.error, entry.parsed, entry.dirty = why, True, True
        line = f"{rel}: skipped, {why}"
        if line not in self.warnings:
            self.warnings.append(line)

    def _known(self, rel: str) -> FileEntry:
        """The file's entry, read and hashed first if it never was: another tree (or an
        earlier run) may have learnt its facts already."""
        entry = self.entries[rel]
        self.looked.add(rel)  # its facts may come from the store, by its stamps
        if entry.digest is not None or entry.error is not None:
            return entry
        data = self.source(rel)
        if data is None:
            return self.entries[rel]
        key = digest(rel, data)
        stored = self.store.entry(key, entry.mtime_ns)
        if stored is not None and stored.size == len(data):
            self.entries[rel] = entry = stored
        else:
            entry.digest, entry.size, entry.dirty = key, len(data), True
        self.keep_source(rel, data)
        return entry

    def ensure_parsed(self, rel: str) -> FileEntry:
        entry = self._known(rel)
        if entry.parsed and entry.error is None:
            entry.facts  # noqa: B018  (a stored record whose facts do not decode: parsed again)
        if not pending(entry):
            if entry.error and not any(w.startswith(f"{rel}:") for w in self.warnings):
                self.warnings.append(f"{rel}: skipped, {entry.error}")
            return entry
        parsed = self.parse(rel)
        if parsed is not None:
            learn(entry, rel, parsed)
        elif not entry.parsed:
            entry.parsed, entry.dirty = True, True
        return entry

    def parse_all(self, rels: Sequence[str], asked: Asked | None = None) -> None:
        """Parse these files' facts at once, through the mapper, with what `asked` asks of
        each (file -> extractor -> its questions). A file that does not parse is warned about
        when `ensure_parsed` reaches it, as if it were parsed there."""
        todo = [rel for rel in rels if pending(self.entries[rel])]
        self.looked.update(todo)
        if len(todo) < 2 or isinstance(self.mapper, InProcess):
            return  # parsed one by one as they are reached, the trees kept for a revisit
        jobs = [
            (rel, self.entries[rel], self._sources.pop(rel, None), (asked or {}).get(rel, {}))
            for rel in todo
        ]
        root = str(self.tree.root)
        store = self.store
        done = self.mapper(
            lambda job: _analyse(root, store, self.parse_bytes, *job),
            jobs,
            [self.entries[r].size for r in todo],
        )
        for rel, result in zip(todo, done, strict=True):
            if isinstance(result, FileEntry):
                self.entries[rel] = result
            elif isinstance(result, str):  # the store knows these bytes
                stored = self.store.entry(result, self.entries[rel].mtime_ns)
                if stored is not None:
                    self.entries[rel] = stored
            # None: unreadable; `ensure_parsed` reads it again and says why

    def wanted_by(self, name: str) -> list[str]:
        """The runtime files whose bytes extractor `name` selected, in walk order (files looked
        at before it was registered are looked at now)."""
        for rel, entry in self.entries.items():
            if rel.startswith(RUNTIME) and entry.error is None and name not in entry.looked:
                data = self.source(rel)
                if data is not None:
                    look_more(entry, data)
                    if name in entry.wanted:
                        self.keep_source(rel, data)
        return [rel for rel, entry in self.entries.items() if name in entry.wanted]

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

    def remember(self, rel: str, fact: Fact[T], value: T) -> None:
        """Keep a fact derived from one file, with the file's other facts (by its bytes)."""
        self._known(rel).keep(fact, value)

    def recall(self, rel: str, fact: Fact[T]) -> T | Literal[Missing.MISSING]:
        """A fact kept for this file (by this run, or by any run that read the same bytes).
        A stored fact that does not decode makes the file's extractors learn it again."""
        entry = self._known(rel)
        found = entry.recall(fact)
        if found is not MISSING or not entry.spoilt:
            return found
        entry.spoilt = False
        return self.ensure_parsed(rel).recall(fact)

    def runtime_files(self) -> list[str]:
        """The runtime's files that parse (or have not been tried yet), in walk order."""
        return [rel for rel, e in self.entries.items() if rel.startswith(RUNTIME) and not e.error]


def read_file(path: str, size: int) -> bytes:
    """A file's bytes in as few calls as can be: one read when it is still `size` long (a
    regular file reads short only at its end); never more than the source limit and a byte
    (the parse refuses what is over it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        cap = SOURCE_FILE_BYTES + 1
        data = os.read(fd, min(size + 1, cap))
        if len(data) <= size or len(data) >= cap:
            return data
        chunks = [data]
        got = len(data)
        while got < cap and (chunk := os.read(fd, min(1 << 20, cap - got))):
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# (the entry, or None when the store has these bytes; their digest; the bytes, if worth
# holding for a parse; why the file could not be read)
_Looked = tuple[FileEntry | None, str | None, bytes | None, str | None]


def _look(
    job: tuple[str, str, int, int],
    store: Store | None,
    learn_now: Callable[[str, bytes], Parsed | str] | None,
) -> _Looked:
    """The byte-level look at one runtime file (its bytes read and hashed; nothing more when
    the store has them), and, given `learn_now` (how to parse), the parse its extractors
    want."""
    rel, path, size, mtime_ns = job
    try:
        data = read_file(path, size)
    except OSError as exc:
        entry = FileEntry(size, mtime_ns, None, False, (), error=str(exc), parsed=True)
        return entry, None, None, f"cannot read ({exc.strerror})"
    key = digest(rel, data)
    if store is not None and store.has(key):
        return None, key, None, None
    entry = look(data, len(data), mtime_ns, key)
    entry.dirty = True
    if not entry.wanted:
        return entry, key, None, None
    if learn_now is not None:
        return analysed(entry, rel, data, None, learn_now), key, None, None
    return entry, key, data, None


def _analyse(
    root: str,
    store: Store,
    parser: Callable[[str, bytes], Parsed | str],
    rel: str,
    entry: FileEntry,
    data: bytes | None,
    asked: Any,
) -> FileEntry | str | None:
    """One file's parse, learnt in a helper: the entry; or the digest, when the file had
    not been read and the store has its bytes; or None when it cannot be read."""
    if data is None:
        try:
            data = read_file(os.path.join(root, rel), entry.size)
        except OSError:
            return None
    if entry.digest is None:
        key = digest(rel, data)
        if store.has(key):
            return key
        entry.digest, entry.size = key, len(data)
    return analysed(entry, rel, data, asked, parser)
