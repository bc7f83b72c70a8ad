"""How long `eaglebug preflight` takes next to `grep -rn` over the same tree, cold and warm.

Why: preflight is the audit plus the launch-flag table, two config reads and the config
checks, and it is what a user runs before every launch. The speed issue's goals, against grep
in the same run on the large (0.5.23) tree, page cache warm for both:

    cold preflight (empty parse cache) <= 5x grep
    warm preflight (cache filled)      <= 0.35x grep
    peak RSS of a preflight process    <= 200 MB

Everything runs as separate processes from compiled bytecode, as in `audit_vs_grep.py` (whose
helpers this uses): cold runs each get a fresh cache folder, warm runs share one filled by an
untimed run; best of N. An info row keeps the older yardstick, warm preflight against a warm
audit of the same tree. Two more rows: the warm text report (what a person types, without
`--json`; kept for the terminal it was rendered on, here a pipe), held to the same warm goal;
and, for information, a new SSH session or tmux pane (`SSH_CONNECTION`, `TMUX_PANE`, ...
differ on every run: left out of the reply's key and of what the checks read, so the kept
reply is printed), and a warm tree with a new variable of any other name (the reply's key
holds it, so the launch's stages run again over the tree's kept answers). The launch is the
Kimi-K2.5 + EAGLE-3 seed scenario, with configs written to a scratch folder, on 8 x H200
(`--gpu-arch sm90`, so the attention rules run too).
A benchmark, not a test: exit 0 whatever the ratios, 1 when a command fails outright or the
timed preflight says a check of it is incomplete (it would time less than a real one).

    python bench/preflight.py [--sglang PATH] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from audit_vs_grep import (
    AuditFailed,
    Run,
    audit_argv,
    audit_env,
    default_tree,
    eaglebug_command,
    run_audit,
    run_child,
    time_cold,
    time_grep,
    warm_up,
)
from report import rss_row, table, timed_row

COLD_GOAL = 5.0  # cold preflight seconds / grep seconds (issue 21)
WARM_GOAL = 0.35  # warm preflight seconds / grep seconds


def write_models(scratch: Path) -> tuple[Path, Path]:
    """The seed launch's model folders: Kimi-K2.5 and its EAGLE-3 draft in their published
    layouts (the tests' `tests/configs.py`: every key the memory check reads, so its whole
    arithmetic runs, as on a real checkpoint), and the target's weight index."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.configs import kimi_k25, kimi_k25_eagle3

    target, draft = scratch / "kimi-k2.5", scratch / "kimi-k2.5-eagle3"
    for folder, config in ((target, kimi_k25()), (draft, kimi_k25_eagle3())):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
    (target / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 594_000_000_000}, "weight_map": {}})
    )
    return target, draft


def preflight_argv(tree: Path, target: Path, draft: Path) -> list[str]:
    return [
        *eaglebug_command(), "preflight", "--sglang", str(tree), "--json",
        "--gpu-mem-gib", "141", "--gpu-arch", "sm90", "--",
        "python", "-m", "sglang.launch_server", "--model-path", str(target),
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
        "--tp", "8", "--trust-remote-code",
    ]  # fmt: skip


def run_warm(argv: list[str], scratch: Path, extra: dict[str, str] | None = None) -> Run:
    """One run over the warm cache whatever its output's format, `extra` added to its
    environment."""
    result = run_child(argv, env={**audit_env(scratch, scratch / "warm"), **(extra or {})})
    if result.exit_code not in (0, 1):
        last = (result.stderr.decode(errors="replace").strip().splitlines() or ["-"])[-1]
        raise AuditFailed(f"preflight exited {result.exit_code}: {last}")
    return result


def _pane(n: int) -> dict[str, str]:
    """The variables a new SSH login and tmux pane set differently (number `n`)."""
    return {
        "SSH_CONNECTION": f"10.0.0.{n} {50000 + n} 10.0.0.99 22",
        "SSH_CLIENT": f"10.0.0.{n} {50000 + n} 22",
        "SSH_TTY": f"/dev/pts/{n}",
        "TMUX_PANE": f"%{n}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--sglang", type=Path, metavar="PATH", help="SGLang tree (default: 0.5.23)")
    parser.add_argument("--runs", type=int, default=5, metavar="N", help="timed runs (default 5)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    tree: Path = args.sglang.expanduser().resolve() if args.sglang else default_tree()
    grep_s = time_grep(tree, args.runs)
    with tempfile.TemporaryDirectory(prefix="eaglebug-bench-") as tmp:
        scratch = Path(tmp)
        target, draft = write_models(scratch)
        audit = audit_argv(tree, "KimiK25ForConditionalGeneration")
        flight = preflight_argv(tree, target, draft)
        try:
            warm_up(audit, scratch)  # compiles the bytecode, fills the warm cache for the audit
            run_audit(flight, scratch, scratch / "warm")  # and for the preflight
            cold = time_cold(flight, args.runs, scratch)
            audit_s = min(
                run_audit(audit, scratch, scratch / "warm").seconds for _ in range(args.runs)
            )
            warm = [run_audit(flight, scratch, scratch / "warm") for _ in range(args.runs)]
            text = [w for w in flight if w != "--json"]
            run_warm(text, scratch)  # keeps the text reply
            text_s = min(run_warm(text, scratch).seconds for _ in range(args.runs))
            pane_s = min(run_warm(flight, scratch, _pane(i)).seconds for i in range(args.runs))
            variable = "EAGLEBUG_BENCH_VARIABLE"
            new_env_s = min(
                run_warm(flight, scratch, {variable: str(i)}).seconds for i in range(args.runs)
            )
        except AuditFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    cold_s = min(r.seconds for r in cold)
    warm_s = min(r.seconds for r in warm)
    rss = max(r.max_rss_mb for r in (*cold, *warm))
    errors = sorted(
        f["id"] + (f":{f['attribute']}" if f["attribute"] else "")
        for f in json.loads(warm[0].stdout)["findings"]
        if f["severity"] == "error"
    )
    rows = [
        ("grep -rn (best)", f"{grep_s:.3f} s", "the baseline", ""),
        timed_row("preflight cold (best)", cold_s, grep_s, COLD_GOAL),
        timed_row("preflight warm (best)", warm_s, grep_s, WARM_GOAL),
        timed_row("preflight warm, text report (best)", text_s, grep_s, WARM_GOAL),
        timed_row("new SSH session or tmux pane (best)", pane_s, grep_s, None),
        timed_row("warm tree, new variable (best)", new_env_s, grep_s, None),
        ("audit warm (best)", f"{audit_s:.3f} s", f"info: preflight {warm_s / audit_s:.2f}x", ""),
        rss_row("peak RSS (max)", rss),
    ]
    print(f"tree: {tree}\nruns: {args.runs} (best time, worst RSS)")
    print("\n".join(table(rows)))
    print(f"preflight errors: {', '.join(errors) or 'none'}")
    return complete(cold[0].stdout)


def complete(stdout: bytes) -> int:
    """0 if the preflight's JSON says every check ran to its end; else 1, said on stderr: the
    figures printed time less than a preflight of this launch does (a trimmed config once
    stopped the memory arithmetic at its first missing key, and every cold figure left it
    out)."""
    findings = json.loads(stdout)["findings"]
    short = [f["message"] for f in findings if "incomplete" in f["message"]]
    if short:
        print(f"error: the timed preflight is incomplete: {'; '.join(short)}", file=sys.stderr)
    return 1 if short else 0


if __name__ == "__main__":
    raise SystemExit(main())
