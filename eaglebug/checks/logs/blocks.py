"""The traceback half of `LogAnalyzer`: open a traceback where its header (or its first frame)
is, give it its lines, close it when it ends or waits too long for the rest, and turn it into a
finding or the evidence of a death; the phase it happened in, from the log or from its frames
for a fragment that says none. A mixin, as `LineReading` is the single-line half; the state it
reads is `LogAnalyzer.reset`'s."""

from __future__ import annotations

import re

from eaglebug.checks.contract.findings import Severity
from eaglebug.checks.logs import patterns as lp
from eaglebug.checks.logs.book import Evidence, Where
from eaglebug.checks.logs.lines import At
from eaglebug.checks.logs.phases import PhaseReading
from eaglebug.checks.logs.reports import as_tokenizer
from eaglebug.checks.logs.results import Result
from eaglebug.checks.logs.traceback import Block, Frame, classify

MAX_OPEN_BLOCKS = 64
SUSPEND_LIMIT = 200  # lines an unfinished traceback waits for the rest of its lines


class TracebackReading(PhaseReading):
    """The traceback half of `LogAnalyzer` (see its state in `LogAnalyzer.reset`)."""

    _blocks: dict[str | None, Block]
    _current: Block | None
    _warmup_failure: str | None

    def _open(self, at: At, process: str | None, wrapper: str) -> None:
        old = self._blocks.pop(at.rank, None)
        if old is not None:
            self._close(old)
        if len(self._blocks) >= MAX_OPEN_BLOCKS:
            self._close(next(iter(self._blocks.values())))
        block = Block(at.rank, at.line, at.offset, at.time, process, wrapper, self._phase_now())
        block.blind = not self._seen_phase()
        self._blocks[at.rank] = block
        self._current = block

    def _age(self) -> None:
        for block in list(self._blocks.values()):
            if block is self._current:
                continue
            block.idle += 1
            if block.idle > SUSPEND_LIMIT:
                self._close(block)

    def _close(self, block: Block) -> None:
        if self._blocks.get(block.rank) is block:
            del self._blocks[block.rank]
        if self._current is block:
            self._current = None
        block.phase = self._inferred(block)
        result = classify(block)
        if block.process in lp.TOKENIZER_PROCESSES and result.key == ("cut_off",):
            result = Result("other", ("other", block.process), "its traceback was cut off", "")
        where = where_of(block)
        if "warmup" in (block.process, block.phase):  # the traceback of the warmup request
            self._warmup_failure = (result.exception or result.message)[:400]
            self._crash("warmup")
            if result.category == "other" or result.generic:
                return  # said by the log.warmup finding
        if (
            block.process in lp.TOKENIZER_PROCESSES
            and result.category == "other"
            and not (result.generic or result.interrupt)
        ):
            result = as_tokenizer(result, block.process)
        if result.interrupt:
            self._book.add(result, "info", where)
        elif result.generic:
            kind, details = "cut_off" if result.key == ("cut_off",) else "exception", {}
            for signal in lp.CRASH_SIGNALS:
                said = signal.rx.search(result.exception)
                if said is not None:
                    kind = signal.kind
                    details = {k: v for k, v in said.groupdict().items() if v is not None}
                    break
            hint = result.exception.find("If exit code is -9")
            if hint >= 0:
                details["sglang_hint"] = result.exception[hint:].strip()
            self._book.evidence(Evidence(kind, result.exception or result.message, where, details))
            self._crash(block.phase)
        else:
            severity = severity_of(block, result)
            self._book.add(result, severity, where)
            if severity == "error":
                self._crash(block.phase)

    def _open_fatal(self) -> Block | None:
        """An open traceback that already shows its exception and will end the launch."""
        block = self._current
        return block if block is not None and block.complete and fatal(block) else None

    def _inferred(self, block: Block) -> str:
        """The phase a traceback happened in: the log's, else what its frames show."""
        if block.phase != "launching" or not block.blind:
            return block.phase
        phase = frames_phase([f for section in block.sections for f in section.frames])
        if phase is not None:
            self._hints.append(phase)
            block.inferred = True
            return phase
        said = "\n".join(line for section in block.sections for line in section.exception)
        for words, phase in lp.PHASE_WORDS:
            if words in said:
                self._hints.append(phase)
                return phase
        return block.phase


_CALLEE_RX = re.compile(r"(\w+)\(\S*$")


def frames_phase(frames: list[Frame]) -> str | None:
    """The launch phase a traceback's frames show, innermost first: SGLang's own function names
    along its start-up (`PHASE_FRAMES`), the call the innermost frame was making where the log
    cut the traceback there (`self.load_model()`), else a frame of the request managers that is
    not part of building them (serving)."""
    names = [f.func for f in frames]
    if frames:
        callee = _CALLEE_RX.search(frames[-1].code)
        if callee:
            names.append(callee[1])
    for func in reversed(names):
        for phase, rx in lp.PHASE_FRAMES:
            if rx.match(func):
                return phase
    for frame in reversed(frames):
        path = frame.file.replace("\\", "/")
        if lp.SERVING_FILE_RX.search(path) and not lp.NOT_SERVING_FUNC_RX.match(frame.func):
            return "ready"
    return None


def fatal(block: Block) -> bool:
    """A scheduler's exception ends the server; any traceback before "ready" ends the launch,
    and so does one of a fragment that never said it served (its phase read from its frames):
    only a log that shows the server up shows a request's exception that a handler caught."""
    if block.process is not None or block.phase != "ready" or block.inferred:
        return True
    return any(
        lp.SCHEDULER_FRAMES_RX.match(f.func) for section in block.sections for f in section.frames
    )


def severity_of(block: Block, result: Result) -> Severity:
    ends = fatal(block)
    result.details = {**result.details, "fatal": ends}
    return "error" if ends else "warning"


def where_of(block: Block) -> Where:
    return Where(block.rank, block.line, block.offset, block.ts, block.phase, block.process)
