"""The engine's side of a session's checks: what a check is asked, and the engine that answers.

Why apart from `session.py`: the checks can run in this process (`HereChecks`: the tests,
and the fallback) or in a worker process of their own (`checkprocess.py`, the TUI's way), and
both take the same `CheckRequest`, plain data that pickles. Everything a check needs from the
session's state (the launch words with their pending flags, the environment the launch will
see, the GPUs, the last launch's measured memory) is gathered by the session first, so the
engine side reads no state file and asks no GPU.

`HereChecks` keeps, between checks, the syntax trees its checks parsed (a re-check after a
flag, a fix or a relaunch parses only the files that changed, `checks/source/trees.py`) and
the last index, shed of its trees, for the class names a log's traceback gives; in the
worker, whole answers too, with the tree's answers on disk (`keptchecks.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from eaglebug.session.collector import few_collections
from eaglebug.session.progress import CheckProgress, ProgressTracker

if TYPE_CHECKING:  # the engine loads when first used, after first paint
    from eaglebug.checks import (
        Answers,
        Background,
        ClassReport,
        ExternalPackage,
        Finding,
        GpuArch,
        GpuMemory,
        Mapper,
        MemoryLog,
        ParsedTrees,
        Patch,
        PreflightResult,
        SglangTree,
        TreeIndex,
    )

Progress = Callable[[CheckProgress], None]


class WorkerEnded(Exception):
    """The process the checks ran in ended in the middle of one (killed, out of memory).

    `last_words`: the end of what it wrote to its stderr, where it wrote anything (a crash's
    stack from `faulthandler`, an error it could not answer with): a bug to report then."""

    def __init__(self, message: str, last_words: str = "") -> None:
        super().__init__(message)
        self.last_words = last_words
        if last_words:  # the errors log's traceback shows them, as the cause
            self.__cause__ = RemoteTraceback(last_words)


class RemoteTraceback(Exception):
    """What the checks' process said of where it failed (an exception's traceback there, or
    the stack a crash wrote to its stderr): the cause of the exception raised here, so the
    errors log holds it (as `concurrent.futures` does)."""

    def __str__(self) -> str:
        return f"in the checks' process:\n{self.args[0]}"


@dataclass
class CheckResult:
    """What the last run of the checks found, with the patches that would fix it."""

    findings: list[Finding]
    reports: list[ClassReport]
    patches: list[Patch]
    preflight: PreflightResult | None
    took_s: float
    error: str | None = None


@dataclass(frozen=True)
class CheckRequest:
    """One preflight of a launch, with everything it reads outside the SGLang tree."""

    tree: SglangTree
    words: list[str]  # the launch command, the pending flag fixes in it
    environ: dict[str, str]  # what the launch will see: this one, its env fixes, the pending
    gpu_memory: GpuMemory | None
    gpu_arch: GpuArch | None
    external: ExternalPackage | None  # where the launch's python finds its model package
    measured: MemoryLog | None  # what the last launch of these words measured


@dataclass(frozen=True)
class AuditRequest:
    """A fix's re-audit: the classes of the check that found what the fix mends."""

    tree: SglangTree
    external: ExternalPackage | None
    target: str | None
    algorithm: str
    draft: str | None


@dataclass(frozen=True)
class Checked:
    """A check's findings and patches, with the warnings of the engine."""

    flight: PreflightResult
    patches: list[Patch]


class Checks(Protocol):
    """Where a session's checks run: here (`HereChecks`) or in a worker process."""

    def start(self) -> None:
        """Get ready for a check whose request is being made (a worker loads the engine)."""
        ...

    def check(self, request: CheckRequest, progress: Progress | None) -> Checked: ...

    def reaudit(self, request: AuditRequest) -> list[Finding]: ...

    def class_named(self, short: str) -> str | None:
        """The qualified name of the one class of the last check's tree named `short`; None
        when there is none or several, or when a check is under way (never waits for it)."""
        ...

    def close(self) -> None: ...


class HereChecks:
    """The engine in this process, with the trees and the index kept between checks."""

    def __init__(
        self,
        mapper: Callable[[Callable[[int, int], None] | None], Mapper] | None = None,
        background: Background | None = None,
        keep: bool = False,
    ) -> None:
        """`mapper(progress)` makes the mapper for a check's work over many files (default:
        in order, here); `background` starts work ahead in a helper (a worker process is
        single-threaded and can fork one; a threaded app cannot); `keep`: whole answers are
        kept with the tree's answers and reused for the same question (`keptchecks.py`)."""
        self._mapper = mapper
        self._background = background
        self._keep = keep
        self._parsed: ParsedTrees | None = None
        self.index: TreeIndex | None = None  # the last check's, shed: class names
        self._tree: SglangTree | None = None  # the last check's tree, for an index of names
        self._lock = threading.Lock()

    def start(self) -> None:
        """The engine loads as the check starts."""

    def parsed_trees(self) -> ParsedTrees:
        if self._parsed is None:
            from eaglebug.checks import ParsedTrees

            self._parsed = ParsedTrees()
        return self._parsed

    def _mapper_for(self, progress: Callable[[int, int], None] | None) -> Mapper:
        if self._mapper is not None:
            return self._mapper(progress)
        from eaglebug.checks import InProcess

        return InProcess(progress)

    def check(self, request: CheckRequest, progress: Progress | None) -> Checked:
        with few_collections(), self._lock:  # a cold check collected as long as it checked
            return self._checked(request, progress)

    def _checked(self, request: CheckRequest, progress: Progress | None) -> Checked:
        tracker = ProgressTracker(progress) if progress is not None else None
        self._tree = request.tree
        if not self._keep:
            return self._computed(request, tracker, None)
        from eaglebug.checks import Answers
        from eaglebug.session import keptchecks

        answers, check_key = Answers(request.tree, True), keptchecks.key(request)
        if (found := keptchecks.kept(answers, check_key)) is not None:
            self.index = None  # another tree state, maybe: names from a new index
            return Checked(found.flight, found.patches)
        checked = self._computed(request, tracker, answers)
        keptchecks.keep(answers, check_key, checked.flight, checked.patches)
        return checked

    def _computed(
        self, request: CheckRequest, tracker: ProgressTracker | None, answers: Answers | None
    ) -> Checked:
        """The check over a new index (`answers`: the tree's, when read already)."""
        from eaglebug.checks import STAGES, TreeIndex, plan_patches, preflight

        if tracker is not None:  # building the index walks the tree: the first stage
            tracker.stage(STAGES[0])
        index = TreeIndex(
            request.tree,
            mapper=self._mapper_for(tracker.files if tracker is not None else None),
            answers=answers,
            parsed=tracker.parsed if tracker is not None else None,
            shared=self.parsed_trees(),
            background=self._background,
        )
        self.index = index
        try:
            flight = preflight(
                index,
                request.words,
                request.environ,
                request.gpu_memory,
                request.gpu_arch,
                external=request.external,
                measured=request.measured,
                progress=tracker.stage if tracker is not None else None,
            )
            patches = plan_patches(index, flight.reports)
        finally:
            index.close()  # no helper of its work ahead outlives the check
            index.shed()  # kept for class names; its trees live on in `parsed_trees` alone
        return Checked(flight, patches)

    def reaudit(self, request: AuditRequest) -> list[Finding]:
        from eaglebug.checks import TreeIndex, audit

        # the launch's package too; the trees of the checks that found what this fixes
        with few_collections(), self._lock:
            index = TreeIndex(
                request.tree,
                external=request.external,
                shared=self.parsed_trees(),
                mapper=self._mapper_for(None),
                background=self._background,
            )
            try:
                return audit(index, request.target, request.algorithm, request.draft).findings
            finally:
                index.close()

    def class_named(self, short: str) -> str | None:
        if not self._lock.acquire(blocking=False):
            return None
        try:
            if self.index is None and self._tree is not None:  # the last answer was kept
                from eaglebug.checks import TreeIndex

                self.index = TreeIndex(self._tree, shared=self.parsed_trees())
            found = self.index.classes_named(short) if self.index is not None else []
        finally:
            self._lock.release()
        return found[0].qualname if len(found) == 1 else None

    def close(self) -> None:
        """Nothing runs apart from the caller here."""
