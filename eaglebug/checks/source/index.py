"""A lazy index over one SGLang tree, and the tree-wide answers the checks ask of it.

`TreeIndex` is what every check is handed. It composes the concepts, each in its module:
the files (`source/files.py`: walk, byte-level look, facts store, parsing on demand), the
classes (`source/classes.py`: names, bases, where an attribute comes from, the registry), and
the answers that hold while no file changes (`answers.py`). What the checks learn of the tree
(the runtime's uses of the model, `reach/resolve.py`; the flags guarding them,
`reach/flags.py`) are functions of their own layers over it, kept as its answers. A run whose
questions were answered before (and whose tree is unchanged) reads only the answers: the
files are never walked.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from eaglebug.checks.contract.errors import InputError, closest_hint
from eaglebug.checks.source import ahead, content
from eaglebug.checks.source.ahead import Background, Handed, Pending
from eaglebug.checks.source.answers import Answers
from eaglebug.checks.source.classes import NN_MODULE_ATTRS, ClassIndex, ClassRef, Provider
from eaglebug.checks.source.classfacts import ModuleFacts
from eaglebug.checks.source.external import (
    ENV_VAR,
    REGISTRY,
    ExternalPackage,
    ExternalRule,
    registry_rule,
)
from eaglebug.checks.source.facts import Fact, FileEntry, Missing, Parsed
from eaglebug.checks.source.files import SourceFiles
from eaglebug.checks.source.mapper import Mapper, in_process
from eaglebug.checks.source.package import PackageFiles
from eaglebug.checks.source.tree import SglangTree
from eaglebug.checks.source.trees import ParsedTrees
from eaglebug.checks.source.walk import Listing

__all__ = [
    "NN_MODULE_ATTRS",
    "ClassRef",
    "FileEntry",
    "Mapper",
    "Provider",
    "TreeIndex",
]

T = TypeVar("T")


class TreeIndex:
    """What every check is handed: one tree, its files walked on first need, its answers
    read first (see the module's docstring)."""

    def __init__(
        self,
        tree: SglangTree,
        use_cache: bool = True,
        mapper: Mapper = in_process,
        answers: Answers | None = None,
        listing: Callable[[], Listing] | None = None,
        external: ExternalPackage | None = None,
        parsed: Callable[[str], None] | None = None,
        shared: ParsedTrees | None = None,
        background: Background | None = None,
    ) -> None:
        """`mapper` runs the work over many files (see `mapper.py`); `answers`, when
        the caller has read them already (to answer before building an index), are reused;
        `listing` gives the walk of the tree, when the caller had it made meanwhile;
        `external`, an out-of-tree model package the registry loads (`use_external`);
        `parsed` hears of each file parsed in this process (progress for a front end);
        `shared`, syntax trees kept by a long-lived process for its next index (`trees.py`);
        `background`, how to start work ahead in a helper process (`ahead`, `ahead.py`)."""
        self.tree = tree
        self.use_cache = use_cache
        self.warnings: list[str] = []
        self.answers = answers if answers is not None else Answers(tree, use_cache)
        self.files = SourceFiles(tree, use_cache, self.warnings, mapper, listing, parsed, shared)
        self.classes = ClassIndex(self.files, self.answers)
        self._content: str | None = None  # the walked tree's content key, once computed
        if self.answers.quick:  # the tree is as the answers left it: walk only if needed
            self.warnings.extend(self.answers.walk_warnings)
            self.files.walk_said = True
        else:  # walk now: the answers wait for its verdict
            self.answers.settle(self.files.walk(), self.files.walk_warnings)
            if use_cache and not self.answers.adopted:
                self._take_over_same_content()
        self.external: ExternalPackage | None = None
        self._kept: dict[str, object] = {}
        self.background = background
        self._owner = os.getpid()  # a helper working ahead saves nothing (`save`)
        self._ahead: list[tuple[Pending[Handed], tuple[str, ...]]] = []
        if external is not None:
            self.use_external(external)

    def use_external(self, package: ExternalPackage) -> ExternalRule | None:
        """Make an out-of-tree package's classes part of the index, as this tree's registry
        loads them (overriding built-in names where it does). None, and a warning, when the
        tree has no such mechanism: then the package is not loaded and stays out."""
        rule = registry_rule(self)
        if rule is None:
            self.warnings.append(
                f"{package.named_by}: this SGLang tree's model registry does not read "
                f"{ENV_VAR} ({REGISTRY}), so the package is not loaded; audited without it"
            )
            return None
        self.external = package
        self.classes.use_external(PackageFiles(package, self.warnings), rule)
        return rule

    def path_of(self, rel: str) -> Path:
        """The file a path of a finding names: in the tree, or in the external package."""
        if self.external is not None and self.external.owns(rel):
            return self.external.root / rel
        return self.tree.root / rel

    # -- the files ----------------------------------------------------------------------------
    @property
    def entries(self) -> dict[str, FileEntry]:
        return self.files.entries

    def module(self, name: str) -> ModuleFacts | None:
        return self.files.module(name)

    def split_qualified(self, qualified: str) -> tuple[str, str] | None:
        return self.files.split_qualified(qualified)

    def parse_file(self, rel: str) -> Parsed | None:
        """The syntax tree and text of one file, for analyses that need more than the facts."""
        external = self.classes.external
        if external is not None and external.owns(rel):
            return external.parse(rel)
        return self.files.parse(rel)

    def remember(self, rel: str, fact: Fact[T], value: T) -> None:
        """Keep a fact derived from one file, with the file's other facts (by its bytes)."""
        self.files.remember(rel, fact, value)

    def recall(self, rel: str, fact: Fact[T]) -> T | Literal[Missing.MISSING]:
        """A fact kept for one file, by this run or any run that read the same bytes."""
        return self.files.recall(rel, fact)

    def save(self) -> None:
        if os.getpid() != self._owner:
            return
        self.files.save()
        answers = self.answers
        if not answers.use_cache:  # nothing is written: the stamps it would keep are moot
            return
        walked = self.files.fingerprint if self.files.scanned else None
        answers.depend_on(walked, self.files.read_here)
        if not answers.unsaved or answers.fingerprint is None:
            return
        key = self._content_key()
        if key is not None:  # the files outside the runtime that the answers read, hashed
            root = self.tree.root
            answers.content = (key, content.extras(root, answers.fingerprint.checked()))
        answers.save()
        if key is not None:
            content.remember(key, self.tree.root)

    def _content_key(self) -> str | None:
        """This tree's content key (`content.py`): computed from the walk, else as the
        answers read had it (their stamps held, so the files are as they were then)."""
        if self.files.scanned:
            if self._content is None:
                self._content = content.content_key(self.files, self.tree.version)
            return self._content
        return self.answers.content[0] if self.answers.content is not None else None

    def _take_over_same_content(self) -> None:
        """No answers for this folder's files as they are: those of the same content, made
        in another folder (or here, before every mtime changed), if there are any."""
        key = self._content_key()
        if key is None:
            return
        folder = content.folder_with(key)
        if folder is None:
            return
        root = self.tree.root
        self.answers.take_over(folder, key, lambda wanted: content.same_extras(root, wanted))

    def kept(self, key: str, make: Callable[[], T]) -> T:
        """An in-memory object that lives as long as this index (the workers' scopes, the
        evaluator's tables of the tree): held by the index itself, so it goes with it. A
        module-level map keyed by the index, weak or not, whose values point back at the index
        keeps every index of a long session alive (gigabytes in a TUI left open, or a suite)."""
        found = self._kept.get(key)
        if found is None:
            found = self._kept[key] = make()
        return found  # type: ignore[return-value]

    def shed(self) -> None:
        """Let go of what only an analysis at work needs: the syntax trees and the in-memory
        objects made over them (`kept`). What stays is what a front end asks of a finished
        index (its class facts, the external package); a session that keeps its last index
        for that holds the trees once, in its own `ParsedTrees`, not twice."""
        self.files.let_go_trees()
        self._kept.clear()

    # -- work ahead ------------------------------------------------------------------------
    def ahead(self, compute: Callable[[], T]) -> Pending[Handed]:
        """Start `compute` now in a helper process, where the index was given a `background`
        (`ahead.py`), for a value the run asks for later (`join`); else it runs here when
        joined."""
        return self._start(compute, ())

    def answers_ahead(self, keys: tuple[str, ...], compute: Callable[[], object]) -> None:
        """Start `compute`, which computes the tree answers `keys`, as `ahead` does; they are
        taken over when first asked for. Nothing to do if each is had or on its way."""
        if all(self.answers.has(k) or any(k in ks for _, ks in self._ahead) for k in keys):
            return
        self._start(compute, keys)

    def _start(self, compute: Callable[[], object], keys: tuple[str, ...]) -> Pending[Handed]:
        """In a helper only once the files are walked: one that walked them itself (the
        answers held, so the run had not) would make the run's walk twice."""
        made = ahead.task(self, compute)
        background = self.background if self.files.scanned else None
        pending = _Later(made) if background is None else background(made)
        self._ahead.append((pending, keys))
        return pending

    def join(self, pending: Pending[Handed]) -> Any:
        """The value of work started `ahead`, with what it learnt of the tree taken over."""
        self._ahead = [(p, keys) for p, keys in self._ahead if p is not pending]
        return ahead.take(self, pending())

    def close(self) -> None:
        """Drop work ahead no one asked for (its helper killed and reaped)."""
        for pending, _ in self._ahead:
            pending.cancel()
        self._ahead = []

    def forget_pending(self) -> None:
        """In a helper working ahead: the parent's pending work is the parent's to join."""
        self._ahead = []

    # -- tree-wide answers ----------------------------------------------------------------
    def answer(self, key: str, kind: object, compute: Callable[[], T]) -> T:
        """A tree-wide answer of type `kind`, computed once per state of the tree (see
        `answers.py`), or taken from the work ahead that computes it."""
        if self._ahead and not self.answers.has(key):
            for pending, keys in list(self._ahead):
                if key in keys:
                    self.join(pending)
        return self.answers.answer(key, kind, self.warnings, compute)

    def answer_for(
        self, prefix: str, subject: list[Any], kind: object, compute: Callable[[], T], keep: int
    ) -> T:
        """A tree answer keyed by what one run depends on (`subject`, JSON-able), the newest
        `keep` of `prefix` kept: a warm preflight of the same launch runs nothing again."""
        text = json.dumps(subject, sort_keys=True, default=str)
        found = self.answer(f"{prefix}{hashlib.sha256(text.encode()).hexdigest()}", kind, compute)
        self.answers.drop_oldest(prefix, keep)
        return found

    # -- classes, for the front ends ----------------------------------------------------------
    def use_model_config(self, config: Mapping[str, object]) -> None:
        """Resolve classes the registry picks from the target's config (see `ClassIndex`)."""
        self.classes.use_model_config(config)

    def classes_named(self, name: str) -> list[ClassRef]:
        return self.classes.classes_named(name)

    def registry(self) -> dict[str, list[ClassRef]]:
        return self.classes.registry()

    def exporters_of(self, name: str) -> list[ClassRef]:
        return self.classes.exporters_of(name)


class _Later:
    """Work `ahead` where no helper can be started: done here, when joined."""

    def __init__(self, made: Callable[[], Handed]) -> None:
        self._made = made
        self._done: list[Handed] = []

    def __call__(self) -> Handed:
        if not self._done:
            self._done.append(self._made())
        return self._done[0]

    def cancel(self) -> None:
        pass


def parsed_with(index: TreeIndex, rel: str, *needles: str) -> Parsed | None:
    """A file's syntax tree, parsed only if its bytes contain one of `needles` (most files do
    not): the byte prefilter every reader of the tree uses, served by the index's parse cache
    and held bytes (each file read once, parsed once) and bound by its limits."""
    peeked = index.files.peek(rel)
    if peeked is not None:
        return peeked if any(n in peeked.text for n in needles) else None
    data = index.files.source(rel)
    if data is None or not any(n.encode() in data for n in needles):
        return None
    index.files.keep_source(rel, data)
    return index.parse_file(rel)


def find_class(index: TreeIndex, name: str) -> ClassRef:
    """A class by short or qualified name; a registered (EntryClass) one wins ties."""
    classes = index.classes
    if "." in name:
        ref = classes.cls(name)
        if ref is not None:
            return ref
        short = name.rsplit(".", 1)[-1]
    else:
        short = name
    candidates = classes.classes_named(short)
    if not candidates:
        broken = classes.unparsed_files_defining(short)
        if broken:
            rel, why = broken[0]
            raise InputError(
                f"{rel}: {why}; class {short!r} is defined there, so it cannot be audited",
                f"fix the file (python -m py_compile {index.path_of(rel)} shows where)",
            )
        hint = closest_hint(
            short,
            classes.all_class_names(),
            "did you mean {}?",
            "check the spelling; class names are case-sensitive",
        )
        raise InputError(
            f"class {name!r} not found in the SGLang tree at {index.tree.package_dir}", hint
        )
    if len(candidates) == 1:
        return candidates[0]
    exported = set(classes.exporter_names(short))  # registered wins a tie
    candidates.sort(key=lambda r: (r.qualname not in exported, "/models/" not in r.file, r.file))
    return candidates[0]
