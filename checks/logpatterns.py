"""What SGLang writes to its log, as pattern tables: line prefixes, milestones, failures.

Every text here is SGLang's own wording, read from the released source trees (paths are relative
to the `sglang` package; "0.5.9" and "0.5.23" name the releases checked):

- Line prefix: `configure_logger` formats records as `[%(asctime)s{ms}{prefix}] %(message)s`
  with `datefmt="%Y-%m-%d %H:%M:%S"` (srt/utils/common.py:1216 in 0.5.9, :2618 in 0.5.23);
  `run_scheduler_process` builds the prefix from `" DP{n}"`, `" PP{n}"`, `" ATTN_CP{n}"`,
  `" MOE_DP{n}"`, `" TP{n}"`, `" EP{n}"` in that order (srt/managers/scheduler.py:3081-3096 in
  0.5.9, :6279-6291 in 0.5.23). `SGLANG_LOG_MS` adds `.%(msecs)03d`.
- Milestones: see `MILESTONES` (each with its source line).
- Weight loading: tqdm with `BAR_FORMAT = "{desc}: {percentage:3.0f}% Completed | {n_fmt}/
  {total_fmt} [...]"` (srt/utils/common.py:129 in 0.5.9, where it ends in "\\n", so each update is
  its own line; :1414 in 0.5.23, without it, so updates are joined by "\\r" on one line) and
  `desc="Loading safetensors checkpoint shards"` (srt/model_loader/weight_utils.py:723 / :1166).
- Failures: see `CATEGORY_RULES` and `CRASH_SIGNALS`.

The fast whole-file scan (`logparse.analyze_file`) only looks at lines these tables can match, so
every line `LogAnalyzer.feed` reacts to must be found by `LAUNCH_SCAN` (before the server is
ready) or contain one of `SERVING_NEEDLES` (after), or continue a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PHASES = ("launching", "loading", "kv_cache", "cuda_graph", "warmup", "ready", "crashed")
PHASE_ORDER: dict[str, int] = {p: i for i, p in enumerate(PHASES)}

# `[2026-01-30 10:36:11 DP0 TP4] message`, optionally after a wrapper that another logger or a
# container runtime put in front (`2025-03-08 02:04:48,693 - __main__ - INFO - `, an ISO
# timestamp and a tab). The wrapper holds no `[`, so the match never backtracks far. A copied
# line that lost its `[` (a paste that began mid-line) still counts.
PREFIX_RX = re.compile(
    r"^(?P<wrap>[^\[\n]{0,120}?)"
    r"\[?(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] "
)
RANK_PART_RX = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP|rank)(\d+)")
RANK_KINDS = ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP", "rank")

# What other programs put in front of SGLang's lines when a user copies a log: a docker compose
# service name (`sglang-1  | `), a kubectl/journal ISO timestamp (`2025-02-27T16:30:43.48Z `,
# also in brackets), an srun task id (`0: `), torch.distributed's `[rank3]:`, a glog header
# (`[E227 16:30:43.486750 12 ProcessGroupNCCL.cpp:1785] `), Python logging's default format
# (`2025-03-08 02:04:48,693 - name - INFO - `). Each is stripped with exactly its separator,
# so a traceback's indentation survives; a rank it names is kept.
FOREIGN_PREFIX_RX = re.compile(
    r"(?:(?P<quote>> ?)"  # a Markdown quote of a pasted log
    r"|\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]? "
    r"(?:(?:stdout|stderr) [FP] )?"  # kubectl / containerd's CRI format
    r"|(?P<svc>[A-Za-z0-9][\w.-]{0,80}?) +\| ?"
    r"|\d{1,5}: "
    r"|\[(?P<rank>rank\d+)\]:"
    r"|\[?(?P<glog>[IWEF])\d{3,4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? [^\]\s]+:\d+\] ?"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - [\w.]+ - (?P<level>[A-Z]+) - "
    r"|[\w.-]+:\d+:\d+ \[\d+\] (?=(?:[\w./]+:\d+ )?NCCL )"  # NCCL's own host:pid:tid [dev]
    r")"
)
FOREIGN_PREFIXES_MAX = 4


def strip_foreign(line: str) -> tuple[str, str | None, str | None]:
    """`line` without the prefixes other programs added; a rank and a log level they named
    (glog's E/F and logging's ERROR/CRITICAL mean the line reports a failure)."""
    rank = level = None
    for _ in range(FOREIGN_PREFIXES_MAX):
        if PREFIX_RX.match(line) and not line.startswith(">"):
            break  # SGLang's own prefix: read by PREFIX_RX
        m = FOREIGN_PREFIX_RX.match(line)
        if m is None or not m.end():
            break
        rank = m["rank"] or rank
        level = m["glog"] or m["level"] or level
        line = line[m.end() :]
    return line, rank, level


ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

TRACEBACK = "Traceback (most recent call last):"
# A message that a traceback on the following lines may belong to (`logger.exception(msg)`).
LEAD_IN_RX = re.compile(r"(?i)error|exception|fail|traceback|:\s*$")
HIT_EXCEPTION_RX = re.compile(r"(\w+) hit an exception: Traceback")

# tqdm bars of the weight loaders (srt/model_loader/weight_utils.py): "Loading safetensors
# checkpoint shards", "Loading pt checkpoint shards", "Multi-thread loading shards", ...
PROGRESS_MARK = "% Completed | "
PROGRESS_RX = re.compile(
    r"(?P<desc>[^\r\n:]*?(?:[Ll]oading|shards)[^\r\n:]*): *(?P<pct>\d+)% Completed \| "
    r"(?P<done>\d+)/(?P<total>\d+)"
)


@dataclass(frozen=True)
class Milestone:
    """A log line that moves the launch forward: phase reached, a short label, where it is."""

    phase: str
    label: str
    rx: re.Pattern[str]
    source: str  # where SGLang logs it


MILESTONES: tuple[Milestone, ...] = (
    Milestone(
        "launching",
        "init torch distributed",
        re.compile(r"^Init torch distributed begin"),
        "srt/model_executor/model_runner.py:731 (0.5.9)",
    ),
    Milestone(
        "loading",
        "load weight begin",
        re.compile(r"^Load weight begin"),
        "srt/model_executor/model_runner.py:899 (0.5.9), :1274 (0.5.23)",
    ),
    # 0.5.23's startup weight-load overlap logs "Load weight end. Committed real weights after
    # CUDA graph capture" (model_runner_components/startup_weight_load.py:538): not a step back.
    Milestone(
        "kv_cache",
        "load weight end",
        re.compile(r"^Load weight end\.(?! Committed real weights after CUDA graph)"),
        "srt/model_executor/model_runner.py:1041 (0.5.9), :1373 (0.5.23)",
    ),
    # 0.5.9: "KV Cache is allocated. #tokens: ..." (srt/mem_cache/memory_pool.py:652/658);
    # 0.5.23: f"{cache_name} is allocated. dtype: ..., #tokens: ..." where cache_name is
    # "KV Cache" (or "<label> KV Cache" for a few special pools, which "Memory pool end"
    # covers) (srt/mem_cache/memory_pool.py:2088/2096).
    Milestone(
        "kv_cache",
        "KV cache allocated",
        re.compile(r"^KV Cache is allocated"),
        "srt/mem_cache/memory_pool.py:652 (0.5.9), :2088 (0.5.23)",
    ),
    Milestone(
        "kv_cache",
        "memory pool end",
        re.compile(r"^Memory pool end"),
        "srt/model_executor/model_runner_kv_cache_mixin.py:745 (0.5.9), "
        "srt/mem_cache/kv_cache_configurator.py:499 (0.5.23)",
    ),
    # 0.5.9: "Capture cuda graph begin. This can take up to several minutes." (model_runner.py:
    # 2147), "Capture draft cuda graph begin." (speculative/eagle_worker.py:249), "Capture
    # piecewise CUDA graph begin." (model_runner.py:2228); 0.5.23: "Capture target decode CUDA
    # graph begin." / "Capture target verify CUDA graph begin." (model_runner_components/
    # cuda_graph_setup.py:759), "Capture draft decode CUDA graph begin." (speculative/
    # eagle_worker_v2.py:515).
    Milestone(
        "cuda_graph",
        "CUDA graph capture begin",
        re.compile(r"^Capture [\w .-]{0,60}?graph begin"),
        "srt/model_executor/model_runner.py:2147 (0.5.9), "
        "srt/model_executor/model_runner_components/cuda_graph_setup.py:759 (0.5.23)",
    ),
    Milestone(
        "cuda_graph",
        "CUDA graph capture end",
        re.compile(r"^Capture [\w .-]{0,60}?graph end"),
        "srt/model_executor/model_runner.py:2161 (0.5.9), "
        "srt/model_executor/model_runner_components/cuda_graph_setup.py:788 (0.5.23)",
    ),
    # The HTTP server is up; SGLang then sends its warmup request (srt/entrypoints/http_server.py
    # `_execute_server_warmup`, :1667 in 0.5.9); a failure from here on is a warmup failure.
    Milestone(
        "warmup",
        "HTTP server up",
        re.compile(r"^INFO: +(?:Uvicorn running on|Application startup complete)"),
        "uvicorn, started by srt/entrypoints/http_server.py:1336 (0.5.9)",
    ),
    # A log whose start was cut off: batches being served mean the server was ready.
    Milestone(
        "ready",
        "serving requests",
        re.compile(r"^(?:Prefill|Decode) batch[.,]"),
        "srt/managers/scheduler_metrics_mixin.py (Prefill batch / Decode batch lines)",
    ),
    Milestone(
        "ready",
        "server ready",
        re.compile(r"^The server is fired up and ready to roll!"),
        "srt/entrypoints/http_server.py:1836 (0.5.9), :2600 (0.5.23)",
    ),
)
READY_TEXT = "The server is fired up and ready to roll!"


@dataclass(frozen=True)
class CrashSignal:
    """A line that says a process died, without saying why."""

    kind: str
    rx: re.Pattern[str]
    source: str


CRASH_SIGNALS: tuple[CrashSignal, ...] = (
    # Launch phase: srt/entrypoints/engine.py:870 (0.5.9), :1978 (0.5.23).
    CrashSignal(
        "sigquit",
        re.compile(r"Received sigquit from a child process"),
        "srt/entrypoints/engine.py:870 (0.5.9), :1978 (0.5.23)",
    ),
    # Running phase: srt/managers/tokenizer_manager.py:2508 (0.5.9), :4074 (0.5.23).
    CrashSignal(
        "sigquit",
        re.compile(r"SIGQUIT received\..*It usually means one child failed"),
        "srt/managers/tokenizer_manager.py:2508 (0.5.9), :4074 (0.5.23)",
    ),
    CrashSignal(
        "scheduler_dead",
        re.compile(r"Rank (?P<rank>\d+) scheduler is dead"),
        "srt/entrypoints/engine.py:897 (0.5.9)",
    ),
    CrashSignal(
        "scheduler_died",
        re.compile(
            r"Rank (?P<rank>\d+) scheduler died during initialization "
            r"\(exit code: (?P<code>-?\d+)\)"
        ),
        "srt/entrypoints/engine.py:2006 (0.5.23)",
    ),
    CrashSignal(
        "exit_code",
        re.compile(r"^Exit code: (?P<code>-?\d+)$"),
        "srt/entrypoints/engine.py:900 (0.5.9)",
    ),
    CrashSignal(
        "subprocess_crashed",
        re.compile(r"Subprocess (?P<name>\S+) \(pid=\d+\) crashed with exit code (?P<code>-?\d+)"),
        "srt/utils/watchdog.py:217 (0.5.23)",
    ),
    CrashSignal(
        "initialization_failed",
        re.compile(r"Initialization failed\."),
        "srt/entrypoints/engine.py:905 and http_server.py:1811 (0.5.9), "
        "http_server.py:2384 (0.5.23)",
    ),
    CrashSignal(
        "fatal_python_error", re.compile(r"Fatal Python error: (?P<what>.+)"), "faulthandler"
    ),
)

SUBPROCESS_CRASHED = next(s for s in CRASH_SIGNALS if s.kind == "subprocess_crashed")

# Exceptions that only say that another process failed: evidence of a crash, not its cause.
GENERIC_EXCEPTION_RX = re.compile(
    r"scheduler died during initialization|scheduler is dead|Initialization failed\. Please see"
    r"|Server process terminated unexpectedly"
    r"|^EOFError\b|^BrokenPipeError\b|^ConnectionResetError\b"
)
INTERRUPT_RX = re.compile(r"^(?:KeyboardInterrupt|SystemExit)\b")


@dataclass(frozen=True)
class CategoryRule:
    category: str
    rx: re.Pattern[str]
    why: str  # the wording it matches, and where it comes from
    # Literal text every match contains, for the whole-file scan to look for anywhere in a line
    # (one of them at least; matched as is, so a rule's case variants are listed).
    needles: tuple[str, ...] = ()


# Tried in order on the exception text of a traceback (its last exception first) or on one line.
# A rule that is the *consequence* of another comes after it: a CUDA graph capture that failed
# because the GPU ran out of memory is `oom`; an illegal memory access that NCCL's watchdog
# reported is `cuda_error`, not `nccl`.
CATEGORY_RULES: tuple[CategoryRule, ...] = (
    CategoryRule(
        "context_length",
        re.compile(
            r"(?P<reason>Target model's|User-specified) context_length \((?P<asked>\d+)\) is "
            r"greater than the derived context_length \((?P<derived>\d+)\)"
        ),
        "srt/configs/model_config.py:367/383 (0.5.9), :1299/1315 (0.5.23)",
        ("is greater than the derived context_length",),
    ),
    CategoryRule(
        "unsupported_architecture",
        re.compile(
            r"Model architectures (?P<archs>\[[^\]]*\]) "
            r"(?P<how>are not supported for now|failed to be inspected)"
            r"|Unsupported architectures: (?P<old>[\w, ]+)\. Supported list"
        ),
        "srt/models/registry.py:49 (0.5.9), :64 (0.5.23); older releases' wording",
        ("are not supported for now", "failed to be inspected", "Unsupported architectures: "),
    ),
    CategoryRule(
        "context_length",
        re.compile(
            r"Input length \((?P<input>\d+) tokens\) exceeds the maximum allowed length "
            r"\((?P<limit>\d+) tokens\)"
            r"|The input \((?P<input2>\d+) tokens\) is longer than the model's context length "
            r"\((?P<limit2>\d+) tokens\)"
        ),
        "srt/managers/tokenizer_manager.py (`_validate_one_request`), scheduler.py "
        "(`Input length ... exceeds the maximum allowed length`)",
        ("exceeds the maximum allowed length", "is longer than the model's context length"),
    ),
    CategoryRule(
        "rank_desync",
        re.compile(
            r"TP rank \d+ could finish the model loading, but there"
            r"|successfully reached monitoredBarrier, but received errors while waiting"
            r"|Please check rank (?P<faulty>\d+) logs for faulty rank"
        ),
        "srt/model_executor/model_runner.py `load_model` (0.5.9); torch ProcessGroupGloo",
        ("could finish the model loading", "reached monitoredBarrier", "logs for faulty rank"),
    ),
    CategoryRule(
        "missing_interface_method",
        re.compile(r"'(?P<cls>\w+)' object has no attribute '(?P<attr>\w+)'"),
        "torch.nn.Module.__getattr__ / Python AttributeError",
        ("object has no attribute",),
    ),
    CategoryRule(
        "oom",
        re.compile(
            r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|HIP out of memory"
            r"|Not enough memory\. Please try to increase --mem-fraction-static"
            r"|The memory capacity is unbalanced|out of memory"
            r"|is larger than the profiled value -\d+"
        ),
        "torch; srt/model_executor/model_runner_kv_cache_mixin.py:417 (0.5.9), "
        "pool_configurator.py:96 (0.5.23); model_runner.py:842 (0.5.9)",
        (
            "out of memory",
            "OutOfMemoryError",
            "Not enough memory",
            "memory capacity is unbalanced",
            "than the profiled value -",
        ),
    ),
    CategoryRule(
        "cuda_graph_capture",
        re.compile(
            r"operation not permitted when stream is capturing|cudaErrorStreamCapture\w+"
            r"|operation (?:is )?not permitted (?:when|while) (?:the )?stream is capturing"
            r"|captures? underway"
        ),
        "the CUDA runtime's capture errors (an op that cannot run inside a CUDA graph)",
        ("stream is capturing", "cudaErrorStreamCapture", "captures underway", "capture underway"),
    ),
    CategoryRule(
        "backend_unsupported",
        re.compile(r"no kernel image is available for execution on the device"),
        "the CUDA runtime: a kernel not built for this GPU's architecture",
        ("no kernel image",),
    ),
    CategoryRule(
        "cuda_error",
        re.compile(
            r"illegal memory access|device-side assert(?:ion)? triggered|unspecified launch failure"
            r"|misaligned address|illegal instruction was encountered|an illegal instruction"
            r"|CUBLAS_STATUS_(?!SUCCESS)\w+|CUDNN_STATUS_(?!SUCCESS)\w+|cudaErrorIllegalAddress"
            r"|CUDA error: (?!out of memory)(?P<cuda>[^\n(]{3,120})"
            r"|\.cu:\d+: .{0,200}Assertion .{1,200} failed"
        ),
        "the CUDA runtime's messages, as torch raises them (also in NCCL's watchdog `what():`)",
        (
            "illegal memory access",
            "device-side assert",
            "unspecified launch failure",
            "misaligned address",
            "illegal instruction",
            "CUBLAS_STATUS_",
            "CUDNN_STATUS_",
            "cudaErrorIllegalAddress",
            "CUDA error: ",
            "Assertion",
        ),
    ),
    CategoryRule(
        "port_in_use",
        re.compile(
            r"[Aa]ddress already in use|Port is already in use|is not available in \d+ seconds"
            r"|errno: 98\b|Errno 98\]|EADDRINUSE"
        ),
        "uvicorn / zmq / TCPStore; srt/server_args.py:5690, srt/utils/common.py:732 (0.5.9)",
        (
            "ddress already in use",
            "Port is already in use",
            "is not available in",
            "rrno: 98",
            "rrno 98]",
        ),
    ),
    CategoryRule(
        "nccl",
        re.compile(
            r"NCCL [Ee]rror|ncclCommInitRank failed|nccl(?:UnhandledCuda|System|Internal|"
            r"InvalidUsage|InvalidArgument|Remote)Error|DistBackendError"
            r"|Watchdog caught collective operation timeout|ProcessGroupNCCL.*(?:timeout|error)"
            r"|NCCL WARN (?P<warn>.*(?:socket\w*Connect|Connect to|bootstrap|[Ff]ail|[Tt]imeout"
            r"|[Ee]rror|refused|No route).*)"
            r"|Timeout at NCCL work|NCCL timeout|socketStartConnect: Connect to [^ ]+ failed"
            r"|client socket has timed out after \d+ ?ms while trying to connect"
            r"|TCP client failed to connect|DistNetworkError|TCPStore\S* .*(?:timed out|failed)"
        ),
        "srt/distributed/device_communicators/pynccl_wrapper.py (NCCL_CHECK); "
        "torch ProcessGroupNCCL; NCCL's own `NCCL WARN` lines",
        (
            "NCCL error",
            "NCCL Error",
            "ncclCommInitRank",
            "ncclUnhandled",
            "ncclSystem",
            "ncclInternal",
            "ncclInvalid",
            "ncclRemote",
            "DistBackendError",
            "Watchdog caught",
            "ProcessGroupNCCL",
            "NCCL WARN",
            "Timeout at NCCL work",
            "NCCL timeout",
            "socketStartConnect",
            "client socket has timed out",
            "TCP client failed",
            "DistNetworkError",
            "TCPStore",
        ),
    ),
    CategoryRule(
        "config_mismatch",
        re.compile(
            r"Attempted to load weight \(|size mismatch for|[Ss]hape mismatch"
            r"|must match the size of tensor|is invalid for input of size"
            r"|shapes cannot be multiplied|[Dd]imension mismatch"
            r"|Sizes of tensors must match except in dimension"
        ),
        "srt/model_loader/weight_utils.py:1028 (0.5.9), :1583 (0.5.23); torch",
        (
            "Attempted to load weight",
            "size mismatch",
            "hape mismatch",
            "must match the size",
            "is invalid for input of size",
            "shapes cannot be multiplied",
            "imension mismatch",
            "Sizes of tensors must match",
        ),
    ),
    CategoryRule(
        "weights_or_path",
        re.compile(
            r"FileNotFoundError|No such file or directory|does not appear to have a file named"
            r"|Can't load the configuration of|is not a local folder and is not a valid model"
            r"|HFValidationError|Repo id must be|RepositoryNotFoundError|GatedRepoError"
            r"|(?:Local)?EntryNotFoundError|Cannot find any model weights|No model weights found"
            r"|Could not find checkpoint files|SafetensorError|Incorrect path_or_model_id"
            r"|40[134] Client Error|We couldn't connect to|OfflineModeIsEnabled"
            r"|Unrecognized model in|Should have a `model_type` key"
        ),
        "srt/model_loader/loader.py:469/1586 (0.5.9), :581/2644 (0.5.23); huggingface_hub; "
        "transformers' AutoConfig",
        (
            "FileNotFoundError",
            "No such file or directory",
            "does not appear to have a file",
            "Can't load the configuration",
            "is not a local folder",
            "HFValidationError",
            "Repo id must be",
            "RepositoryNotFoundError",
            "GatedRepoError",
            "EntryNotFoundError",
            "model weights",
            "Could not find checkpoint files",
            "SafetensorError",
            "Incorrect path_or_model_id",
            "Client Error",
            "We couldn't connect to",
            "OfflineModeIsEnabled",
            "Unrecognized model in",
            "model_type` key",
        ),
    ),
    CategoryRule(
        "backend_unsupported",
        re.compile(
            r"Only SM ?\d+(?:\.x)?(?:(?:,| and| or) SM ?\d+(?:\.x)?)* (?:are|is) supported"
            r"|(?:is|are) not supported on (?:this |the current |your )?"
            r"(?:GPU|device|hardware|architecture|platform|SM ?\d+|sm_?\d+|Blackwell|Hopper|Ampere"
            r"|Volta|Turing|AMD|ROCm|HIP|NPU|XPU|intel_xpu|CPU)"
            r"|does not support speculative (?:decoding|decode|inference)"
            r"|(?:is|are) not supported (?:with|for|when using) (?:speculative|EAGLE|spec)"
            r"|[Uu]nsupported (?:attention )?backend|attention backend [^\n]{0,80}?(?:is not supported|not supported|unsupported)"
            r"|requires (?:SM ?|sm_?|compute capability )\d"
            r"|(?:FlashAttention|FA3|fa3|flashinfer|FlashInfer|FlashMLA|cutlass|CUTLASS|DeepGEMM|"
            r"deep_gemm|trtllm|TRTLLM)[^\n]{0,60}?(?:only supports|is only supported|requires"
            r"|not supported)"
            r"|is only supported on (?:\w+ )?(?:GPUs?|SM ?\d+|devices)"
        ),
        "SGLang's backend checks, e.g. srt/layers/attention/attention_registry.py:296 and "
        "srt/layers/attention/vision.py:1331 (0.5.23); the kernels' own capability checks",
        (
            "Only SM",
            "not supported on",
            "does not support speculative",
            "not supported with",
            "not supported for",
            "not supported when using",
            "nsupported backend",
            "nsupported attention backend",
            "attention backend",
            "requires SM",
            "requires sm",
            "requires compute capability",
            "only supports",
            "is only supported",
        ),
    ),
    CategoryRule(
        "tokenizer",
        re.compile(
            r"Can't load tokenizer|Couldn't instantiate the backend tokenizer|Tokenizer class "
            r"\w+ does not exist|tokenizer\.json|tokenizer_config|PreTrainedTokenizer\w*\b.*Error"
            r"|DetokenizerManager hit an exception|TokenizerManager hit an exception"
            r"|(?:De)?[Tt]okeniz(?:er|ation) (?:error|failed)"
        ),
        "transformers' AutoTokenizer; srt/managers/detokenizer_manager.py and "
        "tokenizer_manager.py (`... hit an exception`)",
        (
            "Can't load tokenizer",
            "backend tokenizer",
            "Tokenizer class",
            "tokenizer.json",
            "tokenizer_config",
            "PreTrainedTokenizer",
            "okenizerManager hit an exception",
            "okenizer error",
            "okenizer failed",
            "okenization error",
            "okenization failed",
        ),
    ),
    CategoryRule(
        "cuda_graph_capture",
        re.compile(r"Capture (?:cuda|CUDA) graph failed"),
        "srt/model_executor/cuda_graph_runner.py:373 + CUDA_GRAPH_CAPTURE_FAILED_MSG :935 (0.5.9), "
        "runner/decode_cuda_graph_runner.py:603 + runner_backend_utils/__init__.py:14 (0.5.23)",
        ("Capture cuda graph failed", "Capture CUDA graph failed"),
    ),
)

# SGLang prints its advice for a failed capture right after the failure (the
# CUDA_GRAPH_CAPTURE_FAILED_MSG cited above): "Possible solutions:\n1. ...".
SGLANG_ADVICE_RX = re.compile(r"Possible (?:solutions|suggestions):\s*(?P<advice>(?:.|\n)*)")
# A warmup that failed after the HTTP server came up (srt/entrypoints/http_server.py:1687, 0.5.9).
WARMUP_FAILED_RX = re.compile(r"Initialization failed\. warmup error: ?(?P<what>.*)")
# An exception printed on its own line (a fragment, or a logger that prints no traceback).
BARE_EXCEPTION_RX = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*(?P<type>[A-Z]\w*(?:Error|Exception|Failure)|Exception)"
    r"(?::\s*(?P<msg>.*))?$"
)
# Lines that report a failure by their form, not their words: what a C++ runtime prints as it
# aborts, a CUDA kernel's failed device-side assertion, SGLang's negative KV budget.
FATAL_LINE_RX = re.compile(
    r"^terminate called after throwing|what\(\):|thread terminated with exception"
    r"|Watchdog caught collective operation timeout"
    r"|^CUDA error\b|\.cu:\d+: .*Assertion .* failed"
    r"|^Segmentation fault|^Aborted \(core dumped\)"
)
# Lines that doom the launch, though SGLang goes on for a moment: a negative KV budget
# ("max_total_tokens=... is larger than the profiled value -561981. Use the profiled value").
DOOMED_LINE_RX = re.compile(r"is larger than the profiled value -\d")
ERROR_LEVELS = frozenset({"E", "F", "ERROR", "CRITICAL", "FATAL"})
# The launch phase a traceback's frames show, innermost first, for a log that says no phase
# (a fragment): SGLang's own function names along its start-up (srt/model_executor/
# model_runner.py, cuda_graph_runner.py, srt/entrypoints/http_server.py, srt/managers/*).
PHASE_FRAMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("warmup", re.compile(r"^(?:_wait_and_warmup|_execute_server_warmup|execute_warmups)$")),
    ("cuda_graph", re.compile(r"^(?:capture\w*|init_device_graphs|init_cuda_graphs|init_graphs)$")),
    ("kv_cache", re.compile(r"^(?:init_memory_pool|profile_max_num_token|init_kv_cache\w*)$")),
    ("loading", re.compile(r"^(?:load_model|load_weights\w*|weight_loader\w*|_load_weights)$")),
    (
        "launching",
        re.compile(
            r"^(?:init_torch_distributed|init_distributed_environment|initialize_model_parallel"
            r"|init_process_group|_new_process_group_helper)$"
        ),
    ),
    (
        "ready",
        re.compile(
            r"^(?:event_loop_normal|event_loop_overlap|event_loop_pp\w*|run_batch"
            r"|forward_batch_generation|forward_batch_speculative_generation"
            r"|process_input_requests|handle_generate_request|_handle_batch_output"
            r"|handle_batch_token_id_out|generate_request|event_loop|merge_batch"
            r"|prepare_for_decode)$"
        ),
    ),
)
# Frames of the scheduler's own loop: an exception there ends the server, as one that a
# request handler catches (`generate_request` in http_server.py) does not.
SCHEDULER_FRAMES_RX = re.compile(
    r"^(?:event_loop_normal|event_loop_overlap|event_loop_pp\w*|run_batch|merge_batch"
    r"|forward_batch_generation|forward_batch_speculative_generation|process_batch_result\w*)$"
)

# What a failure's own words say of when it happened, for a log that shows no phase.
PHASE_WORDS: tuple[tuple[str, str], ...] = (
    ("are not supported for now", "loading"),
    ("Unsupported architectures", "loading"),
    ("Capture cuda graph", "cuda_graph"),
    ("Capture CUDA graph", "cuda_graph"),
    ("stream is capturing", "cuda_graph"),
    ("than the profiled value", "kv_cache"),
    ("Not enough memory", "kv_cache"),
    ("memory pool", "kv_cache"),
    ("KV cache", "kv_cache"),
    ("could finish the model loading", "loading"),
    ("Load weight", "loading"),
    ("Loading safetensors", "loading"),
    ("warmup", "warmup"),
    ("Input length", "ready"),
    ("longer than the model's context length", "ready"),
    ("okenizerManager", "ready"),
)
# A frame line of a traceback whose header is not in the log (a fragment that starts inside).
FRAME_NEEDLE = '  File "'

# Processes whose crash is about the text, not the model (srt/managers/*_manager.py).
TOKENIZER_PROCESSES = frozenset({"TokenizerManager", "DetokenizerManager"})

# Lines that mean a launch stopped moving when nothing new arrives for this long, by phase.
STALL_AFTER_S: dict[str, float] = {
    "launching": 10 * 60,
    "loading": 10 * 60,
    "kv_cache": 5 * 60,
    "cuda_graph": 5 * 60,
    "warmup": 5 * 60,
}

CONTEXT_RULE = CATEGORY_RULES[0]
assert CONTEXT_RULE.category == "context_length"

# An AssertionError on a line like `assert param_data.shape == loaded_weight.shape`
# (srt/layers/linear.py:416 and others) is a shape mismatch while loading weights.
SHAPE_ASSERT_RX = re.compile(r"assert .*(?:\.shape|\.size\(\)) ?== ?")
LOAD_WEIGHTS_FRAME_RX = re.compile(r"load_weights?|weight_loader")
# Class names that are models (the AttributeError names a wrapper that lacks a method).
MODEL_CLASS_RX = re.compile(
    r"For(?:CausalLM|ConditionalGeneration|CausalLMNextN|SequenceClassification)\w*$"
    r"|(?:Model|MTP|Eagle\w*|NextN)$"
)
# Methods SGLang's speculative workers call on the model object (DESIGN.md).
INTERFACE_METHODS = frozenset(
    {
        "set_eagle3_layers_to_capture",
        "get_embed_and_head",
        "set_embed_and_head",
        "get_embed",
        "set_embed",
        "hot_token_id",
        "get_hot_token_id",
        "capture_aux_hidden_states",
        "lm_head",
        "logits_processor",
    }
)
NOT_A_CLASS = frozenset({"NoneType", "str", "int", "float", "dict", "list", "tuple", "bool"})

# Lines that only add evidence to a crash signal that follows them (what a C++ abort said).
CPP_WHAT_RX = re.compile(r"what\(\):\s+(?P<what>.+)")
IMPORT_ERROR_RX = re.compile(r"^Ignore import error when loading (?P<module>[\w.]+): (?P<error>.+)")
ALLOWED_CONTEXT_RX = re.compile(
    r"^Warning: (?P<reason>Target model's|User-specified) context_length \((?P<asked>\d+)\) is "
    r"greater than the derived context_length \((?P<derived>\d+)\)"
)
PORT_RX = re.compile(
    r"\('[^']*', (?P<p1>\d+)\)|tcp://[^:\s']+:(?P<p2>\d+)"
    r"|\]:(?P<p3>\d+) \(errno|:(?P<p4>\d+) \(errno"
    r"|at (?P<p5>\d+) is not available"
)
FRAME_RX = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
EXCEPTION_HEAD_RX = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
CHAIN_MARKERS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)

# --- what the whole-file scan looks for -------------------------------------------------------
# Before "ready": messages that start a prefixed line (one regex whose literal start, "] ",
# lets the regex engine jump from line to line), plus needles that can sit anywhere.
_LAUNCH_MESSAGE_STARTS = (
    r"Init torch distributed begin",
    r"Load weight (?:begin|end)",
    r"KV Cache is allocated",
    r"Memory pool end",
    r"Capture [\w .-]{0,60}?graph (?:begin|end)",
    r"The server is fired up",
    r"Received sigquit",
    r"SIGQUIT received",
    r"Rank \d+ scheduler",
    r"Exit code: ",
    r"Subprocess ",
    r"Initialization failed",
    r"ERROR: ",
    r"Port is already in use",
    r"Warning: (?:Target model's|User-specified) context_length",
    r"Ignore import error when loading",
    r"\w+ hit an exception",
)
# ASCII, so the str pattern (`LogAnalyzer.interesting`) matches what the bytes one (the scan) does.
LAUNCH_LINE_RX = re.compile(r"\] (?:" + "|".join(_LAUNCH_MESSAGE_STARTS) + ")", re.ASCII)
LAUNCH_SCAN = re.compile(LAUNCH_LINE_RX.pattern.encode())
# An exception line with no traceback header, anywhere ("RuntimeError: ...", "CUDA error: ...").
EXCEPTION_NEEDLES = ("rror: ", "Exception: ", "Exception (either")
LAUNCH_NEEDLES: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            "Traceback (most recent call last)",
            PROGRESS_MARK,
            "Fatal Python error",
            "ERROR:    [Errno",
            "Initialization failed",
            FRAME_NEEDLE,
            *EXCEPTION_NEEDLES,
            *(n for rule in CATEGORY_RULES for n in rule.needles),
        )
    )
)
# After "ready": only what can end a running server. Long needles make `bytes.find` skip
# further. The warmup request installs the running-phase SIGQUIT handler before "ready", so a
# SIGQUIT after it is logged as "SIGQUIT received. signum=..." (srt/managers/tokenizer_manager.py
# :2508 in 0.5.9, :4074 in 0.5.23); 0.5.23's subprocess watchdog line ("Subprocess ... crashed
# with exit code ... Triggering SIGQUIT", srt/utils/watchdog.py:217) comes just before it and is
# read back from the context lines.
# Each needle is one more pass over a day of `Decode batch` lines, so after "ready" there are
# few: a bare exception line while serving is "...Error: ..." (a CUDA error, an OOM, NCCL's
# DistBackendError all reach the log as one), and a watchdog's abort ends in "Fatal Python error"
# with its `what():` among the context lines.
SERVING_NEEDLES: tuple[str, ...] = (
    "Traceback (most recent call last)",
    "Fatal Python error",
    "SIGQUIT received",
    "Error: ",
)
# Lines kept before each crash signal, for what a C++ abort printed just before it.
CONTEXT_LINES = 24

# The failure patterns as one extended regex, for `grep -cE` baselines (bench/log_scan.py).
GREP_FAILURE_PATTERN = "|".join(
    (
        r"Traceback \(most recent call last\)",
        r"hit an exception",
        r"Received sigquit",
        r"SIGQUIT received",
        r"scheduler is dead",
        r"scheduler died",
        r"crashed with exit code",
        r"Initialization failed",
        r"Fatal Python error",
        r"[Aa]ddress already in use",
        r"CUDA out of memory",
        r"NCCL error",
        r"are not supported for now",
        r"is greater than the derived context_length",
        r"object has no attribute",
        r"Attempted to load weight",
        r"size mismatch",
        r"illegal memory access",
        r"device-side assert",
        r"Capture cuda graph failed",
        r"NCCL WARN",
        r"rror: ",
        r"Exception: ",
    )
)
