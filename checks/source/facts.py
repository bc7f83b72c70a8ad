"""What the index knows about one file, and how it learns it: a byte-level look, then a parse.

Each file of the tree is looked at once, as bytes: is it worth parsing for consumers (does it
touch `<...>runner.model`, or define a ModelRunner), does it register models (`EntryClass`),
which top-level classes does it define. Only the files an audit needs are parsed; what the
parse gives (class facts, consumer facts, parameter lists) is kept on the entry, which the
parse cache stores, keyed by size and mtime.

These are plain functions of a file's bytes, with no index state, so they can run anywhere:
in this process, or in a helper process the CLI hands in (see `sourcefiles.Mapper`).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from eaglebug.checks.reach.consumers import (
    Entry,
    local_entries,
    param_table,
    scan_module,
    summaries,
)
from eaglebug.checks.reach.uses import ConsumerFacts
from eaglebug.checks.source.classfacts import ModuleFacts, module_facts

RUNTIME = "sglang/srt/"  # where the runtime lives: the only files a launch runs

_CLASS_NAME_RE = re.compile(rb"class\s+(\w+)")
_LINE_CLASS_RE = re.compile(rb"\nclass \s*(\w+)")  # starts with a literal: `re` scans for it
# Files worth parsing for consumers: `<...>runner[...].model`, or a ModelRunner class.
# (Two patterns, each starting with a literal, so `re` can scan for it instead of trying an
# alternation at every byte.)
_RUNNER_MODEL_RE = re.compile(rb"runner\w*(?:\[[^\]\n]*\]|\([^)\n]*\))?\.model\b")
_RUNNER_CLASS_RE = re.compile(rb"class \w*ModelRunner\b|class \w+\([^)]*ModelRunner\b")


@dataclass
class FileEntry:
    size: int
    mtime_ns: int
    consumer_candidate: bool
    has_entry_class: bool
    class_names: tuple[str, ...]
    facts: ModuleFacts | None = None
    consumers: ConsumerFacts | None = None
    params: dict[tuple[str, str], ConsumerFacts | None] = field(default_factory=dict)
    # `Class.method` / `function` -> positional parameters, filled when the file is parsed.
    param_names: dict[str, list[str]] = field(default_factory=dict)
    derived: dict[str, object] = field(default_factory=dict)  # facts other modules compute
    error: str | None = None
    parsed: bool = False


@dataclass(frozen=True)
class Parsed:
    """A file's syntax tree and its text (for the code lines that findings quote)."""

    tree: ast.Module
    text: str


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


def is_consumer_candidate(data: bytes) -> bool:
    if b"unner" not in data:  # one scan for both `runner` and `ModelRunner`: most files stop here
        return False
    return (
        b"runner" in data and b".model" in data and _RUNNER_MODEL_RE.search(data) is not None
    ) or (b"ModelRunner" in data and _RUNNER_CLASS_RE.search(data) is not None)


def prefilter(data: bytes, size: int, mtime_ns: int) -> FileEntry:
    """The byte-level look at a runtime file."""
    return FileEntry(
        size, mtime_ns, is_consumer_candidate(data), b"EntryClass" in data, class_names(data)
    )


def parse(rel: str, data: bytes) -> Parsed | str:
    """The file's syntax tree, or why it cannot be had (the text of its warning)."""
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
    return Parsed(tree, text)


def learn(entry: FileEntry, rel: str, parsed: Parsed, calls_in: Sequence[Entry] = ()) -> None:
    """Fill an entry with what its parse gives: class facts, parameters, for consumer
    candidates every use of a model reference, and the parameter summaries that the calls
    within the module, and `calls_in` (calls into it), will ask for."""
    module, is_package = module_name(rel)
    facts = entry.facts = module_facts(parsed.tree, module, is_package, parsed.text)
    facts.lines = parsed.text.count("\n") + 1
    entry.param_names = param_table(parsed.tree)
    entries = list(calls_in)
    if entry.consumer_candidate:
        entry.consumers = scan_module(
            parsed.tree, module, facts.imports, facts.functions, parsed.text
        )
        entries += local_entries(module, entry.consumers.calls)
    if entries:
        found = summaries(
            parsed.tree,
            module,
            facts.imports,
            facts.functions,
            facts.classes,
            parsed.text,
            entry.param_names,
            entries,
        )
        for key, summary in found.items():
            entry.params.setdefault(key, summary)


def analysed(entry: FileEntry, rel: str, data: bytes, calls_in: Sequence[Entry] = ()) -> FileEntry:
    """A copy of `entry` with its parse learnt (or its parse error noted): one unit of work
    that a helper process can do and hand back."""
    done = FileEntry(entry.size, entry.mtime_ns, entry.consumer_candidate,
                     entry.has_entry_class, entry.class_names, parsed=True)  # fmt: skip
    parsed = parse(rel, data)
    if isinstance(parsed, str):
        done.error = parsed
    else:
        learn(done, rel, parsed, calls_in)
    return done
