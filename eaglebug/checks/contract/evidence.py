"""The evidence behind a finding, typed: what the CLI report, `diagnose` and the TUI show.

Three kinds, one per finding family: `InterfaceEvidence` (the call sites with their guards,
where a present attribute is inherited from, the delegate and the classes it may be),
`ConfigEvidence` (the values compared, where the rule was read from, SGLang's own words) and
`LogEvidence` (ranks, where in the log, the exception, the lines that show a death). Each
serialises to the JSON contract's `details` object with the keys it has always had.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from eaglebug.checks.contract import codec

JsonValue: TypeAlias = str | int | float | bool | tuple["JsonValue", ...] | None


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def frozen_value(value: Any) -> JsonValue:
    """A config value made hashable (lists become tuples; mappings their items)."""
    if isinstance(value, (list, tuple)):
        return tuple(frozen_value(v) for v in value)
    if isinstance(value, dict):
        return tuple((str(k), frozen_value(v)) for k, v in value.items())
    return value  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Site:
    """A call site with the context it runs in."""

    file: str
    line: int
    kind: str  # call | read | getattr | hasattr | ...
    role: str  # target | draft | any
    guards: tuple[str, ...] = ()  # the conditions under which it runs, as written
    via: tuple[str, ...] = ()  # file:line of the calls through which the model arrived

    def to_json(self) -> dict[str, Any]:
        return codec.named(self)


@dataclass(frozen=True)
class InterfaceEvidence:
    algorithm: str
    sites: tuple[Site, ...] = ()
    assumed: tuple[str, ...] = ()  # external bases assumed to provide no SGLang names
    dynamic_getattr: str | None = None  # the class whose __getattr__ is dynamic
    delegate_classes: tuple[str, ...] = ()  # inner classes that provide the attribute
    delegate_provider: str | None = None  # where the first of them gets it from
    delegate_lacking: tuple[str, ...] = ()  # inner choices that do not provide it
    chosen_by: tuple[str | None, ...] = ()  # the condition that picks each lacking choice
    # How the delegate's class is picked, when the registry picks it from a config
    # ("the registry, from self.text_config (sglang/srt/models/llava.py:681)").
    picked_by: str | None = None
    provided_by: str | None = None  # for present attributes: the owner
    chain: tuple[str, ...] = ()  # from the audited class up to the owner
    signature: str | None = None  # the owner's signature, for signature findings
    family_of: str | None = None  # the get_/set_ sibling that brought this one in
    one_of: tuple[str, ...] = ()  # a one-of requirement: the names, any of which would do
    read_from: str | None = None  # where the tree raises (file:line), for a one-of
    sglang_message: str | None = None  # what that raise says

    def site(self, file: str, line: int) -> Site | None:
        return next((s for s in self.sites if s.file == file and s.line == line), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sites": [s.to_json() for s in self.sites]}
        out["algorithm"] = self.algorithm
        if self.assumed:
            out["assumed"] = list(self.assumed)
        if self.dynamic_getattr:
            out["dynamic_getattr"] = self.dynamic_getattr
        if self.delegate_classes:
            out["delegate_class"] = list(self.delegate_classes)
            out["delegate_provider"] = self.delegate_provider
        if self.delegate_lacking:
            out["delegate_lacking"] = list(self.delegate_lacking)
        if self.chosen_by:
            out["chosen_by"] = list(self.chosen_by)
        if self.picked_by:
            out["picked_by"] = self.picked_by
        if self.provided_by:
            out["provided_by"] = self.provided_by
            out["chain"] = list(self.chain)
        if self.signature:
            out["signature"] = self.signature
        if self.family_of:
            out["family_of"] = self.family_of
        if self.one_of:
            out["one_of"] = list(self.one_of)
        if self.read_from:
            out["read_from"] = self.read_from
        if self.sglang_message:
            out["sglang_message"] = self.sglang_message
        return out


@dataclass(frozen=True)
class ConfigEvidence:
    """The values a config check compared, by name (bytes, lengths, ids, counts)."""

    values: tuple[tuple[str, JsonValue], ...] = ()
    read_from: str | None = None  # the tree file the rule came from
    sglang_message: str | None = None  # what SGLang itself would print
    # What the verdict rests on that is not known here (a flag a variable sets when the
    # launch runs, read as not given): said to the user, joined to `details.assumed`.
    assumed: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, values: dict[str, Any], read_from: str | None = None, sglang: str | None = None
    ) -> ConfigEvidence:
        return cls(tuple((k, frozen_value(v)) for k, v in values.items()), read_from, sglang)

    def value(self, name: str) -> JsonValue:
        return next((v for k, v in self.values if k == name), None)

    def to_json(self) -> dict[str, Any]:
        out = {k: _jsonable(v) for k, v in self.values}
        if self.assumed:  # after the check's own (the memory model's stand-ins)
            out["assumed"] = [*out.get("assumed", ()), *self.assumed]
        if self.read_from is not None:
            out["read_from"] = self.read_from
        if self.sglang_message:
            out["sglang_message"] = self.sglang_message
        return out


@dataclass(frozen=True)
class LogLine:
    """A line of the log that shows a process died without saying why."""

    kind: str
    text: str
    line: int | None
    offset: int | None


@dataclass(frozen=True)
class LogEvidence:
    ranks: tuple[str, ...] = ()
    count: int = 1  # how many times it was reported (all ranks together)
    line: int | None = None  # first seen here
    offset: int | None = None
    time: str | None = None
    phase: str | None = None
    exception: str | None = None
    process: str | None = None  # the process that printed it (scheduler, detokenizer, ...)
    import_errors: tuple[str, ...] = ()
    lines: tuple[LogLine, ...] = ()  # for log.other: the crash signals
    cause: str | None = None
    see: str | None = None  # the preflight finding that explains it
    audit: str | None = None  # the command that lists every such problem
    note: str | None = None
    sglang_hint: str | None = None  # SGLang's own advice, from the message
    captured: tuple[tuple[str, JsonValue], ...] = ()  # what the rule's pattern captured

    def get(self, name: str) -> JsonValue:
        return next((v for k, v in self.captured if k == name), None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: _jsonable(v) for k, v in self.captured}
        for key in ("see", "audit", "note", "sglang_hint"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update(
            {
                "ranks": list(self.ranks),
                "count": self.count,
                "line": self.line,
                "offset": self.offset,
                "time": self.time,
                "phase": self.phase,
                "exception": self.exception,
            }
        )
        if self.process:
            out["process"] = self.process
        if self.import_errors:
            out["import_errors"] = list(self.import_errors)
        if self.lines:
            out["evidence"] = [
                {"kind": e.kind, "text": e.text, "line": e.line, "offset": e.offset}
                for e in self.lines
            ]
        if self.cause:
            out["cause"] = self.cause
        return out


@dataclass(frozen=True)
class Cause:
    """A likely cause of a runtime symptom, the check that looks for it, and what it found."""

    text: str
    check: str  # a finding id (config.aux_layers) or a launch flag (--enable-dp-attention)
    flagged: bool | None  # None: that check did not run for this launch


@dataclass(frozen=True)
class RuntimeEvidence:
    """What a running server reported, and what preflight says of the likely causes."""

    reports: tuple[tuple[str, float, float | None], ...]  # (source, length, rate)
    threshold: float
    causes: tuple[Cause, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "reports": [{"source": s, "length": n, "rate": r} for s, n, r in self.reports],
            "threshold": self.threshold,
            "causes": [
                {"cause": c.text, "check": c.check, "flagged": c.flagged} for c in self.causes
            ],
        }


def captured_of(values: Iterable[tuple[str, Any]]) -> tuple[tuple[str, JsonValue], ...]:
    return tuple((k, frozen_value(v)) for k, v in values)


Evidence: TypeAlias = InterfaceEvidence | ConfigEvidence | LogEvidence | RuntimeEvidence
