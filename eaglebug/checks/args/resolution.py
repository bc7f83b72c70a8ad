"""SGLang's argument resolution run on one launch, with the one evaluator (`pyeval`).

Three places, each found in the tree by the name SGLang gives it:
- the argument resolution, before anything loads: `run_resolution_pipeline` (sglang >= 0.5.2x,
  `arg_groups/pipeline.py`) or `ServerArgs.__post_init__` (older `server_args.py`). It picks
  the `auto` backend for the GPU and the model, snaps the page size to what a backend takes,
  chooses the speculative top-k, and raises on combinations it refuses;
- the attention backend factories (`@register_attention_backend("fa3")`), which run after the
  model is loaded and assert on the GPU and on MLA vs MHA, once for the target and once for
  the draft;
- where the draft's backend comes from (`--speculative-draft-attention-backend`, else the
  target's), from the tree's own draft-backend resolver where it has one.
Every refusal is recorded with the fields its tests read (`definite` only when every test on
the way was decided); a run cut short by a limit is `incomplete`, and says so.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from eaglebug.checks.args.world import Models, World, runner, world
from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.launch.flags import (
    FIELD_DEFAULTS,
    field_defaults_in,
    flag_files,
    server_flags,
)
from eaglebug.checks.launch.serverargs import cli_renames
from eaglebug.checks.pyeval.machine import Result
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Write
from eaglebug.checks.pyeval.values import (
    FunctionSite,
    FuncVal,
    Raised,
    Top,
    is_known,
    one_of,
    truth,
)
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.facts import MISSING
from eaglebug.checks.source.index import TreeIndex

_ARGS_FILE = "sglang/srt/server_args.py"
_ARGS_CLASS = "sglang.srt.server_args.ServerArgs"
_PIPELINE = "sglang/srt/arg_groups/pipeline.py"
_REGISTRY = "sglang/srt/layers/attention/attention_registry.py"
_SPECULATIVE = "sglang/srt/speculative/"
_RUNNER = "sglang/srt/model_executor/model_runner.py"


# The launch's fields whose refusals are the attention check's (the rest are other checks').
ATTENTION_FIELDS = frozenset(
    {
        "attention_backend",
        "prefill_attention_backend",
        "decode_attention_backend",
        "speculative_draft_attention_backend",
        "speculative_attention_mode",
        "page_size",
        "speculative_eagle_topk",
    }
)


@dataclass
class Resolution:
    """One run of the tree's resolution and backend factories for one launch."""

    values: dict[str, Any]  # server-args fields after resolution
    writes: dict[str, Write]  # where each resolved field was last written
    raised: list[Raised]  # refused during resolution (before the load)
    after_load: list[tuple[str, str, Raised]] = field(
        default_factory=list
    )  # (role, backend, raise)
    draft_backend: Any = None
    draft_backend_from: str | None = None
    entry: str | None = None
    incomplete: str | None = None  # a limit the run reached (its values are then partial)
    assumed: tuple[str, ...] = ()


def field_defaults(index: TreeIndex) -> dict[str, Any]:
    """Every server-args field's literal default (dataclass fields), a tree answer."""
    return index.answer("attn_field_defaults", dict[str, Any], lambda: _field_defaults(index))


def _field_defaults(index: TreeIndex) -> dict[str, Any]:
    server_flags(index)  # the flags' pass over the same files learns each one's defaults
    out: dict[str, Any] = {}
    for rel in flag_files(index):
        found = index.recall(rel, FIELD_DEFAULTS)
        if found is MISSING:  # a default the cache could not keep: read it again
            parsed = index.parse_file(rel)
            found = field_defaults_in(parsed.tree) if parsed is not None else {}
        for name, value in found.items():
            out.setdefault(name, value)
    return out


def launch_values(index: TreeIndex, launch: LaunchSpec) -> dict[str, Any]:
    """The launch's values typed as argparse would give them, over the fields' defaults, and
    renamed as the tree's `ServerArgs.from_cli_args` renames them (0.5.9: `args.tp_size =
    args.tensor_parallel_size`). A flag a variable sets when the launch runs is unknown (a
    `Top` that says so): what rests on it is undecided, never read on its default."""
    values = dict(field_defaults(index))
    types = {spec.dest: spec.value_type for spec in server_flags(index)}
    for dest, raw in launch.values.items():
        if isinstance(raw, str) and types.get(dest) == "int":
            values[dest] = int(raw)
        elif isinstance(raw, str) and types.get(dest) == "float":
            values[dest] = float(raw)
        elif isinstance(raw, list):
            values[dest] = list(raw)
        else:
            values[dest] = raw
    for dest in launch.at_run_time:  # a variable sets it when the launch runs: unknown
        values[dest] = Top(launch.unknown(dest) or dest, frozenset({dest}))
    for field_name, dest in cli_renames(index):
        if dest in launch.values or dest in launch.at_run_time:
            values[field_name] = values[dest]
    return values


def entry(index: TreeIndex) -> FunctionSite | None:
    """Where the tree resolves its server args."""
    source = Source.of(index)
    if _PIPELINE in index.entries:
        found = source.function("sglang.srt.arg_groups.pipeline", "run_resolution_pipeline")
        if found is not None:
            return found
    if _ARGS_FILE in index.entries:
        return source.function("sglang.srt.server_args", "ServerArgs.__post_init__")
    return None


def has_resolution(index: TreeIndex) -> bool:
    """Does the tree resolve its server args where `entry` looks (a tree answer)?"""
    return index.answer("attn_has_resolution", bool, lambda: entry(index) is not None)


_CHOICE_FILES = ("sglang/srt/arg_groups/choices.py", "sglang/srt/server_args.py")
_CHOICES = "ATTENTION_BACKEND_CHOICES = ["
_NVIDIA_SECTIONS = ("nvidia", "common")


def nvidia_backends(index: TreeIndex) -> tuple[str, ...]:
    """The backends the tree lists for NVIDIA GPUs: `ATTENTION_BACKEND_CHOICES`'s "NVIDIA
    specific" section, then its "Common" one, without the deprecated aliases (a tree answer)."""
    return index.answer("attn_nvidia_backends", tuple[str, ...], lambda: _nvidia_backends(index))


def _nvidia_backends(index: TreeIndex) -> tuple[str, ...]:
    for rel in _CHOICE_FILES:
        if rel not in index.entries:
            continue
        try:
            text = (index.tree.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        start = text.find(_CHOICES)
        if start < 0:
            continue
        sections: dict[str, list[str]] = {}
        section = "common"
        for line in text[start + len(_CHOICES) :].splitlines():
            stripped = line.strip()
            if stripped.startswith("]"):
                break
            if stripped.startswith("#"):
                section = (
                    stripped.lstrip("# ").split()[0].lower() if stripped.lstrip("# ") else section
                )
                continue
            name = re.match(r'"([^"]+)"', stripped)
            if name and "deprecated" not in stripped.lower():
                sections.setdefault(section, []).append(name.group(1))
        return tuple(b for part in _NVIDIA_SECTIONS for b in sections.get(part, []))
    return ()


def registry(index: TreeIndex) -> dict[str, FunctionSite]:
    """Backend name -> its factory (`@register_attention_backend("name")`)."""
    parsed = index.parse_file(_REGISTRY) if _REGISTRY in index.entries else None
    module = _REGISTRY[:-3].replace("/", ".")
    out: dict[str, FunctionSite] = {}
    for stmt in parsed.tree.body if parsed is not None else []:
        if not isinstance(stmt, ast.FunctionDef):
            continue
        for deco in stmt.decorator_list:
            if (
                isinstance(deco, ast.Call)
                and (dotted(deco.func) or "").endswith("register_attention_backend")
                and deco.args
                and isinstance(deco.args[0], ast.Constant)
                and isinstance(deco.args[0].value, str)
            ):
                out[deco.args[0].value] = FunctionSite(_REGISTRY, module, stmt.name, stmt)
    return out


def _args_call(w: World, site: FunctionSite, args: list[Any]) -> Result:
    """Run a function of the resolution: a `ServerArgs` method on the args, or a pipeline
    function handed them."""
    if site.qualname.startswith("ServerArgs."):
        owner = w.machine.source.class_val(_ARGS_CLASS)
        return w.machine.run(FuncVal(site, owner, w.args, "method"), args, {})
    return w.machine.run(FuncVal(site), [w.args, *args], {})


def check_server_args(index: TreeIndex, resolved: dict[str, Any], models: Models) -> list[Raised]:
    """What `ServerArgs.check_server_args` (the launcher calls it after the resolution: 0.5.9
    and 0.5.23 `engine.py`) refuses for these resolved values."""
    site = Source.of(index).function("sglang.srt.server_args", "ServerArgs.check_server_args")
    if site is None:
        return []
    w = world(index, resolved, None, models, models.target_mla)
    result = _args_call(w, site, [])
    return list(result.raised)


def resolve(
    index: TreeIndex,
    values: dict[str, Any],
    capability: tuple[int, int] | None,
    models: Models,
    keep: bool = True,
) -> Resolution | None:
    """Run the tree's resolution, then its backend factories for the target and the draft.
    Once per index for the same inputs: the memory stage and the attention check of a launch
    ask for the same run (0.1-0.3 s of evaluation each on 0.5.23). `keep=False`: a run asked
    once (a value tried in place of an unknown flag), not held by the index."""
    if not keep:
        return _resolve(index, values, capability, models)
    key = json.dumps([values, capability, dataclasses.asdict(models)], sort_keys=True, default=repr)
    digest = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    return index.kept(
        f"args.resolution:{digest}", lambda: _resolve(index, values, capability, models)
    )


def _resolve(
    index: TreeIndex, values: dict[str, Any], capability: tuple[int, int] | None, models: Models
) -> Resolution | None:
    site = entry(index)
    if site is None:
        return None
    w = world(index, values, capability, models, models.target_mla)
    result = _args_call(w, site, [])
    resolved = dict(w.machine.fields(w.args))
    writes = {
        key: write for (oid, key), write in w.machine.heap.writes.items() if oid == w.args.oid
    }
    run = Resolution(
        resolved,
        writes,
        list(result.raised),
        entry=site.where,
        incomplete=result.incomplete,
        assumed=result.assumed,
    )
    if result.incomplete:
        index.warnings.append(
            f"{site.rel}: the argument resolution was not read to its end ({result.incomplete})"
        )
    factories = registry(index)
    prefill, decode = backends(resolved)
    for backend in [b for b in dict.fromkeys((prefill, decode)) if isinstance(b, str)]:
        run.after_load += _factory(
            index, resolved, capability, models, factories, backend, "target"
        )
    if values.get("speculative_algorithm") is not None and models.draft_mla is not None:
        draft, origin = _draft_backend(index, resolved, capability, models)
        run.draft_backend, run.draft_backend_from = draft, origin
        if isinstance(draft, str):
            run.after_load += _factory(
                index, resolved, capability, models, factories, draft, "draft"
            )
    return run


def auto_backend(
    index: TreeIndex,
    values: dict[str, Any],
    capability: tuple[int, int] | None,
    models: Models,
    role: str,
) -> str | None:
    """What `auto` picks for this role's model on this GPU: the tree's resolution, run with no
    backend given and the role's model as the one being served."""
    cleared = dict(values)
    for name in ("attention_backend", "prefill_attention_backend", "decode_attention_backend"):
        cleared[name] = None
    if role == "draft":
        models = Models(
            models.draft_architectures,
            (),
            models.draft_mla,
            None,
            models.draft_config or {},
            environ=models.environ,
        )
    run = resolve(index, cleared, capability, replace(models, draft_mla=None))
    picked = run.values.get("attention_backend") if run is not None else None
    return picked if isinstance(picked, str) else None


def backends(values: Mapping[str, Any]) -> tuple[Any, Any]:
    """(prefill, decode): the split fields, else the base backend (the tree's own fallback)."""
    base = values.get("attention_backend", Top("attention_backend not resolved"))
    return _or(values.get("prefill_attention_backend"), base), _or(
        values.get("decode_attention_backend"), base
    )


def _or(value: Any, fallback: Any) -> Any:
    """`value or fallback` on the reading's values (either, where its truth is not known)."""
    told = truth(value)
    if told is None:
        return one_of((value, fallback), 16)
    return value if told else fallback


def factory_raises(
    index: TreeIndex,
    resolved: Mapping[str, Any],
    capability: tuple[int, int] | None,
    models: Models,
    site: FunctionSite,
    role: str,
) -> list[Raised]:
    """What one backend's factory refuses for this role's model (definite refusals only)."""
    mla = models.draft_mla if role == "draft" else models.target_mla
    served = models
    if role == "draft":
        served = Models(models.draft_architectures, (), mla, None, models.draft_config or {})
    w = world(index, resolved, capability, served, mla)
    result = w.machine.run(FuncVal(site), [runner(w, mla)], {})
    return [raised for raised in result.raised if raised.definite]


def _factory(
    index: TreeIndex,
    resolved: dict[str, Any],
    capability: tuple[int, int] | None,
    models: Models,
    factories: dict[str, FunctionSite],
    backend: str,
    role: str,
) -> list[tuple[str, str, Raised]]:
    site = factories.get(backend)
    if site is None:
        return []
    raised = factory_raises(index, resolved, capability, models, site, role)
    return [(role, backend, r) for r in raised]


def _draft_backend(
    index: TreeIndex,
    resolved: dict[str, Any],
    capability: tuple[int, int] | None,
    models: Models,
) -> tuple[Any, str | None]:
    """The draft runner's backend, by the tree's draft-backend resolver where it has one."""
    source = Source.of(index)
    for rel in sorted(r for r in index.entries if r.startswith(_SPECULATIVE)):
        try:
            text = (index.tree.root / rel).read_bytes()
        except OSError:
            continue
        if b"def resolve_draft_worker_attention_backend" not in text:
            continue
        module = rel[:-3].replace("/", ".")
        site = source.function(module, "resolve_draft_worker_attention_backend")
        if site is not None:
            w = world(index, resolved, capability, models, models.target_mla)
            value = w.machine.run(FuncVal(site), [], {}).value
            return value, site.where
    explicit = resolved.get("speculative_draft_attention_backend")
    if isinstance(explicit, str):
        return explicit, _draft_read(index)
    return backends(resolved)[0], _draft_read(index)


def _draft_read(index: TreeIndex) -> str | None:
    """Where the model runner reads --speculative-draft-attention-backend (its file:line)."""
    parsed = index.parse_file(_RUNNER) if _RUNNER in index.entries else None
    if parsed is None:
        return None
    for number, line in enumerate(parsed.text.splitlines(), 1):
        if "speculative_draft_attention_backend" in line:
            return f"{_RUNNER}:{number}"
    return None


def known(value: Any) -> bool:
    return is_known(value)


__all__ = ["ATTENTION_FIELDS", "Models", "Resolution", "auto_backend", "backends", "resolve"]
