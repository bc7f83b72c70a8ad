"""Log understanding: phases, weight-loading progress, rank prefixes and `log.<category>` findings.

The fixtures under `tests/fixtures/logs/` are written for this project in the shape of real SGLang
logs (rank prefixes from `configure_logger`, tracebacks from `Scheduler hit an exception`, tqdm
bars from the weight loaders, the messages SGLang 0.5.9 and 0.5.23 print); no fixture is a copy
of someone's log.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.logs import patterns as lp
from eaglebug.checks.logs.parse import (
    LogAnalyzer,
    analyze_file,
    analyze_text,
    rank_summary,
    sort_ranks,
)
from eaglebug.checks.logs.scan import scan_file
from eaglebug.cli.diagnose import diagnose_command
from tests.clirun import FINDING_KEYS
from tests.logjson import comparable

LOGS = Path(__file__).parent / "fixtures" / "logs"
FIXTURES = sorted(p.name for p in LOGS.glob("*.log"))
TP8 = [f"TP{i}" for i in range(8)]


def _only(analyzer: LogAnalyzer) -> Any:
    findings = analyzer.findings()
    assert len(findings) == 1, [f.id for f in findings]
    return findings[0]


def _phases(text: str) -> list[str]:
    """The phases a live follower sees, in order, without repeats."""
    analyzer = LogAnalyzer()
    seen: list[str] = []
    for line in text.split("\n"):
        analyzer.feed(line)
        if not seen or seen[-1] != analyzer.phase:
            seen.append(analyzer.phase)
    return seen


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], log: Path, as_json: bool) -> Any:
    code = diagnose_command(argparse.Namespace(log=str(log), json=as_json))
    out = capsys.readouterr().out
    return code, (json.loads(out) if as_json else out)


# --- phases and progress ---------------------------------------------------------------------


def test_phases_in_order_through_a_059_launch_with_a_draft_model() -> None:
    text = (LOGS / "launch_ready_059.log").read_text()
    assert _phases(text) == [
        "launching",
        "loading",
        "kv_cache",
        "cuda_graph",
        "loading",  # the EAGLE-3 draft loads after the target's CUDA graphs
        "kv_cache",
        "cuda_graph",
        "ready",
    ]


def test_phases_and_progress_through_a_0523_launch() -> None:
    text = (LOGS / "launch_ready_0523.log").read_text()
    assert _phases(text) == ["launching", "loading", "kv_cache", "cuda_graph", "ready"]
    analyzer = analyze_text(text)
    assert analyzer.progress is not None
    assert (analyzer.progress.done, analyzer.progress.total, analyzer.progress.percent) == (
        64,
        64,
        100,
    )
    assert analyzer.findings() == []


def test_progress_while_loading_is_n_of_N_with_the_percentage() -> None:
    analyzer = LogAnalyzer()
    for line in (LOGS / "launch_ready_059.log").read_text().split("\n"):
        analyzer.feed(line)
        if "27/64" in line:
            break
    assert analyzer.phase == "loading"
    assert analyzer.progress is not None
    assert analyzer.progress.to_json() == {
        "done": 27,
        "total": 64,
        "percent": 42,
        "label": "Loading safetensors checkpoint shards",
    }


def test_tqdm_updates_joined_by_carriage_returns_and_a_log_line_glued_after_the_bar() -> None:
    analyzer = LogAnalyzer()
    analyzer.feed("[2026-01-30 10:36:06 TP0] Load weight begin. avail mem=138.52 GB")
    bars = "\r".join(
        f"Loading safetensors checkpoint shards: {round(100 * n / 64):3d}% Completed | {n}/64 "
        f"[00:{n:02d}<01:10,  1.12s/it]"
        for n in range(28)
    )
    analyzer.feed("\x1b[32m" + bars + "[2026-01-30 10:36:40 TP3] Load weight end. elapsed=1 s\n")
    assert analyzer.progress is not None
    assert (analyzer.progress.done, analyzer.progress.total) == (27, 64)
    assert [m.label for m in analyzer.milestones] == ["load weight begin", "load weight end"]
    assert analyzer.milestones[-1].rank == "TP3"


def test_progress_of_a_bar_still_being_drawn_as_a_live_follower_reports_it() -> None:
    analyzer = LogAnalyzer()
    analyzer.feed("[2026-01-30 10:36:06 TP0] Load weight begin. avail mem=138.52 GB")
    analyzer.note_progress(
        "Loading safetensors checkpoint shards:  42% Completed | 27/64 [00:30<00:40,  1.1s/it]"
    )
    assert analyzer.progress is not None
    assert (analyzer.progress.done, analyzer.progress.total, analyzer.lines) == (27, 64, 1)
    assert analyzer.phase == "loading"


def test_staggered_ranks_do_not_make_the_phase_flicker() -> None:
    analyzer = LogAnalyzer()
    for rank in ("TP0", "TP1"):
        analyzer.feed(f"[2026-01-30 10:36:06 {rank}] Load weight begin. avail mem=138.52 GB")
    analyzer.feed("[2026-01-30 10:37:06 TP0] Memory pool end. avail mem=14.02 GB")
    analyzer.feed("[2026-01-30 10:37:07 TP0] Capture cuda graph begin. This can take up to s")
    assert analyzer.phase == "loading"  # TP1 is still loading
    analyzer.feed("[2026-01-30 10:37:08 TP1] Memory pool end. avail mem=14.02 GB")
    assert analyzer.phase == "kv_cache"
    analyzer.feed("[2026-01-30 10:37:09 TP1] Capture cuda graph begin. This can take up to s")
    assert analyzer.phase == "cuda_graph"


def test_crash_phase_and_the_phase_it_crashed_in() -> None:
    text = (LOGS / "missing_method_8ranks.log").read_text()
    assert _phases(text)[-2:] == ["cuda_graph", "crashed"]
    analyzer = analyze_text(text)
    assert (analyzer.phase, analyzer.crashed_during) == ("crashed", "cuda_graph")


# --- rank prefixes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "rank", "time"),
    [
        ("[2026-01-30 10:36:11 TP4] Load weight begin.", "TP4", "2026-01-30 10:36:11"),
        ("[2026-01-30 10:36:11 DP0 TP4] Load weight begin.", "DP0 TP4", "2026-01-30 10:36:11"),
        ("[2026-01-30 10:36:11 PP1 TP3] Load weight begin.", "PP1 TP3", "2026-01-30 10:36:11"),
        ("[2026-01-30 10:36:11 TP4 EP4] Load weight begin.", "TP4 EP4", "2026-01-30 10:36:11"),
        (
            "[2026-01-30 10:36:11.123 DP1 ATTN_CP0 MOE_DP1 TP5 EP5] Load weight begin.",
            "DP1 ATTN_CP0 MOE_DP1 TP5 EP5",
            "2026-01-30 10:36:11.123",
        ),
        ("[2026-01-30 10:36:11] Load weight begin.", None, "2026-01-30 10:36:11"),
        (
            "2026-01-30T10:36:11.5Z\t[2026-01-30 10:36:11 TP2] Load weight begin.",
            "TP2",
            "2026-01-30 10:36:11",
        ),
    ],
)
def test_rank_prefixes_in_the_forms_sglang_writes(line: str, rank: str, time: str) -> None:
    analyzer = LogAnalyzer()
    analyzer.feed(line)
    (event,) = analyzer.milestones
    assert (event.rank, event.time, event.phase) == (rank, time, "loading")


def test_rank_order_and_summary() -> None:
    assert sort_ranks({"TP10", "TP2", "TP0"}) == ["TP0", "TP2", "TP10"]
    assert sort_ranks({"DP1 TP1", "DP0 TP4"}) == ["DP0 TP4", "DP1 TP1"]
    assert rank_summary(TP8) == "TP0-TP7"
    assert rank_summary(["TP0", "TP3"]) == "TP0, TP3"
    assert rank_summary(["DP0 TP0 EP0", "DP1 TP1 EP1"]) == "DP0 TP0 EP0, DP1 TP1 EP1"
    dp8 = [f"DP{i} TP{i}" for i in range(8)]
    assert rank_summary(dp8) == "DP0 TP0 … DP7 TP7"
    assert rank_summary([*dp8[:3], "DP3 TP4"]) == "DP0 TP0, DP1 TP1, DP2 TP2, DP3 TP4"


# --- findings, one category each ---------------------------------------------------------------


def test_eight_ranks_printing_one_traceback_are_one_finding_with_the_class_and_attribute() -> None:
    finding = _only(analyze_file(LOGS / "missing_method_8ranks.log"))
    assert finding.id == "log.missing_interface_method"
    assert finding.severity == "error"
    assert finding.class_ == "KimiK25ForConditionalGeneration"
    assert finding.attribute == "set_eagle3_layers_to_capture"
    assert finding.to_json()["details"]["ranks"] == TP8
    assert finding.to_json()["details"]["count"] == 8
    assert finding.to_json()["details"]["see"] == "interface.missing"
    assert finding.to_json()["details"]["process"] == "Scheduler"
    (site,) = finding.call_sites
    assert (site.file, site.line) == ("sglang/srt/model_executor/cuda_graph_runner.py", 365)
    assert site.code == "self.model_runner.model.set_eagle3_layers_to_capture()"
    assert (
        finding.fix is not None
        and finding.fix.text()
        == "eaglebug fix --model-class KimiK25ForConditionalGeneration --apply"
    )


def test_context_length_refusal_names_the_draft_and_the_fix() -> None:
    finding = _only(analyze_file(LOGS / "context_length.log"))
    assert (finding.id, finding.role, finding.attribute) == (
        "log.context_length",
        "draft",
        "context_length",
    )
    assert finding.to_json()["details"]["ranks"] == TP8
    assert (finding.to_json()["details"]["requested"], finding.to_json()["details"]["derived"]) == (
        262144,
        131072,
    )
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in (
        finding.fix.text() if finding.fix else ""
    )
    assert "--context-length 131072" in (finding.fix.text() if finding.fix else "")


def test_context_length_allowed_by_the_env_var_is_a_warning_and_the_server_gets_ready() -> None:
    analyzer = analyze_file(LOGS / "context_allowed.log")
    finding = _only(analyzer)
    assert (finding.id, finding.severity) == ("log.context_length", "warning")
    assert analyzer.phase == "ready"


def test_oom_with_per_rank_numbers_is_one_finding_during_cuda_graph_capture() -> None:
    finding = _only(analyze_file(LOGS / "oom_cuda_graph.log"))
    assert finding.id == "log.oom"
    assert finding.to_json()["details"]["ranks"] == TP8
    assert finding.to_json()["details"]["phase"] == "cuda_graph"
    assert "1.50 GiB" in finding.message
    assert "--mem-fraction-static" in (finding.fix.text() if finding.fix else "")


def test_nccl_error_during_init() -> None:
    finding = _only(analyze_file(LOGS / "nccl_init.log"))
    assert (finding.id, finding.to_json()["details"]["ranks"]) == ("log.nccl", ["TP0", "TP1"])
    assert "NCCL_DEBUG=INFO" in (finding.fix.text() if finding.fix else "")
    assert finding.call_sites[0].file.endswith("pynccl_wrapper.py")


def test_nccl_watchdog_timeout_is_read_from_the_lines_before_the_abort() -> None:
    analyzer = analyze_file(LOGS / "nccl_watchdog.log")
    finding = _only(analyzer)
    assert finding.id == "log.nccl"
    assert "Watchdog caught collective operation timeout" in finding.message
    assert finding.to_json()["details"]["aborted"] == "Aborted"
    assert (analyzer.phase, analyzer.crashed_during) == ("crashed", "ready")


def test_unsupported_architecture_with_the_import_error_sglang_logged() -> None:
    finding = _only(analyze_file(LOGS / "unsupported_architecture.log"))
    assert finding.id == "log.unsupported_architecture"
    assert finding.to_json()["details"]["architectures"] == "['FooForCausalLM']"
    assert finding.to_json()["details"]["import_errors"] == [
        "sglang.srt.models.foo: No module named 'foo_kernels'"
    ]


def test_shape_mismatch_while_loading_is_a_config_mismatch() -> None:
    analyzer = analyze_file(LOGS / "shape_mismatch.log")
    finding = _only(analyzer)
    assert finding.id == "log.config_mismatch"
    assert finding.to_json()["details"]["ranks"] == ["TP0", "TP1", "TP2", "TP3"]
    assert finding.call_sites[0].file == "sglang/srt/model_loader/weight_utils.py"
    assert analyzer.crashed_during == "loading"


def test_bare_shape_assertion_in_a_weight_loader_is_a_config_mismatch() -> None:
    text = "\n".join(
        [
            "[2026-01-30 10:36:11 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/x/sglang/srt/models/llama.py", line 500, in load_weights',
            "    weight_loader(param, loaded_weight, shard_id)",
            '  File "/x/sglang/srt/layers/linear.py", line 416, in weight_loader',
            "    assert param_data.shape == loaded_weight.shape",
            "AssertionError",
            "",
        ]
    )
    finding = _only(analyze_text(text))
    assert finding.id == "log.config_mismatch"
    assert finding.to_json()["details"]["while_loading_weights"] is True


def test_bad_model_path_in_the_main_process() -> None:
    analyzer = analyze_file(LOGS / "weights_path.log")
    finding = _only(analyzer)
    assert finding.id == "log.weights_or_path"
    assert finding.to_json()["details"]["ranks"] == []  # the launcher itself, before any scheduler
    assert analyzer.phase == "crashed"


def test_port_in_use_from_uvicorn() -> None:
    finding = _only(analyze_file(LOGS / "port_in_use.log"))
    assert finding.id == "log.port_in_use"
    assert finding.to_json()["details"]["port"] == 30000
    assert "--port" in (finding.fix.text() if finding.fix else "")


@pytest.mark.parametrize(
    ("exception", "port"),
    [
        ("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5757')", 5757),
        (
            "RuntimeError: The server socket has failed to listen on any local network address. "
            "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in "
            "use).",
            29500,
        ),
        (
            "ValueError: nccl_port at 31337 is not available in 30 seconds. nccl_port is used by "
            "a process already.",
            31337,
        ),
    ],
)
def test_port_in_use_from_zmq_tcpstore_and_sglangs_own_check(exception: str, port: int) -> None:
    text = "\n".join(
        [
            "[2026-01-30 10:36:11 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/x/sglang/srt/managers/scheduler.py", line 3130, in run_scheduler_process',
            "    scheduler = Scheduler(",
            exception,
            "",
        ]
    )
    finding = _only(analyze_text(text))
    assert (finding.id, finding.to_json()["details"]["port"]) == ("log.port_in_use", port)


def test_only_a_dead_child_is_log_other_without_a_guessed_cause() -> None:
    analyzer = analyze_file(LOGS / "child_died.log")
    finding = _only(analyzer)
    assert (finding.id, finding.severity) == ("log.other", "error")
    assert finding.fix is None
    assert finding.to_json()["details"]["cause"] == "not in the log"
    assert "SIGQUIT" in finding.message
    for guess in ("memory", "OOM", "NCCL", "port"):
        assert guess not in finding.message
    assert (analyzer.phase, analyzer.crashed_during) == ("crashed", "loading")


def test_scheduler_died_says_what_sglang_says_and_no_more() -> None:
    finding = _only(analyze_file(LOGS / "scheduler_died.log"))
    assert finding.id == "log.other"
    assert finding.message.startswith("rank 5's scheduler died during initialization")
    assert "exit code -9 = SIGKILL" in finding.message
    assert finding.to_json()["details"]["sglang_hint"].startswith("If exit code is -9 (SIGKILL)")
    assert finding.to_json()["details"]["ranks"] == []  # the main process said it; no rank prefix


def test_059_dead_scheduler_with_its_exit_code(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "[2026-01-30 10:36:06 TP0] Load weight begin. avail mem=138.52 GB",
            "[2026-01-30 10:37:40] Rank 0 scheduler is dead. Please check if there are relevant logs.",
            "[2026-01-30 10:37:40] Exit code: -9",
            "Traceback (most recent call last):",
            '  File "/x/sglang/srt/entrypoints/engine.py", line 893, in _wait_for_scheduler_ready',
            "    data = scheduler_pipe_readers[i].recv()",
            "EOFError",
            "",
        ]
    )
    (tmp_path / "dead.log").write_text(text)
    for analyzer in (analyze_text(text), analyze_file(tmp_path / "dead.log")):
        finding = _only(analyzer)
        assert finding.id == "log.other"
        assert finding.message.startswith("rank 0's scheduler died (exit code -9 = SIGKILL)")
        assert analyzer.crashed_during == "loading"


def test_0523_subprocess_watchdog_while_serving(tmp_path: Path) -> None:
    text = (LOGS / "launch_ready_0523.log").read_text() + "\n".join(
        [
            "[2026-01-30 11:02:13] Subprocess scheduler_TP3 (pid=48244) crashed with exit code -9."
            " Triggering SIGQUIT for cleanup...",
            "[2026-01-30 11:02:13] SIGQUIT received. signum=3, frame=<frame at 0x7f>. It usually "
            "means one child failed.",
            "",
        ]
    )
    (tmp_path / "watchdog.log").write_text(text)
    for analyzer in (analyze_text(text), analyze_file(tmp_path / "watchdog.log")):
        finding = _only(analyzer)
        assert finding.id == "log.other"
        assert finding.message.startswith("scheduler_TP3 crashed (exit code -9 = SIGKILL)")
        assert (analyzer.phase, analyzer.crashed_during) == ("crashed", "ready")


def test_a_specific_cause_replaces_the_generic_sigquit() -> None:
    ids = [f.id for f in analyze_file(LOGS / "missing_method_8ranks.log").findings()]
    assert ids == ["log.missing_interface_method"]  # "Received sigquit" adds nothing


def test_serving_crash_after_ready() -> None:
    analyzer = analyze_file(LOGS / "serving_crash.log")
    finding = _only(analyzer)
    assert (finding.id, finding.to_json()["details"]["ranks"]) == ("log.oom", ["TP6"])
    assert "serving" in finding.message
    assert (analyzer.phase, analyzer.crashed_during) == ("crashed", "ready")


def test_a_request_error_after_ready_is_a_warning_and_the_server_stays_ready() -> None:
    text = (LOGS / "launch_ready_0523.log").read_text() + "\n".join(
        [
            "[2026-01-30 10:50:01] ERROR:    Exception in ASGI application",
            "Traceback (most recent call last):",
            '  File "/x/sglang/srt/entrypoints/http_server.py", line 512, in generate_request',
            "    ret = await _global_state.tokenizer_manager.generate_request(obj, request).__anext__()",
            "ValueError: The input (300001 tokens) is longer than the model's context length (262144 tokens).",
            "",
        ]
    )
    analyzer = analyze_text(text)
    finding = _only(analyzer)
    # A request SGLang rejected: the context length, read from its own wording; a warning.
    assert (finding.id, finding.severity) == ("log.context_length", "warning")
    assert "300001 tokens" in finding.message and "262144" in finding.message
    assert analyzer.phase == "ready"


def test_lines_wrapped_by_another_logger_and_dp_attention_ranks() -> None:
    finding = _only(analyze_file(LOGS / "wrapped_dp_attention.log"))
    assert finding.id == "log.missing_interface_method"
    assert finding.to_json()["details"]["ranks"] == [f"DP{i} TP{i} EP{i}" for i in range(4)]
    assert finding.call_sites[0].line == 365


# --- the live view -----------------------------------------------------------------------------


def test_a_finding_shows_as_soon_as_the_exception_line_arrives() -> None:
    lines = (LOGS / "missing_method_8ranks.log").read_text().split("\n")
    first = next(i for i, line in enumerate(lines) if "hit an exception" in line)
    exception = next(i for i in range(first, len(lines)) if lines[i].startswith("AttributeError"))
    analyzer = LogAnalyzer()
    for line in lines[:exception]:
        analyzer.feed(line)
    assert analyzer.findings() == []
    assert analyzer.phase == "cuda_graph"
    analyzer.feed(lines[exception])
    assert [f.id for f in analyzer.findings()] == ["log.missing_interface_method"]
    assert analyzer.phase == "crashed"
    assert analyzer.findings()[0].to_json()["details"]["ranks"] == [
        "TP3"
    ]  # the first rank to report


def test_memory_stays_bounded_on_huge_tracebacks_and_many_distinct_errors() -> None:
    analyzer = LogAnalyzer()
    analyzer.feed(
        "[2026-01-30 10:36:11 TP0] Scheduler hit an exception: Traceback (most recent call last):"
    )
    for i in range(20_000):
        analyzer.feed(f'  File "/x/sglang/srt/m{i}.py", line {i}, in f')
        analyzer.feed("    g()")
    analyzer.feed("RecursionError: maximum recursion depth exceeded")
    analyzer.finish()
    for i in range(1000):
        analyzer.feed(
            f"[2026-01-30 10:40:00 TP{i % 8}] Scheduler hit an exception: Traceback (most recent call last):"
        )
        analyzer.feed(f"KeyError: 'key_{i}'")
    analyzer.finish()
    assert len(analyzer.findings()) <= 200
    assert len(analyzer._ring) <= lp.CONTEXT_LINES


# --- the fast whole-file path --------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_fast_scan_equals_feeding_every_line(name: str) -> None:
    path = LOGS / name
    assert comparable(analyze_file(path).to_json()) == comparable(
        analyze_text(path.read_text()).to_json()
    )


@pytest.mark.parametrize("chunk", [97, 4096])
@pytest.mark.parametrize("name", ["missing_method_8ranks.log", "launch_ready_0523.log"])
def test_chunk_boundaries_change_nothing(name: str, chunk: int) -> None:
    path = LOGS / name
    analyzer = LogAnalyzer()
    scan_file(path, analyzer, chunk_bytes=chunk)
    analyzer.finish()
    assert analyzer.to_json() == analyze_file(path).to_json()


def _scan(path: Path, chunk: int) -> LogAnalyzer:
    analyzer = LogAnalyzer()
    scan_file(path, analyzer, chunk_bytes=chunk)
    analyzer.finish()
    return analyzer


def test_a_line_longer_than_the_read_window_is_cut_like_feed_cuts_it(tmp_path: Path) -> None:
    crash = (LOGS / "nccl_init.log").read_text()
    text = "[2026-01-30 10:36:00] " + "x" * 300_000 + " Traceback (most recent call last)\n" + crash
    path = tmp_path / "long.log"
    path.write_text(text)
    expected = comparable(analyze_text(text).to_json())
    for chunk in (4096, 1 << 20):
        assert comparable(_scan(path, chunk).to_json()) == expected
    assert [f["id"] for f in expected["findings"]] == ["log.nccl"]


def test_fast_scan_equals_feeding_every_line_on_mixed_fixture_pieces(tmp_path: Path) -> None:
    rng = random.Random(5)
    decode = (
        "[2026-01-30 10:40:00 TP{r}] Decode batch, #running-req: 12, #token: 4096, token usage: "
        "0.03, cuda graph: True, gen throughput (token/s): 512.3, #queue-req: 0, \n"
    )
    texts = [(LOGS / name).read_text().split("\n") for name in FIXTURES]
    for trial in range(40):
        parts = []
        for _ in range(rng.randrange(1, 4)):
            lines = rng.choice(texts)
            start = 0 if rng.random() < 0.5 else rng.randrange(len(lines))
            parts.append("\n".join(lines[start : rng.randrange(start, len(lines) + 1)]) + "\n")
            parts.append("".join(decode.format(r=i % 8) for i in range(rng.randrange(300))))
        text = "".join(parts)
        path = tmp_path / f"mix{trial}.log"
        path.write_text(text)
        fast = _scan(path, rng.choice([61, 97, 4096, 1 << 20])).to_json()
        assert comparable(fast) == comparable(analyze_text(text).to_json()), trial


def test_fast_scan_finds_a_failure_after_megabytes_of_decode_lines(tmp_path: Path) -> None:
    decode = (
        "[2026-01-30 10:40:00 TP{r}] Decode batch, #running-req: 12, #token: 4096, token usage: "
        "0.03, cuda graph: True, gen throughput (token/s): 512.3, #queue-req: 0, \n"
    )
    head = (LOGS / "launch_ready_0523.log").read_text()
    tail = (LOGS / "missing_method_8ranks.log").read_text().split("Capture cuda graph bs")[1]
    body = "".join(decode.format(r=i % 8) for i in range(40_000))
    path = tmp_path / "big.log"
    path.write_text(head + body + tail.split("\n", 1)[1])
    analyzer = analyze_file(path)
    finding = _only(analyzer)
    assert finding.id == "log.missing_interface_method"
    assert finding.to_json()["details"]["ranks"] == TP8
    assert finding.to_json()["details"]["offset"] > len(head) + len(body) - 1
    assert analyzer.crashed_during == "ready"


# --- SGLang's own wording, in the real release trees -------------------------------------------

WORDING = [
    # (release, file, line, text that must be on that line)
    (
        "0.5.9",
        "srt/utils/common.py",
        1228,
        'format = f"[%(asctime)s{maybe_ms}{prefix}] %(message)s"',
    ),
    (
        "0.5.23",
        "srt/utils/common.py",
        2630,
        'format = f"[%(asctime)s{maybe_ms}{prefix}] %(message)s"',
    ),
    ("0.5.9", "srt/managers/scheduler.py", 3094, 'prefix += f" TP{tp_rank}"'),
    ("0.5.23", "srt/managers/scheduler.py", 6289, 'prefix += f" TP{shown_tp}"'),
    ("0.5.9", "srt/model_executor/model_runner.py", 899, "Load weight begin."),
    ("0.5.23", "srt/model_executor/model_runner.py", 1274, "Load weight begin."),
    ("0.5.9", "srt/model_executor/model_runner.py", 1041, "Load weight end. "),
    ("0.5.23", "srt/model_executor/model_runner.py", 1373, "Load weight end. "),
    ("0.5.9", "srt/mem_cache/memory_pool.py", 652, "KV Cache is allocated. #tokens:"),
    ("0.5.23", "srt/mem_cache/memory_pool.py", 2088, "'is allocated'"),
    ("0.5.9", "srt/model_executor/model_runner_kv_cache_mixin.py", 745, "Memory pool end. "),
    ("0.5.23", "srt/mem_cache/kv_cache_configurator.py", 499, "Memory pool end. "),
    (
        "0.5.9",
        "srt/model_executor/model_runner.py",
        2147,
        "Capture {graph_backend[self.device]} begin.",
    ),
    (
        "0.5.23",
        "srt/model_executor/model_runner_components/cuda_graph_setup.py",
        759,
        "Capture {capture_name} {graph_backend[model_runner.device]} begin.",
    ),
    ("0.5.9", "srt/entrypoints/http_server.py", 1836, "The server is fired up and ready to roll!"),
    ("0.5.23", "srt/entrypoints/http_server.py", 2600, "The server is fired up and ready to roll!"),
    ("0.5.9", "srt/utils/common.py", 129, "% Completed | {n_fmt}/{total_fmt}"),
    ("0.5.23", "srt/utils/common.py", 1414, "% Completed | {n_fmt}/{total_fmt}"),
    ("0.5.9", "srt/managers/scheduler.py", 3190, "Scheduler hit an exception: {traceback}"),
    ("0.5.23", "srt/managers/scheduler.py", 6372, "Scheduler hit an exception: {traceback}"),
    ("0.5.9", "srt/entrypoints/engine.py", 870, "Received sigquit from a child process."),
    ("0.5.23", "srt/entrypoints/engine.py", 1978, "Received sigquit from a child process."),
    ("0.5.23", "srt/entrypoints/engine.py", 2006, "scheduler died during initialization "),
    ("0.5.9", "srt/configs/model_config.py", 367, "is greater than the derived context_length"),
    ("0.5.23", "srt/configs/model_config.py", 1299, "is greater than the derived context_length"),
    ("0.5.9", "srt/models/registry.py", 49, "are not supported for now. "),
    ("0.5.23", "srt/models/registry.py", 64, "are not supported for now. "),
    ("0.5.9", "srt/model_loader/weight_utils.py", 1028, "Attempted to load weight ("),
    ("0.5.23", "srt/model_loader/weight_utils.py", 1583, "Attempted to load weight ("),
]


@pytest.mark.parametrize(("release", "file", "line", "text"), WORDING)
def test_the_wording_we_match_is_in_the_release(
    release: str,
    file: str,
    line: int,
    text: str,
    sglang_059: Path,
    sglang_0523: Path,
) -> None:
    root = {"0.5.9": sglang_059, "0.5.23": sglang_0523}[release]
    source = (root / "sglang" / file).read_text(encoding="utf-8").splitlines()
    assert text in source[line - 1], f"{release} {file}:{line}: {source[line - 1]!r}"


def test_the_capture_milestones_of_both_releases_match() -> None:
    capture = next(m for m in lp.MILESTONES if m.label == "CUDA graph capture begin")
    for said in (
        "Capture cuda graph begin. This can take up to several minutes. avail mem=13.57 GB",  # 0.5.9
        "Capture draft cuda graph begin. This can take up to several minutes. avail mem=9 GB",
        "Capture piecewise CUDA graph begin. avail mem=13.57 GB",
        "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail",  # 0.5.23
        "Capture draft decode CUDA graph begin. backend=fa3, avail mem=9.0 GB",
        "Capture Frozen-KV MTP draft cuda graph begin.",
    ):
        assert capture.rx.match(said), said
        assert lp.LAUNCH_LINE_RX.search(f"[2026-01-30 10:36:11 TP0] {said}"), said
    end = next(m for m in lp.MILESTONES if m.label == "load weight end")
    assert not end.rx.match("Load weight end. Committed real weights after CUDA graph capture in")


# --- the command ---------------------------------------------------------------------------------


def test_diagnose_json_shape_and_exit_1_on_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = _run(tmp_path, capsys, LOGS / "missing_method_8ranks.log", as_json=True)
    assert code == 1
    assert set(data) >= {"phase", "progress", "findings"}
    assert data["phase"] == "crashed"
    assert data["progress"] == {
        "done": 64,
        "total": 64,
        "percent": 100,
        "label": "Loading safetensors checkpoint shards",
    }
    (finding,) = data["findings"]
    assert finding["ranks"] == TP8
    assert set(finding) >= FINDING_KEYS
    assert finding["class"] == "KimiK25ForConditionalGeneration"
    assert finding["call_sites"][0]["line"] == 365


def test_diagnose_exit_0_on_a_good_launch_and_on_warnings_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = _run(tmp_path, capsys, LOGS / "launch_ready_059.log", as_json=True)
    assert (code, data["phase"], data["findings"]) == (0, "ready", [])
    code, data = _run(tmp_path, capsys, LOGS / "context_allowed.log", as_json=True)
    assert (code, [f["severity"] for f in data["findings"]]) == (0, ["warning"])
    empty = tmp_path / "empty.log"
    empty.write_text("")
    code, data = _run(tmp_path, capsys, empty, as_json=True)
    assert (code, data["phase"], data["progress"]) == (0, "launching", None)


def test_diagnose_human_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, capsys, LOGS / "missing_method_8ranks.log", as_json=False)
    assert code == 1
    assert "phase: crashed (during cuda_graph)" in out
    assert "weights 64/64 shards (100%)" in out
    assert "log.missing_interface_method" in out
    assert "ranks TP0-TP7" in out
    assert "sglang/srt/model_executor/cuda_graph_runner.py:365" in out
    assert "eaglebug fix --model-class KimiK25ForConditionalGeneration --apply" in out


def test_a_rank_named_by_torch_is_not_named_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch's `[rank1]:` prefix names the rank `rank1`: the line says `rank1`, not
    `rank rank1`."""
    log = LOGS / "corpus" / "eagle2_illegal_access_watchdog_rank1.log"
    code, out = _run(tmp_path, capsys, log, as_json=False)
    assert code == 1
    assert "rank1 · " in out and "rank rank1" not in out


def test_a_negative_kv_profile_on_every_rank_is_one_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DeepSeek-R1 with DP attention (sglang#7691): all 8 ranks warn that the profiled KV
    size is negative, the warning before SGLang's "Not enough memory" raise: one finding for
    the 8 (it was two, rank 0's "CUDA out of memory during KV cache allocation" and the
    others' "during weight loading", whose phase no line of theirs had said), and it says the
    budget is gone: the fix is a larger fraction, where a lower one makes it worse."""
    log = LOGS / "corpus" / "rocm_dsr1_dp8_profiled_kv_tokens_negative.log"
    code, data = _run(tmp_path, capsys, log, as_json=True)
    assert code == 1
    (oom,) = [f for f in data["findings"] if f["id"] == "log.oom"]
    assert len(oom["ranks"]) == 8 and oom["details"]["phase"] == "kv_cache"
    assert oom["message"] == "no GPU memory left for the KV cache after loading the weights"
    assert oom["fix"].startswith("increase --mem-fraction-static")


def test_a_rejected_request_names_both_bounds_of_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DeepSeek-R1 launched with --context-length 163840 rejected a 160k request at 59862
    tokens: the limit was the KV pool, not the context length (SGLang's tp_worker takes the
    smaller of the two). The fix names both, not the context length alone."""
    log = LOGS / "corpus" / "dsr1_input_exceeds_max_allowed_length_tp8.log"
    _, data = _run(tmp_path, capsys, log, as_json=True)
    (rejected,) = [f for f in data["findings"] if f["id"] == "log.context_length"]
    assert rejected["details"]["limit_tokens"] == 59862
    assert "--context-length" in rejected["fix"] and "--mem-fraction-static" in rejected["fix"]


def test_diagnose_refuses_binary_compressed_and_missing_files(tmp_path: Path) -> None:
    binary = tmp_path / "model.safetensors"
    binary.write_bytes(b"\x00\x01\x02\x03" * 1000)
    compressed = tmp_path / "server.log.gz"
    compressed.write_bytes(gzip.compress(b"[2026-01-30 10:36:11 TP0] Load weight begin.\n"))
    for path, words in (
        (binary, "is not a text log"),
        (compressed, "is not a text log (it is compressed)"),
        (tmp_path / "nope.log", "no such file"),
        (tmp_path, "is a directory"),
    ):
        with pytest.raises(InputError) as caught:
            diagnose_command(argparse.Namespace(log=str(path), json=True))
        assert words in caught.value.message
        assert caught.value.hint


def test_invalid_utf8_is_still_a_text_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(
        (LOGS / "nccl_init.log").read_bytes().replace(b"NCCL INFO Bootstrap", b"NCCL \xff\xfe INFO")
    )
    code, data = _run(tmp_path, capsys, log, as_json=True)
    assert (code, data["findings"][0]["id"]) == (1, "log.nccl")
