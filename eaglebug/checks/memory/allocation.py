"""The KV pool's bytes as the tree allocates them, where they differ from its budget's cell.

SGLang sizes the pool by dividing its budget by a cell (bytes a token), then allocates each
layer's buffer as `(size + page_size, 1, kv_cache_dim)` of a KV-dtype-wide store. For an MLA
model with sparse attention (DSA / NSA) and an FP8 KV cache, some releases count a 576-byte
latent in the cell but store the FP8 latent with its per-block scales and a BF16 rope (656
bytes): the token count is the cell's, the memory the pool takes is the allocation's (sglang
#14700's log: 162.38 GB for 3627136 tokens). The dimension is the tree's own:
`ModelRunner.calculate_mla_kv_cache_dim` (0.5.9 on), or the `override_dim` the NSA pool's
constructor computes and its base class takes when `nsa_kv_cache_store_fp8` (0.5.8).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eaglebug.checks.memory.reading import evaluate
from eaglebug.checks.memory.shape import TORCH_NAMES
from eaglebug.checks.pyeval import brains
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import Instance
from eaglebug.checks.source import syntax

if TYPE_CHECKING:
    from eaglebug.checks.memory.fit import Context

_POOLS = "sglang/srt/mem_cache/memory_pool.py"
_RUNNER_DIM = "calculate_mla_kv_cache_dim"


@dataclass(frozen=True)
class Allocation:
    dim: int  # the bytes-wide elements of one layer's token (kv_cache_dim)
    latent: int  # kv_lora_rank + qk_rope_head_dim: what the cell counts
    element_bytes: int  # the store's element size (the KV dtype's)
    layers: int
    read_from: str

    def extra_bytes(self) -> int:
        """What a token takes beyond the cell."""
        return (self.dim - self.latent) * self.layers * self.element_bytes


def allocation(ctx: Context, values: dict[str, object]) -> Allocation | None:
    """The target's MLA pool dimension where the tree allocates one other than the latent."""
    shape = ctx.target
    if not shape.mla:
        return None
    latent = (shape.kv_lora_rank or 0) + (shape.rope_dim or 0)
    named = TORCH_NAMES.get(ctx.launch.kv_cache_dtype) or shape.dtype
    size = brains.DTYPE_BYTES.get(named)
    if size is None:
        return None
    found: tuple[object, str] | None = None
    if ctx.has(_RUNNER_DIM):
        reading, _ = ctx.run(_RUNNER_DIM, [], shape, values)
        found = (reading.value, reading.anchor)
    elif ctx.pool_kind(shape)[0].startswith("MLA + DSA"):
        found = _pool_override(ctx, latent, brains.dtype(named))
    if found is None or not isinstance(found[0], int) or found[0] == latent:
        return None
    return Allocation(found[0], latent, size, shape.layers, found[1])


def _pool_override(ctx: Context, latent: int, dtype: object) -> tuple[object, str] | None:
    """0.5.8: the NSA pool's `override_dim = ...`, taken by its base class where its own
    `self.nsa_kv_cache_store_fp8 = ...` holds for this KV dtype."""
    parsed = ctx.index.parse_file(_POOLS) if _POOLS in ctx.index.entries else None
    if parsed is None:
        return None
    source = Source.of(ctx.index)
    module = _POOLS[:-3].replace("/", ".")
    shape = ctx.target
    names: dict[str, object] = {
        "kv_lora_rank": shape.kv_lora_rank,
        "qk_rope_head_dim": shape.rope_dim,
        "dtype": dtype,
        "use_nsa": True,
    }

    def torch(m: Machine, obj: Instance) -> None:
        brains.register_all(m.intrinsics)

    dim: object = None
    where = ""
    stores: ast.expr | None = None
    for cls in parsed.tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for node in syntax.walk(cls):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = ast.unparse(node.targets[0])
            if target == "override_dim" and dim is None:
                own = {**names, "self": source.class_val(f"{module}.{cls.name}")}
                dim = evaluate(ctx.index, _POOLS, node.value, {}, torch, own)
                where = f"{_POOLS}:{node.lineno}"
            elif target == "self.nsa_kv_cache_store_fp8" and stores is None:
                stores = node.value
    if not isinstance(dim, int) or stores is None:
        return None
    told = evaluate(ctx.index, _POOLS, stores, {}, torch, {**names, "override_kv_cache_dim": dim})
    return (dim, where) if told is True else (latent, where)


__all__ = ["Allocation", "allocation"]
