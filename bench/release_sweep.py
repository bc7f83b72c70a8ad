"""What `eaglebug preflight` leaves unread, release by release, over many launch shapes.

Why: the suite reads eleven releases; the ones between them read differently often enough
(stop 39 found four gaps in eleven untested releases, one still in the newest) that the only
way to know a release is read is to read it. Each release (the last `--last` published on
PyPI, or those named with `--releases`; fetched once into the tests' release cache) gets the
seed preflight's settings (8 x H200, sm90) for each launch shape below: a dense model with an
EAGLE-3 draft and top-k 4, gpt-oss with an EAGLE-3 draft, Qwen3-Next with and without NEXTN,
DeepSeek-V3 with DP attention and MTP, DeepSeek-V3.2 with NEXTN, an FP8 KV cache with page
size 16, the seed launch (Kimi-K2.5 with its EAGLE-3 draft), a STANDALONE draft, Qwen3-30B-A3B
(MoE) and Qwen3-8B (top-k 8) with EAGLE-3 drafts, GLM-4.5-Air drafting with its own MTP
layer, Llama-4-Scout (a vision-language wrapper) with an EAGLE-3 draft, Gemma-3-27B (sliding
window layers). The model folders are the tests' configs (`tests/memconfigs.py`,
`tests/configs.py`: every key the memory check reads) and published ones kept for the sweep
(`sweep_models.py`). A row is printed for each launch whose findings say something was not
read (`details.not_read`, "incomplete", "not read"), and for each run that failed outright.

A benchmark of coverage, not of time: exit 0 whatever is unread, 1 when a preflight crashes or
prints no JSON.

    python bench/release_sweep.py [--last 12] [--releases 0.5.7 0.5.23] [--shapes qwen3next]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from audit_vs_grep import audit_env, eaglebug_command, run_child

REPO = Path(__file__).resolve().parent.parent
# name -> (model folder, its flags); the folders are written by `_models`.
SHAPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "llama-eagle3-topk4": (
        "llama",
        ("--tp", "1", "--speculative-algorithm", "EAGLE3",
         "--speculative-draft-model-path", "{llama-eagle3}", "--speculative-eagle-topk", "4",
         "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "8"),
    ),
    "gptoss-eagle3": (
        "gptoss",
        ("--tp", "8", "--speculative-algorithm", "EAGLE3",
         "--speculative-draft-model-path", "{llama-eagle3}"),
    ),
    "qwen3next": ("qwen3next", ("--tp", "4")),
    "qwen3next-nextn": ("qwen3next", ("--tp", "4", "--speculative-algorithm", "NEXTN")),
    "dsv3-dp-mtp": (
        "dsv3",
        ("--tp", "8", "--enable-dp-attention", "--dp-size", "8",
         "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"),
    ),
    "dsv32-nextn": ("dsv32", ("--tp", "8", "--speculative-algorithm", "NEXTN")),
    "llama-fp8kv-page16": (
        "llama", ("--tp", "2", "--kv-cache-dtype", "fp8_e4m3", "--page-size", "16")
    ),
    "kimi-eagle3": (  # the seed launch: a wrapper class with an EAGLE-3 draft
        "kimi",
        ("--tp", "8", "--speculative-algorithm", "EAGLE3",
         "--speculative-draft-model-path", "{kimi-eagle3}", "--trust-remote-code"),
    ),
    "llama-standalone": (  # a whole model as the draft (the same one: the shape is the point)
        "llama",
        ("--tp", "1", "--speculative-algorithm", "STANDALONE",
         "--speculative-draft-model-path", "{llama}"),
    ),
    "qwen3moe-eagle3": (  # an MoE target, a draft with a shorter context (SpecForge's)
        "qwen3moe",
        ("--tp", "2", "--speculative-algorithm", "EAGLE3",
         "--speculative-draft-model-path", "{qwen3moe-eagle3}", "--speculative-num-steps", "3",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"),
    ),
    "qwen3-8b-eagle3-topk8": (
        "qwen3-8b",
        ("--tp", "1", "--speculative-algorithm", "EAGLE3",
         "--speculative-draft-model-path", "{qwen3-8b-eagle3}", "--speculative-num-steps", "5",
         "--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "32"),
    ),
    "glm45air-mtp": (  # the target's own MTP layer as the draft (no weight size: no memory)
        "glm45air",
        ("--tp", "4", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"),
    ),
    "llama4-eagle3": (  # a vision-language wrapper class as the target (no weight size)
        "llama4",
        ("--tp", "8", "--speculative-algorithm", "EAGLE3",
         "--speculative-draft-model-path", "{llama4-eagle3}", "--context-length", "2048"),
    ),
    "gemma3-ctx32k": (  # sliding-window layers; its config names no context length
        "gemma3", ("--tp", "2", "--context-length", "32768")
    ),
}  # fmt: skip
_UNREAD = re.compile(r"not read|incomplete|could not")


def _models(folder: Path) -> dict[str, Path]:
    sys.path.insert(0, str(REPO))
    import sweep_models as s

    from tests import memconfigs as m
    from tests.configs import kimi_k25, kimi_k25_eagle3, write_model

    made = {
        "llama": (m.LLAMA31_8B, m.LLAMA31_8B_BYTES),
        "llama-eagle3": (m.EAGLE3_LLAMA31_8B, m.EAGLE3_LLAMA31_8B_BYTES),
        "gptoss": (m.GPT_OSS_120B, m.GPT_OSS_120B_BYTES),
        "qwen3next": (m.QWEN3_NEXT_80B, m.QWEN3_NEXT_80B_BYTES),
        "dsv3": (m.DEEPSEEK_V3, m.DEEPSEEK_V3_BYTES),
        "dsv32": (m.DEEPSEEK_V32, m.DEEPSEEK_V3_BYTES),
        "kimi": (kimi_k25(), 594_000_000_000),
        "kimi-eagle3": (kimi_k25_eagle3(), None),
        "gemma3": (m.GEMMA3_27B, m.GEMMA3_27B_BYTES),
        "qwen3moe": (s.QWEN3_30B_A3B, s.QWEN3_30B_A3B_BYTES),
        "qwen3moe-eagle3": (s.QWEN3_30B_A3B_EAGLE3, None),
        "qwen3-8b": (s.QWEN3_8B, s.QWEN3_8B_BYTES),
        "qwen3-8b-eagle3": (s.QWEN3_8B_EAGLE3, None),
        "glm45air": (s.GLM45_AIR, None),
        "llama4": (s.LLAMA4_SCOUT, None),
        "llama4-eagle3": (s.LLAMA4_EAGLE3, None),
    }
    return {
        name: write_model(folder / name, config, total_size=size)
        for name, (config, size) in made.items()
    }


def published(last: int) -> list[str]:
    """The last `last` releases on the package index pip uses, newest first (post releases
    included: they are what users pin)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "sglang"],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("Available versions:"))
    return [v.strip() for v in line.partition(":")[2].split(",")][:last]


def unread(report: dict[str, Any]) -> list[str]:
    """What the report's findings say was not read, one line each."""
    out: list[str] = []
    for finding in report.get("findings", []):
        message = finding.get("message", "")
        if _UNREAD.search(message):
            out.append(f"{finding.get('id')}: {message[:200]}")
        for why in (finding.get("details") or {}).get("not_read") or []:
            out.append(f"  not read: {str(why)[:200]}")
    return out


def sweep(version: str, shapes: list[str], models: dict[str, Path], scratch: Path) -> int:
    """One release's launches; the number of runs that failed outright."""
    sys.path.insert(0, str(REPO))
    from tests.sglang_releases import release

    tree = release(version)
    cache = scratch / f"cache-{version}"  # one cold cache per release, shared by its launches
    failed = 0
    for shape in shapes:
        model, flags = SHAPES[shape]
        argv = [
            *eaglebug_command(), "preflight", "--sglang", str(tree), "--json",
            "--gpu-mem-gib", "141", "--gpu-arch", "sm90", "--",
            "python", "-m", "sglang.launch_server", "--model-path", str(models[model]),
            *(f.format(**{k: str(v) for k, v in models.items()}) for f in flags),
        ]  # fmt: skip
        run = run_child(argv, env=audit_env(scratch, cache))
        try:
            report = json.loads(run.stdout)
        except ValueError:
            said = run.stderr.decode(errors="replace").strip().splitlines()
            error = next((x for x in said if x.startswith("error:")), said[-1] if said else "")
            if run.exit_code == 2 and error.startswith("error:"):  # this release lacks a flag
                print(f"{version:<12} {shape:<20} refused    {error[:120]}")
                continue
            print(f"{version:<12} {shape:<20} FAILED (exit {run.exit_code}): {error[:200]}")
            failed += 1
            continue
        lines = unread(report)
        status = f"{len(lines)} unread" if lines else "read"
        print(
            f"{version:<12} {shape:<20} {status:<10} {run.seconds:5.1f} s {run.max_rss_mb:4.0f} MB"
        )
        for line in lines:
            print(f"{'':<14}{line}")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--last", type=int, default=12, help="the newest N releases on PyPI")
    parser.add_argument("--releases", nargs="*", help="these releases instead")
    parser.add_argument("--shapes", nargs="*", choices=sorted(SHAPES), help="default: all")
    args = parser.parse_args(argv)
    versions = args.releases or published(args.last)
    shapes = args.shapes or list(SHAPES)
    print(f"{len(versions)} releases x {len(shapes)} launch shapes, one cold cache per release")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="eaglebug-sweep-") as tmp:
        scratch = Path(tmp)
        models = _models(scratch / "models")
        for version in versions:
            failed += sweep(version, shapes, models, scratch)
    print(f"{failed} failed run(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
