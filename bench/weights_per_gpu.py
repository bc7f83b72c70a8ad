"""The weights per GPU: the exact split (total / tp), the per-tensor prediction, and what was logged.

Why: `config.memory` used to take the checkpoint's total over tp x pp; SGLang keeps some
tensors whole on every rank (MLA's ReplicatedLinear down-projections, norms, a MoE gate's
raw parameter; with `--enable-dp-attention` the attention and the embedding), and the largest
rank is what its minimum-across-ranks free memory sees. This prints, for each published launch
whose numbers are public, the two estimates beside the logged figure. The checkpoints are
sparse safetensors files built from the published configs (tests/checkpoints.py); the trees
are the releases the tests read. A benchmark, not a test: exit 0 whatever the figures.

Logged figures (SGLang prints GiB as "GB"):
- jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B on one H100, SGLang's own log
  (tests/fixtures/logs/corpus/ready_eagle3_llama31_8b_draft_context_warning.log):
  "Load weight end. type=LlamaForCausalLMEagle3 ... mem usage=1.77 GB".
- Llama-3.1-8B-Instruct on the same H100 (same log): "mem usage=15.11 GB" (float16).
- DeepSeek-R1 (DeepSeek-V3's layout) at TP 8: no SGLang log with the figure was found; the
  nearest public one is vLLM's on 8 Gaudi HPUs, which keeps the same tensors whole
  (https://github.com/HabanaAI/vllm-fork/issues/809: "took 79.41 GiB of device memory").

    python bench/weights_per_gpu.py [--sglang PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eaglebug.checks.memory.parallel import Layout  # noqa: E402
from eaglebug.checks.memory.weights import per_rank_bytes  # noqa: E402
from eaglebug.checks.models.source import ModelSource  # noqa: E402
from eaglebug.checks.source.index import TreeIndex  # noqa: E402
from eaglebug.checks.source.tree import locate  # noqa: E402
from tests.checkpoints import (  # noqa: E402
    Tensor,
    deepseek_v3_tensors,
    eagle3_llama_tensors,
    llama_tensors,
    nbytes,
    write_checkpoint,
)
from tests.memconfigs import EAGLE3_LLAMA31_8B, LLAMA31_8B  # noqa: E402

GIB = 1 << 30
DEEPSEEK_V3: dict[str, Any] = json.loads(
    (ROOT / "tests/fixtures/configs/deepseek-v3.config.json").read_text()
)
CASES: list[tuple[str, dict[str, Any], Any, Layout, str]] = [
    ("Llama-3.1-8B, tp 1", LLAMA31_8B, llama_tensors, Layout(1, 1, 1, 1, 1, False), "15.11 (SGLang)"),
    ("Llama-3.1-8B, tp 8", LLAMA31_8B, llama_tensors, Layout(8, 8, 1, 1, 1, False), "-"),
    ("EAGLE-3 draft, tp 1", EAGLE3_LLAMA31_8B, eagle3_llama_tensors, Layout(1, 1, 1, 1, 1, False), "1.77 (SGLang)"),
    ("EAGLE-3 draft, tp 8", EAGLE3_LLAMA31_8B, eagle3_llama_tensors, Layout(8, 8, 1, 1, 1, False), "-"),
    ("DeepSeek-V3, tp 8", DEEPSEEK_V3, deepseek_v3_tensors, Layout(8, 8, 1, 1, 1, False), "79.41 (vLLM HPU, R1)"),
    ("DeepSeek-V3, tp 8 dp 8 DP-attn", DEEPSEEK_V3, deepseek_v3_tensors, Layout(8, 8, 8, 1, 1, True), "-"),
    ("DeepSeek-V3, tp 4 pp 2", DEEPSEEK_V3, deepseek_v3_tensors, Layout(4, 4, 1, 1, 2, False), "-"),
]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--sglang", type=Path, action="append", metavar="PATH")
    args = parser.parse_args(argv)
    trees = args.sglang or [Path.home() / ".cache/eaglebug-sglang" / v for v in ("0.5.9", "0.5.23")]
    with tempfile.TemporaryDirectory(prefix="eaglebug-weights-") as tmp:
        folders: dict[str, tuple[Path, int]] = {}
        for _label, config, make, _, _ in CASES:
            key = make.__name__
            if key not in folders:
                tensors: list[Tensor] = make(config)
                folder = write_checkpoint(Path(tmp) / key, config, tensors, shards=8)
                folders[key] = (folder, sum(nbytes(t) for t in tensors))
        for tree in trees:
            index = TreeIndex(locate(str(tree)), use_cache=False)
            print(f"\n{tree.name}: GiB per GPU (largest rank)")
            print(f"{'launch':34} {'total/(tp*pp)':>14} {'per tensor':>11}  logged")
            for label, config, make, layout, logged in CASES:
                folder, total = folders[make.__name__]
                source = ModelSource(str(folder), folder, "local folder", config)
                world = layout.tp * layout.pp
                share = per_rank_bytes(index, source, layout, total, "index", world)
                exact = total / world / GIB
                print(f"{label:34} {exact:14.2f} {share.bytes / GIB:11.2f}  {logged}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
