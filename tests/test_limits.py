"""Bounded memory and time for any input (issues 21.2, 24): what is over a limit of
`contract/limits.py` is skipped with one warning line naming it, and the rest is checked as
usual; a link in a loop hides nothing else.

The hostile inputs are built for real: a 10 MB one-line module that the consumer scan would
parse, a module of a million separators under the size limit, a link loop beside the model
file, sparse files whose headers claim tens of megabytes.
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import pytest

from eaglebug.checks.contract import limits
from eaglebug.checks.memory.safetensors import checkpoint_tensors
from eaglebug.checks.models.config import json_file
from eaglebug.checks.source import cache
from eaglebug.checks.source.facts import parse
from tests import clirun
from tests.clirun import cli
from tests.configs import llama, write_model
from tests.peak_rss import run_measured

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "examples" / "sglang-mini"
KIMI = "KimiK25ForConditionalGeneration"
GENERATED = "sglang/srt/generated_table.py"
RSS_LIMIT_MB = 200


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    shutil.copytree(
        MINI / "python", tmp_path / "python", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path / "python"


def _audit(tree: Path) -> tuple[int, str, str, float]:
    """`eaglebug audit --json` as a user runs it: exit code, stdout, stderr, peak RSS (MB)."""
    argv = [sys.executable, "-m", "eaglebug", "audit", "--sglang", str(tree)]
    argv += ["--model-class", KIMI, "--json"]
    run = run_measured(argv)
    return run.code, run.out, run.err, run.rss_mb


def _one_line_module(size: int) -> str:
    """A module the consumer scan selects by its bytes (it calls into a runner's model),
    then one line of generated data: the shape that took 5 GB to parse."""
    head = "def capture(model_runner): model_runner.model.set_eagle3_layers_to_capture(["
    body = ",".join(str(i % 1000) for i in range(size // 3))
    return (head + body)[: size - 2] + "])"


def test_a_10_mb_one_line_module_is_skipped_and_the_rest_audited(mini: Path) -> None:
    code, clean_out, clean_err, _ = _audit(mini)
    assert code == 1, clean_err
    (mini / GENERATED).write_text(_one_line_module(10_000_000))
    code, out, err, rss_mb = _audit(mini)
    assert code == 1, err
    assert json.loads(out)["findings"] == json.loads(clean_out)["findings"]
    said = [line for line in err.splitlines() if GENERATED in line]
    assert len(said) == 1 and said[0].startswith("warning: ") and "limit" in said[0], err
    assert "9.5 MiB" in said[0], said
    assert rss_mb <= RSS_LIMIT_MB, f"peak RSS {rss_mb:.0f} MB"
    # Warm, the warning is said again (the walk's warnings are kept with the answers).
    code, _, warm_err, _ = _audit(mini)
    assert code == 1 and [line for line in warm_err.splitlines() if GENERATED in line] == said


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("x = [" + "1," * 400_000 + "]\n", "separators"),  # 800 KB: under the size limit
        ("x = 1  # " + "y" * 20_000 + "\n", "a line of"),
    ],
)
def test_a_module_over_the_node_or_line_limit_is_not_parsed(text: str, why: str) -> None:
    assert len(text) < limits.SOURCE_FILE_BYTES
    found = parse("sglang/srt/x.py", text.encode())
    assert isinstance(found, str) and why in found and "limit" in found


def test_the_largest_real_modules_are_within_the_limits(sglang_0514: Path) -> None:
    """0.5.14's server_args.py (327 KB, the largest module of any release) parses."""
    data = (sglang_0514 / "sglang/srt/server_args.py").read_bytes()
    assert not isinstance(parse("sglang/srt/server_args.py", data), str)


def test_an_over_limit_module_in_a_call_chain_is_said_where_it_is_reached(mini: Path) -> None:
    """Outside the runtime nothing is read during the walk; a module that an import reaches
    and that is over the limit is skipped with its warning when reached."""
    big = mini / "sglang" / "lang" / "huge.py"
    big.parent.mkdir(exist_ok=True)
    big.write_text("x = 1\n" + "#" * (limits.SOURCE_FILE_BYTES + 10) + "\n")
    code, _, err, _ = _audit(mini)
    assert code == 1, err
    assert "huge.py" not in err  # never reached by the audit, never read


def test_a_symlink_loop_hides_no_class(mini: Path) -> None:
    models = mini / "sglang" / "srt" / "models"
    (models / "a.py").symlink_to("b.py")
    (models / "b.py").symlink_to("a.py")
    (models / "dangling.py").symlink_to("nowhere.py")
    (models / "self").symlink_to(".")
    code, out, err, _ = _audit(mini)
    assert code == 1, err
    errors = {f["attribute"] for f in json.loads(out)["findings"] if f["severity"] == "error"}
    assert errors == {"get_embed_and_head", "set_eagle3_layers_to_capture"}
    for name in ("a.py", "b.py"):
        assert (
            f"warning: sglang/srt/models/{name}: skipped, Too many levels of symbolic links" in err
        )
    assert "warning: sglang/srt/models/dangling.py: skipped" in err


def _sparse(path: Path, size: int, head: bytes = b"") -> None:
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)


def test_a_config_json_over_its_limit_is_refused(
    sglang_059: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    _sparse(model / "config.json", limits.CONFIG_FILE_BYTES + 1, b'{"a": "')
    run = cli(capsys, "audit", "--sglang", str(sglang_059), "--model-path", str(model))
    line = clirun.refused(run)[0]
    assert "config.json" in line and "limit" in line


def test_a_safetensors_header_over_its_limit_is_a_warning(tmp_path: Path) -> None:
    model = write_model(tmp_path / "model", llama())
    length = limits.SAFETENSORS_HEADER_BYTES + 1
    shard = model / "model.safetensors"
    _sparse(shard, length + 8 + 16, struct.pack("<Q", length) + b"{")
    warnings: list[str] = []
    found = checkpoint_tensors(model, None, warnings)
    assert isinstance(found, str) and "limit" in found
    assert warnings == [found] and str(shard) in found


def test_a_model_index_over_its_limit_is_not_read(tmp_path: Path) -> None:
    model = write_model(tmp_path / "model", llama())
    index = model / "model.safetensors.index.json"
    _sparse(index, limits.MODEL_INDEX_BYTES + 1, b'{"weight_map": {')
    assert json_file(index) is None
    found = checkpoint_tensors(model)
    assert isinstance(found, str) and "over the limit" in found


def test_a_cache_file_over_its_limit_is_a_miss(tmp_path: Path) -> None:
    path = cache.store_path()
    path.parent.mkdir(parents=True)
    _sparse(path, limits.CACHE_FILE_BYTES + 1, cache.MAGIC)
    assert cache.read(path, None) is None
