"""How a failure shows besides its words: the form of a line (a bare exception, a C++ abort, a
doomed budget), the level another logger gave it, and what a fragment's frames and words say of
the phase it happened in; SGLang's own advice printed with a failure; stall limits.
"""

from __future__ import annotations

import re

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
# Words that say the process cannot go on, though the line is not an exception and the log may
# end before any crash line (issue 22): torch's out-of-memory message (fatal before the server
# serves: nothing frees memory during a launch), NCCL's watchdog abort ("To avoid data
# inconsistency, we are taking the entire process down", torch ProcessGroupNCCL.cpp), and NCCL
# returning an error code from its communicator init (`NCCL INFO init.cc:1534 -> 2`: NCCLCHECK
# prints the file:line and the code each frame returns on the way up).
FATAL_WORDS_RX = re.compile(
    r"(?P<oom>CUDA out of memory\. Tried to allocate|OutOfMemoryError)"
    r"|taking the entire process down"
    r"|NCCL INFO \S*\binit\.cc:\d+ -> [1-9]"
)
# A C++ abort prints `terminate called after throwing an instance of 'X'` and then `what(): ...`:
# one failure, said better by the second line.
TERMINATE_RX = re.compile(r"^terminate called after throwing an instance of")
ERROR_LEVELS = frozenset({"E", "F", "ERROR", "CRITICAL", "FATAL"})
# The launch phase a traceback's frames show, innermost first, for a log that says no phase
# (a fragment): SGLang's own function names along its start-up (srt/model_executor/
# model_runner.py, cuda_graph_runner.py, srt/entrypoints/http_server.py, srt/managers/*), named
# here because a log is read without a tree.
PHASE_FRAMES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("warmup", re.compile(r"^(?:_wait_and_warmup|_execute_server_warmup|execute_warmups)$")),
    ("cuda_graph", re.compile(r"^(?:capture\w*|init_device_graphs|init_cuda_graphs|init_graphs)$")),
    ("kv_cache", re.compile(r"^(?:init_memory_pool|profile_max_num_token|init_kv_cache\w*)$")),
    (
        "loading",
        re.compile(r"^(?:load_model|load_weights\w*|weight_loader\w*|_load_weights|get_model)$"),
    ),
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
# A frame in SGLang's request managers that is not part of building them runs while the server
# serves (srt/managers/: scheduler.py's event loops, schedule_batch.py, tp_worker.py's forward
# steps, 0.2's `exposed_step`), for a fragment whose frames name no function above.
SERVING_FILE_RX = re.compile(r"/sglang/srt/managers/[\w/]+\.py$")
NOT_SERVING_FUNC_RX = re.compile(
    r"^(?:__init__|_?init\w*|initialize|run_\w+_process|launch\w*|<module>|main|__call__"
    r"|decorate_context|wrapper|_wrapped_call_impl|_call_impl)$"
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
# A frame line of a traceback whose header is not in the log (a fragment that starts inside);
# indented as Python prints it, or not, where a log viewer trimmed each line.
FRAME_NEEDLE = 'File "'

# Processes whose crash is about the text, not the model (srt/managers/*_manager.py); a table
# because a log is read without a tree.
TOKENIZER_PROCESSES = frozenset({"TokenizerManager", "DetokenizerManager"})

# Lines that mean a launch stopped moving when nothing new arrives for this long, by phase.
STALL_AFTER_S: dict[str, float] = {
    "launching": 10 * 60,
    "loading": 10 * 60,
    "kv_cache": 5 * 60,
    "cuda_graph": 5 * 60,
    "warmup": 5 * 60,
}
