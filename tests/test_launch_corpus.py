"""Launch commands as published (tests/fixtures/launches, SOURCE.md): each is read.

Scripts and docs write the launch through Slurm, containers and shells; each command here is
handed over as a user would paste it (one string, `\\` continuations), its shell variables
expanded as its script sets them, and must come back as SGLang's program after its wrappers,
with the flags the release reads."""

from __future__ import annotations

from pathlib import Path
from string import Template

import pytest

from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.flags import FlagSpec, server_flags
from eaglebug.checks.launch.wrappers import unwrapped
from eaglebug.checks.source.index import TreeIndex

CORPUS = Path(__file__).with_name("fixtures") / "launches"
ENTRY = ("python3", "-m", "sglang.launch_server")
# The variables each script sets before its command (Slurm's, as on the job's first node).
SET = {
    "sglang_docs_multi_node_srun.sh": {
        "model": "MODEL_PATH", "tp_size": "16", "NCCL_INIT_ADDR": "node001:8000",
        "SLURM_NODEID": "0",
    },
    "hidden_capacity_docker_workdir.sh": {
        "volume": "$PWD/data", "model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    },
}  # fmt: skip
# file -> (the wrappers, the model path as the server reads it, one more flag and its value)
EXPECTED = {
    "sglang_docs_multi_node_srun.sh": (["srun"], "MODEL_PATH", "node_rank", "0"),
    "marie_ai_qwq_x8.sh": (["docker run"], "Qwen/QwQ-32B", "dp_size", "4"),
    "webcoach_qwen_vl_bash_c.sh": (["docker run"], "Qwen/Qwen2.5-VL-7B-Instruct", "tp_size", "1"),
    "hidden_capacity_docker_workdir.sh": (
        ["docker run"],
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        "port",
        "30000",
    ),
}


@pytest.fixture(scope="module")
def flags(index_0523: TreeIndex) -> list[FlagSpec]:
    return server_flags(index_0523)


def test_every_published_command_is_listed() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.sh")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_published_launch_is_read(name: str, flags: list[FlagSpec]) -> None:
    wrappers, model, dest, value = EXPECTED[name]
    launch = parse_launch([_expanded(name)], flags, "0.5.23")
    assert launch.program[-3:] == ENTRY
    assert [w.name for w in unwrapped(launch.program)[0]] == wrappers
    assert launch.text("model_path") == model
    assert launch.text(dest) == value


def test_a_relative_mount_is_from_the_current_folder(
    flags: list[FlagSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-v ./:/code -w /code` (docker 23 and later read `./` from the current folder)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    launch = parse_launch([_expanded("hidden_capacity_docker_workdir.sh")], flags, "0.5.23")
    assert launch.host_path("/code/models/x", {}) == str(tmp_path / "models" / "x")
    assert launch.host_path("/root/.cache/huggingface/hub", {}) == str(tmp_path / "data" / "hub")


def _expanded(name: str) -> str:
    """The command as its script's shell runs it: the variables it set, expanded (what is
    left, `$PWD`, as a pasted command's mounts are: `containers.mounts`)."""
    return Template((CORPUS / name).read_text()).safe_substitute(SET.get(name, {}))
