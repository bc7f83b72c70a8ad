"""The findings a log analysis accumulates: one per problem, with every rank that reported it.

A problem is keyed by its category and its normalised message (numbers blanked), so eight ranks
printing one traceback, each with its own GPU number, are one finding that lists the eight ranks.
Lines that only show that a process died (SIGQUIT, a dead scheduler, an abort) are kept as
evidence; they become one `log.other` finding only when nothing says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from eaglebug.checks.contract.evidence import LogEvidence, LogLine, captured_of
from eaglebug.checks.contract.findings import Finding, Severity
from eaglebug.checks.logs import patterns as lp
from eaglebug.checks.logs.results import Result, normalize

MAX_FINDINGS = 200
MAX_EVIDENCE = 32

# Which crash signal describes a death best, when several were logged.
_EVIDENCE_PRIORITY = (
    "scheduler_died",
    "subprocess_crashed",
    "scheduler_dead",
    "fatal_python_error",
    "exception",
    "cut_off",
    "sigquit",
    "initialization_failed",
    "exit_code",
)
_SIGNALS = {"-9": " = SIGKILL", "-6": " = SIGABRT", "-11": " = SIGSEGV"}


@dataclass(frozen=True)
class Where:
    """Where a finding was first seen."""

    rank: str | None
    line: int | None
    offset: int | None
    time: str | None
    phase: str
    process: str | None = None


@dataclass
class Evidence:
    """A line or traceback that shows a process died without saying why."""

    kind: str
    text: str
    where: Where
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Entry:
    """One finding as it accumulates ranks and repeats."""

    result: Result
    severity: Severity
    ranks: frozenset[str]
    count: int
    order: int
    where: Where


def rank_key(label: str) -> tuple[int, ...]:
    """`DP0 TP4` sorts by its numbers in prefix order: DP, PP, ATTN_CP, MOE_DP, TP, EP."""
    parts = {kind: int(n) for kind, n in lp.RANK_PART_RX.findall(label)}
    return tuple(parts.get(kind, -1) for kind in lp.RANK_KINDS)


def sort_ranks(ranks: set[str] | frozenset[str]) -> list[str]:
    return sorted(ranks, key=lambda r: (rank_key(r), r))


def rank_summary(ranks: list[str]) -> str:
    """`TP0-TP7` for a contiguous run of one kind; `DP0 TP0 … DP7 TP7` for one of
    labels of several parts, each part counting up by one; else the labels (at most eight)."""
    if not ranks:
        return ""
    kinds = {lp.RANK_PART_RX.sub(lambda m: m[1] + "#", r) for r in ranks}
    if len(ranks) > 2 and len(kinds) == 1:
        parts = [[int(n) for _, n in lp.RANK_PART_RX.findall(r)] for r in ranks]
        if all(
            [n - first for n in column] == list(range(len(ranks)))
            for first, column in zip(parts[0], zip(*parts, strict=True), strict=True)
        ):
            if " " not in ranks[0]:
                return f"{ranks[0]}-{ranks[-1]}"
            return f"{ranks[0]} … {ranks[-1]}"
    shown = ", ".join(ranks[:8])
    return shown + (f", … ({len(ranks)} ranks)" if len(ranks) > 8 else "")


class FindingBook:
    """Findings keyed by category and normalised message, and the evidence of deaths."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, ...], _Entry] = {}
        self._evidence: list[Evidence] = []
        self._order = 0
        self._tentative: set[tuple[str, ...]] = set()
        self.import_errors: list[str] = []  # "Ignore import error when loading ..." lines

    def add(
        self, result: Result, severity: Severity, where: Where, tentative: bool = False
    ) -> None:
        """`tentative`: a failure's words inside another message, a warning unless the launch
        dies with nothing better to say why (then the first of them is the error)."""
        if tentative:  # one per category: the lines around one failure repeat its words
            result.key = (result.category, "tentative")
            self._tentative.add(result.key)
        elif result.category != "other" and result.exception:
            # The same exception printed alone before its traceback (a reporter's paste, a
            # logger's summary) was an unexplained failure until the traceback said what it is.
            self._entries.pop(("other", normalize(result.exception.splitlines()[0])), None)
        self._merge(self._entries, result, severity, where, take_order=True)

    def confirm(self, category: str, where: Where) -> bool:
        """A fatal line of `category` (NCCL's init returning an error code) confirms the failure
        that another line of the same category named in its own words: that one becomes the
        error. False when there is none to confirm."""
        key = (category, "tentative")
        entry = self._entries.get(key)
        if entry is None:
            return False
        self._tentative.discard(key)
        ranks = frozenset([where.rank]) if where.rank else frozenset()
        self._entries[key] = replace(
            entry, severity="error", ranks=entry.ranks | ranks, count=entry.count + 1
        )
        return True

    def supersede(
        self, old: tuple[str, ...], result: Result, severity: Severity, where: Where
    ) -> None:
        """`result` says better what the finding keyed `old` said (a C++ abort's `what():` after
        its `terminate called ...`): it takes that finding's place and first position."""
        entry = self._entries.pop(old, None)
        if entry is None:
            self.add(result, severity, where)
            return
        if result.key in self._entries:  # already said (another rank): one finding
            kept = self._entries[result.key]
            self._entries[result.key] = replace(kept, ranks=kept.ranks | entry.ranks)
            return
        self._entries[result.key] = replace(entry, result=result, severity=severity)

    def _merge(
        self,
        into: dict[tuple[str, ...], _Entry],
        result: Result,
        severity: Severity,
        where: Where,
        take_order: bool,
    ) -> None:
        ranks = frozenset([where.rank]) if where.rank else frozenset()
        old = into.get(result.key)
        if old is not None:
            stronger: Severity = "error" if "error" in (old.severity, severity) else old.severity
            first = old.where
            for key, value in result.details.items():  # what another line adds (an abort)
                old.result.details.setdefault(key, value)
            if result.specific and not old.result.specific:
                old.result.message, old.result.specific = result.message, True
            if first.process is None and where.process is not None:
                first = replace(first, process=where.process)
            into[result.key] = replace(
                old, ranks=old.ranks | ranks, count=old.count + 1, severity=stronger, where=first
            )
            return
        if len(into) >= MAX_FINDINGS:
            return
        order = self._order + 1
        if take_order:
            self._order = order
        into[result.key] = _Entry(result, severity, ranks, 1, order, where)

    def evidence(self, evidence: Evidence) -> None:
        duplicate = any(e.kind == evidence.kind and e.text == evidence.text for e in self._evidence)
        if not duplicate and len(self._evidence) < MAX_EVIDENCE:
            self._evidence.append(evidence)

    def has_evidence(self, kind: str, text: str) -> bool:
        return any(e.kind == kind and e.text == text for e in self._evidence)

    def snapshot(
        self, pending: list[tuple[Result, Severity, Where]], crashed_during: str | None
    ) -> list[Finding]:
        """Every finding in the order first seen, `pending` ones (open tracebacks) merged in."""
        entries = dict(self._entries)
        for result, severity, where in pending:
            self._merge(entries, result, severity, where, take_order=False)
        ordered = sorted(entries.values(), key=lambda e: e.order)
        firm = {e.result.category for e in ordered if e.result.key not in self._tentative}
        for e in ordered:  # unless those words say which (SGLang's Context line for a GPU)
            if e.result.specific and e.result.key in self._tentative:
                for kept in ordered:
                    if kept.result.category == e.result.category and not kept.result.specific:
                        kept.result.message, kept.result.specific = e.result.message, True
                        for key, value in e.result.details.items():
                            kept.result.details.setdefault(key, value)
        ordered = [  # a failure read properly says it better than its words on other lines
            e
            for e in ordered
            if e.result.key not in self._tentative or e.result.category not in firm
        ]
        if any(e.severity == "error" and not e.result.generic for e in ordered):
            ordered = [e for e in ordered if not e.result.generic]  # "another process failed"
        crashed = crashed_during is not None
        if crashed and not any(e.severity == "error" for e in ordered):
            first = next((e for e in ordered if e.result.key in self._tentative), None)
            if first is not None:  # the launch died, and this is all the log says about why
                ordered = [replace(e, severity="error") if e is first else e for e in ordered]
        found = [self._finding(e) for e in ordered]
        if not any(f.severity == "error" for f in found):
            other = self._other(crashed_during)
            if other is not None:
                found.append(other)
        return found

    def _finding(self, entry: _Entry) -> Finding:
        r, where = entry.result, entry.where
        extra = dict(r.details)
        named = {key: extra.pop(key, None) for key in _NAMED}
        evidence = LogEvidence(
            ranks=tuple(sort_ranks(entry.ranks)),
            count=entry.count,
            line=where.line,
            offset=where.offset,
            time=where.time,
            phase=where.phase or None,
            exception=r.exception or None,
            process=where.process,
            import_errors=(
                tuple(self.import_errors)
                if r.category == "unsupported_architecture" and self.import_errors
                else ()
            ),
            see=_text(named["see"]),
            audit=_text(named["audit"]),
            note=_text(named["note"]),
            sglang_hint=_text(named["sglang_hint"]),
            captured=captured_of(extra.items()),
        )
        return Finding(
            id=f"log.{r.category}",
            severity=entry.severity,
            message=r.message,
            role=r.role,
            class_=r.class_,
            attribute=r.attribute,
            call_sites=r.call_sites,
            delegate=None,
            fix=r.fix,
            evidence=evidence,
        )

    def _other(self, crashed_during: str | None) -> Finding | None:
        """`log.other` from crash signals alone: what is known, never a guessed cause."""
        if not self._evidence:
            return None
        main = min(self._evidence, key=lambda e: _EVIDENCE_PRIORITY.index(e.kind))
        extra: dict[str, Any] = {}
        for e in self._evidence:
            extra.update({k: v for k, v in e.details.items() if k not in extra})
        named = {key: extra.pop(key, None) for key in _NAMED}
        evidence = LogEvidence(
            ranks=tuple(sort_ranks({e.where.rank for e in self._evidence if e.where.rank})),
            count=len(self._evidence),
            line=main.where.line,
            offset=main.where.offset,
            time=main.where.time,
            phase=crashed_during,
            lines=tuple(
                LogLine(e.kind, e.text, e.where.line, e.where.offset) for e in self._evidence[:8]
            ),
            cause="not in the log",
            see=_text(named["see"]),
            audit=_text(named["audit"]),
            note=_text(named["note"]),
            sglang_hint=_text(named["sglang_hint"]),
            captured=captured_of(extra.items()),
        )
        message = other_message(main, self._evidence)
        return Finding(id="log.other", severity="error", message=message, evidence=evidence)


_NAMED = ("see", "audit", "note", "sglang_hint")


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def other_message(main: Evidence, evidence: list[Evidence]) -> str:
    """What the crash signals say happened, and that the cause is not in the log."""
    code = main.details.get("code")
    if code is None:
        code = next((e.details["code"] for e in evidence if "code" in e.details), None)
    exit_code = f" (exit code {code}{_SIGNALS.get(str(code), '')})" if code is not None else ""
    unknown = "; the log does not show why"
    rank = main.details.get("rank")
    if main.kind == "scheduler_died":
        return f"rank {rank}'s scheduler died during initialization{exit_code}{unknown}"
    if main.kind == "subprocess_crashed":
        return f"{main.details.get('name')} crashed{exit_code}{unknown}"
    if main.kind == "scheduler_dead":
        return f"rank {rank}'s scheduler died{exit_code}{unknown}"
    if main.kind == "fatal_python_error":
        return f"a process aborted (Fatal Python error: {main.details.get('what', '?')}){unknown}"
    if main.kind == "cut_off":
        return "a traceback was cut off before its exception line; the cause is not in the log"
    if main.kind == "exception":
        return f"{main.text[:160]}{unknown}"
    if main.kind == "sigquit":
        return "a child process failed (SGLang got SIGQUIT from it); its error is not in the log"
    return f"the launch failed ({main.text[:120]}){unknown}"


def finding_json(finding: Finding) -> dict[str, Any]:
    """`Finding.to_json()` plus the ranks at the top level, as `diagnose --json` prints it."""
    return {**finding.to_json(), "ranks": list(finding.ranks)}
