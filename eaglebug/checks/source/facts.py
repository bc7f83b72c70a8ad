"""What the index knows about one file, and how it learns it: a byte-level look, then a parse.

Each file of the tree is looked at once, as bytes: does it register models (`EntryClass`),
which top-level classes does it define, and which of the registered extractors want it
parsed. Only the files a check needs are parsed; what the parse gives (class facts, the
positional parameters of its functions, what each extractor learns) is kept on the entry,
which the facts store keeps by the hash of the file's bytes (`store.py`).

Extractors are how the layers above add per-file facts without the index knowing them: the
audit's consumer scan (`reach/consumers.py`) registers one that selects the files touching
`runner.model` by their bytes and scans them when they are parsed. The index runs whatever is
registered; a file looked at or parsed before an extractor was registered is looked at (or
parsed) again for it when it is first asked for.

These are plain functions of a file's bytes and path, with no index state, so they can run
anywhere: in this process, or in a helper process the CLI hands in (see `files.Mapper`).
"""

from __future__ import annotations

import ast
import enum
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, cast

from eaglebug.checks.contract import codec, limits
from eaglebug.checks.source.classfacts import ModuleFacts, module_facts, param_table

RUNTIME = "sglang/srt/"  # where the runtime lives: the only files a launch runs

T = TypeVar("T")

_CLASS_NAME_RE = re.compile(rb"class\s+(\w+)")
_LINE_CLASS_RE = re.compile(rb"\nclass \s*(\w+)")  # starts with a literal: `re` scans for it


class Missing(enum.Enum):
    """What `recall` gives for a fact not learnt yet (None may be a fact's value)."""

    MISSING = "missing"


MISSING = Missing.MISSING


@dataclass(frozen=True)
class Fact(Generic[T]):
    """A fact kept per file under a name, of the type the store decodes it to (`kind`, the
    runtime spelling of `T`): `Fact[AlgorithmFacts]("algorithms", AlgorithmFacts)`."""

    name: str
    kind: Any


@dataclass(frozen=True)
class Parsed:
    """A file's syntax tree and its text (for the code lines that findings quote)."""

    tree: ast.Module
    text: str


@dataclass(frozen=True)
class ParsedFile:
    """What an extractor is handed: one parsed file and the facts the index read from it."""

    rel: str
    parsed: Parsed
    facts: ModuleFacts
    param_names: dict[str, list[str]]


Keep = Callable[[Fact[Any], Any], None]


@dataclass(frozen=True)
class Extractor:
    """A per-file analysis a layer above the index registers (`register`).

    `wants` looks at a runtime file's bytes: is it worth parsing for this analysis? `learn`
    runs once on each parsed file it wanted (`fresh`), and on files parsed because something
    `asked` it questions (`SourceFiles.parse_all`): it keeps what it finds through `keep`, as
    facts of the file."""

    name: str
    wants: Callable[[bytes], bool]
    learn: Callable[[ParsedFile, bool, Sequence[Any], Keep], None]


EXTRACTORS: dict[str, Extractor] = {}


def register(extractor: Extractor) -> None:
    """Make the index run `extractor` on every tree (a later one of the same name replaces it)."""
    EXTRACTORS[extractor.name] = extractor


@dataclass
class FileEntry:
    """One file of the tree: its stamp, the hash of its bytes, and what they gave.

    `facts` and the kept facts are decoded from the store only when first asked for."""

    size: int
    mtime_ns: int
    digest: str | None  # the bytes' hash (None: not read yet)
    has_entry_class: bool
    class_names: tuple[str, ...]
    wanted: tuple[str, ...] = ()  # extractors whose look selected the file
    looked: tuple[str, ...] = ()  # extractors that looked at it
    learnt: tuple[str, ...] = ()  # extractors that learnt from its parse
    error: str | None = None
    parsed: bool = False
    # `Class.method` / `function` -> positional parameters, filled when the file is parsed.
    param_names: dict[str, list[str]] = field(default_factory=dict)
    facts_json: codec.JsonTree = None  # ModuleFacts | None, as stored, until decoded
    kept: dict[str, codec.JsonTree] = field(default_factory=dict)  # facts, as stored
    dirty: bool = field(default=False, compare=False)  # learnt something the store lacks
    # A kept fact did not decode (a damaged or planted record): the extractors learn again.
    spoilt: bool = field(default=False, compare=False)
    _facts: ModuleFacts | Missing | None = field(
        default=MISSING, init=False, compare=False, repr=False
    )
    _values: dict[str, object] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def facts(self) -> ModuleFacts | None:
        if not isinstance(self._facts, Missing):
            return self._facts
        try:
            decoded: ModuleFacts | None = codec.decode(self.facts_json, ModuleFacts | None)
        except codec.Invalid:  # a damaged record: parsed again, as if never parsed
            decoded, self.parsed, self.learnt, self.dirty = None, False, (), True
        self._facts = decoded
        return decoded

    @facts.setter
    def facts(self, value: ModuleFacts | None) -> None:
        self._facts = value
        self.facts_json = codec.encode(value, ModuleFacts | None)

    def recall(self, fact: Fact[T]) -> T | Literal[Missing.MISSING]:
        if fact.name in self._values:
            return cast(T, self._values[fact.name])
        if fact.name not in self.kept:
            return MISSING
        try:
            value = codec.decode(self.kept[fact.name], fact.kind)
        except codec.Invalid:
            del self.kept[fact.name]
            self.learnt, self.spoilt, self.dirty = (), True, True
            return MISSING
        self._values[fact.name] = value
        return cast(T, value)  # the codec built a `fact.kind`, which is T

    def keep(self, fact: Fact[T], value: T) -> None:
        self._values[fact.name] = value
        try:
            self.kept[fact.name] = codec.encode(value, fact.kind)
        except TypeError:  # a value the codec cannot write is kept for this run only
            self.kept.pop(fact.name, None)
            return
        self.dirty = True

    def merge(self, other: FileEntry) -> None:
        """Add what another process learnt of the same bytes (`ahead.py`) to what this one
        knows: its parse if this one has none, the extractors' looks and kept facts it lacks."""
        if self.digest is None:
            self.digest, self.size = other.digest, other.size
        if not self.parsed and other.parsed:
            self.error, self.parsed = other.error, True
            self.param_names, self.facts_json, self._facts = (
                other.param_names,
                other.facts_json,
                MISSING,
            )
        self.wanted += tuple(n for n in other.wanted if n not in self.wanted)
        self.looked += tuple(n for n in other.looked if n not in self.looked)
        for name, value in other.kept.items():
            self.kept.setdefault(name, value)
        self.learnt += tuple(n for n in other.learnt if n not in self.learnt)
        self.dirty = True

    def record(self) -> Record:
        """What the store keeps of this entry (everything but the stamp)."""
        return Record(
            self.size,
            self.has_entry_class,
            self.class_names,
            self.wanted,
            self.looked,
            self.learnt,
            self.error,
            self.parsed,
            self.param_names,
            self.facts_json,
            self.kept,
        )

    @classmethod
    def of(cls, record: Record, mtime_ns: int, digest: str) -> FileEntry:
        return cls(
            record.size,
            mtime_ns,
            digest,
            record.has_entry_class,
            record.class_names,
            record.wanted,
            record.looked,
            record.learnt,
            record.error,
            record.parsed,
            record.param_names,
            record.facts,
            dict(record.kept),
        )


@dataclass(frozen=True)
class Record:
    """A file entry as the facts store keeps it, by the hash of the file's path and bytes."""

    size: int
    has_entry_class: bool
    class_names: tuple[str, ...]
    wanted: tuple[str, ...]
    looked: tuple[str, ...]
    learnt: tuple[str, ...]
    error: str | None
    parsed: bool
    param_names: dict[str, list[str]]
    facts: codec.JsonTree
    kept: dict[str, codec.JsonTree]


def module_name(rel: str) -> tuple[str, bool]:
    """(dotted module name, is a package) of a file path relative to the tree root."""
    module = rel[:-3].replace("/", ".")
    if module.endswith(".__init__"):
        return module[: -len(".__init__")], True
    return module, False


def class_names(data: bytes) -> tuple[str, ...]:
    """Top-level `class X` names (a line that starts with `class `)."""
    names = [name.decode("ascii") for name in _LINE_CLASS_RE.findall(data)]
    if data.startswith(b"class ") and (first := _CLASS_NAME_RE.match(data)):
        names.insert(0, first.group(1).decode("ascii"))
    return tuple(names)


def look(data: bytes, size: int, mtime_ns: int, digest: str | None) -> FileEntry:
    """The byte-level look at a runtime file, by every registered extractor."""
    entry = FileEntry(size, mtime_ns, digest, b"EntryClass" in data, class_names(data))
    look_more(entry, data)
    return entry


def look_more(entry: FileEntry, data: bytes) -> None:
    """The looks of the extractors registered since the entry was looked at."""
    todo = [e for e in EXTRACTORS.values() if e.name not in entry.looked]
    if not todo:
        return
    entry.wanted += tuple(e.name for e in todo if e.wants(data))
    entry.looked += tuple(e.name for e in todo)
    entry.dirty = True


def over_limit(size: int) -> str | None:
    """Why a file of this size is not read, if it is over the limit."""
    if size > limits.SOURCE_FILE_BYTES:
        return (
            f"{limits.mib(size)} is over the {limits.mib(limits.SOURCE_FILE_BYTES)} limit "
            "for a source file (generated data, not code)"
        )
    return None


_MARKS = b"".join(limits.SOURCE_MARK_BYTES)


def _too_big(data: bytes) -> str | None:
    """Why these bytes are not parsed: too large, a line too long, too many nodes."""
    if (why := over_limit(len(data))) is not None:
        return why
    marks = len(data) - len(data.translate(None, _MARKS))  # one pass for all of them
    if marks > limits.SOURCE_MARKS:
        return (
            f"{marks:,} separators is over the {limits.SOURCE_MARKS:,} limit for a source file "
            "(a syntax tree that large is generated data, not code)"
        )
    if len(data) > limits.SOURCE_LINE_CHARS:
        longest = max(map(len, data.split(b"\n")))
        if longest > limits.SOURCE_LINE_CHARS:
            return (
                f"a line of {longest:,} characters is over the "
                f"{limits.SOURCE_LINE_CHARS:,} limit for a source line"
            )
    return None


def parse(rel: str, data: bytes) -> Parsed | str:
    """The file's syntax tree, or why it cannot be had (the text of its warning)."""
    if (why := _too_big(data)) is not None:
        return why
    try:
        with warnings.catch_warnings():  # the tree's own warnings (an invalid escape) are its own
            warnings.simplefilter("ignore")
            tree = ast.parse(data, filename=rel)
        text = data.decode("utf-8", errors="replace")
    except SyntaxError as exc:
        if "encoding" in exc.msg or "decode" in exc.msg:
            return f"cannot decode: {exc.msg}"
        if exc.lineno:
            return f"syntax error on line {exc.lineno}: {exc.msg}"
        return f"cannot parse: {exc.msg}"
    except (ValueError, UnicodeDecodeError) as exc:
        return f"cannot decode: {exc}"
    except (MemoryError, RecursionError):  # nesting too deep for the parser
        return "cannot parse: nested too deeply"
    return Parsed(tree, text)


def learn(
    entry: FileEntry, rel: str, parsed: Parsed, asked: Mapping[str, Sequence[Any]] | None = None
) -> None:
    """Fill an entry with what its parse gives: class facts, parameters, and what each
    registered extractor learns of it: those that want the file once, and any extractor
    `asked` something of it (extractor name -> what it is asked)."""
    if not entry.parsed:
        module, is_package = module_name(rel)
        facts = module_facts(parsed.tree, module, is_package, parsed.text)
        facts.lines = parsed.text.count("\n") + 1
        entry.facts = facts
        entry.param_names = param_table(parsed.tree)
        entry.parsed = True
        entry.dirty = True
    module_facts_ = entry.facts
    if module_facts_ is None:
        return
    file = ParsedFile(rel, parsed, module_facts_, entry.param_names)
    for name, extractor in EXTRACTORS.items():
        fresh = name in entry.wanted and name not in entry.learnt
        its = (asked or {}).get(name, ())
        if fresh or its:
            extractor.learn(file, fresh, its, entry.keep)
        if fresh:
            entry.learnt += (name,)
            entry.dirty = True


def pending(entry: FileEntry) -> bool:
    """Does a parse of this file still owe something (its facts, or an extractor's)?"""
    if entry.error is not None:
        return False
    return not entry.parsed or any(
        name in EXTRACTORS and name not in entry.learnt for name in entry.wanted
    )


def analysed(
    entry: FileEntry,
    rel: str,
    data: bytes,
    asked: Mapping[str, Sequence[Any]] | None = None,
    parser: Callable[[str, bytes], Parsed | str] | None = None,
) -> FileEntry:
    """A copy of `entry` with its parse learnt (or its parse error noted): one unit of work
    that a helper process can do and hand back. `parser` parses (default: `parse`)."""
    done = FileEntry(
        entry.size, entry.mtime_ns, entry.digest, entry.has_entry_class, entry.class_names,
        entry.wanted, entry.looked, entry.learnt, entry.error, entry.parsed,
        dict(entry.param_names), entry.facts_json, dict(entry.kept), True,
    )  # fmt: skip
    if done.parsed and entry.facts is None and entry.error is not None:
        return done
    parsed = (parser or parse)(rel, data)
    if isinstance(parsed, str):
        done.error, done.parsed = parsed, True
    else:
        learn(done, rel, parsed, asked)
    return done
