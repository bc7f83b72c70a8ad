"""Where the audited tree keeps its memory arithmetic, found by anchors and kept per tree.

The anchors are SGLang's own names: the function that picks the default
`--mem-fraction-static` (`_handle_gpu_memory_settings`, a `ServerArgs` method in 0.5.9 and
0.5.14, `handle_gpu_memory_settings` in `arg_groups/memory_hook.py` from 0.5.22), the one
that turns free memory into the KV budget (`profile_max_num_token` in 0.5.9,
`_profile_available_bytes` later), the cell size (`get_cell_size_per_token`, then
`DefaultPoolConfigurator._compute_cell_size`) and the request limit (`init_memory_pool`, then
`resolve_max_num_reqs`). What those functions say is not copied: where they are is kept as a
tree answer, and `memory/reading.py` runs them, from the tree, on each launch. A release where
an anchor is missing has no such rule, and the findings say so.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from eaglebug.checks.memory import startup
from eaglebug.checks.memory.defaults import (
    constructor_defaults,
    field_defaults,
    server_defaults,
)
from eaglebug.checks.memory.reading import evaluate
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import is_known
from eaglebug.checks.source import syntax
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex, parsed_with
from eaglebug.checks.source.initfacts import self_assignment

# The files that hold the arithmetic in the releases read so far; a release that moves it
# elsewhere shows up as a missing anchor in the finding, not as a wrong number.
_FILES = frozenset(
    {
        "server_args.py",
        "memory_hook.py",
        "cuda_graph_hook.py",
        "kv_cache_configurator.py",
        "pool_configurator.py",
        "model_runner_kv_cache_mixin.py",
        "model_runner.py",
        # The attention layout the pools are sized for (DP attention): the tree's own
        # resolution of `--dp-size N --enable-dp-attention` and its attention-TP width.
        "dp_attention.py",
        "runtime_context.py",
        "parallel_hook.py",
        "model_override_base.py",
        # The model-config predicates the pools branch on (DSA / NSA, hybrid layers).
        "configs/model_config.py",
        "layers/cp/utils.py",
        # The hybrid (mamba / linear-attention) predicates the pools branch on (0.5.23; 0.5.9
        # has them as `ModelRunner` properties).
        "configs/hybrid_arch.py",
    }
)
# The hybrid predicates that are `ModelRunner` properties, kept whole from model_runner.py:
# 0.5.9's `mambaish_config` (`self.mamba2_config or self.hybrid_gdn_config or ...`), 0.5.3's
# `is_hybrid_gdn` (the architecture among a list).
_RUNNER_PROPERTY = re.compile(r"_config$|^is_hybrid_")
# Where a release sets the runner's request limit outside a function of its own (0.5.9:
# `self.max_running_requests = min(...)` in `ModelRunner.initialize`): the expression is kept.
REQUEST_LIMIT = "=max_running_requests"
# The runner's own DP width where it sets one (0.5.9, 0.5.14: `self.dp_size = server_args.dp_size
# if server_args.enable_dp_attention else 1` in `ModelRunner.__init__`), which the runner's
# request limit divides by, not the server's `--dp-size`.
RUNNER_DP = "=dp_size"
# The runner's rewrites of its model config (0.5.7's `load_model`: `self.model_config.
# full_attention_layer_ids = full_attention_layer_ids`, the layers of its own slice that the
# config lists): kept as `=model_config.<field>`, the expression of the local it assigns.
CONFIG_REWRITE = "=model_config."
_POST_INIT = "ServerArgs.__post_init__"
# Where the tree keeps its model config, for a release none of whose memory functions live there
# (0.4.x): its methods (`get_num_kv_heads`) run on the store's `model_config`.
_MODEL_CONFIG = "sglang.srt.configs.model_config.ModelConfig"
_FRACTION_SET = "self.mem_fraction_static ="
_KV_DTYPE_SET = "self.kv_cache_dtype ="
_ATTRIBUTE = re.compile(r"\.(\w+)\b")
_ENV_NAME = re.compile(r"""["'](SGLANG_[A-Z0-9_]+)["']""")
# Words a file must contain to be parsed at all (a byte-level prefilter).
_WORD_TEXTS = (
    "reserved_mem",
    "rest_memory",
    "cell_size",
    "max_num_reqs",
    "self.max_running_requests = min(",
    "attn_tp_size",
    "attn_dp_size",
    "index_topk",
    "mambaish_config",
    "self.mem_fraction_static = ",  # 0.4.x: the fraction set in `__post_init__`
)
ANCHORS: dict[str, tuple[str, ...]] = {
    # Before 0.5.3 the default fraction is set inline in `ServerArgs.__post_init__` (a table
    # by --tp until 0.4.6, the GPU's memory less a reserve from 0.4.7).
    "fraction": ("handle_gpu_memory_settings", "_handle_gpu_memory_settings", _POST_INIT),
    "budget": ("_profile_available_bytes", "profile_max_num_token"),
    "cell": ("DefaultPoolConfigurator._compute_cell_size", "get_cell_size_per_token"),
    "draft_cell": ("DefaultPoolConfigurator.__init__",),
    "requests": ("resolve_max_num_reqs", "_resolve_max_num_reqs", "init_memory_pool"),
    # DP attention: the attention-TP width (both releases), and the resolution that turns
    # `--dp-size N --enable-dp-attention` into `attn_dp_size` (0.5.22 on).
    "attention_layout": ("compute_dp_attention_world_info",),
    "dp_resolution": ("handle_deprecated_dp_attention",),
}


# Evaluated directly, not only through the anchors' calls.
_ALSO = (
    "DefaultPoolConfigurator.calculate_pool_sizes",
    "DefaultPoolConfigurator.__init__",
    "_apply_token_constraints",
    "get_cell_size_per_token",
    "init_memory_pool",
    "profile_max_num_token",
    "_profile_available_bytes",
    "resolve_max_num_reqs",
    "_resolve_max_num_reqs",
    "attn_dp_enabled_of",
    # The model config's own derivation of the pools' layer split (hybrid SWA models) and the
    # configurator the tree picks for it (0.5.23).
    "ModelConfig._derive_hybrid_model",
    "ModelConfig._derive_model_shapes",
    "ModelConfig._get_sliding_window_size",
    "create_memory_pool_configurator",
    # The hybrid model's predicates, read for the finding and the runner's copies.
    "mambaish_config",
    "hybrid_gdn_config",
    "hybrid_kda_config",
)


@dataclass(frozen=True)
class FunctionSource:
    """One function's text as the tree has it, with its place (for `file:line`)."""

    qualname: str
    file: str
    line: int
    text: str


@dataclass(frozen=True)
class MemorySources:
    functions: tuple[FunctionSource, ...]
    entries: dict[str, str]  # rule -> qualname of the anchor found ("" when none)
    defaults: dict[str, object] = field(default_factory=dict)  # ServerArgs' field defaults
    # The CUDA-graph backends the fraction's hook compares with (`Backend.FULL` /
    # `Backend.DISABLED` of 0.5.23's cuda_graph_config), by member name.
    graph_backends: dict[str, object] = field(default_factory=dict)
    model_config_class: str = ""  # the tree's ModelConfig (qualified), whose methods run
    # Does a function read here set the runner's KV dtype from `server_args.kv_cache_dtype`
    # itself (`init_memory_pool` before 0.5.7)? Then the store holds the flag's string, and
    # the tree's own code turns it into torch's dtype.
    derives_kv_dtype: bool = False
    # The runner's copies of its model config's fields (`self.dtype = self.model_config.dtype`,
    # `self.is_hybrid = model_config.is_hybrid`): runner field -> model-config field. The flat
    # store holds the server args under the same names (`dtype` is the flag's "auto"), so the
    # runner's reading takes these from the model config.
    runner_copies: dict[str, str] = field(default_factory=dict)
    # The SGLANG_ variables the memory functions' modules name (`SGLANG_CI_SMALL_KV_SIZE =
    # os.getenv(...)` in 0.5.6's model_runner.py): the tree's own, whether or not its Envs
    # declares them, so the launch's environment answers for them.
    env_read: tuple[str, ...] = ()


def memory_sources(index: TreeIndex) -> MemorySources:
    """The memory functions of this tree (a tree answer: read once per state of the tree)."""
    return index.answer("memory_sources", MemorySources, lambda: _memory_sources(index))


def _memory_sources(index: TreeIndex) -> MemorySources:
    found: list[FunctionSource] = []
    start_up: list[tuple[FunctionSource, list[str]]] = []  # `_startup`, kept where read
    runner: dict[str, object] = {}
    copies: dict[str, str] = {}
    env_read: set[str] = set()
    runner_defs: list[tuple[FunctionSource, set[str]]] = []
    calls: dict[str, set[str]] = {}
    fields: dict[str, dict[str, object]] = {}  # class -> its `name: T = literal` defaults
    always: set[str] = set()  # kept whether or not an anchor reaches them (0.5.9's hybrid
    # predicates, read for the finding)
    for rel in sorted(index.entries):
        if not rel.startswith("sglang/srt/") or not _wanted(rel):
            continue
        parsed = parsed_with(index, rel, *_WORD_TEXTS)
        if parsed is None:
            continue
        lines = parsed.text.splitlines(keepends=True)
        env_read.update(_ENV_NAME.findall(parsed.text))
        if rel.endswith("/model_runner.py"):
            runner = constructor_defaults(parsed.tree, "ModelRunner")
            copies = _runner_copies(parsed.tree)
            found.extend(_kept_assignments(parsed.tree, rel, parsed.text))
            rewrites = _config_rewrites(parsed.tree, rel, parsed.text)
            found.extend(rewrites)
            always.update(f.qualname for f in rewrites)
            start_up = _startup(parsed.tree, rel, lines)
            properties = _runner_properties(parsed.tree, rel, lines)
            found.extend(properties)
            always.update(f.qualname for f in properties)
            # Before 0.5.7 the runner's own methods hold the arithmetic
            # (`ModelRunner.profile_max_num_token`, `init_memory_pool`): read where no other
            # file holds the budget (below), and kept where an anchor reaches them.
            for qualname, node in _defs(parsed.tree):
                if qualname.startswith("ModelRunner.") and qualname not in always:
                    runner_defs.append((_source(qualname, node, rel, lines), _calls(node)))
            continue
        fields.update(field_defaults(parsed.tree))
        for qualname, node in _defs(parsed.tree):
            found.append(_source(qualname, node, rel, lines))
            calls[qualname] = _calls(node)
    plain = {f.qualname.rsplit(".", 1)[-1] for f in found}
    if not plain & set(ANCHORS["budget"]):  # the runner itself sizes the pool (before 0.5.7)
        for source, called in runner_defs:
            found.append(source)
            calls[source.qualname] = called
    names = {f.qualname for f in found} | {f.qualname.rsplit(".", 1)[-1] for f in found}
    if not any(f.qualname == _POST_INIT and _FRACTION_SET in f.text for f in found):
        names.discard(_POST_INIT)  # a resolution that sets no fraction is not its anchor
    entries = {
        rule: next((a for a in anchors if a in names), "") for rule, anchors in ANCHORS.items()
    }
    kept = _reachable(found, calls, [e for e in entries.values() if e] + list(_ALSO))
    kept.update({REQUEST_LIMIT, RUNNER_DP} | always)
    functions = [f for f in found if f.qualname in kept]
    read = set(_ATTRIBUTE.findall("\n".join(f.text for f in functions)))
    functions += [source for source, fields in start_up if read.intersection(fields)]
    defaults = server_defaults(index)
    for name, value in runner.items():  # the target's runner and model config: what its
        # worker leaves unset
        defaults.setdefault(name, value)
    for owner in sorted({f.qualname.rsplit(".", 1)[0] for f in functions if "." in f.qualname}):
        for name, value in fields.get(owner, {}).items():  # the flat self's field defaults
            defaults.setdefault(name, value)
    model_config = next(
        (
            f"{module_name(f.file)[0]}.ModelConfig"
            for f in functions
            if f.qualname.startswith("ModelConfig.")
        ),
        _MODEL_CONFIG if index.classes.cls(_MODEL_CONFIG) is not None else "",
    )
    ref = index.classes.cls(model_config) if model_config else None
    parsed = index.parse_file(ref.file) if ref is not None else None
    for name, value in constructor_defaults(parsed.tree, "ModelConfig").items() if parsed else ():
        defaults.setdefault(f"model_config.{name}", value)  # `is_draft_model=False`
    return MemorySources(
        tuple(functions),
        entries,
        defaults,
        _graph_backends(index, entries.get("fraction", ""), functions),
        model_config,
        any(
            _KV_DTYPE_SET in f.text
            for f in functions
            if f.qualname.rsplit(".", 1)[-1] in {entries["budget"], entries["requests"]}
        ),
        copies,
        tuple(sorted(env_read)),
    )


def _graph_backends(
    index: TreeIndex, anchor: str, functions: list[FunctionSource]
) -> dict[str, object]:
    """`Backend.FULL` / `Backend.DISABLED` as the memory functions' modules import them (the
    tree's cuda_graph_config; an older tree has none): what `cuda_graph_config.*.backend`
    holds for a launch with, and without, CUDA graphs."""
    machine = Machine(Source.of(index))
    for rel in dict.fromkeys(f.file for f in functions):
        module, _ = module_name(rel)
        facts = index.module(module)
        if facts is None or "Backend" not in facts.imports:
            continue
        out: dict[str, object] = {}
        for member in ("FULL", "DISABLED"):
            node = ast.parse(f"Backend.{member}", mode="eval").body
            made = machine.evaluate(node, module).value
            if is_known(made):
                out[member] = made
        if out:
            return out
    return {}


def kept_expression(
    index: TreeIndex, sources: MemorySources, qualname: str, values: dict[str, object]
) -> object:
    """One of the kept `self.x = <expr>` lines (`REQUEST_LIMIT`, `RUNNER_DP`) evaluated on
    `values`; None when the tree has no such line, it does not parse, or is not known."""
    source = next((f for f in sources.functions if f.qualname == qualname), None)
    if source is None:
        return None
    try:
        node = ast.parse(source.text.strip(), mode="eval").body
    except SyntaxError:
        return None
    ast.increment_lineno(node, source.line - 1)
    return evaluate(index, source.file, node, values)


def _wanted(rel: str) -> bool:
    """A file named in `_FILES`, by its name or by its path's tail."""
    return rel.rsplit("/", 1)[-1] in _FILES or any(
        "/" in name and rel.endswith("/" + name) for name in _FILES
    )


def _kept_assignments(tree: ast.Module, rel: str, text: str) -> list[FunctionSource]:
    """`self.max_running_requests = <call>` and `self.dp_size = <expr>` (the first of each),
    as their expressions' text."""
    wanted = {"max_running_requests": REQUEST_LIMIT, "dp_size": RUNNER_DP}
    out: dict[str, FunctionSource] = {}
    for node in syntax.statements(tree):
        if not isinstance(node, ast.Assign):
            continue
        attr = self_assignment(node)
        if attr is None or attr not in wanted or attr in out:
            continue
        if attr == "max_running_requests" and not isinstance(node.value, ast.Call):
            continue
        segment = ast.get_source_segment(text, node.value)
        if segment:
            out[attr] = FunctionSource(wanted[attr], rel, node.value.lineno, segment)
    return list(out.values())


def _config_rewrites(tree: ast.Module, rel: str, text: str) -> list[FunctionSource]:
    """`self.model_config.<field> = <local>` in a `ModelRunner` method, where the method
    assigned `<local>` before: the local's expression, as `=model_config.<field>`."""
    out: dict[str, FunctionSource] = {}
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "ModelRunner"):
            continue
        for function in cls.body:
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            locals_: dict[str, ast.expr] = {}
            for node in syntax.statements(function):
                if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                    continue
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    locals_.setdefault(target.id, node.value)
                elif (
                    isinstance(target, ast.Attribute)
                    and ast.unparse(target.value) == "self.model_config"
                    and isinstance(node.value, ast.Name)
                    and node.value.id in locals_
                ):
                    value = locals_[node.value.id]
                    segment = ast.get_source_segment(text, value)
                    if segment:
                        name = CONFIG_REWRITE + target.attr
                        out.setdefault(name, FunctionSource(name, rel, value.lineno, segment))
    return list(out.values())


def _source(qualname: str, node: ast.FunctionDef, rel: str, lines: list[str]) -> FunctionSource:
    """A function's text from its first decorator to its last line."""
    end = node.end_lineno or node.lineno
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return FunctionSource(qualname, rel, start, "".join(lines[start - 1 : end]))


def _startup(
    tree: ast.Module, rel: str, lines: list[str]
) -> list[tuple[FunctionSource, list[str]]]:
    """The runner's start-up statements that write server-args fields (`startup.py`), each
    with those fields; kept where the arithmetic reads one of them (`.field`)."""
    stops = (*ANCHORS["budget"], "init_memory_pool")
    return [
        (
            FunctionSource(f"{startup.STARTUP}{method}:{node.lineno}", rel, node.lineno, text),
            startup.written(node),
        )
        for method, node in startup.statements(tree, stops)
        if (text := startup.source_text(node, lines))
    ]


def _runner_copies(tree: ast.Module) -> dict[str, str]:
    """`self.x = model_config.y` / `self.x = self.model_config.y` in `ModelRunner` (the first
    of each field): the runner's copies of its model config."""
    out: dict[str, str] = {}
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "ModelRunner"):
            continue
        for node in syntax.statements(cls):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute)):
                continue
            attr = self_assignment(node)
            if attr is None:
                continue
            if ast.unparse(node.value.value) in {"model_config", "self.model_config"}:
                out.setdefault(attr, node.value.attr)
    return out


def _runner_properties(tree: ast.Module, rel: str, lines: list[str]) -> list[FunctionSource]:
    """`ModelRunner`'s hybrid predicates (`_RUNNER_PROPERTY`)."""
    out: list[FunctionSource] = []
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == "ModelRunner"):
            continue
        for item in node.body:
            if (
                isinstance(item, ast.FunctionDef)
                and _RUNNER_PROPERTY.search(item.name)
                and any(ast.unparse(d) == "property" for d in item.decorator_list)
            ):
                start = min(d.lineno for d in item.decorator_list)
                text = "".join(lines[start - 1 : item.end_lineno or item.lineno])
                out.append(FunctionSource(f"ModelRunner.{item.name}", rel, start, text))
    return out


def _calls(node: ast.FunctionDef) -> set[str]:
    """The plain names a function calls (`f()`, `self.f()`, `mod.f()`)."""
    calls: set[str] = set()
    for inner in syntax.walk(node):
        if isinstance(inner, ast.Call):
            func = inner.func
            if isinstance(func, ast.Name):
                calls.add(func.id)
            elif isinstance(func, ast.Attribute):
                calls.add(func.attr)
    return calls


def _reachable(
    found: list[FunctionSource], calls: dict[str, set[str]], roots: list[str]
) -> set[str]:
    """The functions the anchors can reach by name: only those are kept and parsed again."""
    by_name: dict[str, list[str]] = {}
    for f in found:
        by_name.setdefault(f.qualname, []).append(f.qualname)
        by_name.setdefault(f.qualname.rsplit(".", 1)[-1], []).append(f.qualname)
        owner, _, method = f.qualname.rpartition(".")
        if owner and method in _CONSTRUCTED:  # `C(kvc)` runs C.__init__; the caller sizes
            by_name.setdefault(owner, []).append(f.qualname)
    kept: set[str] = set()
    todo = [q for root in roots for q in by_name.get(root, [])]
    while todo:
        qualname = todo.pop()
        if qualname in kept:
            continue
        kept.add(qualname)
        for name in calls.get(qualname, ()):
            todo.extend(by_name.get(name, []))
    return kept


def _defs(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    out: list[tuple[str, ast.FunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out.append((f"{node.name}.{item.name}", item))
    return out


# What constructing a class reaches: its `__init__`, and the sizing call the configurator's
# user makes on it (`calculate_pool_sizes`, memplan).
_CONSTRUCTED = frozenset({"__init__", "calculate_pool_sizes"})
