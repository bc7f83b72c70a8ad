"""What a failure says: a `Result` (category, key, message, the exception, the SGLang call site,
the fix and typed details), and `describe`, which words the message and the fix of each category
from what matched (a traceback's exception or one line) and the phase it happened in."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.contract.environ import visible_devices
from eaglebug.checks.contract.findings import CallSite
from eaglebug.checks.contract.fixes import AdviceFix, Choice, EnvFix, Fix, FlagFix
from eaglebug.checks.contract.numbers import float_text
from eaglebug.checks.logs import patterns as lp


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
    # Its message names what its line showed (which GPU a rank asked for, what it saw): it
    # words the finding over a plainer line of the same failure, whichever came first.
    specific: bool = False


def normalize(text: str) -> str:
    """A message with its numbers and addresses blanked, so eight ranks' copies compare equal."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x#", text)
    return re.sub(r"(?<![\w.])\d+(?:\.\d+)?", "#", text)[:300]


def _role(code: str) -> str | None:
    has_draft, has_target = "draft" in code, "target" in code
    if has_draft != has_target:
        return "draft" if has_draft else "target"
    return None


def excerpt(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _port(text: str) -> str | None:
    m = lp.PORT_RX.search(text)
    if not m:
        return None
    return next((g for g in m.groups() if g), None)


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

# The categories whose finding is what failed, the line that says so, and one advice.
_PLAIN: dict[str, tuple[str, str]] = {
    "config_mismatch": (
        "weight shapes do not match the model",
        "check that config.json matches the checkpoint, and that the draft was trained for "
        "this target (eaglebug preflight compares the configs)",
    ),
    "cuda_graph_capture": (
        "CUDA graph capture failed",
        "lower --mem-fraction-static or --cuda-graph-max-bs (SGLang's own advice below), "
        "or --disable-cuda-graph to confirm",
    ),
    "backend_unsupported": (
        "not supported on this GPU or with these options",
        "pick another --attention-backend (or --speculative-attention-mode / quantisation) "
        "that supports this GPU and speculative decoding, as the message says",
    ),
    "tokenizer": (
        "the tokenizer failed",
        "check --tokenizer-path and that the model folder has its tokenizer files; "
        "--trust-remote-code for custom tokenizers",
    ),
}


def describe(
    category: str, m: re.Match[str], text: str, phase: str, site: CallSite | None
) -> Result:
    """Message, fix and evidence for one matched category; `text` is the exception or line."""
    first = text.splitlines()[0] if text else ""
    key: tuple[str, ...] = (category, normalize(first))
    result = Result(category, key, excerpt(first), excerpt(first, 400))
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
            "send shorter prompts, or relaunch with room for longer ones: the limit is the "
            "smaller of --context-length and the KV pool (max_total_num_tokens), so a larger "
            "--context-length (the draft's trained length bounds it with speculative decoding) "
            "or a larger pool (--mem-fraction-static, more GPUs); --allow-auto-truncate cuts them"
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
        # SGLang's raise, or its warning of a negative profile that comes before the raise
        # ("max_total_tokens=131072 is larger than the profiled value -561981"): no budget left
        # for any KV cache, which a lower fraction makes worse, not better.
        if "Not enough memory" in text or lp.DOOMED_LINE_RX.search(text):
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
        result.message = f"NCCL failed: {excerpt(first, 160)}"
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
    elif category in _PLAIN:
        what, advice = _PLAIN[category]
        result.message = f"{what}: {excerpt(first, 160)}"
        result.fix = AdviceFix(advice)
    elif category == "weights_or_path":
        result.message = f"model files not found or not readable: {excerpt(first, 160)}"
        if "Unrecognized model in" in text or "model_type` key" in text:
            result.message = (
                "the model folder is not a model transformers recognises (its config.json has "
                f"no model_type): {excerpt(first, 120)}"
            )
        result.fix = AdviceFix(
            "check --model-path / --speculative-draft-model-path: a folder with config.json and "
            "*.safetensors, or a Hub id (HF_TOKEN for gated repos)"
        )
    elif category == "rank_desync":
        result.key = (category, normalize(first))
        result.message = f"ranks did not get equally far: {excerpt(first, 200)}"
        faulty = m.groupdict().get("faulty")
        result.fix = AdviceFix(
            f"read rank {faulty}'s own log lines: its error comes first"
            if faulty
            else "read the log of the ranks (or nodes) that did not finish: their error comes "
            "first (often OOM or a slow disk)"
        )
    elif category == "device_ordinal":
        _device_ordinal(result, m, text)
    elif category == "cuda_error":
        what = excerpt(m.group(0), 120)
        result.key = (category, normalize(m.group(0)))
        result.message = f"a CUDA kernel failed ({what}) during {_DURING.get(phase, phase)}"
        advice = (
            "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; try another "
            "--attention-backend, --disable-cuda-graph, or an SGLang release that fixed it"
        )
        if "watchdog" in text.lower() or "ProcessGroupNCCL" in text:
            advice += "; NCCL's watchdog only reported it: NCCL itself is not the cause"
        result.fix = AdviceFix(advice)
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
    said = lp.SGLANG_ADVICE_RX.search(text)
    if said is not None:
        lines = [x.strip() for x in said["advice"].splitlines() if x.strip()][:6]
        result.details = {**result.details, "sglang_hint": " ".join(lines)}
    return result


def _device_ordinal(result: Result, m: re.Match[str], text: str) -> None:
    """A rank's `set_device` named a GPU its process does not see: more ranks on this node (or
    a higher `--base-gpu-id`) than `CUDA_VISIBLE_DEVICES` or the container leaves it. SGLang's
    Context line, where the text has it (after the error, in the same message), says which GPU
    and what was visible."""
    m = next((c for c in m.re.finditer(text) if c["gpu"] is not None), m)
    result.key = ("device_ordinal",)
    result.attribute = "tp_size"
    result.message = (
        "a rank asked for a GPU its process does not see (CUDA error: invalid device ordinal)"
    )
    details: dict[str, Any] = {"see": "config.gpu_count"}
    if m["gpu"] is not None:
        shown = m["cvd"].strip("'")
        gpu, rank = int(m["gpu"]), m["rank"]
        details["gpu_id"] = gpu
        details["cuda_visible_devices"] = None if shown == "None" else shown
        who = f"TP rank {rank}" if rank is not None else "a rank"
        if shown == "None":
            seen = "every GPU of the host is visible"
        else:
            count = len(visible_devices(shown))
            details["gpus_visible"] = count
            seen = f"CUDA_VISIBLE_DEVICES={shown} leaves it {count} (0-{count - 1})"
            if count <= 1:
                seen = f"CUDA_VISIBLE_DEVICES={shown} leaves it {count}"
        result.message = f"{who} asked for GPU {gpu}, but {seen}: invalid device ordinal"
        result.specific = True
        if m["size"] is not None:
            details["tp_size"] = int(m["size"])
    result.details = details
    result.fix = AdviceFix(
        "the launch puts more GPUs on this node than it sees: --tp x --pp (from --base-gpu-id, "
        "numbered from 0 among the visible GPUs) must fit what CUDA_VISIBLE_DEVICES (or docker "
        "--gpus) leaves it; eaglebug preflight counts them (config.gpu_count)"
    )
