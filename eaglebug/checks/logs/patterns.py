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
- Failures: see `CATEGORY_RULES` (logs/rules.py), the forms of failure lines (logs/forms.py) and
  `CRASH_SIGNALS`; line prefixes are in logs/prefix.py. Everything is re-exported here, the one
  namespace (`lp.`) the readers use.

Why tables and not readings of a tree: a log is read without one (`eaglebug diagnose LOG`, the
watch of a launch on another host, a log pasted from an issue), and it may come from a release
other than any tree at hand; so each entry carries the source line it was copied from, and
`test_logparse.py`'s `WORDING` checks those lines in the real releases.

The fast whole-file scan (`logparse.analyze_file`) only looks at lines these tables can match, so
every line `LogAnalyzer.feed` reacts to must be found by `LAUNCH_SCAN` (before the server is
ready) or contain one of `SERVING_NEEDLES` (after), or continue a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eaglebug.checks.logs.forms import (
    BARE_EXCEPTION_RX as BARE_EXCEPTION_RX,
)
from eaglebug.checks.logs.forms import (
    DOOMED_LINE_RX as DOOMED_LINE_RX,
)
from eaglebug.checks.logs.forms import (
    ERROR_LEVELS as ERROR_LEVELS,
)
from eaglebug.checks.logs.forms import (
    FATAL_LINE_RX as FATAL_LINE_RX,
)
from eaglebug.checks.logs.forms import (
    FATAL_WORDS_RX as FATAL_WORDS_RX,
)
from eaglebug.checks.logs.forms import (
    FRAME_NEEDLE as FRAME_NEEDLE,
)
from eaglebug.checks.logs.forms import (
    NOT_SERVING_FUNC_RX as NOT_SERVING_FUNC_RX,
)
from eaglebug.checks.logs.forms import (
    PHASE_FRAMES as PHASE_FRAMES,
)
from eaglebug.checks.logs.forms import (
    PHASE_WORDS as PHASE_WORDS,
)
from eaglebug.checks.logs.forms import (
    SCHEDULER_FRAMES_RX as SCHEDULER_FRAMES_RX,
)
from eaglebug.checks.logs.forms import (
    SERVING_FILE_RX as SERVING_FILE_RX,
)
from eaglebug.checks.logs.forms import (
    SGLANG_ADVICE_RX as SGLANG_ADVICE_RX,
)
from eaglebug.checks.logs.forms import (
    STALL_AFTER_S as STALL_AFTER_S,
)
from eaglebug.checks.logs.forms import (
    TERMINATE_RX as TERMINATE_RX,
)
from eaglebug.checks.logs.forms import (
    TOKENIZER_PROCESSES as TOKENIZER_PROCESSES,
)
from eaglebug.checks.logs.forms import (
    WARMUP_FAILED_RX as WARMUP_FAILED_RX,
)
from eaglebug.checks.logs.prefix import (
    ANSI_RX as ANSI_RX,
)
from eaglebug.checks.logs.prefix import (
    FOREIGN_PREFIX_RX as FOREIGN_PREFIX_RX,
)
from eaglebug.checks.logs.prefix import (
    FOREIGN_PREFIXES_MAX as FOREIGN_PREFIXES_MAX,
)
from eaglebug.checks.logs.prefix import (
    PREFIX_RX as PREFIX_RX,
)
from eaglebug.checks.logs.prefix import (
    RANK_KINDS as RANK_KINDS,
)
from eaglebug.checks.logs.prefix import (
    RANK_PART_RX as RANK_PART_RX,
)
from eaglebug.checks.logs.prefix import (
    RAY_REPEATED_RX as RAY_REPEATED_RX,
)
from eaglebug.checks.logs.prefix import (
    newest_first as newest_first,
)
from eaglebug.checks.logs.prefix import (
    strip_foreign as strip_foreign,
)
from eaglebug.checks.logs.prefix import (
    unwrap_record as unwrap_record,
)
from eaglebug.checks.logs.rules import (
    CATEGORY_RULES as CATEGORY_RULES,
)
from eaglebug.checks.logs.rules import (
    CONTEXT_RULE as CONTEXT_RULE,
)
from eaglebug.checks.logs.rules import (
    INTERFACE_METHODS as INTERFACE_METHODS,
)
from eaglebug.checks.logs.rules import (
    LOAD_WEIGHTS_FRAME_RX as LOAD_WEIGHTS_FRAME_RX,
)
from eaglebug.checks.logs.rules import (
    MODEL_CLASS_RX as MODEL_CLASS_RX,
)
from eaglebug.checks.logs.rules import (
    NOT_A_CLASS as NOT_A_CLASS,
)
from eaglebug.checks.logs.rules import (
    SHAPE_ASSERT_RX as SHAPE_ASSERT_RX,
)
from eaglebug.checks.logs.rules import (
    CategoryRule as CategoryRule,
)

PHASES = ("launching", "loading", "kv_cache", "cuda_graph", "warmup", "ready", "crashed")
PHASE_ORDER: dict[str, int] = {p: i for i, p in enumerate(PHASES)}


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


# Lines only a serving server prints: a prefill or decode batch (the scheduler's metrics lines,
# `Decode batch.` before 0.3), or uvicorn's access line of a request that completed (POST 200).
SERVING_LINE_RX = re.compile(
    r'^(?:(?:Prefill|Decode) batch[.,]|INFO: +\S+ - "POST /\S* HTTP/[\d.]+" 200\b)'
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
        SERVING_LINE_RX,
        "srt/managers/scheduler_metrics_mixin.py (Prefill batch / Decode batch lines); "
        "uvicorn's access line of a request that completed",
    ),
    Milestone(
        "ready",
        "server ready",
        re.compile(r"^The server is fired up and ready to roll!"),
        "srt/entrypoints/http_server.py:1836 (0.5.9), :2600 (0.5.23)",
    ),
)
READY_TEXT = "The server is fired up and ready to roll!"
SERVING_MILESTONE = next(m for m in MILESTONES if m.label == "serving requests")


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
        re.compile(r"Received sigquit from a child proces"),  # "proces": before 0.4.3
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
    # The shell's job status for a process that SIGKILL ended (the OOM killer, a watchdog's
    # kill): `Killed`, or `./entrypoint.sh: line 48:    27 Killed   python3 -m sglang...`.
    CrashSignal(
        "killed",
        re.compile(r"^(?:\S+: line \d+: +\d+ )?Killed(?: +\S.*)?$"),
        "bash's job status for SIGKILL",
    ),
)

SUBPROCESS_CRASHED = next(s for s in CRASH_SIGNALS if s.kind == "subprocess_crashed")

# Exceptions that only say that another process failed: evidence of a crash, not its cause.
GENERIC_EXCEPTION_RX = re.compile(
    r"scheduler died during initialization|scheduler is dead|Initialization failed\. Please see"
    r"|Server process terminated unexpectedly|The actor died because of an error raised in"
    r"|^EOFError\b|^BrokenPipeError\b|^ConnectionResetError\b"
)
INTERRUPT_RX = re.compile(r"^(?:KeyboardInterrupt|SystemExit)\b")


# Lines that only add evidence to a crash signal that follows them (what a C++ abort said).
# c10's exceptions end their message with where they were raised: after "ready" this line (its
# `x` is rare in decode lines) is what the scan finds of a C++ abort, and the abort's lines
# above it are read back (`LogAnalyzer._cpp_abort`).
CPP_RAISED = "Exception raised from "
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
    r"(?:\w{1,40} )?KV Cache is allocated",
    r"Memory pool end",
    r"max_total_num_tokens=",
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
    r"Exception in \w+:",
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
            "Killed",
            "taking the entire process down",
            'HTTP/1.1" 200',
            "Decode batch",
            "Prefill batch",
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
    "Received sigquit",
    "Error: ",
    "atchdog timeout (self.watchdog_timeout=",
    CPP_RAISED,
)
LAUNCH_NEEDLE_BYTES = tuple(n.encode() for n in LAUNCH_NEEDLES)
SERVING_NEEDLE_BYTES = tuple(n.encode() for n in SERVING_NEEDLES)
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
