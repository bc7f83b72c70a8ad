"""Multi-node launches: one command run on every node, with `--nnodes N --node-rank i
--dist-init-addr host:port` (often from SLURM).

The flags are the tree's own (their spellings, aliases and defaults read from its
`server_args.py` / `arg_groups`). Two kinds of finding, both `config.multinode`:

- What the tree itself refuses while checking the arguments, found by running its argument
  resolution on the launch (`resolution.resolve`, the one evaluator run the attention checks use):
  every definite refusal whose conditions read the node layout (`(tp_size * pp_size) % nnodes
  == 0` in 0.5.9's `check_server_args` and 0.5.23's `validation_hook.py`, a multi-node DP
  replica in 0.5.23, ...), with SGLang's message and file:line. A warning: it fails seconds
  into the launch, but on every node.
- What only shows on the other nodes, where no check of SGLang's is: with `--nnodes > 1`, a
  missing `--dist-init-addr` (no node can find node 0), a loopback one (only node 0 can reach
  it), a missing `--node-rank` (every node would think it is node 0), a rank outside
  0..nnodes-1. And, for a good layout, an info line with what each node runs: `tp x pp / nnodes`
  GPUs, and that the model path must hold the same files on every node.
"""

from __future__ import annotations

import ast
import ipaddress
from collections.abc import Mapping
from typing import Any

from eaglebug.checks.args import resolution
from eaglebug.checks.args.world import Models, declared_env
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import AdviceFix, FlagFix
from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.launch.flags import FlagSpec
from eaglebug.checks.source import syntax
from eaglebug.checks.source.index import TreeIndex

NODE_FIELDS = frozenset({"nnodes", "node_rank", "dist_init_addr"})
_ID = "config.multinode"
_ANSWER = "multinode:"
_KEEP_ANSWERS = 16
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _flag(specs: list[FlagSpec], dest: str) -> FlagSpec | None:
    return next((s for s in specs if s.dest == dest), None)


def _where(spec: FlagSpec | None) -> str | None:
    return f"{spec.file}:{spec.line}" if spec is not None else None


def _used_in_start_up(index: TreeIndex, algorithm: str | None, needle: str) -> str | None:
    """file:line where the start-up's distributed init reads `needle` (the function that opens
    the tree's `distributed_init` step), so the finding's step is where the launch waits."""
    from eaglebug.checks.startup.steps import trace_for

    trace = trace_for(index, algorithm)
    span = next((s for s in trace.spans if s.name == "distributed_init"), None) if trace else None
    if span is None:
        return None
    rel, _, line = span.site.rpartition(":")
    parsed = index.parse_file(rel)
    if parsed is None or not line.isdigit():
        return span.site
    lines = parsed.text.splitlines()
    call = int(line)
    for node in syntax.walk(parsed.tree):  # the function the site calls, if it is in this file
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "init_torch_distributed"
        ):
            end = node.end_lineno or node.lineno
            for number in range(node.lineno, end + 1):
                if needle in lines[number - 1]:
                    return f"{rel}:{number}"
    return f"{rel}:{call}"


def _loopback(addr: str) -> bool:
    host = addr.rsplit(":", 1)[0].strip("[]") if ":" in addr else addr
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def check_multinode(
    index: TreeIndex,
    launch: LaunchSpec,
    specs: list[FlagSpec],
    target_config: Mapping[str, Any] | None,
    environ: Mapping[str, str] | None = None,
    algorithm: str | None = None,
) -> list[Finding]:
    """The node-layout findings of one launch (the tree's refusals kept as a tree answer)."""
    if _flag(specs, "nnodes") is None:
        return []  # a tree without multi-node launches
    values = resolution.launch_values(index, launch)
    # The tree's resolution runs again only for a launch that sets the node layout: with none
    # of its flags given, every node field is the tree's default, which it never refuses (and
    # the attention check has run the resolution for this launch already).
    given = any(launch.get(field) is not None for field in NODE_FIELDS)
    findings = [*_refusals(index, values, target_config, environ)] if given else []  # a kept answer
    nnodes = _int(values.get("nnodes")) or 1
    if nnodes > 1:
        findings += _layout(index, algorithm, values, launch, specs, nnodes)
    return findings


def _refusals(
    index: TreeIndex,
    values: dict[str, Any],
    target_config: Mapping[str, Any] | None,
    environ: Mapping[str, str] | None,
) -> list[Finding]:
    if target_config is None or not resolution.has_resolution(index):
        return []
    env = declared_env(index, environ)
    subject = [sorted(values.items(), key=str), target_config, env]
    return index.answer_for(
        _ANSWER,
        subject,
        list[Finding],
        lambda: _run_refusals(index, values, target_config, env),
        _KEEP_ANSWERS,
    )


def _run_refusals(
    index: TreeIndex,
    values: dict[str, Any],
    target_config: Mapping[str, Any],
    environ: Mapping[str, str],
) -> list[Finding]:
    models = Models.target_only(target_config, environ)
    run = resolution.resolve(index, values, None, models)
    if run is None:
        return []
    raised_all = [*run.raised, *resolution.check_server_args(index, run.values, models)]
    version = f"SGLang {index.tree.version}" if index.tree.version else "this SGLang tree"
    out: list[Finding] = []
    seen: set[tuple[str, int]] = set()
    for raised in raised_all:
        if not raised.definite or not raised.reads & NODE_FIELDS:
            continue
        if (raised.rel, raised.line) in seen:
            continue
        seen.add((raised.rel, raised.line))
        said = raised.message or raised.condition
        out.append(
            Finding(
                id=_ID,
                severity="warning",
                message=f"{version} refuses this node layout while checking its arguments, on "
                f"every node ({raised.rel}:{raised.line}): {said}",
                attribute="+".join(sorted(raised.reads & (NODE_FIELDS | {"tp_size", "pp_size"}))),
                fix=AdviceFix("make --tp x --pp a multiple of --nnodes (GPUs split evenly)"),
                evidence=ConfigEvidence.of(
                    {
                        "nnodes": values.get("nnodes"),
                        "tp_size": values.get("tp_size"),
                        "pp_size": values.get("pp_size"),
                        "condition": raised.condition,
                    },
                    read_from=f"{raised.rel}:{raised.line}",
                    sglang=raised.message,
                ),
            )
        )
    return out


def _layout(
    index: TreeIndex,
    algorithm: str | None,
    values: dict[str, Any],
    launch: LaunchSpec,
    specs: list[FlagSpec],
    nnodes: int,
) -> list[Finding]:
    out: list[Finding] = []
    addr = launch.at_run_time.get("dist_init_addr") or values.get("dist_init_addr")
    addr_spec, rank_spec = _flag(specs, "dist_init_addr"), _flag(specs, "node_rank")
    # Where the nodes meet (or wait for each other): the start-up's distributed init.
    meets = _used_in_start_up(index, algorithm, "dist_init_addr") or _where(addr_spec)
    rank_given = launch.at_run_time.get("node_rank", values.get("node_rank"))
    shown = {"nnodes": nnodes, "node_rank": rank_given, "dist_init_addr": addr}
    if not addr:
        out.append(
            Finding(
                id=_ID,
                severity="warning",
                message=f"--nnodes {nnodes} without --dist-init-addr: the nodes have no address "
                "to find node 0 at, and the launch waits at distributed init on every node",
                attribute="dist_init_addr",
                fix=FlagFix("--dist-init-addr", "NODE0_HOST:PORT", "the same on every node"),
                evidence=ConfigEvidence.of(shown, read_from=meets),
            )
        )
    elif addr and _loopback(str(addr)):
        out.append(
            Finding(
                id=_ID,
                severity="warning",
                message=f"--dist-init-addr {addr} is a loopback address with --nnodes {nnodes}: "
                "only node 0 can reach it; the other nodes wait at distributed init",
                attribute="dist_init_addr",
                fix=FlagFix(
                    "--dist-init-addr", "NODE0_HOST:PORT", "node 0's address on the network"
                ),
                evidence=ConfigEvidence.of(shown, read_from=_where(addr_spec)),
            )
        )
    rank = _int(values.get("node_rank"))
    if launch.get("node_rank") is None and "node_rank" not in launch.at_run_time:
        out.append(
            Finding(
                id=_ID,
                severity="warning",
                message=f"--nnodes {nnodes} without --node-rank: every node that runs this "
                f"command is node {rank if rank is not None else 0}; give each its own rank",
                attribute="node_rank",
                fix=AdviceFix(
                    f"run the command on each node with its --node-rank 0..{nnodes - 1} "
                    "(SLURM: --node-rank $SLURM_NODEID)"
                ),
                evidence=ConfigEvidence.of(shown, read_from=meets or _where(rank_spec)),
            )
        )
    elif rank is not None and not 0 <= rank < nnodes:
        out.append(
            Finding(
                id=_ID,
                severity="error",
                message=f"--node-rank {rank} is outside 0..{nnodes - 1} for --nnodes {nnodes}: "
                "the other nodes wait for a rank that never joins",
                attribute="node_rank",
                fix=FlagFix("--node-rank", str(nnodes - 1) if rank >= nnodes else "0"),
                evidence=ConfigEvidence.of(shown, read_from=meets or _where(rank_spec)),
            )
        )
    tp, pp = _int(values.get("tp_size")) or 1, _int(values.get("pp_size")) or 1
    if not out and (tp * pp) % nnodes == 0:
        out.append(
            Finding(
                id=_ID,
                severity="info",
                message=f"{nnodes} nodes, {tp * pp // nnodes} GPUs each (--tp {tp} x --pp {pp}); "
                f"run this same command on every node with its --node-rank, node 0 at {addr}; "
                "the model path must hold the same files on every node",
                evidence=ConfigEvidence.of(shown, read_from=_where(_flag(specs, "nnodes"))),
            )
        )
    return out


def check_gpu_count(
    index: TreeIndex,
    launch: LaunchSpec,
    specs: list[FlagSpec],
    gpus_here: int | None,
    algorithm: str | None = None,
    seen_as: str | None = None,
) -> list[Finding]:
    """`config.gpu_count`: the launch sees fewer GPUs than it puts on each node
    (`--tp x --pp / --nnodes`, from `--base-gpu-id`): a rank finds no device when its
    scheduler starts, before anything loads ("CUDA error: invalid device ordinal"). Only where
    the GPUs were counted: by NVML, or bounded by what the launch narrows them to (`seen_as`,
    `launch/devices.py`: its `CUDA_VISIBLE_DEVICES`, `--gpus`, Slurm step, pod)."""
    if gpus_here is None:
        return []
    values = resolution.launch_values(index, launch)
    nnodes = _int(values.get("nnodes")) or 1
    tp, pp = _int(values.get("tp_size")) or 1, _int(values.get("pp_size")) or 1
    base = _int(values.get("base_gpu_id")) or 0
    step = _int(values.get("gpu_id_step")) or 1
    per_node = max(tp * pp // nnodes, 1)
    needed = base + (per_node - 1) * step + 1
    if needed <= gpus_here:
        return []
    where = "per node" if nnodes > 1 else "on this host"
    return [
        Finding(
            id="config.gpu_count",
            severity="error",
            message=f"the launch puts {per_node} GPUs {where} (--tp {tp} x --pp {pp}"
            + (f" / --nnodes {nnodes}" if nnodes > 1 else "")
            + (f", from GPU {base}" if base else "")
            + f") but {seen_as or f'this host has {gpus_here}'}: a rank finds no GPU when its "
            "scheduler starts",
            attribute="tp_size",
            fix=AdviceFix(
                f"let the launch see {needed} GPUs (CUDA_VISIBLE_DEVICES, --gpus, a pod's "
                "nvidia.com/gpu limit), or lower --tp"
                if seen_as
                else f"run on a host with {needed} GPUs, or lower --tp (or add nodes with --nnodes)"
            ),
            evidence=ConfigEvidence.of(
                {"gpus_per_node": per_node, "gpus_here": gpus_here, "base_gpu_id": base}
                | ({"gpus_seen_by": seen_as} if seen_as else {}),
                read_from=_used_in_start_up(index, algorithm, "set_device(")
                or _where(_flag(specs, "tp_size")),
            ),
        )
    ]
