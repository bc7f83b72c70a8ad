"""The world a reading of SGLang's argument resolution runs in: the box, the launch, the models.

What the tree cannot say for itself is given here, each by the qualified name of what it
answers (`pyeval.intrinsics`):
- the box: an NVIDIA GPU under CUDA with flashinfer installed (SGLang's default install); the
  platform probes that test the GPU's compute capability answer from the majors the tree's
  own `partial(_check_cuda_device_version, device_capability_majors=[...])` lists;
- the resolution helpers that are proxies over the process's runtime context, which no
  static reading can follow (`resolved_view`, `resolving_view`, `record_of`: a view over the
  server args, read here as the args themselves; `declare_resolution`: the fields it
  declares are written; `run_post_process_pass`: the pass runs and its dict is declared;
  `run_hook`: the step runs; `get_exec()` / `get_spec()` / `get_server_args()`: the args;
  `model_config_of()`: the model's config object; `get_config(path)`: that checkpoint's
  config.json);
- the launch's environment (`os.environ`; the tree's own `envs.X.get()` reads it and parses
  it with its own `EnvBool.parse`).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.pyeval import brains
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Call
from eaglebug.checks.pyeval.values import (
    UNSET,
    ClassVal,
    EnumMember,
    FuncVal,
    Instance,
    Intrinsic,
    OneOf,
    Top,
    one_of,
)
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classfacts import dotted
from eaglebug.checks.source.index import TreeIndex

_PROBE_FILES = ("sglang/srt/utils/common.py", "sglang/srt/utils.py")
_PLATFORM_TABLE = "_PLATFORM_PROBES"
_UTILS = "sglang.srt.utils*"
_ENVIRON = "sglang/srt/environ.py"
# The box: an NVIDIA GPU under CUDA, with flashinfer installed (SGLang's default install).
# These describe the machine, not SGLang; the capability-gated probes are read from the tree.
MACHINE = {
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
# The runtime-context proxies of the resolution (see the module's docstring): views of the
# args that read as the args, and the getters of the published args.
_VIEWS = ("resolved_view", "resolving_view", "record_of", "ResolvedView", "ResolvingConfig")
# 0.5.9-0.5.14: the global the scheduler sets; 0.5.2x: the published runtime context, whose
# config bags (`get_exec()`, `get_spec()`, ...) are views of the same args.
_GLOBAL_ARGS = "sglang.srt.server_args.get_global_server_args"
_CONTEXT = "sglang.srt.runtime_context._CONTEXT"
_ARGS_ALIASES = frozenset({"kernel"})  # `get_exec().kernel.attention_backend`: the same fields


@dataclass(frozen=True)
class Probe:
    """A platform probe of the tree: true when the GPU's major is one of `majors`."""

    name: str
    majors: tuple[int, ...]
    where: str  # file:line


def probes(index: TreeIndex) -> tuple[Probe, ...]:
    """The tree's capability-gated platform probes (a tree answer)."""
    return index.answer("attn_probes", tuple[Probe, ...], lambda: _probes(index))


def _probes(index: TreeIndex) -> tuple[Probe, ...]:
    found: list[Probe] = []
    for rel in _PROBE_FILES:
        parsed = index.parse_file(rel) if rel in index.entries else None
        for stmt in parsed.tree.body if parsed is not None else []:
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
    for call in syntax.walk(node):
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
    parsed = index.parse_file(rel) if rel in index.entries else None
    for stmt in parsed.tree.body if parsed is not None else []:
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


def capability_probes(
    index: TreeIndex, capability: tuple[int, int] | None
) -> dict[str, bool | None]:
    """Each probe's answer on a GPU of this capability (None where the GPU is unknown)."""
    answers: dict[str, bool | None] = dict(MACHINE)
    for probe in probes(index):
        answers[probe.name] = None if capability is None else capability[0] in probe.majors
    return answers


def _is_mla(config: Mapping[str, Any] | None) -> bool | None:
    """Multi-head latent attention: the config carries a latent KV rank."""
    if config is None:
        return None
    for key in ("text_config", "language_config", "llm_config"):
        inner = config.get(key)
        if isinstance(inner, dict):
            config = inner
            break
    return "kv_lora_rank" in config and config.get("kv_lora_rank") is not None


def _archs(config: Mapping[str, Any] | None) -> tuple[str, ...]:
    archs = config.get("architectures") if config else None
    return tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()


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
    def of_launch(
        cls,
        target_config: Mapping[str, Any],
        draft_config: Mapping[str, Any] | None,
        environ: Mapping[str, str],
    ) -> Models:
        """The target and the draft as their configs say (architectures, latent attention)."""
        return cls(
            _archs(target_config),
            _archs(draft_config),
            _is_mla(target_config),
            _is_mla(draft_config),
            target_config,
            draft_config,
            environ=dict(environ or {}),
        )

    @classmethod
    def target_only(cls, config: Mapping[str, Any], environ: Mapping[str, str]) -> Models:
        """The target alone, for a run of the argument resolution that picks no backend."""
        archs = config.get("architectures")
        names = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()
        return cls(names, (), None, None, config, None, environ=dict(environ))


@dataclass
class World:
    """One run's inputs: the machine that evaluates, the server args object, and what the
    plug-ins answer for this launch."""

    machine: Machine
    args: Instance
    model: Instance
    hf: Instance
    draft_hf: Instance


def world(
    index: TreeIndex,
    values: Mapping[str, Any],
    capability: tuple[int, int] | None,
    models: Models,
    mla: bool | None,
) -> World:
    """A fresh machine over `index`, its plug-ins and inputs filled for one run (`mla`: of the
    model being served)."""
    machine = Machine(Source.of(index))
    hooks = machine.intrinsics
    brains.register_all(hooks, models.environ, capability, known=set(env_names(index)))
    args = machine.bag(
        dict(values), machine.source.class_val("sglang.srt.server_args.ServerArgs"), track=True
    )
    machine.heap.aliases[args.oid] = _ARGS_ALIASES
    config_class = ClassVal("transformers.PretrainedConfig")
    hf = machine.bag(
        {k: v for k, v in models.target_config.items() if isinstance(v, (int, float, str, bool))}
        | {"architectures": list(models.architectures)},
        config_class,
    )
    draft_hf = machine.bag({"architectures": list(models.draft_architectures)}, config_class)
    arch = machine.source.class_val("sglang.srt.configs.model_config.AttentionArch")
    model = machine.bag(
        {
            "hf_config": hf,
            "attention_arch": Top("the model's attention architecture is not known")
            if mla is None
            else EnumMember(arch, "MLA" if mla else "MHA", None),
        },
        closed=False,  # ModelConfig's other fields are computed at load time
    )
    register_platform(hooks, index, capability)
    register_resolution(hooks, args, model)
    hooks.call_in("sglang.srt*", "get_config", _get_config(args, hf, draft_hf))
    return World(machine, args, model, hf, draft_hf)


def register_platform(
    hooks: Intrinsics, index: TreeIndex, capability: tuple[int, int] | None
) -> None:
    """The box's platform: its probes (the machine's, and the capability-gated ones the
    tree lists), `get_platform()`, `current_platform`, the device's SM and capability."""
    answers = capability_probes(index, capability)
    for name, answer in answers.items():
        hooks.call_in(_UTILS, name, _answer(answer, name))
    for probe in probes(index):  # `is_sm100_supported = partial(...)`: a value, not a def
        module = probe.where.partition(":")[0][:-3].replace("/", ".")
        hooks.value(f"{module}.{probe.name}", Intrinsic(f"sglang.probe.{probe.name}"))
        hooks.call(f"sglang.probe.{probe.name}", _answer(answers[probe.name], probe.name))
    names = platform_names(index)
    platform = Intrinsic("sglang.platform")

    def platform_attribute(call: Call) -> Any:
        attr = call.args[0] if call.args else ""
        probe = names.get(str(attr))
        if probe is None:
            return UNSET  # a method of the platform: `is_out_of_tree()` below, else unknown
        return _tri(answers.get(probe), f"get_platform().{attr}")

    hooks.call("sglang.platform.__getattr__", platform_attribute)
    hooks.call_in("sglang.srt*", "get_platform", lambda call: platform)
    hooks.value("sglang.srt.platforms.current_platform", platform)  # a lazy module singleton
    hooks.call("sglang.platform.is_out_of_tree", lambda call: False)
    hooks.call_in("sglang.srt*", "get_device_sm", lambda call: _sm(capability))
    hooks.call_in(
        "sglang.srt*",
        "get_device_capability",
        lambda call: capability if capability is not None else Top("the GPU is not known"),
    )


def register_resolution(hooks: Intrinsics, args: Instance, model: Instance) -> None:
    """The runtime-context proxies of the resolution (the module's docstring), answering
    with `args` (the server args, or the memory check's flat object) and `model`."""
    for name in _VIEWS:
        hooks.call_in(
            "sglang.srt.arg_groups*", name, lambda call: call.args[0] if call.args else None
        )
    hooks.call(_GLOBAL_ARGS, lambda call: args)
    context = Intrinsic("sglang.runtime_context")
    hooks.value(_CONTEXT, context)
    hooks.call("sglang.runtime_context.config_bag", lambda call: args)
    hooks.call(
        "sglang.runtime_context.__getattr__",
        lambda call: args if call.args and call.args[0] == "server_args" else UNSET,
    )
    hooks.call_in("sglang.srt.arg_groups*", "model_config_of", lambda call: model)
    hooks.call_in("sglang.srt*", "get_model_config", lambda call: model)
    hooks.call_in("sglang.srt.arg_groups*", "declare_resolution", _declare(args))
    hooks.call_in("sglang.srt.arg_groups*", "run_post_process_pass", _post_process(args))
    hooks.call_in("sglang.srt.arg_groups*", "run_hook", _run_hook)


def runner(w: World, mla: bool | None) -> Instance:
    """The model runner an attention backend's factory is handed."""
    return w.machine.bag(
        {
            "model_config": w.model,
            "server_args": w.args,
            "use_mla_backend": mla if mla is not None else Top("MLA not known"),
        }
    )


def _answer(answer: bool | None, name: str) -> Any:
    return lambda call: _tri(answer, f"{name}()")


def _tri(value: bool | None, what: str) -> Any:
    return Top(f"{what}: the GPU is not known") if value is None else value


def _sm(capability: tuple[int, int] | None) -> Any:
    if capability is None:
        return Top("the GPU is not known")
    return capability[0] * 10 + capability[1]


def _declare(args: Instance) -> Any:
    def declare(call: Call) -> Any:
        target = call.args[0] if call.args else None
        if not _is(target, args):
            return Top(f"{call.where}: declare_resolution on another object")
        for key, value in call.kwargs.items():
            call.machine.write(args, key, value, call.frame.rel if call.frame else "", _line(call))
        return None

    return declare


def _post_process(args: Instance) -> Any:
    """`run_post_process_pass(args, fn)`: `fn(view)` returns the fields it declares; where
    the pass's paths return different dicts, a field only some paths set may keep its value."""

    def run(call: Call) -> Any:
        if len(call.args) < 2 or not isinstance(call.args[1], FuncVal):
            return Top(f"{call.where}: a post-process pass not known")
        fn = call.args[1]
        m = call.machine
        result = m.invoke(fn, [call.args[0]], {})
        node = m.source.node_of(fn.site)
        line = node.lineno if node is not None else fn.site.line
        choices = result.values if isinstance(result, OneOf) else (result,)
        if all(isinstance(c, dict) for c in choices):
            keys = dict.fromkeys(k for c in choices for k in c)
            for key in keys:
                if not isinstance(key, str):
                    continue
                before = m.fields(args).get(key, Top(f"{key} not set"))
                values = [c.get(key, before) for c in choices]
                m.write(args, key, one_of(values, m.budget.alternatives), fn.site.rel, line)
        elif isinstance(result, Top):
            for key in _dict_keys(node) if node is not None else []:
                m.write(args, key, Top(f"{fn.site.where}: the pass's result"), fn.site.rel, line)
        return None

    return run


def _run_hook(call: Call) -> Any:
    step = call.args[0] if call.args else None
    if not isinstance(step, FuncVal):
        return Top(f"{call.where}: a hook not known")
    return call.machine.invoke(step, call.args[1:], call.kwargs)


def _get_config(args: Instance, hf: Instance, draft_hf: Instance) -> Any:
    """`get_config(path)`: the target's or the draft's config.json, by the path given. The
    target's first: a draft path that is the model path (0.5.3 sets it so for DeepSeek MTP
    before it asks `get_hf_config()` for the architecture) is the same config.json."""

    def get(call: Call) -> Any:
        path = call.args[0] if call.args else call.kwargs.get("model")
        fields = call.machine.fields(args)
        if isinstance(path, str) and path == fields.get("model_path"):
            return hf
        if isinstance(path, str) and path == fields.get("speculative_draft_model_path"):
            return draft_hf
        return Top(f"{call.where}: the config of {path!r}")

    return get


def _is(value: Any, obj: Instance) -> bool:
    return isinstance(value, Instance) and value.oid == obj.oid


def _line(call: Call) -> int:
    return call.node.lineno if call.node is not None else 0


def _dict_keys(fn: ast.AST) -> list[str]:
    """The keys a post-process function may return, for when its result is undecided."""
    out: list[str] = []
    for node in syntax.walk(fn):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            for key in node.value.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    out.append(key.value)
    return list(dict.fromkeys(out))


def env_names(index: TreeIndex) -> tuple[str, ...]:
    """The variables the tree's `Envs` declares (`environ.py`): what `envs.X.get()` can read."""
    return index.answer("attn_env_names", tuple[str, ...], lambda: _env_names(index))


def _env_names(index: TreeIndex) -> tuple[str, ...]:
    parsed = index.parse_file(_ENVIRON) if _ENVIRON in index.entries else None
    names: list[str] = []
    for cls in parsed.tree.body if parsed is not None else []:
        if isinstance(cls, ast.ClassDef) and cls.name == "Envs":
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign):
                    names += [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    return tuple(names)


def declared_env(index: TreeIndex, environ: Mapping[str, str] | None) -> dict[str, str]:
    """The `SGLANG_*` variables of `environ` that the tree declares (what its run can read)."""
    read = {name: (environ or {}).get(name) for name in env_names(index)}
    return {name: value for name, value in read.items() if value is not None}
