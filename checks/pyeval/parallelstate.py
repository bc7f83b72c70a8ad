"""Stand-ins for the runtime's distributed state, answering with the launch's layout.

A layer reads its group sizes from the runtime (`get_tensor_model_parallel_world_size()`,
`get_attention_tp_size()`, `get_parallel().moe_ep_size`, a `tp_group`'s `world_size`); the
name of the call or attribute says which group it sizes, whatever the release calls the
accessor. The answers are the launch's numbers (the attention TP size as the tree derives
it), tagged with their group (`GroupSize`) so that a division by one is seen as a split.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglebug.checks.pyeval.memeval import Unknown


class GroupSize(int):
    """A group's size as the layers read it; a division by one is what shards a weight."""

    group: str

    def __new__(cls, value: int, group: str) -> GroupSize:
        made = super().__new__(cls, value)
        made.group = group
        return made


@dataclass(frozen=True)
class Layout:
    """The launch's parallel layout, as the stand-ins answer it."""

    tp: int
    attn_tp: int
    dp: int
    ep: int
    pp: int
    enable_dp_attention: bool
    enable_dp_lm_head: bool = False

    def size(self, name: str) -> object:
        """The group a name sizes (`attn_tp_size`, `get_moe_expert_parallel_world_size`)."""
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
            "attn_tp": self.attn_tp,
            "moe_ep": self.ep,
            "moe_tp": self.tp // max(self.ep, 1),
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
        }[group]
        if low.endswith("group"):
            return StateGroup(GroupSize(value, group))
        return GroupSize(value, group)


def _group_of(low: str) -> str | None:
    if not (low.endswith(("size", "group")) or "world_size" in low):
        return None
    if "attn_tp" in low or "attention_tp" in low or "attn_tensor" in low:
        return "attn_tp"
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


@dataclass(frozen=True)
class StateGroup:
    world_size: GroupSize
    rank_in_group: int = 0
    is_first_rank: bool = True
    is_last_rank: bool = True


@dataclass
class State:
    """`get_parallel()`, `get_global_server_args()`: attributes answered by their names."""

    layout: Layout

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        found = self.layout.size(name)
        return Unknown(f"{name} of the distributed state") if found is None else found
