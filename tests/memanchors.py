"""SGLang's own memory numbers from public logs (`fixtures/memory/anchors.json`, each with its
source), and eaglebug's reading of the launch behind one of them: the computation the tests
and `bench/kvfit_compare.py` both compare with what SGLang printed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from eaglebug.checks.logs.memory import MemoryLog
from eaglebug.checks.memory.fit import GIB, MIB, Gpu, MemoryLaunch
from eaglebug.checks.memory.plan import Prediction, Weights, minimum_fraction, predict
from eaglebug.checks.memory.rules import memory_sources
from eaglebug.checks.source.index import TreeIndex
from tests.memconfigs import DEEPSEEK_V3, shape_on

ANCHORS: dict[str, dict[str, Any]] = {
    a["name"]: a
    for a in json.loads(
        (Path(__file__).parent / "fixtures" / "memory" / "anchors.json").read_text()
    )["anchors"]
}
H200 = Gpu(143771 * MIB, int(139.5 * GIB))


def inferencex_2128(index: TreeIndex, draft_gb: float) -> tuple[Prediction, float | None]:
    """InferenceX #2128: DeepSeek-V4-Pro FP8 (DeepSeek-V3's MLA shape), --tp 8
    --mem-fraction-static 0.88 on 8 x H200, read with the figures its log gave (free before
    the load = avail + usage) and `draft_gb` of MTP draft weights (0: no draft). eaglebug's
    prediction at 0.88, and the smallest fraction whose pool holds a token."""
    measured = ANCHORS["dsv4_pro_h200_tp8_no_kv_budget"]["measured"]
    sources = memory_sources(index)
    shape = shape_on(index, DEEPSEEK_V3)
    assert not isinstance(shape, str)
    free = measured["avail_after_target_gb"] + measured["target_weights_gb"]
    log = MemoryLog("TP0", free, measured["target_weights_gb"], draft_gb or None, *[None] * 5)
    launch = MemoryLaunch(
        "deepseek-ai/DeepSeek-V4-Pro",
        tp=8,
        mem_fraction_static=0.88,
        algorithm="NEXTN" if draft_gb else None,
    )
    draft = shape if draft_gb else None

    def at(fraction: float) -> Prediction:
        trial = replace(launch, mem_fraction_static=fraction)
        return predict(index, sources, trial, shape, draft, H200, Weights(0, 0), log.overheads())

    return at(0.88), minimum_fraction(lambda f: at(f).max_total_num_tokens or 0, 1)
