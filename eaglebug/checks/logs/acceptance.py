"""Is speculative decoding working? Acceptance as SGLang reports it, and the low-acceptance finding.

A launch can reach "ready" with its speed-up gone: the target verifies every token, so answers
stay right, and the only symptom is an acceptance length near 1.0 (the draft's tokens are all
rejected). SGLang reports it in three places, whose wording and names this module reads from the
audited tree when it has one (they change between releases), else uses the releases it knows:

- the decode log line: `msg += f"accept len: {spec_accept_length:.2f}, accept rate: ..."`
  (srt/managers/scheduler_metrics_mixin.py:390 in 0.5.9, scheduler_components/
  metrics_reporter.py:1005 in 0.5.23), every `--decode-log-interval` batches;
- Prometheus gauges `sglang:spec_accept_length`, `sglang:spec_accept_rate` (srt/metrics/
  collector.py:388 in 0.5.9, observability/metrics_collector.py:512 in 0.5.23) with
  `--enable-metrics`;
- `/server_info`'s `internal_states[i].avg_spec_accept_length` (srt/managers/scheduler.py:2664
  in 0.5.9, scheduler_components/internal_state.py:125 in 0.5.23), an average since start,
  so consecutive polls are differenced.

`low_acceptance` turns reports into `runtime.low_acceptance` and names the causes preflight
can check for this launch, with whether preflight flagged each.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eaglebug.checks.contract.evidence import Cause, RuntimeEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import AdviceFix
from eaglebug.checks.contract.numbers import float_text, float_value
from eaglebug.checks.source import syntax

if TYPE_CHECKING:  # the TUI watches acceptance without the index (its checks run apart)
    from eaglebug.checks.source.index import TreeIndex

THRESHOLD = 1.2  # below this for `REPORTS_NEEDED` reports in a row: the speed-up is gone
REPORTS_NEEDED = 3
NO_SPEEDUP = 1.05  # this close to 1.0: no draft token is accepted at all


@dataclass(frozen=True)
class AcceptanceRules:
    """Where the audited SGLang reports acceptance, and in what words."""

    log_rx: re.Pattern[str]  # named groups: length, rate (rate may be absent)
    metric_length: str
    metric_rate: str
    server_info_key: str
    server_info_paths: tuple[str, ...]  # newest first
    source: str  # where the wording was read from

    @property
    def log_needle(self) -> str:
        """The literal every decode line with acceptance carries (for fast scans)."""
        head = self.log_rx.pattern.split("(?P", 1)[0]
        return re.sub(r"\\(.)", r"\1", head) or "accept len"


DEFAULT_RULES = AcceptanceRules(
    log_rx=re.compile(
        r"accept len: (?P<length>\d+(?:\.\d+)?), accept rate: (?P<rate>\d+(?:\.\d+)?)"
    ),
    metric_length="sglang:spec_accept_length",
    metric_rate="sglang:spec_accept_rate",
    server_info_key="avg_spec_accept_length",
    server_info_paths=("/server_info", "/get_server_info"),
    source="sglang 0.5.9 and 0.5.23 (see eaglebug/checks/logs/acceptance.py)",
)

_FSTRING_NEEDLE = b'f"accept len: {'
_METRIC_RX = re.compile(rb'name="(sglang:spec_accept_(?:length|rate))"')
_ROUTE_RX = re.compile(rb'@app\.get\("(/(?:get_)?server_info)"\)')
# Where SGLang keeps its scheduler's log lines, its metrics and its HTTP routes.
_WHERE = tuple(f"sglang/srt/{d}/" for d in ("managers", "metrics", "observability", "entrypoints"))
_GROUP_NAMES = {"spec_accept_length": "length", "spec_accept_rate": "rate"}


def acceptance_rules(index: TreeIndex) -> AcceptanceRules:
    """The tree's own wording, names and routes; the known ones where the tree is silent."""
    log_rx, where = None, None
    metrics: set[str] = set()
    routes: list[str] = []
    for rel in index.entries:
        if not rel.startswith(_WHERE):
            continue
        try:
            data = (index.tree.root / rel).read_bytes()
        except OSError:
            continue
        if log_rx is None and _FSTRING_NEEDLE in data:
            found = _log_pattern(data)
            if found is not None:
                log_rx, where = found[0], f"{rel}:{found[1]}"
        if b"sglang:spec_accept_" in data:
            metrics.update(m.decode() for m in _METRIC_RX.findall(data))
        if b"server_info" in data and b"@app.get" in data:
            routes += [r.decode() for r in _ROUTE_RX.findall(data)]
    rules = AcceptanceRules(
        log_rx=log_rx or DEFAULT_RULES.log_rx,
        metric_length=next(
            (m for m in metrics if m.endswith("length")), DEFAULT_RULES.metric_length
        ),
        metric_rate=next((m for m in metrics if m.endswith("rate")), DEFAULT_RULES.metric_rate),
        server_info_key=DEFAULT_RULES.server_info_key,
        server_info_paths=tuple(sorted(set(routes), key=len)) or DEFAULT_RULES.server_info_paths,
        source=where or DEFAULT_RULES.source,
    )
    return rules


def _log_pattern(data: bytes) -> tuple[re.Pattern[str], int] | None:
    """The decode line's acceptance part as a regex, from the f-string that prints it."""
    at = data.find(_FSTRING_NEEDLE)
    line_no = data.count(b"\n", 0, at) + 1
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at)
    text = data[start : end if end >= 0 else len(data)].decode("utf-8", "replace").strip()
    try:
        node = ast.parse(text)
    except SyntaxError:
        return None
    joined = next((n for n in syntax.walk(node) if isinstance(n, ast.JoinedStr)), None)
    if joined is None:
        return None
    parts: list[str] = []
    for value in joined.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(
                re.escape(value.value.rstrip(", "))
                if value is joined.values[-1]
                else re.escape(value.value)
            )
        elif isinstance(value, ast.FormattedValue):
            name = value.value.id if isinstance(value.value, ast.Name) else ""
            group = _GROUP_NAMES.get(name)
            parts.append(f"(?P<{group}>\\d+(?:\\.\\d+)?)" if group else r"[\d.]+")
    pattern = "".join(parts)
    if "(?P<length>" not in pattern:
        return None
    return re.compile(pattern), line_no


# Far past the tokens per verify step of any draft (speculative_num_draft_tokens is a few, an
# n-gram draft's a few dozen): a length beyond it, below 0, NaN or infinite measures nothing.
MAX_ACCEPT_LENGTH = 1024.0


def accept_length(value: object) -> float | None:
    """An acceptance length as a reading, or None: what a log, a gauge or a server's JSON gives
    goes through here (and the one number reader), so `nan`, `-3` or `1e400` is never shown."""
    return float_value(value, lo=0.0, hi=MAX_ACCEPT_LENGTH)


def accept_rate(value: object) -> float | None:
    """An acceptance rate (a fraction of the draft's tokens) as a reading, or None."""
    return float_value(value, lo=0.0, hi=1.0)


@dataclass(frozen=True)
class Report:
    """One acceptance report: the mean accepted tokens per verify step, and the rate."""

    length: float
    rate: float | None
    source: str  # log | metrics | server_info | probe

    @classmethod
    def of(cls, length: object, rate: object, source: str) -> Report | None:
        """A report from outside figures, or None when the length is no reading."""
        reading = accept_length(length)
        return cls(reading, accept_rate(rate), source) if reading is not None else None


def _cause(
    text: str,
    check: str,
    attribute: str | None,
    findings: list[Finding] | None,
    flags: set[str] | None,
) -> Cause:
    if check.startswith("--"):
        return Cause(text, check, (check in flags) if flags is not None else None)
    if findings is None or (
        check not in _ALWAYS_CHECKED and not any(f.id == check for f in findings)
    ):
        return Cause(text, check, None)
    hit = any(
        f.id == check
        and f.severity in {"error", "warning"}
        and (attribute is None or f.attribute == attribute)
        for f in findings
    )
    return Cause(text, check, hit)


def _from_match(m: re.Match[str]) -> Report | None:
    rate = m.groupdict().get("rate")
    return Report.of(float_text(m["length"]), float_text(rate) if rate else None, "log")


def from_log_line(line: str, rules: AcceptanceRules = DEFAULT_RULES) -> Report | None:
    m = rules.log_rx.search(line)
    return _from_match(m) if m is not None else None


def reports_in(text: str, rules: AcceptanceRules = DEFAULT_RULES) -> list[Report]:
    """Every decode-line report in `text`, oldest first."""
    found = (_from_match(m) for m in rules.log_rx.finditer(text))
    return [report for report in found if report is not None]


def from_metrics(text: str, rules: AcceptanceRules = DEFAULT_RULES) -> Report | None:
    """The gauges of SGLang's `/metrics` (Prometheus text; the mean over its label sets)."""
    lengths: list[float] = []
    rates: list[float] = []
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith("sglang:"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        value = float_text(line.rsplit(" ", 1)[-1])  # `NaN`, `+Inf`: no reading
        if name == rules.metric_length and (length := accept_length(value)) is not None:
            lengths.append(length)
        elif name == rules.metric_rate and (rate := accept_rate(value)) is not None:
            rates.append(rate)
    lengths = [v for v in lengths if v > 0]  # a gauge at 0 has not been set yet
    if not lengths:
        return None
    mean_rate = sum(rates) / len(rates) if rates else None
    return Report.of(sum(lengths) / len(lengths), mean_rate, "metrics")


def from_cumulative(before: tuple[float, int] | None, now: tuple[float, int]) -> Report | None:
    """`/server_info` gives (average since start, verify steps since start): the average of
    the steps between two polls is the difference, weighted by the steps."""
    average, steps = now
    if before is None:
        return Report.of(average, None, "server_info") if steps > 0 else None
    old_average, old_steps = before
    new_steps = steps - old_steps
    if new_steps <= 0:
        return None
    difference = (average * steps - old_average * old_steps) / new_steps
    return Report.of(difference, None, "server_info")


# What preflight can check for a launch whose acceptance is low, with the check that does it.
CAUSES: tuple[tuple[str, str, str | None], ...] = (
    (
        "the algorithm name does not fit the draft's architecture (EAGLE vs EAGLE3)",
        "config.algorithm_mismatch",
        None,
    ),
    (
        "the aux hidden-state layer ids miss the target's layers (after the class's offset)",
        "config.aux_layers",
        None,
    ),
    (
        "the target never captures aux hidden states (set_eagle3_layers_to_capture)",
        "interface.missing",
        "set_eagle3_layers_to_capture",
    ),
    (
        "the draft's vocabulary map (d2t) is missing or does not match the target",
        "config.vocab",
        None,
    ),
    ("the draft has no trained lm_head (nor takes the target's)", "config.draft_lm_head", None),
    (
        "draft tensors its loader cannot place keep their initial values",
        "config.draft_weights",
        None,
    ),
    ("DP attention lowers acceptance (sglang #16274: 2.35 -> 1.48)", "--enable-dp-attention", None),
)


# The checks preflight runs for every EAGLE launch whose configs it can read.
_ALWAYS_CHECKED = frozenset({"config.aux_layers", "config.vocab", "interface.missing"})


def low_acceptance(
    reports: Sequence[Report],
    preflight: Iterable[Finding] | None = None,
    launch_flags: Iterable[str] | None = None,
    threshold: float = THRESHOLD,
    needed: int = REPORTS_NEEDED,
) -> Finding | None:
    """`runtime.low_acceptance` when the last `needed` reports all stay below `threshold`.

    `preflight`: this launch's preflight findings (None: preflight did not run, so no cause is
    known to be checked); `launch_flags`: the launch's flags (None: not known)."""
    last = list(reports)[-needed:]
    if len(last) < needed or any(r.length >= threshold for r in last):
        return None
    findings = list(preflight) if preflight is not None else None
    flags = set(launch_flags) if launch_flags is not None else None
    causes = [_cause(text, check, attribute, findings, flags) for text, check, attribute in CAUSES]
    dead = all(r.length <= NO_SPEEDUP for r in last)
    mean = sum(r.length for r in last) / len(last)
    flagged_now = [c.check for c in causes if c.flagged]
    message = (
        f"speculative decoding accepts {mean:.2f} tokens per step over the last {len(last)} "
        f"reports (below {threshold:g})"
        + ("; the draft's tokens are all rejected: no speed-up" if dead else "")
    )
    if flagged_now:
        message += f"; preflight flagged {', '.join(flagged_now)}"
    return Finding(
        id="runtime.low_acceptance",
        severity="error" if dead else "warning",
        message=message,
        fix=AdviceFix(
            "fix what preflight flagged (Enter shows which causes it checked), relaunch, and "
            "compare: an EAGLE-3 draft trained for this target accepts about 2.5-4 tokens"
        ),
        evidence=RuntimeEvidence(
            reports=tuple((r.source, r.length, r.rate) for r in last),
            threshold=threshold,
            causes=tuple(causes),
        ),
    )
