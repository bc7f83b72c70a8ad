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
  among them. `podman run --gpus VALUE` is one CDI device each (`nvidia.com/gpu=VALUE`, podman's
  `specgenutil`), as is `--device nvidia.com/gpu=...`. Without either, `-e
  NVIDIA_VISIBLE_DEVICES=...` is the NVIDIA runtime's list (under `--runtime nvidia`; else the
  daemon's default runtime decides: those GPUs or none). With none of them, what the container
  sees depends on the default runtime and the image: not known here, so a list inside only
  bounds how many.
- A Kubernetes pod's `nvidia.com/gpu: N` limit (`kubectl.py`): N GPUs of the node it lands on,
  which ones the device plugin's choice, as for a Slurm step.
- `srun --gres=gpu:N`, `--gpus-per-node=N` (or `--gpus=N` on one node): Slurm sets the step's
  `CUDA_VISIBLE_DEVICES` to its N GPUs on a compute node, which ones is Slurm's choice. A
  variable from the shell is replaced; one set after srun (an `env` wrapper) bounds the count.

Where a verdict would rest on what is not known here, only the count is bounded, never made
smaller than the launch can have: a false `config.gpu_count` costs a user a launch that works.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from eaglebug.checks.contract.environ import visible_devices
from eaglebug.checks.contract.limits import MACHINE_GPUS
from eaglebug.checks.contract.numbers import int_text
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
    # Another machine's GPUs (a Slurm step runs on a compute node): this host's count and
    # figures say nothing of them.
    remote: bool = False

    def describe(self) -> str:
        return ", then ".join(self.said)


# What a wrapper gives the command after it: every GPU of the machine, in its own order
# (`--gpus all`); GPUs not known here (a container without a GPU option: the daemon's default
# runtime and the image decide); or the ones a `Visible` names.
_EVERY, _UNKNOWN = "every", "unknown"


def visible_gpus(
    program: Sequence[str], environ: Mapping[str, str], pod: Visible | None = None
) -> Visible | None:
    """The GPUs the server after `program`'s wrappers sees, started in `environ` (with the
    launch's `VAR=value` words); None where nothing narrows them, or what does is not known
    here (then every GPU of the host is taken, as before any of this was read). `pod`: the
    GPUs a Kubernetes pod's limit gives its container (`kubectl.py`), in place of what the
    container's own options say."""
    wrapped = unwrapped(program)[0]
    seen: Visible | str = _EVERY
    env = dict(environ)
    start = 0  # the wrappers from here on run in `env`
    for at, wrapper in enumerate(wrapped):
        if wrapper.container != "docker" and wrapper.name != "srun":
            continue
        here = environment(wrapped[start : at + 1], env)
        given = pod if pod is not None and wrapper.container else _given_by(wrapper, here)
        if given is None:
            continue  # an srun that asks for no GPU: it passes the variables on
        # The GPUs a container or a step is given are the machine's, whatever was seen before.
        seen, env, start = given, here, at + 1
        if wrapper.name == "srun":
            env.pop("CUDA_VISIBLE_DEVICES", None)  # the step's own, set by Slurm
    final = environment(wrapped[start:], env)
    value = final.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return seen if isinstance(seen, Visible) else None
    listed = visible_devices(value)
    said = f"CUDA_VISIBLE_DEVICES={value}"
    if seen == _EVERY:
        picked = Visible(listed, len(listed), (said,))
    elif seen == _UNKNOWN:  # the container's GPUs are not known: the list bounds the count
        picked = Visible(None, len(listed), (said,))
    else:
        assert isinstance(seen, Visible)
        picked = _among(seen, listed, said)
    numbered = any(int_text(entry, lo=0) is not None for entry in listed)
    if numbered and final.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
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


def _given_by(wrapper: Wrapped, inside: Mapping[str, str]) -> Visible | str | None:
    """The GPUs a wrapper gives the command after it (`_EVERY`, `_UNKNOWN` or named); None for
    a wrapper that gives none of its own (an srun without a GPU request)."""
    if wrapper.container == "docker":
        return _container_gpus(wrapper, inside)
    count = _slurm_gpus(wrapper)
    if count is None:
        return None
    return Visible(None, count, (f"srun's {count} GPU{'s' if count != 1 else ''}",), remote=True)


def _container_gpus(wrapper: Wrapped, inside: Mapping[str, str]) -> Visible | str:
    """A container's GPUs: `--gpus` as docker reads it (podman: each value one CDI device,
    `nvidia.com/gpu=VALUE`), CDI `--device nvidia.com/gpu=...`, else the NVIDIA runtime's
    `NVIDIA_VISIBLE_DEVICES` (the NVIDIA Container Toolkit's values)."""
    requests = [value for option, value in wrapper.options if option == "--gpus"]
    cdi = [
        value.split("=", 1)[1]
        for option, value in wrapper.options
        if option == "--device" and value.startswith("nvidia.com/gpu=")
    ]
    if wrapper.name.startswith("podman"):
        cdi, requests = cdi + requests, []
    if requests and cdi:
        return _UNKNOWN
    if len(requests) > 1:
        return _UNKNOWN  # several device requests: how the runtime joins them is not read
    if requests:
        return _docker_gpus(requests[0])
    if cdi:
        if "all" in cdi:
            return _EVERY
        said = tuple(f"--device nvidia.com/gpu={name}" for name in cdi)
        return Visible(tuple(dict.fromkeys(cdi)), len(set(cdi)), (", ".join(said),))
    listed = inside.get("NVIDIA_VISIBLE_DEVICES")
    if listed is None:
        return _UNKNOWN
    if listed == "all":
        return _EVERY
    ids = () if listed in ("none", "void", "") else tuple(listed.split(","))
    said = (f"NVIDIA_VISIBLE_DEVICES={listed}",)
    if wrapper.option("--runtime") == "nvidia":
        return Visible(ids, len(set(ids)), said)
    # Without --runtime nvidia the daemon's default runtime decides: these GPUs, or none.
    return Visible(None, len(set(ids)), said)


def _docker_gpus(value: str) -> Visible | str:
    """`--gpus VALUE` as docker reads it (docker/cli `opts/gpus.go`); what docker refuses
    (a repeated key, count with devices, an empty value) or does not narrow is not read."""
    try:
        fields = next(csv.reader([value]))
    except (csv.Error, StopIteration):
        return _UNKNOWN
    if not fields:
        return _UNKNOWN  # `--gpus ''`: docker's CSV reader ends at once, and docker refuses it
    count: int | None = None
    devices: list[str] | None = None
    keys: set[str] = set()
    for field in fields:
        key, eq, text = field.partition("=")
        name = "count" if not eq else key
        if name in keys:
            return _UNKNOWN  # "gpu request key 'count' can be specified only once"
        keys.add(name)
        if name == "count":
            number = text if eq else key
            if number == "all":
                return _EVERY
            count = int_text(number, lo=0, hi=MACHINE_GPUS)
            if count is None:
                return _UNKNOWN
        elif key == "device":
            devices = text.split(",")
        elif key not in ("driver", "capabilities", "options"):
            return _UNKNOWN
    said = (f"docker --gpus {value}",)
    if devices is not None:
        if count is not None:
            return _UNKNOWN  # docker: "cannot set both Count and DeviceIDs on device request"
        if "all" in devices:
            return _EVERY  # handed to the toolkit as NVIDIA_VISIBLE_DEVICES=all
        return Visible(tuple(dict.fromkeys(devices)), len(set(devices)), said)
    count = 1 if count is None else count
    return Visible(tuple(str(i) for i in range(count)), count, said)


def _slurm_gpus(wrapper: Wrapped) -> int | None:
    """The GPUs per node a srun step asks for (`--gres=gpu[:type]:N`, `--gpus-per-node`,
    `--gpus`/`-G` on one node); None where it asks none or it is not read here."""
    if wrapper.name != "srun":
        return None
    gres = wrapper.option("--gres")
    if gres is not None:
        for item in gres.split(","):
            parts = item.split(":")
            if parts[0] == "gpu":
                return int_text(parts[-1], lo=0, hi=MACHINE_GPUS) if len(parts) > 1 else 1
    per_node = wrapper.option("--gpus-per-node")
    if per_node is not None:
        return int_text(per_node.rsplit(":", 1)[-1], lo=0, hi=MACHINE_GPUS)
    total = wrapper.option("--gpus", "-G")
    if total is not None and wrapper.option("--nodes", "-N") in (None, "1"):
        return int_text(total.rsplit(":", 1)[-1], lo=0, hi=MACHINE_GPUS)
    return None


def _among(outer: Visible, listed: tuple[str, ...], said: str) -> Visible:
    """`CUDA_VISIBLE_DEVICES` inside a container or a Slurm step: its indices count the GPUs
    given there from 0, in the machine's order. Where the GPUs given are named by number, the
    index picks one; else (a Slurm step's, UUIDs, MIG) only how many is known: at most as many
    as listed (whether Slurm confines the step to its own GPUs is its configuration's)."""
    described = (*outer.said, said)
    given = [int_text(i, lo=0) for i in outer.ids] if outer.ids is not None else [None]
    if outer.ids is None or None in given:
        bound = len(listed) if outer.ids is None else min(outer.count, len(listed))
        return Visible(None, bound, described, remote=outer.remote)
    order = [str(n) for n in sorted(n for n in given if n is not None)]
    picked: list[str] = []
    for entry in listed:
        index = int_text(entry, lo=0)
        if index is None:
            return Visible(None, min(outer.count, len(listed)), described)  # a UUID, MIG
        if index >= len(order):
            break  # an index the container lacks: CUDA stops there
        if order[index] not in picked:
            picked.append(order[index])
    return Visible(tuple(picked), len(picked), described)


def seen_by(gpu: GpuMemory, visible: Visible) -> GpuMemory:
    """The host's GPU figures for the GPUs the launch sees: how many, the smallest and the
    least free among them. Where NVML named the GPUs and the launch's are known by index or
    UUID, theirs; else the whole host's figures stand and only the count is bounded (CUDA's
    default order among unlike GPUs, where an index may not be nvidia-smi's; a UUID NVML did
    not give). A Slurm step's GPUs are another machine's: its count, not this host's."""
    picked = picked_gpus(gpu.gpus, visible)
    if picked is None:
        mine = gpu.count is None or visible.remote
        return replace(gpu, count=visible.count if mine else min(gpu.count or 0, visible.count))
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
    if not gpus or visible.ids is None or visible.remote or not order_known:
        return None
    return _pick(gpus, visible.ids)


def _pick(gpus: tuple[HostGpu, ...], ids: tuple[str, ...]) -> tuple[HostGpu, ...] | None:
    """The host GPUs `ids` name, up to the first that names none (CUDA and the toolkit stop
    there: an index past the host's GPUs, a UUID no GPU has). None where one cannot be told
    here: a MIG instance (`MIG-...`, `0:1`), a UUID where NVML gave none or a prefix two GPUs
    share, anything else not read."""
    by_index = {str(g.index): g for g in gpus}
    uuids_known = all(g.uuid for g in gpus)
    picked: list[HostGpu] = []
    for entry in ids:
        index = int_text(entry, lo=0)
        if index is not None:
            found = by_index.get(str(index))
        elif entry.startswith("GPU-") and uuids_known:
            matches = [g for g in gpus if (g.uuid or "").lower().startswith(entry.lower())]
            if len(matches) > 1:
                return None
            found = matches[0] if matches else None
        else:
            return None
        if found is None or found in picked:
            break
        picked.append(found)
    return tuple(picked)
