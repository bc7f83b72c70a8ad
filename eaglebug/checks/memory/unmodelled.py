"""What the memory arithmetic does not model yet, read from the tree where it applies.

Two mechanisms change the pool SGLang sizes and are not in the prediction: CUDA graphs captured
piecewise before the KV pool is sized (their memory is gone from what the budget sees), and
online FP8 quantization (`--quantization fp8` on a checkpoint that is not FP8: the weights
shrink at load, so a size read from the checkpoint's files overstates them). Whether each
applies is read from the tree (does the runner capture piecewise graphs before it sizes the
pool; does its FP8 config quantize a checkpoint that is not FP8-serialized) and from the
launch; where one applies the prediction says so in `assumed`, never silently.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from eaglebug.checks.source import syntax
from eaglebug.checks.source.index import TreeIndex

_RUNNER = "sglang/srt/model_executor/model_runner.py"
_FP8 = "sglang/srt/layers/quantization/fp8.py"
# The runner's calls that size the KV pool (before 0.5.20, and the configurator after).
_POOL_CALLS = ("init_memory_pool", "configure")


@dataclass(frozen=True)
class Unmodelled:
    """Where the tree does what the arithmetic leaves out (file:line), None where it does not."""

    piecewise_before_pool: str | None = None  # the runner's piecewise capture, before the pool
    online_fp8: str | None = None  # Fp8Config's test of `is_checkpoint_fp8_serialized`


def unmodelled(index: TreeIndex) -> Unmodelled:
    """The tree's reading (a tree answer)."""
    return index.answer("memory_unmodelled", Unmodelled, lambda: _read(index))


def _read(index: TreeIndex) -> Unmodelled:
    return Unmodelled(_piecewise_before_pool(index), _online_fp8(index))


def _piecewise_before_pool(index: TreeIndex) -> str | None:
    """A `ModelRunner` method that calls a piecewise-graph method before the pool's sizing."""
    parsed = index.parse_file(_RUNNER) if _RUNNER in index.entries else None
    if parsed is None:
        return None
    for cls in parsed.tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "ModelRunner"):
            continue
        for function in cls.body:
            if not isinstance(function, ast.FunctionDef):
                continue
            calls = sorted(
                (node.lineno, node.func.attr)
                for node in syntax.walk(function)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            )
            pool = next((line for line, name in calls if name in _POOL_CALLS), None)
            if pool is None:
                continue
            early = [line for line, name in calls if "piecewise" in name and line < pool]
            if early:
                return f"{_RUNNER}:{early[0]}"
    return None


def _online_fp8(index: TreeIndex) -> str | None:
    """The line where the tree's FP8 config branches on an FP8-serialized checkpoint (else it
    quantizes the weights itself at load)."""
    parsed = index.parse_file(_FP8) if _FP8 in index.entries else None
    if parsed is None:
        return None
    for node in syntax.walk(parsed.tree):
        if isinstance(node, ast.If) and "is_checkpoint_fp8_serialized" in ast.unparse(node.test):
            return f"{_FP8}:{node.lineno}"
    return None


def assumed(
    index: TreeIndex,
    defaults: dict[str, object],
    piecewise: bool | None,
    quantization: str | None,
    checkpoint_quantized: bool,
    weights_measured: bool,
) -> list[str]:
    """The notes for one launch: `piecewise` the launch's own choice (None: the tree's
    default), `quantization` its --quantization."""
    found = unmodelled(index)
    out: list[str] = []
    if found.piecewise_before_pool is not None:
        on = piecewise
        if on is None:  # the tree's default: an opt-in flag, or an opt-out one
            if "enable_piecewise_cuda_graph" in defaults:
                on = bool(defaults["enable_piecewise_cuda_graph"])
            else:
                on = not defaults.get("disable_piecewise_cuda_graph", False)
        if on:
            out.append(
                f"{found.piecewise_before_pool}: piecewise CUDA graphs are captured before the "
                "KV pool is sized; their memory is not modelled (the pool will be smaller)"
            )
    if (
        quantization == "fp8"
        and found.online_fp8 is not None
        and not checkpoint_quantized
        and not weights_measured
    ):
        out.append(
            f"{found.online_fp8}: --quantization fp8 on a checkpoint that is not FP8 quantizes "
            "the weights at load; they are counted at the checkpoint's size here (not modelled: "
            "the pool will be larger)"
        )
    return out
