"""The GPUs a launch sees (`checks/launch/devices.py`): `CUDA_VISIBLE_DEVICES`, `docker run
--gpus`, a Slurm step's GPUs, and the host's GPU figures narrowed to them, through preflight's
GPU count and memory checks.

Real material: THUDM/slime#1326 (https://github.com/THUDM/slime/issues/1326), SGLang started
with `CUDA_VISIBLE_DEVICES='4,5,6,7'`, `tp_size=2` and a `base_gpu_id` of 6: "CUDA error:
invalid device ordinal" when the scheduler calls `torch.cuda.set_device(6)`; sglang#4657
(https://github.com/sgl-project/sglang/issues/4657), the same with GPUs not numbered from 0.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.launch.devices import GpuMemory, HostGpu, Visible, seen_by, visible_gpus
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.configs import kimi_k25, kimi_k25_eagle3
from tests.test_memory import models
from tests.test_preflight import LAUNCH, pair

GIB = 1024**3
SERVER = "python3 -m sglang.launch_server --model-path /m --tp 4"


def seen(line: str, environ: dict[str, str] | None = None) -> Visible | None:
    """What `line` (as pasted: `VAR=value` words first) lets its server see."""
    words = shlex.split(line)
    additions = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        additions[name] = value
    return visible_gpus(words, {**(environ or {}), **additions})


def ids(line: str, environ: dict[str, str] | None = None) -> tuple[tuple[str, ...] | None, int]:
    found = seen(line, environ)
    assert found is not None, line
    return found.ids, found.count


def test_nothing_narrows_a_plain_launch() -> None:
    assert seen(SERVER) is None
    assert seen(f"nohup {SERVER}") is None
    # a container without --gpus: its GPUs are the daemon's and the image's business
    assert seen(f"docker run --rm lmsysorg/sglang {SERVER}") is None
    assert seen(f"docker run --gpus all -e HF_TOKEN=x lmsysorg/sglang {SERVER}") is None


def test_cuda_visible_devices_as_cuda_reads_it() -> None:
    assert ids(f"CUDA_VISIBLE_DEVICES=4,5,6,7 {SERVER}") == (("4", "5", "6", "7"), 4)
    assert ids(SERVER, {"CUDA_VISIBLE_DEVICES": "1"}) == (("1",), 1)  # from the shell
    assert ids(f"env CUDA_VISIBLE_DEVICES=2,3 {SERVER}") == (("2", "3"), 2)
    # an invalid entry ends the list (the CUDA Programming Guide's own example)
    assert ids(f"CUDA_VISIBLE_DEVICES=0,2,-1,1 {SERVER}") == (("0", "2"), 2)
    assert ids(f"CUDA_VISIBLE_DEVICES= {SERVER}") == ((), 0)  # empty: no GPU
    assert ids(f"CUDA_VISIBLE_DEVICES=-1 {SERVER}") == ((), 0)
    assert ids(f"CUDA_VISIBLE_DEVICES=GPU-8932f937,3 {SERVER}") == (("GPU-8932f937", "3"), 2)
    assert ids(f"CUDA_VISIBLE_DEVICES='0, 1' {SERVER}") == (("0", "1"), 2)
    # `env -u` takes the shell's away again
    assert seen(f"env -u CUDA_VISIBLE_DEVICES {SERVER}", {"CUDA_VISIBLE_DEVICES": "0"}) is None
    found = seen(f"CUDA_VISIBLE_DEVICES=4,5 {SERVER}")
    assert found is not None and found.describe() == "CUDA_VISIBLE_DEVICES=4,5"


def test_docker_gpus_as_docker_reads_them() -> None:
    image = "lmsysorg/sglang:latest"
    assert ids(f"docker run --gpus 2 {image} {SERVER}") == (("0", "1"), 2)  # the first two
    assert ids(f"docker run --gpus count=3 {image} {SERVER}") == (("0", "1", "2"), 3)
    assert ids(f"""docker run --gpus '"device=2,3"' {image} {SERVER}""") == (("2", "3"), 2)
    assert ids(f"docker run --gpus device=5 {image} {SERVER}") == (("5",), 1)
    assert ids(f"docker run --gpus capabilities=compute {image} {SERVER}") == (("0",), 1)
    # unquoted, `device=2,3` is a device and a count: docker refuses it, nothing is read
    assert seen(f"docker run --gpus device=2,3 {image} {SERVER}") is None
    # the container's own variable picks among its GPUs, numbered from 0 in the host's order
    line = f"""docker run --gpus '"device=6,7"' -e CUDA_VISIBLE_DEVICES=1 {image} {SERVER}"""
    assert ids(line) == (("7",), 1)
    found = seen(line)
    assert found is not None
    assert found.describe() == 'docker --gpus "device=6,7", then CUDA_VISIBLE_DEVICES=1'
    # an index the container lacks ends the list
    assert ids(f"docker run --gpus 2 -e CUDA_VISIBLE_DEVICES=1,2 {image} {SERVER}") == (("1",), 1)
    # the shell's variable does not reach the container; -e does
    assert ids(f"docker run --gpus 4 {image} {SERVER}", {"CUDA_VISIBLE_DEVICES": "0"}) == (
        ("0", "1", "2", "3"),
        4,
    )
    assert ids(f"docker run --gpus all -e CUDA_VISIBLE_DEVICES=3 {image} {SERVER}") == (("3",), 1)
    # the NVIDIA runtime's own variable, without --gpus
    line = f"docker run --runtime nvidia -e NVIDIA_VISIBLE_DEVICES=0,1 {image} {SERVER}"
    assert ids(line) == (("0", "1"), 2)
    # podman: each --gpus value is one CDI device, `nvidia.com/gpu=VALUE`, and they add up
    assert ids(f"podman run --gpus 1 {image} {SERVER}") == (("1",), 1)
    assert ids(f"podman run --gpus 0 --gpus 3 {image} {SERVER}") == (("0", "3"), 2)
    assert seen(f"podman run --gpus all {image} {SERVER}") is None
    # CDI devices by name, docker's too; then the container's own list picks among them
    line = f"docker run --device nvidia.com/gpu=3 -e CUDA_VISIBLE_DEVICES=0 {image} {SERVER}"
    assert ids(line) == (("3",), 1)


def test_what_is_not_known_only_bounds_the_count() -> None:
    """Where which GPUs the launch gets is not known here, a list still bounds how many, and
    nothing docker refuses is read: never a smaller count than the launch will have."""
    image = "lmsysorg/sglang:latest"
    # a container without a GPU option: its GPUs are the daemon's and the image's business
    assert ids(f"docker run -e CUDA_VISIBLE_DEVICES=0 {image} {SERVER}") == (None, 1)
    # the NVIDIA runtime's variable without --runtime nvidia: those GPUs or, under runc, none
    assert ids(f"docker run -e NVIDIA_VISIBLE_DEVICES=1,2 {image} {SERVER}") == (None, 2)
    # several device requests, or UUIDs the container numbers in bus order: how many only
    line = f"docker run --gpus 2 --gpus 3 -e CUDA_VISIBLE_DEVICES=1 {image} {SERVER}"
    assert ids(line) == (None, 1)
    uuids = """docker run --gpus '"device=GPU-5aaa,GPU-3aaa"' -e CUDA_VISIBLE_DEVICES=0"""
    assert ids(f"{uuids} {image} {SERVER}") == (None, 1)
    # what docker itself refuses, or hands on as every GPU
    for gpus in ("''", "count=2,count=3", "device=all"):
        assert seen(f"docker run --gpus {gpus} {image} {SERVER}") is None, gpus
    # hostile numbers: 5,000 digits, or a count no machine has, are not GPU counts (read as
    # numbers they were a ValueError, and a tuple of thirty million GPU names, 2 GB)
    for count in ("1" * 5000, "30000000"):
        assert seen(f"docker run --gpus {count} {image} {SERVER}") is None
        assert seen(f"srun --gres=gpu:{count} {SERVER}") is None
    # `isdigit` takes a superscript two; CUDA does not: an invalid first entry, no GPU
    assert ids(f"docker run --gpus 2 -e CUDA_VISIBLE_DEVICES=² {image} {SERVER}") == ((), 0)
    # a MIG instance, or a UUID NVML gave no UUIDs to match: counted, not picked
    host = GpuMemory(141 * GIB, "NVML", 139 * GIB, "NVML", 8, tuple(
        HostGpu(i, None, "NVIDIA H200", 141 * GIB, 139 * GIB) for i in range(8)
    ))  # fmt: skip
    for line in (f"docker run --gpus device=0:0 {image} {SERVER}",
                 f"CUDA_VISIBLE_DEVICES=GPU-3aaa {SERVER}"):  # fmt: skip
        found = seen(line)
        assert found is not None
        assert (seen_by(host, found).count, seen_by(host, found).gpus) == (1, host.gpus), line


def test_a_slurm_steps_gpus() -> None:
    # Slurm sets the step's own variable: the shell's is replaced, which GPUs is Slurm's choice
    assert ids(f"srun -N 1 --gres=gpu:8 {SERVER}", {"CUDA_VISIBLE_DEVICES": "0"}) == (None, 8)
    assert ids(f"srun --gres=gpu:h100:4 {SERVER}") == (None, 4)
    assert ids(f"srun --gpus-per-node=2 {SERVER}") == (None, 2)
    assert ids(f"srun -N 1 -G 4 {SERVER}") == (None, 4)
    assert seen(f"srun -N 2 -G 16 {SERVER}") is None  # spread over nodes: not read
    # a variable set after srun picks among the step's GPUs, or replaces Slurm's (whether the
    # step is confined to its own GPUs is Slurm's configuration): at most as many as listed
    assert ids(f"srun --gres=gpu:8 env CUDA_VISIBLE_DEVICES=0,1 {SERVER}") == (None, 2)
    assert ids(f"srun --gres=gpu:4 env CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 {SERVER}") == (None, 6)
    assert seen(f"srun -N 1 {SERVER}") is None
    # the step runs on a compute node: this (login) host's two GPUs do not bound it
    step = seen(f"srun -N 1 --gres=gpu:8 {SERVER}")
    assert step is not None and step.remote
    login = GpuMemory(80 * GIB, "NVML", 79 * GIB, "NVML", 2, tuple(
        HostGpu(i, None, "NVIDIA A100", 80 * GIB, 79 * GIB) for i in range(2)
    ))  # fmt: skip
    assert seen_by(login, step).count == 8


# -- the host's GPUs, narrowed ----------------------------------------------------------------
EIGHT = tuple(
    HostGpu(i, f"GPU-{i}a{i}b0000-0000", "NVIDIA H200", 141 * GIB, (2 if i < 4 else 139) * GIB)
    for i in range(8)
)  # a neighbour's job fills GPUs 0-3
HOST = GpuMemory(141 * GIB, "NVML (8 x NVIDIA H200)", 2 * GIB, "NVML", 8, EIGHT)


def test_the_host_figures_are_the_launchs_own_gpus() -> None:
    found = seen(f"CUDA_VISIBLE_DEVICES=4,5,6,7 {SERVER}")
    assert found is not None
    mine = seen_by(HOST, found)
    assert (mine.count, mine.free_bytes) == (4, 139 * GIB)  # not the neighbour's 2 GiB
    assert [g.index for g in mine.gpus] == [4, 5, 6, 7]
    assert mine.source == "NVML (8 x NVIDIA H200), GPUs 4,5,6,7 (CUDA_VISIBLE_DEVICES=4,5,6,7)"
    # by UUID prefix, and an index past the host's GPUs ends the list (CUDA stops there)
    assert seen_by(HOST, Visible(("GPU-5a5", "1"), 2, ("x",))).free_bytes == 2 * GIB
    assert [g.index for g in seen_by(HOST, Visible(("6", "9", "7"), 3, ("x",))).gpus] == [6]
    # a prefix two GPUs share, or a MIG instance: which is not known, only the count bounded
    shared = seen_by(HOST, Visible(("GPU-",), 1, ("x",)))
    assert (shared.count, shared.free_bytes, shared.gpus) == (1, 2 * GIB, EIGHT)
    # a Slurm step: how many, not which
    step = seen_by(HOST, Visible(None, 4, ("srun's 4 GPUs",)))
    assert (step.count, step.free_bytes) == (4, 2 * GIB)
    # --gpu-free-gib stands for the least free: no GPU's own figure replaces it
    given = GpuMemory(141 * GIB, "NVML (8 x NVIDIA H200)", 50 * GIB, "--gpu-free-gib", 8, EIGHT)
    assert seen_by(given, found).free_bytes == 50 * GIB


# -- through preflight --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def index(sglang_0523: Path) -> TreeIndex:
    return TreeIndex(locate(str(sglang_0523)), use_cache=False)


def counted(index: TreeIndex, line: str, gpu: GpuMemory | None) -> list[Finding]:
    words = shlex.split(line)
    found = preflight(index, words, {}, gpu).findings
    return [f for f in found if f.id == "config.gpu_count"]


def test_a_launch_pointed_at_fewer_gpus_than_its_ranks(index: TreeIndex, tmp_path: Path) -> None:
    target = pair(tmp_path, kimi_k25(), kimi_k25_eagle3())[0]
    server = f"{' '.join(LAUNCH)} --model-path {target}"
    # slime#1326: four GPUs seen, the ranks from GPU 6
    line = f"CUDA_VISIBLE_DEVICES=4,5,6,7 {server} --tp 2 --base-gpu-id 6"
    [short] = counted(index, line, HOST)
    assert short.severity == "error"
    assert "it sees 4 GPUs (CUDA_VISIBLE_DEVICES=4,5,6,7)" in short.message
    assert "from GPU 6" in short.message
    assert short.evidence is not None
    assert isinstance(short.evidence, ConfigEvidence)
    assert str(short.evidence.value("gpus_seen_by")).startswith("it sees 4 GPUs")
    assert counted(index, f"CUDA_VISIBLE_DEVICES=4,5,6,7 {server} --tp 4", HOST) == []
    # the whole host would have held --tp 8; the launch's four do not
    [eight] = counted(index, f"CUDA_VISIBLE_DEVICES=0,1,2,3 {server} --tp 8", HOST)
    assert "it sees 4 GPUs" in eight.message
    assert counted(index, f"{server} --tp 8", HOST) == []
    # without NVML the variable still bounds the count: two GPUs cannot hold --tp 4
    [bounded] = counted(index, f"CUDA_VISIBLE_DEVICES=0,1 {server} --tp 4", None)
    assert "it sees at most 2 GPUs" in bounded.message
    words = shlex.split(f"CUDA_VISIBLE_DEVICES=0,1 {server} --tp 4")
    assert preflight(index, words, {}, None).gpus_seen == {
        "count": 2,
        "exact": False,
        "nvml_indices": None,
        "by": "CUDA_VISIBLE_DEVICES=0,1",
    }
    assert counted(index, f"CUDA_VISIBLE_DEVICES=0,1 {server} --tp 2", None) == []
    # a container given two GPUs
    line = f"""docker run --gpus '"device=2,3"' -v {target}:{target} img {server} --tp 4"""
    [boxed] = counted(index, line, HOST)
    assert 'it sees 2 GPUs (docker --gpus "device=2,3")' in boxed.message


def memory_json(
    capsys: pytest.CaptureFixture[str], sglang: Path, words: list[str]
) -> tuple[dict[str, Any], Any]:
    """The memory finding's details, and what the answer says of the GPUs the launch sees."""
    import eaglebug.cli.parser

    code = eaglebug.cli.parser.main(["preflight", "--sglang", str(sglang), "--json", "--", *words])
    out, _ = capsys.readouterr()
    assert code in (0, 1), out
    answer = json.loads(out)
    [found] = [f for f in answer["findings"] if f["id"] == "config.memory"]
    return dict(found["details"]), answer["gpus_seen"]


def test_the_memory_check_reads_the_launchs_gpus_not_the_neighbours(
    sglang_0523: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import eaglebug.gpu.nvml

    each = tuple((g.index, g.uuid, g.name, g.total_bytes, g.free_bytes) for g in EIGHT)
    monkeypatch.setattr(
        eaglebug.gpu.nvml,
        "smallest_gpu_memory",
        lambda: (141 * GIB, "NVML (8 x NVIDIA H200)", 2 * GIB, "NVML", 8, each),
    )
    launch = [*LAUNCH, *models(tmp_path)]
    host, every = memory_json(capsys, sglang_0523, launch)
    assert host["free_before_load_gib"] == 2.0  # the whole host: the neighbour's GPU 0
    assert every is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    mine, seen = memory_json(capsys, sglang_0523, launch)
    assert mine["free_before_load_gib"] == 139.0
    assert mine["gpu_memory_from"].endswith("GPUs 4,5 (CUDA_VISIBLE_DEVICES=4,5)")
    assert seen == {
        "count": 2,
        "exact": True,
        "nvml_indices": [4, 5],
        "by": "CUDA_VISIBLE_DEVICES=4,5",
    }
    # the text report says it under the models
    import eaglebug.cli.parser

    eaglebug.cli.parser.main(["preflight", "--sglang", str(sglang_0523), *launch])
    out, _ = capsys.readouterr()
    assert "GPUs it sees: 4,5 (CUDA_VISIBLE_DEVICES=4,5)" in out


def test_cudas_default_order_among_unlike_gpus_bounds_only_the_count() -> None:
    """CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; nvidia-smi (and
    docker) by PCI bus. Among like GPUs the two agree; among unlike ones an index may name
    another GPU, so only how many is taken."""
    mixed = (
        HostGpu(0, None, "NVIDIA RTX A4000", 16 * GIB, 15 * GIB),
        HostGpu(1, None, "NVIDIA H100 80GB HBM3", 80 * GIB, 79 * GIB),
    )
    host = GpuMemory(16 * GIB, "NVML (2 x NVIDIA RTX A4000)", 15 * GIB, "NVML", 2, mixed)
    default = seen(f"CUDA_VISIBLE_DEVICES=1 {SERVER}")
    assert default is not None and default.fastest_first
    first = seen(f"CUDA_VISIBLE_DEVICES=0 {SERVER}")  # GPU 0 is a number too
    assert first is not None and first.fastest_first
    assert seen_by(host, first).gpus == mixed  # which one: not known, so not picked
    assert (seen_by(host, default).count, seen_by(host, default).free_bytes) == (1, 15 * GIB)
    ordered = seen(f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1 {SERVER}")
    assert ordered is not None and not ordered.fastest_first
    assert seen_by(host, ordered).free_bytes == 79 * GIB
    # docker's --gpus numbers are nvidia-smi's
    boxed = seen(f"docker run --gpus device=1 img {SERVER}")
    assert boxed is not None and seen_by(host, boxed).free_bytes == 79 * GIB
    # none visible is none, in any order
    assert seen_by(host, Visible((), 0, ("CUDA_VISIBLE_DEVICES=",), True)).count == 0
