"""`diagnose --sglang PATH`: the memory the tree's arithmetic predicts for the logged launch,
beside what the log measured. The launch comes from the log's own `server_args=ServerArgs(...)`
line (read with ast, never evaluated); the model folders are real configs written locally."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eaglebug.cli.predict import launch_words, server_args_of
from tests.clirun import cli
from tests.configs import write_hub_model
from tests.test_memory import models


def _log(tmp_path: Path, target: str, draft: str, tokens: int) -> Path:
    log = tmp_path / "server.log"
    log.write_text(
        f"[2026-01-30 10:36:00] server_args=ServerArgs(model_path='{target}', tp_size=1, "
        f"mem_fraction_static=None, speculative_algorithm='EAGLE3', "
        f"speculative_draft_model_path='{draft}', enable_metrics=False, "
        "json_model_override_args='{}', lora_paths=None, attention_backend=<Backend.FA3: 1>)\n"
        "[2026-01-30 10:36:06 TP0] Load weight begin. avail mem=78.58 GB\n"
        "[2026-01-30 10:37:10 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16,"
        " avail mem=63.47 GB, mem usage=15.11 GB.\n"
        f"[2026-01-30 10:37:20 TP0] KV Cache is allocated. #tokens: {tokens}, K size: 20.00 GB, "
        "V size: 20.00 GB\n"
    )
    return log


def test_the_logged_launch_is_read_from_its_server_args(tmp_path: Path) -> None:
    log = _log(tmp_path, "/m/target", "/m/draft", 1000)
    args = server_args_of(log)
    assert args is not None
    assert args["model_path"] == "/m/target" and args["tp_size"] == 1
    assert args["attention_backend"] is None  # an object repr: not a literal, not taken
    words = launch_words(args)
    assert words is not None
    assert words[words.index("--model-path") + 1] == "/m/target"
    assert words[words.index("--speculative-algorithm") + 1] == "EAGLE3"
    assert "--mem-fraction-static" not in words  # None: the tree's default decides


def test_predicted_beside_logged(
    tmp_path: Path, sglang_0523: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = models(tmp_path)
    target = flags[flags.index("--model-path") + 1]
    draft = flags[flags.index("--speculative-draft-model-path") + 1]
    log = _log(tmp_path, target, draft, 380000)
    run = cli(capsys, "diagnose", "--log", str(log), "--sglang", str(sglang_0523), "--json")
    data = json.loads(run.out)
    predicted = data["memory_predicted"]
    assert isinstance(predicted["max_total_num_tokens"], int)
    assert predicted["logged"] == 380000
    assert predicted["ratio"] == pytest.approx(predicted["max_total_num_tokens"] / 380000, rel=1e-3)
    assert 0.5 < predicted["ratio"] < 2.0  # the same arithmetic on the same GPU: close
    text = cli(capsys, "diagnose", "--log", str(log), "--sglang", str(sglang_0523))
    assert "memory predicted by this tree's arithmetic: max_total_num_tokens=" in text.out


def test_no_model_here_says_why(
    tmp_path: Path, sglang_0523: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path, "/nowhere/target", "/nowhere/draft", 1000)
    run = cli(capsys, "diagnose", "--log", str(log), "--sglang", str(sglang_0523), "--json")
    predicted = json.loads(run.out)["memory_predicted"]
    assert "max_total_num_tokens" not in predicted and predicted["skipped"]


# -- real launches (tests/fixtures/memory/launches22, each with its source URL) -----------------
LAUNCHES = Path(__file__).parent / "fixtures/memory/launches22"


def _record(name: str) -> dict[str, Any]:
    records = json.loads((LAUNCHES / "launches.json").read_text())["launches"]
    return next(r for r in records if r["name"] == name)


def test_an_elided_server_args_line_gives_the_fields_it_has(
    tmp_path: Path, sglang_0510: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """Qwen3-8B on one B200 (SGLang's own clean-startup-log reference, 2026-04-27): its
    `server_args=ServerArgs(model_path='Qwen/Qwen3-8B', ...)` is elided, and the model is a hub
    id. The field that is there is read; the model is found in the hub cache the user's
    `HF_HUB_CACHE` names; the prediction lands on the pool the log printed."""
    record = _record("qwen3_8b_b200_tp1_piecewise_cuda_graph_2026_04_27")
    server_args = record["server_args_line"].split("  (elided")[0]
    log = tmp_path / "server.log"
    log.write_text("\n".join([server_args, *record["log"]]) + "\n")
    args = server_args_of(log)
    assert args == {"model_path": "Qwen/Qwen3-8B"}
    hub = tmp_path / "hub"
    config = json.loads((LAUNCHES / "Qwen3-8B.config.json").read_text())
    snapshot = write_hub_model(hub, "Qwen/Qwen3-8B", config)
    weights = int(record["figures"]["weights_gb"] * 1024**3)  # the load's own mem usage
    (snapshot / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": weights}, "weight_map": {}})
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    run = cli(capsys, "diagnose", "--log", str(log), "--sglang", str(sglang_0510), "--json")
    predicted = json.loads(run.out)["memory_predicted"]
    logged = record["figures"]["max_total_num_tokens"]
    assert predicted["logged"] == logged
    assert predicted["ratio"] == pytest.approx(1.0, abs=0.01)


def test_the_kv_line_of_another_rank_stands_for_the_reference_one(tmp_path: Path) -> None:
    """QwQ-32B over 4 x L4 (0.4.3.post4): every rank sizes the same pool. Here rank 1 has the
    least free memory before the load and its KV line is not in the log (rank 0's is): the
    logged pool is rank 0's, not null."""
    from eaglebug.checks import analyze_file

    record = _record("qwq32b_4xl4_tp4_v0_4_3_post4")
    lines = record["log"]
    rank1 = [
        line.replace("TP0]", "TP1]").replace("avail mem=21.63", "avail mem=21.60")
        for line in lines
        if "Load weight" in line
    ]
    log = tmp_path / "server.log"
    log.write_text("\n".join([*lines, *rank1]) + "\n")
    memory = analyze_file(log).memory
    assert memory is not None and memory.rank == "TP1"
    assert memory.free_before_load_gib == 21.60
    assert memory.kv_tokens == record["figures"]["max_total_num_tokens"]
