"""The runtime's distributed state, answered with the launch's layout (a plug-in).

A layer or a pool reads its group sizes from module state the runtime fills at start-up
(`get_tensor_model_parallel_world_size()`, `get_attention_tp_size()`, a `tp_group`'s
`world_size`, `get_parallel().moe_ep_size`); statically that state is unset. The getters of
SGLang's distributed modules (`sglang.srt.distributed`, `sglang.srt.layers.dp_attention`,
the MoE layers, the runtime context's parallel view) answer here with the launch's numbers:
which group a getter sizes is read from its name, whatever the release calls it. Sizes are
`GroupSize`s (ints that remember their group) so that a division by one is seen as a split.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.pyeval.intrinsics import DECLINE, Intrinsics
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import FuncVal, Intrinsic, Top

# Where the distributed state's getters live: the distributed package, dp_attention, the MoE
# layers and the runtime context today, and wherever a release moves them. A function of the
# tree is taken for a getter only when its name sizes a group and it needs no argument
# (`_reads_state`): one computed from its arguments runs.
MODULES = ("sglang.srt*",)


class GroupSize(int):
    """A group's size as the layers read it; a division by one is what shards a weight."""

    group: str

    def __new__(cls, value: int, group: str) -> GroupSize:
        made = super().__new__(cls, value)
        made.group = group
        return made


@dataclass(frozen=True)
class Layout:
    """The launch's parallel layout, as the getters answer it."""

    tp: int
    attn_tp: int
    dp: int
    ep: int
    pp: int
    enable_dp_attention: bool
    enable_dp_lm_head: bool = False

    def size(self, name: str) -> object:
        """What a getter or attribute named `name` answers (`attn_tp_size`,
        `get_moe_expert_parallel_world_size`, `tp_group`), or None when the name sizes no
        group."""
        low = name.lower()
        if "rank" in low:
            return 0
        if "enable_dp_attention" in low or low.endswith("dp_attention_enabled"):
            return self.enable_dp_attention
        if "dp_lm_head" in low:
            return self.enable_dp_lm_head
        group = _group_of(low)
        if group is None:
            return None
        value = {
            "cp": 1,  # context parallelism: not a flag the launch gives here
            "attn_tp": self.attn_tp,
            "attn_dp": self.tp // max(self.attn_tp, 1),
            "moe_ep": self.ep,
            "moe_tp": self.tp // max(self.ep, 1),
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
        }[group]
        if low.endswith("group"):
            return Intrinsic("sglang.parallel.group", GroupSize(value, group))
        return GroupSize(value, group)


def _group_of(low: str) -> str | None:
    if not (low.endswith(("size", "group")) or "world_size" in low):
        return None
    if "cp_size" in low or "context_parallel" in low or "cp_group" in low:
        return "cp"
    if "attn_tp" in low or "attention_tp" in low or "attn_tensor" in low:
        return "attn_tp"
    if "attn_dp" in low or "attention_dp" in low:
        return "attn_dp"
    if "moe_ep" in low or "expert_parallel" in low:
        return "moe_ep"
    if "moe_tp" in low or "moe_tensor" in low:
        return "moe_tp"
    if "pp_" in low or "pipeline" in low:
        return "pp"
    if "dp_size" in low:
        return "dp"
    if "tp_" in low or "tensor_model_parallel" in low or low in {"tp_size", "tp_group"}:
        return "tp"
    return None


def register(hooks: Intrinsics, layout: Layout) -> None:
    """The distributed modules' getters, and `get_parallel()`'s attributes, as the layout."""

    def getter(name: str) -> Any:
        found = layout.size(name)
        if found is None:
            return None
        return lambda call: found if _reads_state(call) else DECLINE

    for module in MODULES:
        hooks.call_matching(module, getter)
    parallel = Intrinsic("sglang.parallel")
    hooks.call_in("sglang.srt.runtime_context", "get_parallel", lambda call: parallel)
    hooks.call("sglang.parallel.__getattr__", _attribute(layout))
    hooks.call("sglang.parallel.group.__getattr__", _group_attribute)


def _reads_state(call: Call) -> bool:
    """A getter of the runtime's state takes nothing it must be given; a function of the same
    family's name with required parameters computes its answer from them, and runs."""
    callee = call.callee
    node = call.machine.source.node_of(callee.site) if isinstance(callee, FuncVal) else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True
    spec = node.args
    positional = [a for a in (*spec.posonlyargs, *spec.args) if a.arg not in {"self", "cls"}]
    required = len(positional) - len(spec.defaults)
    required += sum(1 for d in spec.kw_defaults if d is None)
    return required <= 0


def _attribute(layout: Layout) -> Any:
    def attribute(call: Call) -> Any:
        name = str(call.args[0]) if call.args else ""
        found = layout.size(name)
        return Top(f"get_parallel().{name} is not a size of the launch") if found is None else found

    return attribute


def _group_attribute(call: Call) -> Any:
    """A group's `world_size` (its size), `rank_in_group` (0), first and last rank (rank 0
    of one stage is both)."""
    group = call.callee.data if isinstance(call.callee, Intrinsic) else None
    name = str(call.args[0]) if call.args else ""
    if name == "world_size":
        return group
    if name == "rank_in_group":
        return 0
    if name in {"is_first_rank", "is_last_rank"}:
        return True
    return Top(f"a group's {name} is not known")
