"""One Python traceback as it appears in an SGLang log, and what it says went wrong.

A scheduler prints `[ts TP4] Scheduler hit an exception: Traceback (most recent call last):` and
then the frames and the exception on lines without a prefix; a logger's `exception()` prints the
traceback on the lines after its message. `Block` collects those lines with a cap (the last frames
and the first lines of each exception), and `classify` turns a finished block into a category,
a message, the SGLang call site and a fix.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from eaglebug.checks.contract.environ import visible_devices
from eaglebug.checks.contract.findings import CallSite
from eaglebug.checks.contract.fixes import AdviceFix
from eaglebug.checks.logs import patterns as lp
from eaglebug.checks.logs.results import Result, describe, excerpt, normalize

FRAMES_KEPT = 24  # innermost frames of each exception
EXC_LINES_KEPT = 40  # lines of each exception message
SECTIONS_KEPT = 6  # chained exceptions
LINE_CHARS = 2000  # characters kept of one line
MAX_FRAME_LINES = 5000  # a "traceback" longer than this is not one


@dataclass
class Frame:
    file: str
    line: int
    func: str
    code: str = ""


@dataclass
class Section:
    """One `Traceback (most recent call last):` and its exception."""

    frames: deque[Frame] = field(default_factory=lambda: deque(maxlen=FRAMES_KEPT))
    exception: list[str] = field(default_factory=list)
    frame_count: int = 0


def wrapper_pattern(wrapper: str) -> re.Pattern[str] | None:
    """What another logger put before each line, with its digits (timestamps) left variable."""
    if not wrapper:
        return None
    parts = re.split(r"(\d+)", wrapper)
    return re.compile("".join(r"\d+" if p.isdigit() else re.escape(p) for p in parts))


class Block:
    """The lines of one traceback, as they arrive; `add` says whether a line belonged to it."""

    def __init__(
        self,
        rank: str | None,
        line: int | None,
        offset: int | None,
        ts: str | None,
        process: str | None,
        wrapper: str,
        phase: str,
    ) -> None:
        self.rank = rank
        self.line = line
        self.offset = offset
        self.ts = ts
        self.process = process  # "Scheduler" for "Scheduler hit an exception"
        self.wrapper = wrapper_pattern(wrapper)
        self.phase = phase  # the launch phase when it started
        self.sections: deque[Section] = deque([Section()], maxlen=SECTIONS_KEPT)
        self.state = "frames"  # frames | exception | after_blank | chain
        self.lines = 1
        self.idle = 0  # lines since this block last took one
        self.trimmed = False  # its frame lines lost their indentation (a log viewer's export)
        self.inferred = False  # its phase was read from its frames: the log said none
        self.blind = False  # the log had said no phase when it began

    @property
    def complete(self) -> bool:
        return bool(self.sections[-1].exception)

    def strip(self, line: str) -> str:
        if self.wrapper is not None:
            m = self.wrapper.match(line)
            if m:
                return line[m.end() :]
        return line

    def add(self, raw: str) -> bool:
        """Take one line without an SGLang prefix; False: it does not belong (the block ended)."""
        line = self.strip(raw)[:LINE_CHARS]
        section = self.sections[-1]
        if not line.strip():
            if self.state == "exception":
                self.state = "after_blank"
            return True
        if line.startswith(lp.TRACEBACK):
            self.sections.append(Section())
            self.state = "frames"
            return self._took()
        if line.startswith(lp.CHAIN_MARKERS):
            self.state = "chain"
            return self._took()
        if self.state == "after_blank":
            return False
        frame = lp.FRAME_RX.match(line) if line.startswith((" ", lp.FRAME_NEEDLE)) else None
        if frame and self.state != "exception":
            self.trimmed = not line.startswith(" ")
            section.frames.append(
                Frame(frame["file"], int(frame["line"]), (frame["func"] or "").strip())
            )
            section.frame_count += 1
            self.state = "frames"
            return self._took(frames=True)
        if (
            self.state == "frames"
            and self.trimmed
            and section.frames
            and not section.frames[-1].code
            and not lp.BARE_EXCEPTION_RX.match(line)
        ):  # a frame's code line that a log viewer trimmed: the exception comes after it
            section.frames[-1].code = line.strip()
            return self._took(frames=True)
        if line[0] in " \t":
            if self.state == "frames":
                if section.frames and not section.frames[-1].code:
                    section.frames[-1].code = line.strip()
                return self._took(frames=True)
            if self.state == "exception":
                return self._exception_line(section, line.rstrip())
            return self._took()
        self.state = "exception"
        return self._exception_line(section, line.rstrip())

    def _took(self, frames: bool = False) -> bool:
        self.lines += 1
        self.idle = 0
        return not (frames and self.lines > MAX_FRAME_LINES)

    def _exception_line(self, section: Section, line: str) -> bool:
        if len(section.exception) >= EXC_LINES_KEPT:
            return False  # what follows is not part of the exception any more
        section.exception.append(line)
        return self._took()


def sglang_site(frames: list[Frame]) -> CallSite | None:
    """The innermost frame inside the sglang package, relative to its parent folder."""
    for frame in reversed(frames):
        path = frame.file.replace("\\", "/")
        at = path.rfind("/sglang/")
        if at < 0 and path.startswith("sglang/"):
            at = -1
        if at >= 0 or path.startswith("sglang/"):
            return CallSite(file=path[at + 1 :], line=frame.line, code=frame.code)
    return None


def rule_match(text: str) -> tuple[str, re.Match[str]] | None:
    for rule in lp.CATEGORY_RULES:
        m = rule.rx.search(text)
        if m is None:
            continue
        if rule.category == "missing_interface_method" and not _is_model_attribute(m):
            continue
        if rule.category == "device_ordinal":
            m = next((c for c in rule.rx.finditer(text) if _past_the_visible(c)), None)
            if m is None:
                continue
        return rule.category, m
    return None


def _past_the_visible(m: re.Match[str]) -> bool:
    """SGLang's Context line comes with any failed `set_device`: it says the ordinal was bad
    only where the GPU asked for is past the ones `CUDA_VISIBLE_DEVICES` lists (a busy or
    unavailable GPU fails there too, and its own error says so); with the variable unset, only
    the error's own words can say it."""
    if m["gpu"] is None:
        return True  # the error's own words
    listed = m["cvd"].strip("'")
    if listed == "None":
        return False  # every GPU visible: the line alone cannot say the ordinal was bad
    return int(m["gpu"]) >= len(visible_devices(listed))


def _is_model_attribute(m: re.Match[str]) -> bool:
    cls, attr = m["cls"], m["attr"]
    if cls in lp.NOT_A_CLASS:
        return False
    return attr in lp.INTERFACE_METHODS or bool(lp.MODEL_CLASS_RX.search(cls))


def _exception_text(section: Section) -> str:
    return "\n".join(section.exception)


def classify(block: Block) -> Result:
    """The category of a finished traceback, from its last exception back to the first."""
    sections = [s for s in block.sections if s.exception or s.frames]
    if not sections:
        sections = [block.sections[-1]]
    last = sections[-1]
    frames = list(last.frames)
    site = sglang_site(frames)
    exc = _exception_text(last)
    first = exc.splitlines()[0] if exc else ""
    if lp.INTERRUPT_RX.match(first):
        message = f"the server was stopped ({excerpt(first, 80)})"
        return Result("other", ("interrupt",), message, first, interrupt=True)
    if lp.GENERIC_EXCEPTION_RX.search(first):
        return Result("other", ("generic", normalize(first)), excerpt(first), first, generic=True)
    for section in reversed(sections):
        text = _exception_text(section)
        found = rule_match(text)
        if found:
            category, m = found
            here = sglang_site(list(section.frames)) or site
            return describe(category, m, text, block.phase, here)
    if first.startswith("AssertionError") and site and lp.SHAPE_ASSERT_RX.search(site.code):
        loading = any(lp.LOAD_WEIGHTS_FRAME_RX.search(f.func) for f in frames)
        text = f"{first or 'AssertionError'} at `{site.code}`"
        result = describe("config_mismatch", _dummy_match(), text, block.phase, site)
        result.key = ("config_mismatch", site.file, str(site.line))
        result.details = {"while_loading_weights": loading}
        return result
    if first.startswith("KeyError") and any(
        lp.LOAD_WEIGHTS_FRAME_RX.search(f.func) for f in frames
    ):
        return _unplaced_tensor(first, frames, block.phase, site)
    if not first and (block.phase == "cuda_graph" or _capturing(frames)):
        # Cut before its exception, inside the graph runner's capture: the capture failed.
        message = "CUDA graph capture failed; the log ends before the exception said why"
        result = describe("cuda_graph_capture", _dummy_match(), "", block.phase, site)
        result.message, result.key = message, ("cuda_graph_capture", "cut_off")
        return result
    if not first:
        message = "a traceback was cut off before its exception line"
        return Result("other", ("cut_off",), message, "", call_sites=_sites(site), generic=True)
    result = Result("other", ("other", normalize(first)), excerpt(first), excerpt(first, 400))
    result.call_sites = _sites(site)
    return result


def _capturing(frames: list[Frame]) -> bool:
    """The frames run inside a CUDA graph capture (the graph runner's `capture*` functions)."""
    capture = dict(lp.PHASE_FRAMES)["cuda_graph"]
    return any(capture.match(f.func) for f in frames)


_KEY_RX = re.compile(r"""^KeyError: ['"](?P<key>[^'"]+)['"]""")
_MODELS_FILE_RX = re.compile(r"sglang/srt/models/(?P<module>\w+)\.py$")


def _unplaced_tensor(first: str, frames: list[Frame], phase: str, site: CallSite | None) -> Result:
    """A `KeyError` from a model's `load_weights` (`params_dict[name]`): the checkpoint has a
    tensor the loading class has no parameter for. Which class's module was loading (the
    innermost `sglang/srt/models/*.py` frame), for which role, and what family of names it
    could not place: a draft's EAGLE-3 layer (`midlayer.*`) loaded by a module that is not an
    EAGLE-3 one means the draft's `architectures` names the wrong class."""
    key_match = _KEY_RX.match(first)
    key = key_match["key"] if key_match else None
    family = re.sub(r"\.\d+\.", ".#.", key) if key else None
    loader = next(
        (f for f in reversed(frames) if _MODELS_FILE_RX.search(f.file.replace("\\", "/"))), None
    )
    module = _MODELS_FILE_RX.search(loader.file.replace("\\", "/")) if loader else None
    where = f"sglang/srt/models/{module['module']}.py:{loader.line}" if module and loader else None
    draft = any("draft" in f.code or "eagle_worker" in f.file for f in frames)
    role = "draft" if draft else None
    result = describe("config_mismatch", _dummy_match(), first, phase, site)
    loading = f"the model class of {where} (load_weights)" if where else "the model's load_weights"
    result.message = (
        f"{loading} has no parameter for the checkpoint tensor {key or excerpt(first, 80)!r}"
        + (" of the draft" if draft else "")
    )
    eagle3_names = bool(key) and (key or "").split(".", 1)[0] == "midlayer"
    eagle3_module = bool(module) and "eagle3" in (module["module"] if module else "")
    if eagle3_names and not eagle3_module:
        result.message += (
            ": its midlayer.* names are an EAGLE-3 draft's, loaded by a class that is not an "
            "EAGLE-3 one, so the draft's config.json architectures is wrong"
        )
        result.fix = AdviceFix(
            "set the draft's config.json architectures to the EAGLE-3 class SGLang registers "
            "for its target (e.g. LlamaForCausalLMEagle3), or pass "
            "--speculative-algorithm EAGLE3 with a draft converted for it"
        )
    elif draft:
        result.fix = AdviceFix(
            "the draft checkpoint does not match the class its config.json architectures names: "
            "name the EAGLE class SGLang registers for this draft (eaglebug preflight checks it)"
        )
    elif family and re.search(r"_scale$|\.scales?$|zero_point", family):
        result.message += " (a quantization scale: the checkpoint is quantized)"
        result.fix = AdviceFix(
            "the checkpoint's quantization (its config.json quantization_config) is not the one "
            "the model was built with: pass the matching --quantization, or use the "
            "checkpoint's own config.json"
        )
    result.role = role
    result.key = ("config_mismatch", "unplaced", family or normalize(first))
    result.details = {
        "tensor": key,
        "tensor_family": family,
        "loading_module": where,
        "while_loading_weights": True,
    }
    return result


def _sites(site: CallSite | None) -> tuple[CallSite, ...]:
    return (site,) if site is not None else ()


def _dummy_match() -> re.Match[str]:
    m = re.match("", "")
    assert m is not None
    return m
