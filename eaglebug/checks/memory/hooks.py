"""What a live SGLang process would answer to the memory arithmetic, for one launch's numbers.

Each is a plug-in by the qualified name of what it answers (`pyeval.intrinsics`): the GPU's
total and free memory (`get_device_memory_capacity`, `get_available_gpu_memory` in
`sglang.srt.utils`), torch's element sizes, the runtime context's config bags and override
(the launch's flat store), the platform (a CUDA box; the GPU's capability is not known here).
The KV pools' constructors are not run (their allocations are what the arithmetic sized).
Everything else, predicates and helpers included, is the tree's own code, run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eaglebug.checks.args import published
from eaglebug.checks.args.world import (
    env_names,
    register_platform,
    register_resolution,
)
from eaglebug.checks.memory import parallel
from eaglebug.checks.pyeval import brains
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import ClassVal, Instance, Intrinsic, Top
from eaglebug.checks.source.index import TreeIndex

MIB = 1 << 20
_UTILS = "sglang.srt.utils*"
_CAPACITY = (
    "get_device_memory_capacity",
    "get_nvgpu_memory_capacity",
    "get_amdgpu_memory_capacity",
    "get_hpu_memory_capacity",
    "get_npu_memory_capacity",
)
_MODEL_CONFIG = "sglang.srt.configs.model_config.ModelConfig"


def register(
    m: Machine,
    index: TreeIndex,
    obj: Instance,
    *,
    total_bytes: int,
    avail_gb: float | None,
    environ: Mapping[str, str],
    layout: parallel.Layout,
    env_read: tuple[str, ...] = (),
) -> None:
    """The plug-ins of one memory reading, answering with the flat object `obj`; `env_read`:
    the variables the memory functions' modules name besides the ones the tree declares."""
    hooks = m.intrinsics
    brains.register_all(hooks, environ, None, known=set(env_names(index)) | set(env_read))
    register_platform(hooks, index, None)
    model = Instance(obj.oid, None, "model_config")
    register_resolution(hooks, obj, model)
    total_mib = total_bytes / MIB
    # The GPU's memory in MiB: `get_device_memory_capacity` (0.4.9 on) and the per-vendor
    # getters older releases call directly (0.4.x's `__post_init__`: nvidia-smi's answer).
    for getter in _CAPACITY:
        hooks.call_in(_UTILS, getter, lambda call: total_mib)
    free = avail_gb if avail_gb is not None else Top("free memory after the load")
    hooks.call_in(_UTILS, "get_available_gpu_memory", lambda call: free)
    parallel.register(hooks, layout)  # the distributed state: the launch's layout
    # `get_parallel().attn_tp_size`, `.enable_kv_cache_sharding`: sizes and flags the store
    # holds, as the resolution published them.
    hooks.call_in("sglang.srt.runtime_context", "get_parallel", lambda call: obj)
    hooks.call_in("sglang.srt.distributed*", "get_world_group", lambda call: obj)
    hooks.call("sglang.runtime_context.override", _override(obj))
    # `ModelConfig.from_server_args(self)` (0.5.3's fraction reads `is_multimodal` from it):
    # the model config of the launch, which the store holds; a live process reads the same
    # config.json.
    hooks.call(f"{_MODEL_CONFIG}.from_server_args", lambda call: model)
    published.publish(m, index, obj)  # the fields the runtime context derives at publish
    hooks.call_matching("sglang.srt.mem_cache*", _pool_class)
    hooks.call("torch._utils._element_size", _element_size)
    hooks.call("gc.collect", lambda call: 0)


def _override(obj: Instance) -> Any:
    """`get_context().override("reason", name=value)`: the value set for the run."""

    def override(call: Call) -> Any:
        where = call.frame.rel if call.frame is not None else ""
        line = call.node.lineno if call.node is not None else 0
        for key, value in call.kwargs.items():
            call.machine.write(obj, key, value, where, line)
        return None

    return override


def _pool_class(name: str) -> Any:
    """The KV pools and their allocators (`NSATokenToKVPool(...)`, `ReqToTokenPool(...)`):
    their constructors allocate the tensors the arithmetic before them sized (torch.zeros on
    the device) and check the layout the attention checks read; here each is an object of its
    class whose attributes are not known, its `__init__` not run."""
    if not name.endswith(("Pool", "Allocator")):
        return None
    return lambda call: call.machine.new_object(
        call.callee if isinstance(call.callee, ClassVal) else None
    )


def _element_size(call: Call) -> Any:
    """torch's element size of a dtype (the KV dtype, `torch.uint8`)."""
    dtype = call.args[0] if call.args else None
    if isinstance(dtype, Intrinsic) and dtype.qualname.startswith("torch."):
        size = brains.DTYPE_BYTES.get(dtype.qualname.removeprefix("torch."))
        if size is not None:
            return size
    return Top(f"{call.where}: the element size of {dtype!r}")
