"""How long a warm `eaglebug preflight` takes next to a warm `eaglebug audit` of the same tree.

Why: preflight is the audit plus the launch-flag table, two config reads and the config
checks; the speed issue asks that, with the parse cache warm, it stay within 2x of the audit
alone on the large (0.5.23) tree. Both run as separate processes from compiled bytecode with the
same warm cache, best of N, in the same run; the ratio is what is reported.

The launch is the Kimi-K2.5 + EAGLE-3 seed scenario, with configs written to a scratch folder.
A benchmark, not a test: exit 0 whatever the ratio, 1 only when a command fails outright.

    python bench/preflight.py [--sglang PATH] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from audit_vs_grep import AuditFailed, audit_argv, default_tree, run_audit, verdict, warm_up

GOAL = 2.0  # warm preflight seconds / warm audit seconds
TARGET = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "text_config": {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "kv_lora_rank": 512,
        "vocab_size": 163840,
        "max_position_embeddings": 262144,
    },
}
DRAFT = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": 7168,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 163840,
    "draft_vocab_size": 32000,
    "max_position_embeddings": 131072,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]},
}


def write_models(scratch: Path) -> tuple[Path, Path]:
    target, draft = scratch / "kimi-k2.5", scratch / "kimi-k2.5-eagle3"
    for folder, config in ((target, TARGET), (draft, DRAFT)):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
    (target / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 594_000_000_000}, "weight_map": {}})
    )
    return target, draft


def preflight_argv(tree: Path, target: Path, draft: Path) -> list[str]:
    return [
        sys.executable, "-m", "eaglebug", "preflight", "--sglang", str(tree), "--json",
        "--gpu-mem-gib", "141", "--",
        "python", "-m", "sglang.launch_server", "--model-path", str(target),
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
        "--tp", "8", "--trust-remote-code",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--sglang", type=Path, metavar="PATH", help="SGLang tree (default: 0.5.23)")
    parser.add_argument("--runs", type=int, default=5, metavar="N", help="timed runs (default 5)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    tree = args.sglang or default_tree()
    with tempfile.TemporaryDirectory(prefix="eaglebug-bench-") as tmp:
        scratch = Path(tmp)
        target, draft = write_models(scratch)
        audit = audit_argv(tree, "KimiK25ForConditionalGeneration")
        flight = preflight_argv(tree, target, draft)
        try:
            warm_up(audit, scratch)
            run_audit(flight, scratch, scratch / "warm")  # warm the preflight's extra facts too
            audit_s = min(
                run_audit(audit, scratch, scratch / "warm").seconds for _ in range(args.runs)
            )
            flight_runs = [run_audit(flight, scratch, scratch / "warm") for _ in range(args.runs)]
        except AuditFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    flight_s = min(r.seconds for r in flight_runs)
    ratio = flight_s / audit_s
    errors = sorted(
        f["id"] + (f":{f['attribute']}" if f["attribute"] else "")
        for f in json.loads(flight_runs[0].stdout)["findings"]
        if f["severity"] == "error"
    )
    print(f"tree: {tree}\nruns: {args.runs} (best time)")
    print(f"audit warm      {audit_s:.3f} s")
    print(
        f"preflight warm  {flight_s:.3f} s   <= {GOAL:g}x audit: {ratio:.2f}x  {verdict(ratio <= GOAL)}"
    )
    print(f"preflight errors: {', '.join(errors) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
