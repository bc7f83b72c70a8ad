"""What the audited SGLang tree decides about attention for one launch, read from its source.

Three places, each found in the tree by the name SGLang gives it and run with
`treeinterp.Interpreter` (never imported):
- the argument resolution, before anything loads: `run_resolution_pipeline` (sglang >= 0.5.2x,
  `arg_groups/pipeline.py`) or `ServerArgs.__post_init__` (older `server_args.py`). It picks
  the `auto` backend for the GPU and the model (`get_default_attn_backend` or the branch of
  `_handle_attention_backend_compatibility`), snaps the page size to what a backend takes,
  chooses the speculative top-k, and raises on combinations it refuses (the speculative
  handlers: `speculative_hook.py` or `_handle_speculative_decoding`);
- the attention backend factories (`@register_attention_backend("fa3")` in
  `attention_registry.py`), which run after the model is loaded and assert on the GPU's
  compute capability and on MLA vs MHA, once for the target and once for the draft;
- where the draft's backend comes from (`--speculative-draft-attention-backend`, else the
  target's), from the tree's own draft-backend resolver where it has one.

The machine's facts come from the tree too: which compute-capability majors each platform
probe (`is_sm100_supported`, `is_hopper_with_cuda_12_3`, ...) accepts is read from
`utils/common.py`'s `partial(_check_cuda_device_version, device_capability_majors=[...])`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from eaglebug.checks.launch.command import LaunchSpec
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.launch.serverargs import cli_renames, server_args_method
from eaglebug.checks.pyeval.treeinterp import Interpreter
from eaglebug.checks.pyeval.treevalues import (
    ARGS,
    UNKNOWN,
    FuncRef,
    OneOf,
    Raised,
    Sentinel,
    World,
    Write,
)
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex

_FIELD_FILES = ("sglang/srt/server_args.py",)
_FIELD_FOLDERS = ("sglang/srt/arg_groups/",)
_PROBE_FILES = ("sglang/srt/utils/common.py", "sglang/srt/utils.py")
_REGISTRY = "sglang/srt/layers/attention/attention_registry.py"
_PLATFORM_TABLE = "_PLATFORM_PROBES"
# The machine: an NVIDIA GPU under CUDA, with flashinfer installed (SGLang's default install).
# These describe the box, not SGLang; the capability-gated probes are read from the tree.
_MACHINE = {
    "is_cuda": True,
    "is_cuda_alike": True,
    "is_hip": False,
    "is_npu": False,
    "is_xpu": False,
    "is_musa": False,
    "is_mps": False,
    "is_cpu": False,
    "is_hpu": False,
    "is_flashinfer_available": True,
    "cpu_has_amx_support": False,
    "xpu_has_xmx_support": False,
    "use_mlx": False,
}


@dataclass(frozen=True)
class Probe:
    """A platform probe of the tree: true when the GPU's major is one of `majors`."""

    name: str
    majors: tuple[int, ...]
    where: str  # file:line


@dataclass
class Resolution:
    """One run of the tree's resolution and backend factories for one launch."""

    values: dict[str, Any]  # server-args fields after resolution
    writes: dict[str, Write]  # where each resolved field was last written
    raised: list[Raised]  # refused during resolution (before the load)
    after_load: list[tuple[str, str, Raised]] = field(
        default_factory=list
    )  # (role, backend, raise)
    draft_backend: Any = UNKNOWN
    draft_backend_from: str | None = None
    entry: str | None = None


def probes(index: TreeIndex) -> tuple[Probe, ...]:
    """The tree's capability-gated platform probes (a tree answer)."""
    return index.answer("attn_probes", tuple[Probe, ...], lambda: _probes(index))


def _probes(index: TreeIndex) -> tuple[Probe, ...]:
    found: list[Probe] = []
    for rel in _PROBE_FILES:
        if rel not in index.entries:
            continue
        parsed = index.parse_file(rel)
        if parsed is None:
            continue
        for stmt in parsed.tree.body:
            if not isinstance(stmt, ast.Assign):
                continue
            majors = _partial_majors(stmt.value)
            if majors is None:
                continue
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    found.append(Probe(target.id, majors, f"{rel}:{stmt.lineno}"))
    return tuple(found)


def _partial_majors(node: ast.expr) -> tuple[int, ...] | None:
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and (dotted(call.func) or "").endswith("partial"):
            for kw in call.keywords:
                if kw.arg == "device_capability_majors":
                    try:
                        value = ast.literal_eval(kw.value)
                    except ValueError:
                        return None
                    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
                        return tuple(value)
    return None


def platform_names(index: TreeIndex) -> dict[str, str]:
    """`get_platform().is_sm100` -> the probe it calls (`_PLATFORM_PROBES`, sglang >= 0.5.2x)."""
    return index.answer("attn_platform_names", dict[str, str], lambda: _platform_names(index))


def _platform_names(index: TreeIndex) -> dict[str, str]:
    rel = "sglang/srt/runtime_context.py"
    if rel not in index.entries:
        return {}
    parsed = index.parse_file(rel)
    if parsed is None:
        return {}
    for stmt in parsed.tree.body:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(isinstance(t, ast.Name) and t.id == _PLATFORM_TABLE for t in targets):
            try:
                table = ast.literal_eval(stmt.value)
            except ValueError:
                return {}
            return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else {}
    return {}


def field_defaults(index: TreeIndex) -> dict[str, Any]:
    """Every server-args field's literal default (dataclass fields), a tree answer."""
    return index.answer("attn_field_defaults", dict[str, Any], lambda: _field_defaults(index))


def _field_defaults(index: TreeIndex) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rel in index.entries:
        if rel not in _FIELD_FILES and not rel.startswith(_FIELD_FOLDERS):
            continue
        parsed = index.parse_file(rel)
        if parsed is None or "class " not in parsed.text:
            continue
        for cls in (n for n in ast.walk(parsed.tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.value is not None
                ):
                    try:
                        value = ast.literal_eval(stmt.value)
                    except (ValueError, SyntaxError, TypeError):
                        continue
                    out.setdefault(
                        stmt.target.id, tuple(value) if isinstance(value, list) else value
                    )
    return out


def capability_probes(
    index: TreeIndex, capability: tuple[int, int] | None
) -> dict[str, bool | None]:
    """Each probe's answer on a GPU of this capability (None where the GPU is unknown)."""
    answers: dict[str, bool | None] = dict(_MACHINE)
    for probe in probes(index):
        answers[probe.name] = None if capability is None else capability[0] in probe.majors
    return answers


def launch_values(index: TreeIndex, launch: LaunchSpec) -> dict[str, Any]:
    """The launch's values typed as argparse would give them, over the fields' defaults, and
    renamed as the tree's `ServerArgs.from_cli_args` renames them (0.5.9: `args.tp_size =
    args.tensor_parallel_size`)."""
    values = dict(field_defaults(index))
    types = {spec.dest: spec.value_type for spec in server_flags(index)}
    for dest, raw in launch.values.items():
        if isinstance(raw, str) and types.get(dest) == "int":
            values[dest] = int(raw)
        elif isinstance(raw, str) and types.get(dest) == "float":
            values[dest] = float(raw)
        elif isinstance(raw, list):
            values[dest] = tuple(raw)
        else:
            values[dest] = raw
    for field_name, dest in cli_renames(index):
        if dest in launch.values:
            values[field_name] = values[dest]
    return values


def declared_env(index: TreeIndex, environ: Mapping[str, str] | None) -> dict[str, str]:
    """The `SGLANG_*` variables of `environ` that the tree declares (what its run can read)."""
    read = {name: (environ or {}).get(name) for name in env_names(index)}
    return {name: value for name, value in read.items() if value is not None}


def has_resolution(index: TreeIndex) -> bool:
    """Does the tree resolve its server args where `entry` looks (a tree answer)?"""
    return index.answer("attn_has_resolution", bool, lambda: entry(index) is not None)


def env_names(index: TreeIndex) -> tuple[str, ...]:
    """The variables the tree's `Envs` declares (`environ.py`): what `envs.X.get()` can read."""
    return index.answer("attn_env_names", tuple[str, ...], lambda: _env_names(index))


def _env_names(index: TreeIndex) -> tuple[str, ...]:
    rel = "sglang/srt/environ.py"
    parsed = index.parse_file(rel) if rel in index.entries else None
    if parsed is None:
        return ()
    names: list[str] = []
    for cls in parsed.tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Envs":
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign):
                    names += [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    return tuple(names)


def entry(index: TreeIndex) -> tuple[FuncRef, tuple[str, str]] | None:
    """Where the tree resolves its server args, and the ServerArgs class `self.x()` reaches."""
    args_rel = "sglang/srt/server_args.py"
    parsed = index.parse_file(args_rel) if args_rel in index.entries else None
    if parsed is None:
        return None
    args_class = (args_rel, "ServerArgs")
    pipeline = "sglang/srt/arg_groups/pipeline.py"
    if pipeline in index.entries:
        tree = index.parse_file(pipeline)
        if tree is not None:
            for stmt in tree.tree.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "run_resolution_pipeline":
                    return FuncRef(pipeline, "sglang.srt.arg_groups.pipeline", stmt), args_class
    for cls in parsed.tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "ServerArgs":
            for stmt in cls.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "__post_init__":
                    return FuncRef(
                        args_rel, "sglang.srt.server_args", stmt, "ServerArgs"
                    ), args_class
    return None


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


def registry(index: TreeIndex) -> dict[str, FuncRef]:
    """Backend name -> its factory (`@register_attention_backend("name")`)."""
    if _REGISTRY not in index.entries:
        return {}
    parsed = index.parse_file(_REGISTRY)
    if parsed is None:
        return {}
    module = _REGISTRY[:-3].replace("/", ".")
    out: dict[str, FuncRef] = {}
    for stmt in parsed.tree.body:
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
                out[deco.args[0].value] = FuncRef(_REGISTRY, module, stmt)
    return out


@dataclass(frozen=True)
class Models:
    """What the launch serves (target and draft, as their configs say) and the environment the
    server's process sees (`envs.SGLANG_*.get()` reads it)."""

    architectures: tuple[str, ...]
    draft_architectures: tuple[str, ...]
    target_mla: bool | None
    draft_mla: bool | None
    target_config: Mapping[str, Any]
    draft_config: Mapping[str, Any] | None = None
    environ: Mapping[str, str] = field(default_factory=dict)  # the server's environment

    @classmethod
    def target_only(cls, config: Mapping[str, Any], environ: Mapping[str, str]) -> Models:
        """The target alone, for a run of the argument resolution that picks no backend."""
        archs = config.get("architectures")
        names = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()
        return cls(names, (), None, None, config, None, environ=dict(environ))


def _world(
    index: TreeIndex, values: dict[str, Any], capability: tuple[int, int] | None, models: Models
) -> World:
    return World(
        values=values,
        probes=capability_probes(index, capability),
        capability=capability,
        platform_names=platform_names(index),
        architectures=models.architectures,
        draft_architectures=models.draft_architectures,
        mla=models.target_mla,
        environ=dict(models.environ),
        config={
            k: v for k, v in models.target_config.items() if isinstance(v, (int, float, str, bool))
        },
    )


def check_server_args(index: TreeIndex, resolved: dict[str, Any], models: Models) -> list[Raised]:
    """What `ServerArgs.check_server_args` (the launcher calls it after the resolution: 0.5.9
    and 0.5.23 `engine.py`) refuses for these resolved values."""
    method = server_args_method(index, "check_server_args")
    if method is None:
        return []
    args_class = ("sglang/srt/server_args.py", "ServerArgs")
    run = Interpreter(index, _world(index, dict(resolved), None, models), args_class)
    ref = FuncRef(args_class[0], "sglang.srt.server_args", method, "ServerArgs")
    try:
        run.call(ref, [], {})
    except RecursionError:
        return []
    return list(run.raised)


def resolve(
    index: TreeIndex, values: dict[str, Any], capability: tuple[int, int] | None, models: Models
) -> Resolution | None:
    """Run the tree's resolution, then its backend factories for the target and the draft."""
    found = entry(index)
    if found is None:
        return None
    ref, args_class = found
    world = _world(index, values, capability, models)
    run = Interpreter(index, world, args_class)
    try:
        run.call(ref, [ARGS] if ref.owner is None else [], {})
    except RecursionError:  # an expression nested past Python's stack: say so, check nothing
        index.warnings.append(
            f"{ref.rel}: the argument resolution nests too deep to follow; attention rules skipped"
        )
        return None
    resolved = run.state.fields
    result = Resolution(
        resolved, run.state.writes, run.raised, entry=f"{ref.rel}:{ref.node.lineno}"
    )
    factories = registry(index)
    prefill, decode = _backends(resolved)
    target_backends = [b for b in dict.fromkeys((prefill, decode)) if isinstance(b, str)]
    for backend in target_backends:
        result.after_load += _factory(
            index, world, args_class, resolved, factories, backend, "target"
        )
    if values.get("speculative_algorithm") is not None and models.draft_mla is not None:
        draft, origin = _draft_backend(index, world, args_class, resolved)
        result.draft_backend, result.draft_backend_from = draft, origin
        if isinstance(draft, str):
            draft_world = replace(world, mla=models.draft_mla)
            result.after_load += _factory(
                index, draft_world, args_class, resolved, factories, draft, "draft"
            )
    return result


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


def _backends(values: Mapping[str, Any]) -> tuple[Any, Any]:
    """(prefill, decode): the split fields, else the base backend (the tree's own fallback)."""
    base = values.get("attention_backend", UNKNOWN)
    prefill = values.get("prefill_attention_backend") or base
    decode = values.get("decode_attention_backend") or base
    return prefill, decode


def _factory(
    index: TreeIndex,
    world: World,
    args_class: tuple[str, str],
    resolved: dict[str, Any],
    factories: dict[str, FuncRef],
    backend: str,
    role: str,
) -> list[tuple[str, str, Raised]]:
    ref = factories.get(backend)
    if ref is None:
        return []
    run = Interpreter(index, replace(world, values=resolved), args_class)
    run.call(ref, [Sentinel("runner")], {})
    return [(role, backend, raised) for raised in run.raised if raised.definite]


def _draft_backend(
    index: TreeIndex, world: World, args_class: tuple[str, str], resolved: dict[str, Any]
) -> tuple[Any, str | None]:
    """The draft runner's backend, by the tree's draft-backend resolver where it has one."""
    for rel in index.entries:
        if not rel.startswith("sglang/srt/speculative/"):
            continue
        try:
            text = (index.tree.root / rel).read_bytes()
        except OSError:
            continue
        if b"def resolve_draft_worker_attention_backend" not in text:
            continue
        parsed = index.parse_file(rel)
        if parsed is None:
            continue
        for stmt in parsed.tree.body:
            if (
                isinstance(stmt, ast.FunctionDef)
                and stmt.name == "resolve_draft_worker_attention_backend"
            ):
                run = Interpreter(index, replace(world, values=resolved), args_class)
                value = run.call(FuncRef(rel, rel[:-3].replace("/", "."), stmt), [], {})
                return value, f"{rel}:{stmt.lineno}"
    explicit = resolved.get("speculative_draft_attention_backend")
    if isinstance(explicit, str):
        return explicit, _draft_read(index)
    return _backends(resolved)[0], _draft_read(index)


def _draft_read(index: TreeIndex) -> str | None:
    """Where the model runner reads --speculative-draft-attention-backend (its file:line)."""
    rel = "sglang/srt/model_executor/model_runner.py"
    if rel not in index.entries:
        return None
    parsed = index.parse_file(rel)
    if parsed is None:
        return None
    for number, line in enumerate(parsed.text.splitlines(), 1):
        if "speculative_draft_attention_backend" in line:
            return f"{rel}:{number}"
    return None


def known(value: Any) -> bool:
    return value is not UNKNOWN and not isinstance(value, OneOf)
