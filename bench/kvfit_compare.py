"""How close config.memory's predictions come: against SGLang's own logged numbers and kvfit.

Why: the memory check is only useful if it says what SGLang will do. Two kinds of reference,
in the same run: SGLang's own figures from public logs (tests/fixtures/memory/anchors.json:
the minimum viable --mem-fraction-static it printed for DeepSeek-V4-Pro on 8 x H200, the K/V
sizes it logged for Llama-3.1-8B + EAGLE-3 on an H100), and kvfit's static planner
(https://pypi.org/project/kvfit/, not a dependency: `pip download kvfit` and unpack it, then
pass --kvfit DIR or set KVFIT_SRC) on the same configs. kvfit knows neither SGLang's default
fraction, its reserve, nor a separate EAGLE draft; it is run at its default utilization (0.90)
and at the fraction SGLang would use, so the gap is visible either way.

    python bench/kvfit_compare.py [--kvfit /tmp/kvfit/src]

A benchmark, not a test: it prints a table and exits 0 (1 only when a prediction cannot be
made at all).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eaglebug.checks.memory.fit import GIB, MIB, Gpu, MemoryLaunch, model_shape  # noqa: E402
from eaglebug.checks.memory.plan import Prediction, Weights, predict  # noqa: E402
from eaglebug.checks.memory.rules import memory_sources  # noqa: E402
from eaglebug.checks.source.index import TreeIndex  # noqa: E402
from eaglebug.checks.source.tree import locate  # noqa: E402
from tests import memconfigs  # noqa: E402
from tests.memanchors import ANCHORS, H200, inferencex_2128  # noqa: E402
from tests.sglang_releases import release  # noqa: E402

H100 = Gpu(81559 * MIB, int(78.58 * GIB))  # the docs-CI H100: 78.58 GB free before the load
CASES: list[dict[str, Any]] = [
    {
        "name": "Llama-3.1-8B + EAGLE-3, 1 x H100 80 GB",
        "target": memconfigs.LLAMA31_8B,
        "target_bytes": memconfigs.LLAMA31_8B_BYTES,
        "draft": memconfigs.EAGLE3_LLAMA31_8B,
        "draft_bytes": memconfigs.EAGLE3_LLAMA31_8B_BYTES,
        "algorithm": "EAGLE3",
        "tp": 1,
        "gpu": H100,
        "kvfit_gpu": "h100-80",
    },
    {
        "name": "DeepSeek-V3 + NextN, 8 x H200",
        "target": memconfigs.DEEPSEEK_V3,
        "target_bytes": memconfigs.DEEPSEEK_V3_BYTES,
        "draft": memconfigs.DEEPSEEK_V3,
        "draft_bytes": 0,  # the NextN layer ships in the target's checkpoint
        "algorithm": "NEXTN",
        "tp": 8,
        "gpu": H200,
        "kvfit_gpu": "h200-141",
    },
    {
        "name": "Kimi-K2.5 + EAGLE-3, 8 x H200",
        "target": memconfigs.kimi_k25_config(),
        "target_bytes": memconfigs.KIMI_K25_BYTES,
        "draft": memconfigs.kimi_k25_eagle3_config(),
        "draft_bytes": memconfigs.KIMI_K25_EAGLE3_BYTES,
        "algorithm": "EAGLE3",
        "tp": 8,
        "gpu": H200,
        "kvfit_gpu": "h200-141",
    },
]


def _kvfit(folder: str | None) -> Any:
    path = folder or os.environ.get("KVFIT_SRC")
    if not path or not Path(path, "kvfit").is_dir():
        return None
    sys.path.insert(0, path)
    import kvfit  # type: ignore[import-not-found]

    return kvfit


def kvfit_tokens(kvfit: Any, case: dict[str, Any], utilization: float) -> tuple[int, str]:
    """kvfit's KV capacity per rank in tokens (a 1-token "sequence"), and its verdict for one
    request of the model's context."""
    from kvfit.architectures import estimate_cache  # type: ignore[import-not-found]
    from kvfit.hardware import parse_hardware  # type: ignore[import-not-found]
    from kvfit.planner import plan_topologies  # type: ignore[import-not-found]

    hardware = parse_hardware(case["kvfit_gpu"])
    weights = case["target_bytes"] + case["draft_bytes"]

    def plan(context_tokens: int) -> Any:
        """kvfit's first topology for this case, its cache sized for `context_tokens`."""
        cache = estimate_cache(case["target"], context_tokens=context_tokens)
        return plan_topologies(
            cache,
            weight_bytes=weights,
            hardware=hardware,
            gpus=case["tp"],
            utilization=utilization,
            tensor_parallel=case["tp"],
        )[0]

    shape = model_shape(case["target"], None)
    context = shape.context_len if not isinstance(shape, str) else 1
    return plan(1).sequences_per_replica, plan(context).verdict


def ours(version: str, case: dict[str, Any]) -> Prediction:
    index = TreeIndex(locate(str(release(version))), use_cache=False)
    target = model_shape(case["target"], None)
    draft = model_shape(case["draft"], None)
    assert not isinstance(target, str) and not isinstance(draft, str)
    launch = MemoryLaunch("model", tp=case["tp"], algorithm=case["algorithm"])
    weights = Weights(case["target_bytes"] // case["tp"], case["draft_bytes"] // case["tp"])
    return predict(index, memory_sources(index), launch, target, draft, case["gpu"], weights)


def anchors() -> list[str]:
    by_name = ANCHORS
    rows: list[str] = []
    dsv4 = by_name["dsv4_pro_h200_tp8_no_kv_budget"]
    index = TreeIndex(locate(str(release("0.5.23"))), use_cache=False)
    for draft_gb, key in (
        (0.0, "minimum_mem_fraction_static"),
        (dsv4["sglang"]["draft_weights_gb"], "minimum_mem_fraction_static_mtp"),
    ):
        made, fraction = inferencex_2128(index, draft_gb)
        said = made.raised.message if made.raised else "(no raise)"
        rows.append(
            f"  DeepSeek-V4-Pro {'+ MTP ' if draft_gb else ''}8 x H200 --mem-fraction-static 0.88: "
            f"SGLang printed minimum {dsv4['sglang'][key]}, eaglebug {fraction} "
            f"(the tree's message evaluated: ...{said[said.find('minimum viable') :][:48]}...)"
        )
    cells = by_name["llama31_8b_eagle3_h100_docs_ci_cells"]["sglang"]
    old = ours("0.5.9", CASES[0])
    tokens = cells["tokens"]
    rows.append(
        f"  Llama-3.1-8B + EAGLE-3 on H100 (docs CI): SGLang logged K+V {cells['target_kv_gb']} GB "
        f"and {cells['draft_kv_gb']} GB for {tokens} tokens; eaglebug's cells give "
        f"{tokens * (old.kv_cell_bytes or 0) / GIB:.2f} GB and {tokens * old.draft_cell_bytes / GIB:.2f} GB"
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kvfit", help="folder holding the unpacked kvfit package")
    args = parser.parse_args()
    kvfit = _kvfit(args.kvfit)
    print("SGLang's own numbers (public logs) vs eaglebug:")
    for row in anchors():
        print(row)
    print()
    print("max_total_num_tokens per GPU: eaglebug (the release's arithmetic) vs kvfit")
    failed = False
    for case in CASES:
        print(f"  {case['name']}")
        for version in ("0.5.9", "0.5.22", "0.5.23"):
            made = ours(version, case)
            if made.max_total_num_tokens is None:
                failed = True
                print(f"    eaglebug {version}: not predicted ({'; '.join(made.unknown)})")
                continue
            print(
                f"    eaglebug {version}: {made.max_total_num_tokens:>9} tokens "
                f"(fraction {made.fraction} from {made.fraction_from}, cell {made.kv_cell_bytes} B, "
                f"max_running_requests {made.max_running_requests})"
            )
        if kvfit is None:
            print("    kvfit: not available (pip download kvfit; --kvfit DIR)")
            continue
        fraction = ours("0.5.23", case).fraction or 0.9
        for utilization in (0.90, fraction):
            try:
                tokens, verdict = kvfit_tokens(kvfit, case, utilization)
            except ValueError as exc:  # kvfit fails closed on architectures it does not know
                print(f"    kvfit at utilization {utilization:.3f}: no verdict ({exc})")
                continue
            print(
                f"    kvfit at utilization {utilization:.3f}: {tokens:>9} tokens, verdict {verdict}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
