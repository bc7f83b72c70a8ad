"""The GPUs a launch's server sees: `CUDA_VISIBLE_DEVICES`, `docker run --gpus`, a Slurm
step's GPUs, read from the launch, and the host's GPUs narrowed to them.

Why: on a shared 8-GPU box a launch is pointed at its GPUs, most often by
`CUDA_VISIBLE_DEVICES=4,5,6,7 python3 -m sglang.launch_server ... --tp 4`. Its ranks call
`torch.cuda.set_device(base_gpu_id + rank)` over the GPUs it sees, numbered from 0; the rest of
the box is not its. Counted over the whole host, `--tp 8` under `CUDA_VISIBLE_DEVICES=0,1,2,3`
passes and dies at the scheduler's start ("CUDA error: invalid device ordinal"), and a
neighbour's full GPU 0 reads as the least free memory of a launch that never touches it.

What decides the set, as each tool documents it:
- CUDA (the CUDA Programming Guide, "CUDA Environment Variables"): unset, every GPU; empty,
  none; else a comma-separated sequence of indices (nvidia-smi's numbers) or UUIDs (`GPU-...`,
  a unique prefix will do), enumerated in that order; an invalid entry ends the sequence.
  `MIG-...` entries name MIG instances, whose memory is not the GPU's: counted, not sized.
- `docker run --gpus` (docker/cli `opts/gpus.go`, moby's nvidia device driver): `all`; a count
  `N` (the host's GPUs 0..N-1); `device=0,2` (quoted so that its commas survive the CSV);
  neither count nor device gives one GPU; count and devices together, docker refuses. Inside
  the container the GPUs are numbered from 0 and its own `CUDA_VISIBLE_DEVICES` (`-e`) picks
  among them. Without `--gpus`, `-e NVIDIA_VISIBLE_DEVICES=...` is the NVIDIA runtime's list;
  with neither, what the container sees depends on the daemon's default runtime and the
  image: not known here, so not narrowed.
- `srun --gres=gpu:N`, `--gpus-per-node=N` (or `--gpus=N` on one node): Slurm sets the step's
  `CUDA_VISIBLE_DEVICES` to its N GPUs, which ones is Slurm's choice. A variable from the shell
  is replaced; one set after srun (an `env` wrapper) narrows further.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from eaglebug.checks.contract.environ import visible_devices
from eaglebug.checks.launch.command import env_and_argv
from eaglebug.checks.launch.wrappers import Wrapped, environment, unwrapped


@dataclass(frozen=True)
class HostGpu:
    """One GPU of this host as NVML numbers it (nvidia-smi's index)."""

    index: int
    uuid: str | None
    name: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class GpuMemory:
    bytes_per_gpu: int
    source: str  # "NVML (NVIDIA H200)", "--gpu-mem-gib"
    free_bytes: int | None = None  # the least free on any GPU now (NVML, --gpu-free-gib)
    free_source: str | None = None
    count: int | None = None  # GPUs on this host (NVML); None when given by hand
    gpus: tuple[HostGpu, ...] = ()  # each GPU, where NVML answered: the launch's are picked


@dataclass(frozen=True)
class Visible:
    """The GPUs a launch's server sees. `ids`: host GPUs by index or UUID, in the order the
    server numbers them (None: which ones is not known here); `count`: how many at most (the
    entries that can be valid; the host may have fewer); `said`: what narrowed them."""

    ids: tuple[str, ...] | None
    count: int
    said: tuple[str, ...]
    # Its indices are CUDA's, in CUDA's default order (fastest first, `CUDA_DEVICE_ORDER`
    # unset): nvidia-smi's numbers only where the GPUs are alike (ties go by PCI bus).
    fastest_first: bool = False

    def describe(self) -> str:
        return ", then ".join(self.said)


def visible_gpus(program: Sequence[str], environ: Mapping[str, str]) -> Visible | None:
    """The GPUs the server after `program`'s wrappers sees, started in `environ` (with the
    launch's `VAR=value` words); None where nothing narrows them (every GPU of the host)."""
    wrapped = unwrapped(program)[0]
    seen: Visible | None = None
    env = dict(environ)
    start = 0  # the wrappers from here on run in `env`
    for at, wrapper in enumerate(wrapped):
        if wrapper.container != "docker" and wrapper.name != "srun":
            continue
        here = environment(wrapped[start : at + 1], env)
        given = _given_by(wrapper, here)
        if given is None:
            continue
        # The GPUs a container or a step is given are the host's, whatever was seen before.
        seen, env, start = given, here, at + 1
        if wrapper.name == "srun":
            env.pop("CUDA_VISIBLE_DEVICES", None)  # the step's own, set by Slurm
    final = environment(wrapped[start:], env)
    value = final.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return seen
    listed = visible_devices(value)
    said = f"CUDA_VISIBLE_DEVICES={value}"
    picked = Visible(listed, len(listed), (said,)) if seen is None else _among(seen, listed, said)
    if final.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and any(e.isdigit() for e in listed):
        picked = replace(picked, fastest_first=True)
    return picked


def launch_gpus(
    words: Sequence[str], environ: Mapping[str, str], gpus: tuple[HostGpu, ...]
) -> frozenset[int] | None:
    """NVML's numbers of this host's `gpus` that a launch command (as typed: its `VAR=value`
    words first) sees, where it narrows them to known ones; None: all of them, or not known
    which. The launch watch tells a stall by their memory, not by a neighbour's job."""
    additions, argv = env_and_argv(words)
    visible = visible_gpus(argv, {**environ, **additions})
    picked = picked_gpus(gpus, visible) if visible is not None else None
    return None if picked is None or picked == gpus else frozenset(g.index for g in picked)


def _given_by(wrapper: Wrapped, inside: Mapping[str, str]) -> Visible | None:
    """The GPUs a wrapper gives the command after it, where it says: a container's `--gpus`
    (or the NVIDIA runtime's variable), a Slurm step's GPU request."""
    if wrapper.container == "docker":
        requests = [value for option, value in wrapper.options if option == "--gpus"]
        if len(requests) == 1:
            return _docker_gpus(requests[0])
        listed = inside.get("NVIDIA_VISIBLE_DEVICES")  # the NVIDIA Container Toolkit's values
        if not requests and listed is not None and listed != "all":
            ids = () if listed in ("none", "void", "") else visible_devices(listed)
            return Visible(ids, len(ids), (f"NVIDIA_VISIBLE_DEVICES={listed}",))
        return None
    if wrapper.name == "srun":
        count = _slurm_gpus(wrapper)
        if count is not None:
            return Visible(None, count, (f"srun's {count} GPU{'s' if count != 1 else ''}",))
    return None


def _docker_gpus(value: str) -> Visible | None:
    """`--gpus VALUE` as docker reads it; None where it is refused or not read (docker then
    says why, or the GPUs are not narrowed here)."""
    try:
        fields = next(csv.reader([value]))
    except (csv.Error, StopIteration):
        return None
    count: int | None = None
    devices: list[str] | None = None
    for field in fields:
        key, eq, text = field.partition("=")
        if not eq or key == "count":
            number = text if eq else key
            if number == "all":
                return None  # every GPU of the host
            if not number.isdigit():
                return None
            count = int(number)
        elif key == "device":
            devices = text.split(",")
        elif key not in ("driver", "capabilities", "options"):
            return None
    said = (f"docker --gpus {value}",)
    if devices is not None:
        if count is not None:
            return None  # docker: "cannot set both Count and DeviceIDs on device request"
        return Visible(tuple(devices), len(set(devices)), said)
    count = 1 if count is None else count
    return Visible(tuple(str(i) for i in range(count)), count, said)


def _slurm_gpus(wrapper: Wrapped) -> int | None:
    """The GPUs per node a srun step asks for (`--gres=gpu[:type]:N`, `--gpus-per-node`,
    `--gpus`/`-G` on one node); None where it asks none or it is not read here."""
    gres = wrapper.option("--gres")
    if gres is not None:
        for item in gres.split(","):
            parts = item.split(":")
            if parts[0] == "gpu":
                return int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    per_node = wrapper.option("--gpus-per-node")
    if per_node is not None:
        number = per_node.rsplit(":", 1)[-1]
        return int(number) if number.isdigit() else None
    total = wrapper.option("--gpus", "-G")
    nodes = wrapper.option("--nodes", "-N")
    if total is not None and nodes in (None, "1"):
        number = total.rsplit(":", 1)[-1]
        return int(number) if number.isdigit() else None
    return None


def _among(outer: Visible, listed: tuple[str, ...], said: str) -> Visible:
    """`CUDA_VISIBLE_DEVICES` inside a container or a Slurm step: its indices count the GPUs
    given there from 0, in the host's order; a UUID names its GPU wherever it is."""
    described = (*outer.said, said)
    if outer.ids is None:
        return Visible(None, min(outer.count, len(listed)), described)
    order = sorted(outer.ids, key=lambda i: (not i.isdigit(), int(i) if i.isdigit() else 0))
    picked: list[str] = []
    for entry in listed:
        if entry.isdigit():
            if int(entry) >= len(order):
                break  # an index the container lacks: CUDA stops there
            entry = order[int(entry)]
        if entry not in picked:
            picked.append(entry)
    return Visible(tuple(picked), len(picked), described)


def seen_by(gpu: GpuMemory, visible: Visible) -> GpuMemory:
    """The host's GPU figures for the GPUs the launch sees: how many, the smallest and the
    least free among them. Where NVML named the GPUs and the launch's are known by index or
    UUID, theirs; else the whole host's figures stand and only the count is bounded (a Slurm
    step's; CUDA's default order among unlike GPUs, where an index may not be nvidia-smi's)."""
    picked = picked_gpus(gpu.gpus, visible)
    if picked is None:
        count = visible.count if gpu.count is None else min(gpu.count, visible.count)
        return replace(gpu, count=count)
    if not picked:
        return replace(gpu, count=0, gpus=())
    numbers = ",".join(str(g.index) for g in picked)
    return GpuMemory(
        min(g.total_bytes for g in picked),
        f"{gpu.source}, GPU{'s' if len(picked) > 1 else ''} {numbers} ({visible.describe()})",
        min(g.free_bytes for g in picked) if gpu.free_source == "NVML" else gpu.free_bytes,
        gpu.free_source,
        len(picked),
        picked,
    )


def picked_gpus(gpus: tuple[HostGpu, ...], visible: Visible) -> tuple[HostGpu, ...] | None:
    """Which of this host's `gpus` (NVML's) the launch sees; None where that is not known here
    (no GPU named; a Slurm step's; CUDA's default order among unlike GPUs; see `_pick`)."""
    order_known = not visible.fastest_first or len({g.name for g in gpus}) <= 1
    if not gpus or visible.ids is None or not order_known:
        return None
    return _pick(gpus, visible.ids)


def _pick(gpus: tuple[HostGpu, ...], ids: tuple[str, ...]) -> tuple[HostGpu, ...] | None:
    """The host GPUs `ids` name, up to the first that names none (CUDA stops there); None
    where one cannot be told apart here (a MIG instance, a UUID prefix two GPUs share)."""
    by_index = {str(g.index): g for g in gpus}
    picked: list[HostGpu] = []
    for entry in ids:
        if entry.startswith("MIG-"):
            return None
        if entry.startswith("GPU-"):
            matches = [g for g in gpus if g.uuid and g.uuid.lower().startswith(entry.lower())]
            if len(matches) > 1:
                return None
            found = matches[0] if matches else None
        else:
            found = by_index.get(entry)
        if found is None or found in picked:
            break
        picked.append(found)
    return tuple(picked)
