"""What a log says as a whole, beyond its single failures: ranks that did not get equally far,
a launch that stopped moving, a warmup request that failed, a tokenizer process that crashed."""

from __future__ import annotations

from eaglebug.checks.contract.evidence import LogEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import AdviceFix
from eaglebug.checks.logs import patterns as lp
from eaglebug.checks.logs.book import rank_summary, sort_ranks
from eaglebug.checks.logs.results import Result

STALL_FIX = {
    "loading": "check the disk or network the weights come from (iostat, the HF cache); a rank "
    "that waits in a collective is stuck behind another rank",
    "cuda_graph": "py-spy dump the schedulers; lower --cuda-graph-max-bs, or --disable-cuda-graph "
    "to confirm",
    "launching": "a rank waits for the others (NCCL init): check every node started and "
    "--dist-init-addr is reachable",
}


def desync(rank_phase: dict[str, str], ranks_seen: set[str]) -> Result | None:
    """Some ranks got further than others before the end: look at the ones behind (a rank
    the log named but that never reported a phase is behind too)."""
    known = {r: p for r, p in rank_phase.items() if r}
    if not known:
        return None
    furthest = max(known.values(), key=lp.PHASE_ORDER.__getitem__)
    ranks = {r: known.get(r, "") for r in ranks_seen | set(known) if r}
    behind = sort_ranks({r for r, p in ranks.items() if p != furthest})
    ahead = sort_ranks({r for r, p in ranks.items() if p == furthest})
    if not behind or furthest == "launching":
        return None
    message = (
        f"{rank_summary(behind)} did not reach {furthest} while {rank_summary(ahead)} did: "
        "the failure is on the ranks behind"
    )
    result = Result("rank_desync", ("rank_desync", *behind), message, "")
    result.fix = AdviceFix(
        f"read the log lines (or the node) of {rank_summary(behind)}: their own error comes "
        "first; a rank that waits for them is not the cause"
    )
    result.details = {"behind": behind, "ahead": ahead, "furthest": furthest}
    return result


def stalled(
    phase: str,
    last_time: str | None,
    silent_s: float,
    after_s: dict[str, float] | None = None,
    gpus_watched: bool = False,
) -> Finding | None:
    """`log.stalled` if nothing new came for longer than the phase allows (`gpus_watched`:
    the silence also counts GPU memory, which did not move either)."""
    limits = {**lp.STALL_AFTER_S, **(after_s or {})}
    limit = limits.get(phase)
    if limit is None or silent_s < limit:
        return None
    minutes = silent_s / 60
    return Finding(
        id="log.stalled",
        severity="warning",
        message=(
            f"no new log line{' and no GPU-memory change' if gpus_watched else ''} "
            f"for {minutes:.0f} min in {phase} "
            f"(more than the {limit / 60:.0f} min a {phase} step is given)"
        ),
        fix=AdviceFix(STALL_FIX.get(phase, "look at the ranks' processes (py-spy dump)")),
        evidence=LogEvidence(
            time=last_time,
            phase=phase,
            captured=(("silent_s", round(silent_s)), ("limit_s", round(limit))),
        ),
    )


def warmup_result(said: str | None = None) -> Result:
    message = (
        "the launch failed in SGLang's warmup request, after the weights, the KV cache and the "
        "CUDA graphs were ready and the HTTP server was up"
    )
    if said:
        message += f": {said.splitlines()[0][:160]}"
    result = Result("warmup", ("warmup",), message, said or "")
    result.fix = AdviceFix(
        "the model loaded fine: the first request failed; read the error above it, and check "
        "--host/--port, a proxy (no_proxy=127.0.0.1), and the generation settings"
    )
    return result


def as_tokenizer(result: Result, process: str) -> Result:
    """A TokenizerManager's or DetokenizerManager's crash is about the text, not the model."""
    result.category = "tokenizer"
    result.key = ("tokenizer", *result.key[1:])
    result.message = f"{process} crashed: {result.message}"
    result.fix = AdviceFix(
        "check --tokenizer-path and the model folder's tokenizer files; --trust-remote-code "
        "for custom tokenizers; --skip-tokenizer-init to confirm"
    )
    return result
