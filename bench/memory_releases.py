"""config.memory against SGLang's own logged pool size, each launch on its own release, before
and after in the same run.

Why: issue 22 found that releases 0.4.x to 0.5.6 could not be read ("memory check incomplete")
and fell back to another release's fraction. The real launches of
`tests/fixtures/memory/launches22/launches.json` (public threads, each with its source URL)
carry SGLang's own `max_total_num_tokens`; each is predicted on the release its evidence
names (`RELEASE` below), from the launch's own flags and the free memory and weight size its
log measured, the way `diagnose --sglang` does. The base (`--base`, default `engine2`) and
this checkout are installed side by side (`pip install --no-deps --target`) and each runs the
same worker in its own process; the table gives the error of each against the logged figure,
per release. A launch whose model config is not kept in the repository is listed, not guessed.

    python bench/memory_releases.py [--base engine2]

Releases are fetched on demand (`tests/sglang_releases.py`). A benchmark, not a test: exit 0
whatever the errors, 1 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from side_by_side import install_base_and_head

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests/fixtures/memory/launches22"
# The release each launch ran, from its `sglang_evidence` (a "main @ date" build: the release
# published nearest before that date; "0.4.2.x": the last of that line).
RELEASE = {
    "qwq32b_4xl4_tp4_v0_4_3_post4": "0.4.3.post4",
    "r1_distill_qwen7b_rtx3090_tp1_v0_4_2": "0.4.2.post2",
    "llama31_8b_h100_docs_send_request_2025_01_23": "0.4.1.post7",
    "glm5_fp8_mi355x_tp8_fp8kv_v0_5_8_post1": "0.5.8.post1",
    "glm5_fp8_mi355x_tp8_fp8kv_v0_5_9": "0.5.9",
    "kimi_k25_mi355x_tp8_v0_5_8_post1": "0.5.8.post1",
    "kimi_k25_mi355x_tp8_triton_backend_v0_5_8_post1": "0.5.8.post1",
    "granite40_h_micro_16gb_bench_one_batch_pr18040": "0.5.8",
    "lfm2_700m_16gb_bench_one_batch_pr16065": "0.5.6.post2",
    "qwen35_9b_2x_rtx4090_tp2_ctx262144_main_2026_04": "0.5.10",
    "qwen3_8b_b300_tp1_piecewise_cuda_graph_2026_05_24": "0.5.11",
    "qwen3_8b_b200_tp1_piecewise_cuda_graph_2026_04_27": "0.5.10",
    "qwen3_235b_a22b_fp8_4xh100_tp4_mfs093": "0.4.9.post2",
    "llama31_8b_24gb_docker_desktop_2025_07_14": "0.4.9.post2",
    "qwen35_4b_rtx4090d_ctx4096_v0_5_13_post1_partial": "0.5.13.post1",
}


def _config(record: dict[str, Any]) -> dict[str, Any] | None:
    """The model config kept beside the launches (real files with their .source), or the one
    the project already keeps for Kimi-K2.5 (tests/configs.py)."""
    named = record.get("config") or ""
    kept = {"qwen35_9b_2x_rtx4090_tp2_ctx262144_main_2026_04": "configs/Qwen3.5-9B.config.json"}
    named = kept.get(record["name"], named)  # found after the launches were gathered
    if named.startswith("configs/"):
        return dict(json.loads((FIXTURES / named.removeprefix("configs/")).read_text()))
    if "kimi_k25()" in named:
        sys.path.append(str(REPO))  # after the installation under test: only `tests` from here
        from tests.configs import kimi_k25

        return kimi_k25()
    return None


def _flags(command: str) -> dict[str, str]:
    words = shlex.split(command.split("(")[0])
    out: dict[str, str] = {}
    for i, word in enumerate(words):
        if word.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[word] = words[i + 1]
    return out


def worker() -> int:
    """One installation's predictions, as JSON lines on stdout."""
    from eaglebug.checks.logs.memory import Overheads
    from eaglebug.checks.memory.classes import model_objects
    from eaglebug.checks.memory.fit import GIB, MIB, Gpu, MemoryLaunch, model_shape
    from eaglebug.checks.memory.plan import Weights, predict
    from eaglebug.checks.memory.rules import memory_sources
    from eaglebug.checks.source.index import TreeIndex
    from eaglebug.checks.source.tree import locate

    sys.path.append(str(REPO))
    from tests.sglang_releases import release

    records = json.loads((FIXTURES / "launches.json").read_text())["launches"]
    indexes: dict[str, Any] = {}
    for record in records:
        name, figures = record["name"], record["figures"]
        row: dict[str, Any] = {"name": name, "release": RELEASE[name]}
        row["logged"] = figures.get("max_total_num_tokens")
        config = _config(record)
        free = figures.get("avail_before_load_gb") or figures.get("avail_before_load_gb_derived")
        if config is None or row["logged"] is None or free is None:
            row["skipped"] = "no model config kept" if config is None else "no logged pool size"
            print(json.dumps(row), flush=True)
            continue
        flags = _flags(record["launch"])
        tp = int(
            flags.get("--tp") or flags.get("--tp-size") or flags.get("--tensor-parallel-size") or 1
        )
        fraction = flags.get("--mem-fraction-static")
        launch = MemoryLaunch(
            "model",
            tp=tp,
            mem_fraction_static=float(fraction) if fraction else None,
            kv_cache_dtype=flags.get("--kv-cache-dtype", "auto"),
            page_size=int(flags.get("--page-size") or figures.get("page_size") or 1),
        )
        context = flags.get("--context-length")
        shape = model_shape(config, int(context) if context else None)
        if isinstance(shape, str):
            row["skipped"] = shape
            print(json.dumps(row), flush=True)
            continue
        version = RELEASE[name]
        if version not in indexes:
            index = TreeIndex(locate(str(release(version))), use_cache=False)
            indexes[version] = (index, memory_sources(index))
        index, sources = indexes[version]
        gpu = Gpu(int(record["gpu_total_gb"] * 1024) * MIB, int(free * GIB))
        weights_gib = figures["weights_gb"]
        measured = Overheads(free, weights_gib)
        try:
            config_class = model_objects(index, config).qualname or None
            weights = Weights(int(weights_gib * GIB), 0)
            made = predict(
                index, sources, launch, shape, None, gpu, weights, measured, config_class
            )
        except Exception as error:  # the base may fail where the head does not
            row["failed"] = f"{type(error).__name__}: {error}"[:200]
            print(json.dumps(row), flush=True)
            continue
        row["predicted"] = made.max_total_num_tokens
        row["fraction"] = made.fraction
        row["unknown"] = made.unknown[:2]
        row["mamba"] = made.mamba_cache_requests
        row["kv_gib"] = made.kv_gib
        print(json.dumps(row), flush=True)
    return 0


def _run(site: Path) -> dict[str, dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}
    done = subprocess.run(
        [sys.executable, __file__, "--worker"], env=env, capture_output=True, text=True, cwd="/"
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {row["name"]: row for row in rows}


def _error(row: dict[str, Any]) -> str:
    if "skipped" in row:
        return f"({row['skipped']})"
    if "failed" in row:
        return "failed"
    if row.get("predicted") is None:
        reason = (row.get("unknown") or ["?"])[0]
        return "incomplete: " + re.sub(r"\s+", " ", str(reason))[:48]
    return f"{100 * (row['predicted'] - row['logged']) / row['logged']:+.2f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--base", default="engine2", help="the commit to compare with")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker()
    with tempfile.TemporaryDirectory(prefix="eaglebug-mem-") as tmp:
        scratch = Path(tmp)
        try:
            sites = install_base_and_head(args.base, scratch)
            base, head = _run(sites["base"]), _run(sites["head"])
        except (subprocess.CalledProcessError, RuntimeError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    print(f"{'release':<13} {'launch':<50} {'logged':>9} {'base':>9} {'head':>9}  base / head")
    order = sorted(head.items(), key=lambda kv: (_version(kv[1]["release"]), kv[0]))
    for name, row in order:
        before = base.get(name, {})
        print(
            f"{row['release']:<13} {name[:50]:<50} {row.get('logged') or '-':>9} "
            f"{before.get('predicted') or '-':>9} {row.get('predicted') or '-':>9}  "
            f"{_error(before)} / {_error(row)}"
        )
    print("\nper release (launches with a kept config and a logged pool): predicted, mean |error|")
    for version in sorted({row["release"] for row in head.values()}, key=_version):
        rows = [(base.get(n, {}), r) for n, r in head.items() if r["release"] == version]
        wanted = [(b, r) for b, r in rows if "skipped" not in r]
        if wanted:
            before = _summary([b for b, _ in wanted])
            print(f"{version:<13} base {before:<20} head {_summary([r for _, r in wanted])}")
    return 0


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _summary(rows: list[dict[str, Any]]) -> str:
    errors = [
        abs(r["predicted"] - r["logged"]) / r["logged"]
        for r in rows
        if r.get("predicted") is not None
    ]
    mean = f", {100 * sum(errors) / len(errors):.2f}%" if errors else ""
    return f"{len(errors)} of {len(rows)}{mean}"


if __name__ == "__main__":
    raise SystemExit(main())
