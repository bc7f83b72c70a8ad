"""Numbers from outside, built for real (issue 24): a 5,000-digit integer, `1e400`, NaN and a
bool in config.json, the state file and the launch command, read by the one reader
(`eaglebug/checks/contract/numbers.py`). None of them ends in a traceback or `internal error`; what
cannot be a figure is refused in one line or, where it only calibrates, passed over with a
warning. (Numbers in log lines are tested with the log reader; HTTP ones in
`test_hostile_http.py` and `test_hostile_prometheus.py`; the state file's among the bad state
files of `test_bad_input.py`.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.numbers import NotJson, python_json, strict_json
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.server.calibration import measured_for
from eaglebug.server.state import LaunchRecord, State, save_state
from tests import test_memory
from tests.clirun import cli, refused
from tests.configs import eagle3, llama, write_model
from tests.test_memory import EAGLE3_LLAMA31_8B, LLAMA31_8B, LLAMA31_8B_BYTES

# The releases' indexes, built once per module (test_memory's fixtures).
index = test_memory.index

LAUNCH = ["python", "-m", "sglang.launch_server"]
HUGE = "9" * 5000


def _write_raw(folder: Path, config: dict[str, Any], key_path: tuple[str, ...], raw: str) -> Path:
    """config.json with `raw` (JSON text, NaN included) at `key_path`."""
    marked = json.loads(json.dumps(config))
    where = marked
    for key in key_path[:-1]:
        where = where.setdefault(key, {})
    where[key_path[-1]] = "@@RAW@@"
    write_model(folder, {})
    (folder / "config.json").write_text(json.dumps(marked).replace('"@@RAW@@"', raw))
    return folder


# -- config.json --------------------------------------------------------------------------------

FACTORS = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e400": "1e400",
    "5000 digits": HUGE,
    "0": "0",
    "-2": "-2",
    "a bool": "true",
}


def _words(target: Path, draft: Path) -> list[str]:
    return [*LAUNCH, "--model-path", str(target), "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", str(draft)]  # fmt: skip


@pytest.mark.parametrize("case", sorted(FACTORS))
def test_a_drafts_rope_scaling_factor_that_is_no_number(
    index: TreeIndex, tmp_path: Path, case: str
) -> None:
    """SGLang multiplies the context length by it (`int(factor * value)`): NaN crashed there."""
    target = write_model(tmp_path / "target", llama())
    draft_config = eagle3(rope_scaling={"type": "dynamic", "factor": 2.0})
    draft = _write_raw(tmp_path / "draft", draft_config, ("rope_scaling", "factor"), FACTORS[case])
    with pytest.raises(InputError) as caught:
        preflight(index, _words(target, draft), {})
    said = caught.value.message
    assert "draft/config.json" in said and HUGE not in said
    if case == "5000 digits":
        assert "more than 4,300 digits" in said
    else:
        assert "rope_scaling.factor is" in said and "positive finite number" in said


def test_the_cli_says_so_in_one_line(
    sglang_0523: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = write_model(tmp_path / "target", llama())
    draft_config = eagle3(rope_scaling={"type": "dynamic", "factor": 2.0})
    draft = _write_raw(tmp_path / "draft", draft_config, ("rope_scaling", "factor"), "NaN")
    run = cli(capsys, "preflight", "--sglang", str(sglang_0523), "--", *_words(target, draft))
    refused(run, "draft/config.json: rope_scaling.factor is NaN")


@pytest.mark.parametrize(
    ("key", "raw", "says"),
    [
        pytest.param("hidden_size", HUGE, "more than 4,300 digits", id="5000 digits"),
        ("num_hidden_layers", "1e400", "expected a positive integer"),
        ("max_position_embeddings", str(10**30), "expected a positive integer"),
        ("num_attention_heads", "NaN", "expected a positive integer"),
        ("vocab_size", "true", "expected a positive integer"),
    ],
)
def test_a_targets_size_that_is_no_count(
    index_059: TreeIndex, tmp_path: Path, key: str, raw: str, says: str
) -> None:
    target = _write_raw(tmp_path / "target", llama(), (key,), raw)
    draft = write_model(tmp_path / "draft", eagle3())
    with pytest.raises(InputError) as caught:
        preflight(index_059, _words(target, draft), {})
    assert "target/config.json" in caught.value.message and says in caught.value.message
    assert len(caught.value.message) < 300, "the number is echoed whole"


def test_a_nan_in_a_key_nobody_reads_does_not_stop_a_preflight(
    sglang_059: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SGLang reads config.json with Python's reader, which takes NaN: so does preflight."""
    target = _write_raw(tmp_path / "target", llama(), ("initializer_range",), "NaN")
    draft = write_model(tmp_path / "draft", eagle3())
    run = cli(capsys, "preflight", "--json", "--sglang", str(sglang_059), "--gpu-mem-gib", "80",
              "--", *_words(target, draft))  # fmt: skip
    assert run.code == 0, run.err
    assert "NaN" not in run.out
    json.loads(run.out)


def test_the_two_json_readers() -> None:
    assert python_json('{"a": NaN}')["a"] != python_json('{"a": NaN}')["a"]  # NaN, as SGLang
    for text in ('{"a": NaN}', '{"a": 1e400}', '{"a": -Infinity}', HUGE):
        with pytest.raises(NotJson):
            strict_json(text)
    with pytest.raises(NotJson, match="more than 4,300 digits"):
        python_json(HUGE)


# -- the launch command ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", pytest.param(HUGE, id="huge")])
def test_context_length_that_is_no_finite_number(
    index: TreeIndex, tmp_path: Path, value: str
) -> None:
    """0.5.9 types the flag `int` (argparse refuses them); 0.5.23 parses it with its own
    `human_readable_int`, run in the one evaluator: SGLang's own refusal is said, on one line,
    and a 5,000-digit value is not echoed whole."""
    target = write_model(tmp_path / "target", llama())
    with pytest.raises(InputError) as caught:
        preflight(index, [*LAUNCH, "--model-path", str(target), "--context-length", value], {})
    said = caught.value.message
    assert said.startswith("--context-length") and "\n" not in said and len(said) < 300
    assert any(why in said for why in ("finite number", "expected an integer", "SGLang refuses it"))


def test_context_length_nan_at_the_cli(
    sglang_0523: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = write_model(tmp_path / "target", llama())
    run = cli(capsys, "preflight", "--sglang", str(sglang_0523), "--", *LAUNCH,
              "--model-path", str(target), "--context-length", "nan")  # fmt: skip
    refused(run, "--context-length nan: SGLang refuses it (ArgumentTypeError: Invalid integer")


# -- calibration from the state file ------------------------------------------------------------

GOOD = {"free_before_load_gib": 70.0, "target_weights_gib": 15.0, "kv_tokens": 250000.0}
BAD = {
    "free memory -80 GiB": {**GOOD, "free_before_load_gib": -80.0},
    "weights -5 GiB": {**GOOD, "target_weights_gib": -5.0},
    "free memory 1e300 GiB": {**GOOD, "free_before_load_gib": 1e300},
    "more weights than free": {**GOOD, "target_weights_gib": 90.0},
    "-3 KV tokens": {**GOOD, "kv_tokens": -3.0},
    "half a token": {**GOOD, "kv_tokens": 0.5},
}


def _launch(
    tmp_path: Path, number: int, words: list[str], memory: dict[str, float]
) -> LaunchRecord:
    log = str(tmp_path / f"launch-{number:03d}.log")  # gone: the record's figures are all
    return LaunchRecord(number, words, {}, log, 4242, 1.0, 1.0, memory=memory)


@pytest.mark.parametrize("case", sorted(BAD))
def test_figures_no_gpu_measured_are_not_the_launchs(tmp_path: Path, case: str) -> None:
    words = [*LAUNCH, "--model-path", "/m"]
    save_state(tmp_path, State(launches=[_launch(tmp_path, 1, words, BAD[case])]))
    warnings: list[str] = []
    assert measured_for(tmp_path, words, warnings) is None
    assert len(warnings) == 1 and "launch 1's memory figures are not a GPU's" in warnings[0]
    # an older launch of the same command that measured real figures calibrates instead
    older = _launch(tmp_path, 1, words, GOOD)
    save_state(tmp_path, State(launches=[older, _launch(tmp_path, 2, words, BAD[case])]))
    found = measured_for(tmp_path, words)
    assert found is not None and found.free_before_load_gib == 70.0


def test_preflight_says_it_passed_them_over(
    sglang_0523: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    target = write_model(tmp_path / "target", LLAMA31_8B, total_size=LLAMA31_8B_BYTES)
    draft = write_model(tmp_path / "draft", EAGLE3_LLAMA31_8B, total_size=2 * 2**30)
    words = [*LAUNCH, "--model-path", str(target), "--speculative-algorithm", "EAGLE3",
             "--speculative-draft-model-path", str(draft)]  # fmt: skip
    save_state(tmp_path, State(launches=[_launch(tmp_path, 1, words, BAD["free memory -80 GiB"])]))
    monkeypatch.chdir(tmp_path)
    run = cli(capsys, "preflight", "--json", "--sglang", str(sglang_0523), "--gpu-mem-gib",
              "80", "--", *words)  # fmt: skip
    assert "launch 1's memory figures are not a GPU's (free_before_load_gib -80)" in run.err
    memory = [f for f in json.loads(run.out)["findings"] if f["id"] == "config.memory"]
    assert memory and memory[0]["details"]["calibrated"] is False
    assert "-80" not in json.dumps(memory[0])
