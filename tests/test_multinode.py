"""Multi-node launches in preflight: the tree's own node-layout checks, and what only the other
nodes would show (no address for node 0, a loopback one, every node as rank 0, a rank outside
0..N-1), on 0.5.9 and 0.5.23; both sides of each."""

from __future__ import annotations

from pathlib import Path

import pytest

from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.test_preflight import LAUNCH, kimi_k25, kimi_k25_eagle3, pair

RELEASES = ["sglang_059", "sglang_0523"]
GOOD = ["--dist-init-addr", "10.0.0.1:5000", "--node-rank", "1"]


@pytest.fixture(scope="module", params=RELEASES)
def index(request: pytest.FixtureRequest) -> TreeIndex:
    return TreeIndex(locate(str(request.getfixturevalue(request.param))), use_cache=False)


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return pair(tmp_path, kimi_k25(), kimi_k25_eagle3())[0]


def nodes(index: TreeIndex, target: Path, *flags: str) -> list[Finding]:
    result = preflight(index, [*LAUNCH, "--model-path", str(target), *flags], {}, None)
    return [f for f in result.findings if f.id == "config.multinode"]


def test_a_good_layout_says_what_each_node_runs(index: TreeIndex, target: Path) -> None:
    [info] = nodes(index, target, "--tp", "16", "--nnodes", "2", *GOOD)
    # Asked again in the same process (a session's re-check): the kept answer is not grown.
    assert nodes(index, target, "--tp", "16", "--nnodes", "2", *GOOD) == [info]
    assert info.severity == "info"
    assert "2 nodes, 8 GPUs each (--tp 16 x --pp 1)" in info.message
    assert "same command on every node" in info.message


def test_one_node_has_no_multinode_finding(index: TreeIndex, target: Path) -> None:
    assert nodes(index, target, "--tp", "8") == []


def test_the_trees_own_divisibility_check(index: TreeIndex, target: Path) -> None:
    found = nodes(index, target, "--tp", "3", "--nnodes", "2", *GOOD)
    [refused] = [f for f in found if f.severity == "warning"]
    assert refused.interface is None
    details = refused.to_json()["details"]
    assert details["sglang_message"] == "tp_size must be divisible by number of nodes"
    file, _, line = details["read_from"].rpartition(":")
    source = (Path(index.tree.root) / file).read_text().splitlines()
    assert "% " in "".join(source[int(line) - 1 : int(line) + 3])  # the assert itself
    assert not [
        f for f in nodes(index, target, "--tp", "4", "--nnodes", "2", *GOOD) if f.severity != "info"
    ]


def test_no_address_for_node_0(index: TreeIndex, target: Path) -> None:
    found = nodes(index, target, "--tp", "16", "--nnodes", "2", "--node-rank", "0")
    [missing] = [f for f in found if f.attribute == "dist_init_addr"]
    assert missing.severity == "warning" and "without --dist-init-addr" in missing.message
    assert missing.fix is not None and "--dist-init-addr" in missing.fix.text()
    # Where the nodes would wait: the start-up's distributed init, read from the tree.
    assert missing.step is not None and missing.step.name == "distributed_init"
    file, _, line = missing.to_json()["details"]["read_from"].rpartition(":")
    assert file.startswith("sglang/srt/") and line.isdigit()


@pytest.mark.parametrize("addr", ["127.0.0.1:5000", "localhost:5000", "[::1]:5000", "0.0.0.0:1"])
def test_a_loopback_address_only_node_0_reaches(index: TreeIndex, target: Path, addr: str) -> None:
    found = nodes(
        index, target, "--tp", "16", "--nnodes", "2", "--dist-init-addr", addr, "--node-rank", "0"
    )
    assert [f.attribute for f in found] == ["dist_init_addr"]
    assert "loopback" in found[0].message


def test_every_node_as_rank_0_and_a_rank_past_the_end(index: TreeIndex, target: Path) -> None:
    flags = ["--tp", "16", "--nnodes", "2", "--dist-init-addr", "10.0.0.1:5000"]
    [unranked] = nodes(index, target, *flags)
    assert unranked.attribute == "node_rank" and unranked.severity == "warning"
    [past] = nodes(index, target, *flags, "--node-rank", "2")
    assert past.severity == "error" and "outside 0..1" in past.message
    assert [f.severity for f in nodes(index, target, *flags, "--node-rank", "1")] == ["info"]


def test_more_gpus_per_node_than_this_host_has(index: TreeIndex, target: Path) -> None:
    from eaglebug.checks.launch.devices import GpuMemory

    def counted(gpus: int, *flags: str) -> list[Finding]:
        gpu = GpuMemory(141 * 1024**3, "NVML (fake)", None, None, gpus)
        words = [*LAUNCH, "--model-path", str(target), *flags]
        return [f for f in preflight(index, words, {}, gpu).findings if f.id == "config.gpu_count"]

    [short] = counted(4, "--tp", "8")
    assert short.severity == "error" and "8 GPUs on this host" in short.message
    assert short.step is not None and short.step.name == "distributed_init"
    assert "this host has 4" in short.message
    assert counted(8, "--tp", "8") == []
    # Two nodes of eight: eight per node fit an eight-GPU host; sixteen on one node do not.
    assert counted(8, "--tp", "16", "--nnodes", "2", *GOOD) == []
    [per_node] = counted(8, "--tp", "16")
    assert "16 GPUs on this host" in per_node.message
    # Without a count (--gpu-mem-gib by hand) nothing is said.
    gpu = GpuMemory(141 * 1024**3, "--gpu-mem-gib")
    words = [*LAUNCH, "--model-path", str(target), "--tp", "64"]
    assert not [f for f in preflight(index, words, {}, gpu).findings if f.id == "config.gpu_count"]


def test_srun_gives_each_task_its_own_node_rank(index: TreeIndex, target: Path) -> None:
    """`srun` run from inside an allocation: the batch shell has its own `SLURM_NODEID` (0),
    and each task srun starts has its node's. `--node-rank $SLURM_NODEID` in the task's script
    is set when the launch runs, not the shell's 0 (srun(1), OUTPUT ENVIRONMENT VARIABLES)."""
    script = f"{' '.join(LAUNCH)} --model-path {target} --tp 16 --nnodes 2 "
    script += "--dist-init-addr 10.0.0.1:5000 --node-rank $SLURM_NODEID"
    allocation = {"SLURM_JOB_ID": "7", "SLURM_NODEID": "0", "SLURM_PROCID": "0"}
    task = preflight(index, ["srun", "--nodes=2", "bash", "-c", script], allocation, None)
    assert task.launch.at_run_time == {"node_rank": "$SLURM_NODEID"}
    assert "--node-rank $SLURM_NODEID: set when the launch runs, not known here" in task.warnings
    [info] = [f for f in task.findings if f.id == "config.multinode"]
    assert info.severity == "info" and info.to_json()["details"]["node_rank"] == "$SLURM_NODEID"
    # A default in the script is not taken: srun always sets the task's own.
    default = script.replace("$SLURM_NODEID", "${SLURM_NODEID:-0}")
    with_default = preflight(index, ["srun", "--nodes=2", "bash", "-c", default], allocation, None)
    assert with_default.launch.at_run_time == {"node_rank": "${SLURM_NODEID:-0}"}
    # The same script run by the batch shell itself (no srun): the shell's own value, node 0.
    shell = preflight(index, ["bash", "-c", script], allocation, None)
    assert (shell.launch.get("node_rank"), shell.launch.at_run_time) == ("0", {})
