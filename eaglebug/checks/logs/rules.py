"""The failure categories: each rule's pattern, where SGLang (or torch, NCCL, the CUDA runtime)
words it, and the literal text the whole-file scan looks for to find it anywhere in a line.

Tried in order; a rule that is the consequence of another comes after it (see CATEGORY_RULES).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


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
    # The scheduler's watchdog: no forward step finished for `--watchdog-timeout` seconds while
    # a batch ran (or, from 0.5.9, while the scheduler initialised); a hard one then sends the
    # launcher SIGQUIT and the server dies, a soft one (`soft=True`) only reports.
    CategoryRule(
        "hang",
        re.compile(
            r"[Ww]atchdog timeout \(self\.watchdog_timeout=(?P<timeout>[\d.]+)"
            r"(?:, self\.soft=(?P<soft>True|False))?\)"
        ),
        'srt/managers/scheduler.py `watchdog_thread` (0.4.x: "Watchdog timeout (...)"); '
        'srt/utils/watchdog.py:151 `WatchdogRaw._watchdog_once` (0.5.9, 0.5.23: "Scheduler '
        'watchdog timeout (self.watchdog_timeout=..., self.soft=...)")',
        ("atchdog timeout (self.watchdog_timeout=",),
    ),
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
    # Before `cuda_error`: a rank asked for a GPU its process does not see. SGLang logs what it
    # asked for just before the raise ("Context: ... gpu_id=6 ... CUDA_VISIBLE_DEVICES=..."),
    # a line that only a failed `set_device` prints.
    CategoryRule(
        "device_ordinal",
        re.compile(
            r"invalid device ordinal|cudaErrorInvalidDevice\b"
            r"|Context: \S*device=\S+ \S*gpu_id=(?P<gpu>\d+) "
            r"\S*CUDA_VISIBLE_DEVICES'?\)?=(?P<cvd>'[^']*'|[^\n]*?)(?= \S*tp_rank=|\n|$)"
            r"(?: \S*tp_rank=(?P<rank>\d+))?(?: \S*tp_size=(?P<size>\d+))?"
        ),
        "torch's `set_device` (the CUDA runtime's cudaErrorInvalidDevice); the Context line: "
        "srt/model_executor/model_runner.py:460 and srt/distributed/bootstrap.py:136 (0.5.23), "
        "model_runner.py `init_torch_distributed` (0.5.9)",
        ("invalid device ordinal", "cudaErrorInvalidDevice", "CUDA_VISIBLE_DEVICES"),
    ),
    CategoryRule(
        "cuda_error",
        re.compile(
            r"illegal memory access|device-side assert(?:ion)? triggered|unspecified launch failure"
            r"|misaligned address|illegal instruction was encountered|an illegal instruction"
            r"|CUBLAS_STATUS_(?!SUCCESS)\w+|CUDNN_STATUS_(?!SUCCESS)\w+|cudaErrorIllegalAddress"
            r"|CUDA error: (?!out of memory|invalid device ordinal)(?P<cuda>[^\n(]{3,120})"
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
            r"|NCCL INFO \S*\binit\.cc:\d+ -> [1-9]\d*"
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
            "init.cc:",
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
        re.compile(r"Capture (?:cuda|CUDA) graph failed|Registering 0 cuda graph addresses"),
        "srt/model_executor/cuda_graph_runner.py:373 + CUDA_GRAPH_CAPTURE_FAILED_MSG :935 (0.5.9), "
        "runner/decode_cuda_graph_runner.py:603 + runner_backend_utils/__init__.py:14 (0.5.23); "
        "custom all-reduce registering no graph buffer after a capture ('Registering 0 cuda graph "
        "addresses', srt/distributed/device_communicators/custom_all_reduce.py:234 in 0.5.10)",
        ("Capture cuda graph failed", "Capture CUDA graph failed", "Registering 0 cuda graph"),
    ),
)


CONTEXT_RULE = next(r for r in CATEGORY_RULES if r.category == "context_length")
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
# Methods SGLang's speculative workers call on the model object (DESIGN.md). A table, not the
# interface audit's reading (eaglebug/checks/interface): a log is read without a tree.
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
