"""Reading failures from single lines (no traceback): crash signals, what a C++ abort printed
just before it, a bare exception line, a known failure's words inside another message, and
SGLang's warning that an overridden context length is allowed. A mixin of `LogAnalyzer`, which
holds the state these methods read and the book they write to."""

from __future__ import annotations

import re
from collections import deque

from eaglebug.checks.logs import patterns as lp
from eaglebug.checks.logs.book import Evidence, Where
from eaglebug.checks.logs.phases import PhaseReading
from eaglebug.checks.logs.results import Result, describe, normalize
from eaglebug.checks.logs.traceback import rule_match


class At:
    """The line being read: its rank, position and time."""

    __slots__ = ("line", "offset", "rank", "time")

    def __init__(
        self, rank: str | None, line: int | None, offset: int | None, time: str | None
    ) -> None:
        self.rank, self.line, self.offset, self.time = rank, line, offset, time


class LineReading(PhaseReading):
    """The single-line half of `LogAnalyzer` (see its state in `LogAnalyzer.reset`; what it
    shares with the other halves is declared on `PhaseReading`)."""

    _ring: deque[str]
    _line_level: str | None
    _warmup_failure: str | None
    _terminate: tuple[str, ...] | None  # the finding of a C++ abort's first line, until what()

    # --- single lines -------------------------------------------------------------------------

    def _signals(self, text: str, at: At) -> bool:
        """A crash signal on this line (kept as evidence); True if there was one."""
        for signal in lp.CRASH_SIGNALS:
            m = signal.rx.search(text)
            if m is None:
                continue
            phase = self._phase_now()
            if signal.kind == "fatal_python_error" and self._aborted_because(m, at, phase):
                return True
            warmup = lp.WARMUP_FAILED_RX.search(text)
            if warmup is not None:
                self._warmup_failure = warmup["what"].strip()[:400] or None
                phase = "warmup"
            if signal.kind == "sigquit":
                self._crashed_child_before(phase)
            details = {k: v for k, v in m.groupdict().items() if v is not None}
            hint = text.find("If exit code is -9")
            if hint >= 0:
                details["sglang_hint"] = text[hint:].strip()
            where = Where(at.rank, at.line, at.offset, at.time, phase)
            self._book.evidence(Evidence(signal.kind, text.strip()[:400], where, details))
            self._crash(phase)
            return True
        return False

    def _crashed_child_before(self, phase: str) -> None:
        """The watchdog line that made SGLang send itself SIGQUIT (0.5.23), if it is just above."""
        crashed = lp.SUBPROCESS_CRASHED
        for previous in reversed(self._ring):
            m = crashed.rx.search(previous)
            if m is None:
                continue
            prefix = lp.PREFIX_RX.match(previous)
            text = previous[prefix.end() if prefix else 0 :].strip()[:400]
            where = Where(None, None, None, self._last_time, phase)
            self._book.evidence(Evidence(crashed.kind, text, where, m.groupdict()))
            return

    def _aborted_because(self, m: re.Match[str], at: At, phase: str) -> bool:
        """A C++ abort: what the lines just before `Fatal Python error` said, if anything."""
        for previous in reversed(self._ring):
            if not previous or lp.PREFIX_RX.match(previous):
                continue  # the C++ runtime prints without SGLang's prefix
            what = lp.CPP_WHAT_RX.search(previous)
            found = rule_match(previous)
            if found is None and what is None:
                continue
            text = what["what"] if what else previous
            if found is not None:
                result = describe(found[0], found[1], text.strip(), phase, None)
            else:
                key = ("other", normalize(text))
                result = Result("other", key, f"a process aborted: {text[:160]}", text[:400])
            result.details = {**result.details, "aborted": m["what"].strip()}
            self._book.add(result, "error", Where(at.rank, at.line, at.offset, at.time, phase))
            self._crash(phase)
            return True
        return False

    def _single_line(self, text: str, at: At) -> None:
        """A failure on one line: an exception printed without its traceback (a fragment, or
        `RuntimeError: ...` from a logger), uvicorn's `ERROR:    [Errno 98] ...`, or a known
        failure's words inside another message (`Failed to initialize lk_moe: CUDA out of
        memory`). An exception line is a failure; words inside another message are a warning
        until the launch dies without a better reason (`FindingBook.tentative`)."""
        stripped = text.strip()
        found = rule_match(stripped)
        if found is not None and found[0] == "hang":
            self._hang(found[1], stripped, at)
            return
        words = lp.FATAL_WORDS_RX.search(stripped)
        fatal = words is not None and not (words["oom"] and self._ready)
        cpp = bool(lp.FATAL_LINE_RX.search(stripped))
        doomed = bool(lp.DOOMED_LINE_RX.search(stripped)) or fatal
        shaped = bool(lp.BARE_EXCEPTION_RX.match(stripped)) or cpp or doomed
        if found is None and not shaped:
            return
        # An error-level line of another logger reports a failure but is not itself the end.
        logged = not shaped and self._line_level in lp.ERROR_LEVELS
        shaped = shaped or logged or stripped.startswith("ERROR:")
        phase = self._phase_now(at.rank)
        if phase == "launching" and not self._seen_phase():
            phase = next((ph for words, ph in lp.PHASE_WORDS if words in stripped), phase)
            self._hints.append(phase)
        what = lp.CPP_WHAT_RX.search(stripped)
        said = what["what"].strip() if what else stripped  # as `_aborted_because` reads it
        if found is not None:
            result = describe(found[0], found[1], said, phase, None)
        else:
            key = ("other", normalize(said))
            result = Result("other", key, said[:160], said[:400])
            # only says another process failed (the Engine's "Server process terminated
            # unexpectedly", Ray's actor): the failure's own line says why, where there is one
            result.generic = bool(lp.GENERIC_EXCEPTION_RX.search(said))
        where = Where(at.rank, at.line, at.offset, at.time, phase)
        if not shaped:
            self._book.add(result, "warning", where, tentative=True)
            return
        if fatal and self._book.confirm(result.category, where):
            return  # the failure another line named is fatal: that line says it better
        if what is not None and self._terminate is not None:
            self._book.supersede(self._terminate, result, "error", where)
            self._terminate = None
            return
        if self._ready and not (cpp or fatal):
            self._book.add(result, "warning", where)
            return
        self._book.add(result, "error", where)
        self._terminate = result.key if lp.TERMINATE_RX.match(stripped) else None
        if not (doomed or logged):
            self._crash(phase)

    def _hang(self, m: re.Match[str], text: str, at: At) -> None:
        """The scheduler's watchdog fired: no forward step finished for its timeout. It watches
        a running batch (and, from 0.5.9, the scheduler's initialisation), so where the log does
        not say the launch is still starting, a batch was being served."""
        phase = self.phase
        if self._ready or not self._seen_phase():
            phase = "warmup" if phase == "warmup" else "ready"
        elif phase not in {"warmup", "ready"}:
            phase = self._phase_now(at.rank)
        soft = m["soft"] == "True"
        result = describe("hang", m, text, phase, None)
        where = Where(at.rank, at.line, at.offset, at.time, phase)
        self._book.add(result, "warning" if soft else "error", where)
        if not soft:
            self._crash(phase)

    def _allowed_context(self, m: re.Match[str], at: At) -> None:
        """SGLang warned and went on: SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN was set."""
        found = lp.CONTEXT_RULE.rx.search(m.string)
        if found is None:
            return
        result = describe("context_length", found, m.string, self.phase, None)
        who = "the draft runs" if m["reason"] == "Target model's" else "the model runs"
        result.message = (
            f"context length {m['asked']} is longer than the derived {m['derived']}; "
            f"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set, so {who} past its trained positions"
        )
        result.fix = None
        result.key = (*result.key, "allowed")
        self._book.add(result, "warning", Where(at.rank, at.line, at.offset, at.time, self.phase))
