"""The mechanisms issue 22 found missing in the log reader, each on real logs of the corpus
(tests/fixtures/logs/corpus/, with their source URLs): what a finding says, not only its id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eaglebug.checks.logs.parse import analyze_file, analyze_text
from tests.clirun import cli

CORPUS = Path(__file__).parent / "fixtures" / "logs" / "corpus"


def _details(name: str) -> tuple[dict[str, object], list[dict[str, object]]]:
    data = analyze_file(CORPUS / f"{name}.log").to_json()
    return data, data["findings"]


def test_the_scheduler_watchdog_on_eight_ranks_is_one_hang_while_serving(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data, findings = _details("watchdog_timeout_all_tp_killed_3752")
    (hang,) = findings
    assert (hang["id"], hang["severity"]) == ("log.hang", "error")
    assert hang["ranks"] == [f"TP{n}" for n in range(8)]
    assert "300 s during serving" in hang["message"] and "killed the server" in hang["message"]
    assert (data["phase"], data["crashed_during"]) == ("crashed", "ready")
    run = cli(capsys, "diagnose", "--log", str(CORPUS / "watchdog_timeout_all_tp_killed_3752.log"))
    assert run.code == 1 and "log.hang" in run.out


def test_an_eagle3_drafts_layers_loaded_by_another_class_name_the_architectures() -> None:
    data, findings = _details("keyerror_midlayer_eagle3_draft_loaded_by_qwen3_angelslim39")
    (mismatch,) = findings
    assert mismatch["id"] == "log.config_mismatch"
    assert "sglang/srt/models/qwen3.py:493" in mismatch["message"]
    assert "EAGLE-3" in mismatch["message"] and "architectures" in mismatch["message"]
    details = mismatch["details"]
    assert details["tensor"] == "midlayer.self_attn.qkv_proj.weight"
    assert details["loading_module"] == "sglang/srt/models/qwen3.py:493"
    assert "architectures" in str(mismatch["fix"])
    assert data["crashed_during"] == "loading"


def test_a_draft_checkpoint_its_class_cannot_place_says_draft() -> None:
    _, findings = _details("keyerror_qwen2_eagle1_draft_loaded_by_qwen2_eagle130")
    (mismatch,) = findings  # the KeyError pasted above its traceback is the same failure
    assert mismatch["role"] == "draft"
    assert mismatch["details"]["tensor_family"] == "layers.#.self_attn.qkv_proj.weight"


def test_a_newest_first_export_is_read_in_the_order_it_was_written() -> None:
    data, findings = _details("gcp_cloud_logging_reverse_order_keyerror_llama_fp8_5095")
    (mismatch,) = findings
    assert mismatch["details"]["tensor"] == "model.layers.55.mlp.gate_up_proj.input_scale"
    assert "quantization scale" in mismatch["message"]
    text = (CORPUS / "gcp_cloud_logging_reverse_order_keyerror_llama_fp8_5095.log").read_text()
    assert analyze_text(text).to_json()["findings"][0]["id"] == "log.config_mismatch"
    assert data["crashed_during"] == "loading"


def test_a_cpp_abort_is_one_failure_said_by_its_what_line() -> None:
    data, findings = _details("nccl_watchdog_cxx_terminate_while_serving_v033_1693")
    (nccl,) = findings
    assert "Watchdog caught collective operation timeout" in nccl["message"]
    assert (data["phase"], data["crashed_during"]) == ("crashed", "ready")


def test_nccl_init_returning_an_error_code_makes_its_warn_line_an_error(tmp_path: Path) -> None:
    """The real NCCL lines of a corpus log, cut before the Python traceback that followed."""
    lines = (CORPUS / "nccl_socketpollconnect_no_route_tp16.log").read_text().splitlines()
    nccl_only = [line for line in lines[: lines.index(next(x for x in lines if "[20" in x))]]
    assert any("init.cc:" in line for line in nccl_only)
    log = tmp_path / "nccl.log"
    log.write_text("\n".join(nccl_only) + "\n")
    data = analyze_file(log).to_json()
    (nccl,) = data["findings"]
    assert (nccl["id"], nccl["severity"]) == ("log.nccl", "error")
    assert "No route to host" in nccl["message"]  # the WARN line's words, confirmed by init.cc
    warn_only = tmp_path / "warn.log"
    warn_only.write_text(nccl_only[0] + "\n")
    assert analyze_file(warn_only).to_json()["findings"][0]["severity"] == "warning"


def test_out_of_memory_during_the_load_is_an_error_without_a_crash_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = CORPUS / "lk_moe_cuda_oom_glm51_mtp.log"
    run = cli(capsys, "diagnose", "--log", str(log), "--json")
    data = json.loads(run.out)
    assert run.code == 1
    assert [(f["id"], f["severity"]) for f in data["findings"]] == [("log.oom", "error")]
    assert data["phase"] == "loading"


@pytest.mark.parametrize(
    ("wrapped", "plain"),
    [
        (
            "docker_json_file_records_serving_crash_ours_12567",
            "serving_crash_after_prefill_gptoss_spec_overlap_12567",
        ),
        (
            "journald_short_watchdog_all_tp_killed_ours_3752",
            "watchdog_timeout_all_tp_killed_3752",
        ),
    ],
)
def test_a_log_in_a_foreign_record_format_reads_as_the_log_inside(wrapped: str, plain: str) -> None:
    inside, _ = _details(plain)
    outside, _ = _details(wrapped)
    for data in (inside, outside):
        for finding in data["findings"]:
            finding["details"].pop("offset", None)
            finding["details"].pop("line", None)
            for item in finding["details"].get("evidence", []):
                item.pop("offset", None)
    assert outside == inside


def test_time_only_prefixes_and_serving_lines_give_the_phase() -> None:
    capture, _ = _details("time_only_prefix_capture_begin_dsv2_1467")
    assert capture["phase"] == "cuda_graph"
    serving, _ = _details("time_only_prefix_decode_serving_1270")
    assert serving["phase"] == "ready"
    custom, _ = _details("custom_log_format_pid_file_line_serving_crash_pr21723")
    assert custom["crashed_during"] == "ready"


def test_a_rank_past_the_visible_gpus_says_which_gpu_and_what_it_saw() -> None:
    """slime#1326: base GPU 6 under CUDA_VISIBLE_DEVICES=4,5,6,7. The exception line comes
    first and SGLang's Context line (printed only when `set_device` fails) after it: the
    finding says the Context line's GPU, whichever came first; the Engine's "Server process
    terminated unexpectedly" and Ray's dead actor only say another process failed."""
    data, findings = _details("device_ordinal_base_gpu_id_past_visible_slime_1326")
    assert data["phase"] == "crashed"
    (ordinal,) = findings
    assert (ordinal["id"], ordinal["severity"]) == ("log.device_ordinal", "error")
    assert ordinal["message"] == (
        "TP rank 0 asked for GPU 6, but CUDA_VISIBLE_DEVICES=4,5,6,7 leaves it 4 (0-3): "
        "invalid device ordinal"
    )
    details = ordinal["details"]
    assert (details["gpu_id"], details["gpus_visible"], details["tp_size"]) == (6, 4, 2)
    assert details["see"] == "config.gpu_count"
    assert "CUDA_VISIBLE_DEVICES" in str(ordinal["fix"])
    # sglang#23602: cut before its exception, the Context line is all it says: 8 ranks on 4
    _, (cut,) = _details("device_ordinal_tp8_on_4_visible_context_line_23602")
    assert cut["severity"] == "error" and cut["ranks"] == ["TP4"]
    assert cut["message"].startswith("TP rank 4 asked for GPU 4, but")
    assert cut["details"]["tp_size"] == 8


@pytest.mark.parametrize(
    "context",
    [
        # 0.5.23's two wordings (model_runner.py:460, distributed/bootstrap.py:136)
        "Context: self.device='cuda' get_device().gpu_id=2 "
        "os.environ.get('CUDA_VISIBLE_DEVICES')='0,1' get_parallel().tp_rank=2 "
        "get_parallel().tp_size=4",
        "Context: device=cuda gpu_id=2 CUDA_VISIBLE_DEVICES=0,1 tp_rank=2",
    ],
)
def test_the_context_line_in_each_release_wording(context: str) -> None:
    text = (
        f"[2026-01-01 10:00:00 TP2] {context}\n"
        "[2026-01-01 10:00:00 TP2] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 455, in __init__\n'
        "    torch.get_device_module(self.device).set_device(get_device().gpu_id)\n"
        "torch.AcceleratorError: CUDA error: invalid device ordinal\n"
    )
    (ordinal,) = analyze_text(text).to_json()["findings"]
    assert ordinal["id"] == "log.device_ordinal"
    assert ordinal["message"].startswith("TP rank 2 asked for GPU 2, but CUDA_VISIBLE_DEVICES=0,1")
    assert ordinal["details"]["gpus_visible"] == 2


def test_a_line_that_only_says_another_process_failed_stands_alone() -> None:
    """Nothing better in the log: the Engine's line is what it shows of the crash."""
    text = "Exception: Server process terminated unexpectedly.\n"
    (other,) = analyze_text(text).to_json()["findings"]
    assert (other["id"], other["severity"]) == ("log.other", "error")


@pytest.mark.parametrize(
    "context",
    [
        "Context: device=cuda gpu_id=1 CUDA_VISIBLE_DEVICES=2,3 tp_rank=1",
        "Context: device=cuda gpu_id=1 CUDA_VISIBLE_DEVICES=2, 3 tp_rank=1",  # a space: 2 GPUs
        # unset: every GPU visible, and the line alone cannot say the ordinal was bad
        "Context: self.device='cuda' self.gpu_id=1 os.environ.get('CUDA_VISIBLE_DEVICES')=None "
        "self.tp_rank=1 self.tp_size=2",
    ],
)
def test_a_context_line_for_a_gpu_it_does_see_is_not_an_ordinal_error(context: str) -> None:
    """SGLang prints its Context line for any failed `set_device`: GPU 1 of the two listed
    failing as busy is the busy GPU's error, not a rank past the visible GPUs."""
    text = (
        f"[2026-01-01 10:00:00 TP1] {context}\n"
        "[2026-01-01 10:00:00 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/python/sglang/srt/distributed/bootstrap.py", line 133, in init\n'
        "    torch.get_device_module(device).set_device(get_device().gpu_id)\n"
        "torch.AcceleratorError: CUDA error: CUDA-capable device(s) is/are busy or unavailable\n"
    )
    found = analyze_text(text).to_json()["findings"]
    assert [f["id"] for f in found] == ["log.cuda_error"]
