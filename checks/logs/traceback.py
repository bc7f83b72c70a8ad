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
from typing import Any

from eaglebug.checks.contract.findings import CallSite
from eaglebug.checks.contract.fixes import AdviceFix, Choice, EnvFix, Fix, FlagFix
from eaglebug.checks.contract.numbers import float_text
from eaglebug.checks.logs import patterns as lp

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


@dataclass
class Result:
    """What one finished traceback says."""

    category: str
    key: tuple[str, ...]
    message: str
    exception: str  # the exception line, e.g. "AttributeError: '...' object has no attribute '...'"
    class_: str | None = None
    attribute: str | None = None
    role: str | None = None
    call_sites: tuple[CallSite, ...] = ()
    fix: Fix | None = None
    details: dict[str, Any] = field(default_factory=dict)
    generic: bool = False  # only says another process failed
    interrupt: bool = False


def normalize(text: str) -> str:
    """A message with its numbers and addresses blanked, so eight ranks' copies compare equal."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x#", text)
    return re.sub(r"(?<![\w.])\d+(?:\.\d+)?", "#", text)[:300]


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


def _role(code: str) -> str | None:
    has_draft, has_target = "draft" in code, "target" in code
    if has_draft != has_target:
        return "draft" if has_draft else "target"
    return None


def _excerpt(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _port(text: str) -> str | None:
    m = lp.PORT_RX.search(text)
    if not m:
        return None
    return next((g for g in m.groups() if g), None)


def rule_match(text: str) -> tuple[str, re.Match[str]] | None:
    for rule in lp.CATEGORY_RULES:
        m = rule.rx.search(text)
        if m is None:
            continue
        if rule.category == "missing_interface_method" and not _is_model_attribute(m):
            continue
        return rule.category, m
    return None


def _is_model_attribute(m: re.Match[str]) -> bool:
    cls, attr = m["cls"], m["attr"]
    if cls in lp.NOT_A_CLASS:
        return False
    return attr in lp.INTERFACE_METHODS or bool(lp.MODEL_CLASS_RX.search(cls))


OOM_FIX = {
    "loading": "the weights do not fit: spread them over more GPUs (--tp) or use a quantized "
    "checkpoint",
    "ready": "lower --mem-fraction-static, or --max-running-requests / --chunked-prefill-size",
}
_DURING = {
    "launching": "launch",
    "loading": "weight loading",
    "kv_cache": "KV cache allocation",
    "cuda_graph": "CUDA graph capture",
    "warmup": "the warmup request",
    "ready": "serving",
}
OOM_FIX_DEFAULT = (
    "lower --mem-fraction-static (e.g. 0.8) or --cuda-graph-max-bs, to leave room for CUDA "
    "graphs and activations"
)


def describe(
    category: str, m: re.Match[str], text: str, phase: str, site: CallSite | None
) -> Result:
    """Message, fix and evidence for one matched category; `text` is the exception or line."""
    first = text.splitlines()[0] if text else ""
    key: tuple[str, ...] = (category, normalize(first))
    result = Result(category, key, _excerpt(first), _excerpt(first, 400))
    if site is not None:
        result.call_sites = (site,)
    if category == "missing_interface_method":
        cls, attr = m["cls"], m["attr"]
        result.key = (category, cls, attr)
        result.class_, result.attribute = cls, attr
        result.role = _role(site.code) if site else None
        result.message = f"{cls} has no {attr}, which SGLang calls on the model object"
        result.fix = AdviceFix(f"eaglebug fix --model-class {cls} --apply")
        result.details = {
            "see": "interface.missing",
            "audit": f"eaglebug audit --model-class {cls}",
            "note": "the fix delegates every method the wrapper lacks, not only this one",
        }
    elif category == "context_length" and "input" in m.re.groupindex:
        given = int(m["input"] or m["input2"])
        limit = int(m["limit"] or m["limit2"])
        result.key = (category, "request", str(limit))
        result.attribute = "context_length"
        result.message = (
            f"a request of {given} tokens is longer than the {limit} tokens this server "
            "accepts; SGLang rejected it"
        )
        result.fix = AdviceFix(
            "send shorter prompts, or relaunch with a larger --context-length (the draft's "
            "trained length bounds it with speculative decoding); --allow-auto-truncate cuts them"
        )
        result.details = {"input_tokens": given, "limit_tokens": limit}
    elif category == "context_length":
        asked, derived = int(m["asked"]), int(m["derived"])
        env_var = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
        result.key = (category, m["reason"], str(asked), str(derived))
        result.attribute = "context_length"
        if m["reason"] == "Target model's":
            result.role = "draft"
            result.message = (
                f"the draft's context length ({derived}) is shorter than the target's ({asked}); "
                "SGLang refused to start"
            )
            result.fix = Choice(
                (
                    EnvFix(
                        env_var,
                        "1",
                        f"keeps the full {asked}-token context; the draft runs past the "
                        f"{derived} positions it was trained on, so acceptance drops on long "
                        "prompts",
                    ),
                    FlagFix(
                        "--context-length",
                        str(derived),
                        "keeps the draft inside its trained range; prompts longer than "
                        f"{derived} tokens are rejected",
                    ),
                )
            )
        else:
            result.role = "target"
            result.message = (
                f"--context-length {asked} is longer than the model's derived context length "
                f"{derived}; SGLang refused to start"
            )
            result.fix = Choice(
                (
                    FlagFix("--context-length", str(derived), "stays within the model's length"),
                    EnvFix(env_var, "1", "forces the longer context on SGLang"),
                )
            )
        result.details = {
            "see": "config.context_length",
            "requested": asked,
            "derived": derived,
            "env_var": env_var,
        }
    elif category == "unsupported_architecture":
        archs = m["archs"] or f"[{m['old']}]"
        result.key = (category, archs, m["how"] or "are not supported for now")
        if m["how"] == "failed to be inspected":
            result.message = f"SGLang could not import the model class for {archs}"
            result.fix = AdviceFix(
                "fix the import error of the model's module (details.import_errors)"
            )
        else:
            result.message = f"this SGLang release does not support the architecture {archs}"
            result.fix = AdviceFix(
                "use an SGLang release that registers it, or check architectures in config.json"
            )
        result.details = {"architectures": archs, "see": "config.unregistered_architecture"}
    elif category == "oom":
        tried = re.search(r"Tried to allocate ([\d.]+ [KMGT]?i?B)", text)
        if "Not enough memory" in text:
            result.message = "no GPU memory left for the KV cache after loading the weights"
            result.fix = AdviceFix(
                "increase --mem-fraction-static (SGLang's own hint), or use more GPUs (--tp)"
            )
        elif "unbalanced" in text:
            result.message = "GPU memory differs between ranks: other processes hold some GPUs"
            result.fix = AdviceFix(
                "free the GPUs other processes hold (nvidia-smi), or pick idle ones"
            )
        else:
            during = _DURING.get(phase, phase)
            result.message = f"CUDA out of memory during {during}" + (
                f" (tried to allocate {tried.group(1)})" if tried else ""
            )
            result.fix = AdviceFix(OOM_FIX.get(phase, OOM_FIX_DEFAULT))
        result.key = (category, result.message.split(" (")[0])
    elif category == "nccl":
        result.message = f"NCCL failed: {_excerpt(first, 160)}"
        if "NCCL_DEBUG=INFO" in text or "NCCL error" in text:
            result.fix = AdviceFix("rerun with NCCL_DEBUG=INFO to see NCCL's reason")
    elif category == "port_in_use":
        port = _port(text)
        result.key = (category, port or "")
        result.message = f"port {port} is already in use" if port else "a port is already in use"
        result.fix = AdviceFix(
            f"stop what holds port {port} (ss -ltnp | grep {port}), or pass another --port"
            if port
            else "stop the earlier server, or pass another --port"
        )
        if port:
            result.details = {"port": int(port)}
    elif category == "config_mismatch":
        result.message = f"weight shapes do not match the model: {_excerpt(first, 160)}"
        result.fix = AdviceFix(
            "check that config.json matches the checkpoint, and that the draft was trained for "
            "this target (eaglebug preflight compares the configs)"
        )
    elif category == "weights_or_path":
        result.message = f"model files not found or not readable: {_excerpt(first, 160)}"
        if "Unrecognized model in" in text or "model_type` key" in text:
            result.message = (
                "the model folder is not a model transformers recognises (its config.json has "
                f"no model_type): {_excerpt(first, 120)}"
            )
        result.fix = AdviceFix(
            "check --model-path / --speculative-draft-model-path: a folder with config.json and "
            "*.safetensors, or a Hub id (HF_TOKEN for gated repos)"
        )
    elif category == "rank_desync":
        result.key = (category, normalize(first))
        result.message = f"ranks did not get equally far: {_excerpt(first, 200)}"
        faulty = m.groupdict().get("faulty")
        result.fix = AdviceFix(
            f"read rank {faulty}'s own log lines: its error comes first"
            if faulty
            else "read the log of the ranks (or nodes) that did not finish: their error comes "
            "first (often OOM or a slow disk)"
        )
    elif category == "cuda_error":
        what = _excerpt(m.group(0), 120)
        result.key = (category, normalize(m.group(0)))
        result.message = f"a CUDA kernel failed ({what}) during {_DURING.get(phase, phase)}"
        advice = (
            "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; try another "
            "--attention-backend, --disable-cuda-graph, or an SGLang release that fixed it"
        )
        if "watchdog" in text.lower() or "ProcessGroupNCCL" in text:
            advice += "; NCCL's watchdog only reported it: NCCL itself is not the cause"
        result.fix = AdviceFix(advice)
    elif category == "cuda_graph_capture":
        result.message = f"CUDA graph capture failed: {_excerpt(first, 160)}"
        result.fix = AdviceFix(
            "lower --mem-fraction-static or --cuda-graph-max-bs (SGLang's own advice below), "
            "or --disable-cuda-graph to confirm"
        )
    elif category == "backend_unsupported":
        result.message = f"not supported on this GPU or with these options: {_excerpt(first, 160)}"
        result.fix = AdviceFix(
            "pick another --attention-backend (or --speculative-attention-mode / quantisation) "
            "that supports this GPU and speculative decoding, as the message says"
        )
    elif category == "hang":
        timeout, soft = m["timeout"], m["soft"] == "True"
        during = _DURING.get(phase, phase)
        result.key = (category, "soft" if soft else "hard")
        result.message = (
            f"no forward step finished for {timeout} s during {during}: the scheduler's "
            + ("soft watchdog reported it" if soft else "watchdog killed the server")
        )
        result.fix = AdviceFix(
            "a step hung: a collective waiting for another rank (NCCL_DEBUG=INFO), a kernel that "
            "never returns, or a deadlock on the CPU side; py-spy dump the scheduler processes "
            "(SGLang dumps them itself when py-spy is installed); raise --watchdog-timeout only "
            "if a step is legitimately that slow"
        )
        result.details = {"watchdog_timeout_s": float_text(timeout), "soft": soft}
    elif category == "tokenizer":
        result.message = f"the tokenizer failed: {_excerpt(first, 160)}"
        result.fix = AdviceFix(
            "check --tokenizer-path and that the model folder has its tokenizer files; "
            "--trust-remote-code for custom tokenizers"
        )
    said = lp.SGLANG_ADVICE_RX.search(text)
    if said is not None:
        lines = [x.strip() for x in said["advice"].splitlines() if x.strip()][:6]
        result.details = {**result.details, "sglang_hint": " ".join(lines)}
    return result


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
        message = f"the server was stopped ({_excerpt(first, 80)})"
        return Result("other", ("interrupt",), message, first, interrupt=True)
    if lp.GENERIC_EXCEPTION_RX.search(first):
        return Result("other", ("generic", normalize(first)), _excerpt(first), first, generic=True)
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
    result = Result("other", ("other", normalize(first)), _excerpt(first), _excerpt(first, 400))
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
        f"{loading} has no parameter for the checkpoint tensor {key or _excerpt(first, 80)!r}"
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
