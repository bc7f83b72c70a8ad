"""The server-args fields SGLang resolves for itself that the memory arithmetic reads.

A launch that leaves `--max-running-requests` unset does not always run with the tree's field
default: 0.5.9's `_handle_speculative_decoding` resets it to 48 for EAGLE / EAGLE3 /
STANDALONE (its warning: "Max running requests is reset to 48 for speculative decoding"),
0.5.23 in each algorithm's handler (`_handle_eagle_family`, ...), and the draft-token count is
derived from the step count. The memory check starts from what the tree's own argument resolution leaves
(`resolution.resolve`, the one evaluator run the attention and node-layout checks use), so its
request limit, and the mamba state it reserves per request and draft token, are SGLang's.
Only fields the launch did not give and the resolution wrote as a whole number are taken,
with the file:line of the write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.args import resolution
from eaglebug.checks.args.world import Models, declared_env
from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.source.index import TreeIndex

# The speculative triple comes out of one call (`auto_choose_speculative_params`), and the
# draft pool's size reads all three (0.5.3's `draft_runner_cache_size`: requests x steps x
# top-k + requests x draft tokens).
_TRIPLE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
FIELDS = ("max_running_requests", *_TRIPLE, "page_size")
# The fields only a speculative launch has resolved for it.
_SPECULATIVE = frozenset({"max_running_requests", *_TRIPLE})
_ANSWER = "memresolved:"
_KEEP_ANSWERS = 16


@dataclass(frozen=True)
class Resolved:
    """A field as the tree's resolution wrote it."""

    value: int
    read_from: str  # file:line of the write


def resolved_fields(
    index: TreeIndex,
    launch: LaunchSpec,
    target_config: Mapping[str, Any] | None,
    environ: Mapping[str, str] | None,
    draft_config: Mapping[str, Any] | None = None,
    capability: tuple[int, int] | None = None,
) -> dict[str, Resolved]:
    """The FIELDS this launch leaves to SGLang, as the tree resolves them (a tree answer):
    for the launch's target and draft on its GPU (`capability`, None where unknown), the run
    the attention check makes of the same launch (`resolution.resolve` keeps it)."""
    speculative = launch.values.get("speculative_algorithm") is not None
    wanted = [
        f for f in FIELDS if launch.values.get(f) is None and (speculative or f not in _SPECULATIVE)
    ]
    if not wanted or target_config is None:
        return {}
    if not resolution.has_resolution(index):
        return {}
    env = declared_env(index, environ)
    subject = [launch.values, launch.at_run_time, target_config, draft_config, capability]
    subject += [env, wanted]
    models = Models.of_launch(target_config, draft_config, env)
    return index.answer_for(
        _ANSWER,
        subject,
        dict[str, Resolved],
        lambda: _run(index, launch, models, capability, wanted),
        _KEEP_ANSWERS,
    )


def _run(
    index: TreeIndex,
    launch: LaunchSpec,
    models: Models,
    capability: tuple[int, int] | None,
    wanted: list[str],
) -> dict[str, Resolved]:
    run = resolution.resolve(index, resolution.launch_values(index, launch), capability, models)
    if run is None or run.incomplete:  # a partial reading decides no field
        return {}
    out: dict[str, Resolved] = {}
    for name in wanted:
        write = run.writes.get(name)
        value = run.values.get(name)
        if write is None or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            continue
        out[name] = Resolved(value, f"{write.rel}:{write.line}")
    return out
