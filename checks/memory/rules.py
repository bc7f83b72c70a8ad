"""Where the audited tree keeps its memory arithmetic, found by anchors and kept per tree.

The anchors are SGLang's own names: the function that picks the default
`--mem-fraction-static` (`_handle_gpu_memory_settings`, a `ServerArgs` method in 0.5.9 and
0.5.14, `handle_gpu_memory_settings` in `arg_groups/memory_hook.py` from 0.5.22), the one
that turns free memory into the KV budget (`profile_max_num_token` in 0.5.9,
`_profile_available_bytes` later), the cell size (`get_cell_size_per_token`, then
`DefaultPoolConfigurator._compute_cell_size`) and the request limit (`init_memory_pool`, then
`resolve_max_num_reqs`). What those functions say is not copied: their source text is kept as
a tree answer (so a warm run parses a few small functions, not the 5,000-line files) and
`memeval` evaluates it on each launch. A release where an anchor is missing has no such rule,
and the findings say so.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field

from eaglebug.checks.memory.imports import class_string, imported_blocks, imports_of, sglang_imports
from eaglebug.checks.pyeval.memeval import ROOTS, Evaluator, Function, Ref, Unknown
from eaglebug.checks.source.index import TreeIndex, parsed_with

_ENVIRON = "sglang/srt/environ.py"

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
# 0.5.9's hybrid predicates: `ModelRunner` properties (`mambaish_config` is
# `self.mamba2_config or self.hybrid_gdn_config or ...`), kept whole from model_runner.py.
_RUNNER_PROPERTY_SUFFIX = "_config"
# Where a release sets the runner's request limit outside a function of its own (0.5.9:
# `self.max_running_requests = min(...)` in `ModelRunner.initialize`): the expression is kept.
REQUEST_LIMIT = "=max_running_requests"
# The runner's own DP width where it sets one (0.5.9, 0.5.14: `self.dp_size = server_args.dp_size
# if server_args.enable_dp_attention else 1` in `ModelRunner.__init__`), which the runner's
# request limit divides by, not the server's `--dp-size`.
RUNNER_DP = "=dp_size"
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
)
ANCHORS: dict[str, tuple[str, ...]] = {
    "fraction": ("handle_gpu_memory_settings", "_handle_gpu_memory_settings"),
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
class EnvDefault:
    kind: str  # EnvBool, EnvInt, EnvFloat, EnvStr, ...
    default: object
    where: str  # file:line


@dataclass(frozen=True)
class MemorySources:
    functions: tuple[FunctionSource, ...]
    entries: dict[str, str]  # rule -> qualname of the anchor found ("" when none)
    env: dict[str, EnvDefault] = field(default_factory=dict)  # environ.py's declarations
    defaults: dict[str, object] = field(default_factory=dict)  # ServerArgs' field defaults
    # `Class.attr` constants of classes the functions import (`DSATokenToKVPool.quant_block_size`)
    constants: dict[str, object] = field(default_factory=dict)


def memory_sources(index: TreeIndex) -> MemorySources:
    """The memory functions of this tree (a tree answer: read once per state of the tree)."""
    return index.answer("memory_sources", MemorySources, lambda: _memory_sources(index))


def _memory_sources(index: TreeIndex) -> MemorySources:
    found: list[FunctionSource] = []
    calls: dict[str, set[str]] = {}
    used: dict[str, set[str]] = {}  # qualname -> the names it reads or calls
    imports: dict[str, dict[str, tuple[str, str]]] = {}
    module_values: dict[str, dict[str, ast.expr]] = {}  # file -> its `NAME = <expr>` lines
    fields: dict[str, dict[str, object]] = {}  # class -> its `name: T = literal` defaults
    for rel in sorted(index.entries):
        if not rel.startswith("sglang/srt/") or not _wanted(rel):
            continue
        parsed = parsed_with(index, rel, *_WORD_TEXTS)
        if parsed is None:
            continue
        lines = parsed.text.splitlines(keepends=True)
        imports[rel] = imports_of(parsed.tree)
        module_values[rel] = {
            stmt.targets[0].id: stmt.value
            for stmt in parsed.tree.body
            if isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        }
        if rel.endswith("/model_runner.py"):
            found.extend(_kept_assignments(parsed.tree, rel, parsed.text))
            found.extend(_runner_properties(parsed.tree, rel, lines))
            continue
        fields.update(_field_defaults(parsed.tree, rel))
        for qualname, node in _defs(parsed.tree):
            end = node.end_lineno or node.lineno
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            text = "".join(lines[start - 1 : end])
            found.append(FunctionSource(qualname, rel, start, text))
            calls[qualname], used[qualname], inner = _references(node)
            for name, target in inner.items():  # a function's own `from ... import`
                imports[rel].setdefault(name, target)
    names = {f.qualname for f in found} | {f.qualname.rsplit(".", 1)[-1] for f in found}
    entries = {
        rule: next((a for a in anchors if a in names), "") for rule, anchors in ANCHORS.items()
    }
    kept = _reachable(found, calls, [e for e in entries.values() if e] + list(_ALSO))
    kept.update({REQUEST_LIMIT, RUNNER_DP})
    kept.update(f.qualname for f in found if f.qualname.startswith("ModelRunner."))
    functions = [f for f in found if f.qualname in kept]
    helpers, constants = imported_blocks(
        index, [(f.file, used.get(f.qualname, set())) for f in functions], imports, names
    )
    functions.extend(FunctionSource(name, rel, line, text) for name, rel, line, text in helpers)
    constants.update(_module_constants(functions, used, module_values))
    for owner in sorted({f.qualname.rsplit(".", 1)[0] for f in functions if "." in f.qualname}):
        for name, value in fields.get(owner, {}).items():  # the flat self's field defaults
            constants.setdefault(name, value)
    return MemorySources(
        tuple(functions),
        entries,
        _env_defaults(index),
        _server_defaults(index),
        constants,
    )


_ARGS_FILES = ("sglang/srt/server_args.py",)
_ARGS_FOLDER = "sglang/srt/arg_groups/fields/"


def _server_defaults(index: TreeIndex) -> dict[str, object]:
    """`name: T = default` of the server-args classes (0.5.9's `ServerArgs`, 0.5.23's field
    groups): what a flag the launch does not give is, for the arithmetic."""
    constants = Evaluator({}, {})
    out: dict[str, object] = {}
    rels = [r for r in sorted(index.entries) if r in _ARGS_FILES or r.startswith(_ARGS_FOLDER)]
    for rel in rels:
        parsed = index.parse_file(rel)
        if parsed is None:
            continue
        for cls in parsed.tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            # A nested namespace (0.5.23: `_NS_PATH = "exec.mamba"`) is read as
            # `get_exec().mamba.x`: its fields under the path below the top-level bag too.
            inner = (class_string(cls, "_NS_PATH") or "").partition(".")[2]
            for stmt in cls.body:
                if not (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.value is not None
                ):
                    continue
                # None defaults stay unknown: several are objects the hooks fill in
                # (cuda_graph_config), which the evaluator follows as attribute paths;
                # 0.5.23's `Arg(..., fallback=0.8)` is what an unset field answers.
                value = constants.constant(stmt.value, rel)
                if value is None:
                    value = _fallback(stmt.annotation, constants, rel)
                if isinstance(value, (bool, int, float, str)):
                    out.setdefault(stmt.target.id, value)
                    if inner:
                        out.setdefault(f"{inner}.{stmt.target.id}", value)
    return out


def flag_env(index: TreeIndex, variables: set[str]) -> dict[str, tuple[str, str]]:
    """`envs.NAME.set(cfg.field)` in the server-args code, for the variables asked about: a
    flag the tree hands on as an environment variable (`--mamba-ssm-dtype` ->
    SGLANG_MAMBA_SSM_DTYPE, which the state size reads): field -> (variable, file:line).
    Only files that name one of the variables are parsed."""
    out: dict[str, tuple[str, str]] = {}
    words = [f"envs.{v}.set(" for v in sorted(variables)]
    for rel in sorted(index.entries):
        if rel not in _ARGS_FILES and not rel.startswith("sglang/srt/arg_groups/"):
            continue
        parsed = parsed_with(index, rel, *words) if words else None
        if parsed is None:
            continue
        for node in ast.walk(parsed.tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "set"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr in variables
                and isinstance(node.func.value.value, ast.Name)
                and node.func.value.value.id == "envs"
                and len(node.args) == 1
                and isinstance(node.args[0], ast.Attribute)
                and isinstance(node.args[0].value, ast.Name)
                and node.args[0].value.id in ROOTS
            ):
                continue
            where = f"{rel}:{node.lineno}"
            out.setdefault(node.args[0].attr, (node.func.value.attr, where))
    return out


def kept_expression(sources: MemorySources, qualname: str, values: dict[str, object]) -> object:
    """One of the kept `self.x = <expr>` lines (`REQUEST_LIMIT`, `RUNNER_DP`) evaluated on
    `values`; None when the tree has no such line or it does not parse."""
    source = next((f for f in sources.functions if f.qualname == qualname), None)
    if source is None:
        return None
    try:
        node = ast.parse(source.text.strip(), mode="eval").body
    except SyntaxError:
        return None
    ast.increment_lineno(node, source.line - 1)
    return Evaluator({}, dict(values)).value(node, source.file)


def _module_constants(
    functions: list[FunctionSource],
    used: dict[str, set[str]],
    module_values: dict[str, dict[str, ast.expr]],
) -> dict[str, object]:
    """The module-level constants the kept functions read (`SWA_SINK_ARCHS = frozenset(...)`
    in model_config.py), where they are plain literals."""
    constants = Evaluator({}, {})
    out: dict[str, object] = {}
    for function in functions:
        table = module_values.get(function.file, {})
        for name in sorted(used.get(function.qualname, set()) & table.keys()):
            value = constants.constant(table[name], function.file)
            if not isinstance(value, (Unknown, Ref)):
                out.setdefault(name, value)
    return out


def _wanted(rel: str) -> bool:
    """A file named in `_FILES`, by its name or by its path's tail."""
    return rel.rsplit("/", 1)[-1] in _FILES or any(
        "/" in name and rel.endswith("/" + name) for name in _FILES
    )


def _fallback(annotation: ast.expr, constants: Evaluator, rel: str) -> object:
    """The `fallback=` of a field's `Arg(...)` metadata (`A[Optional[float], Arg(...)]`)."""
    for node in ast.walk(annotation):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Arg":
            for keyword in node.keywords:
                if keyword.arg == "fallback":
                    return constants.constant(keyword.value, rel)
    return None


def _kept_assignments(tree: ast.Module, rel: str, text: str) -> list[FunctionSource]:
    """`self.max_running_requests = <call>` and `self.dp_size = <expr>` (the first of each),
    as their expressions' text."""
    wanted = {"max_running_requests": REQUEST_LIMIT, "dp_size": RUNNER_DP}
    out: dict[str, FunctionSource] = {}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute)
            and node.targets[0].attr in wanted
            and node.targets[0].attr not in out
            and isinstance(node.targets[0].value, ast.Name)
            and node.targets[0].value.id == "self"
        ):
            continue
        attr = node.targets[0].attr
        if attr == "max_running_requests" and not isinstance(node.value, ast.Call):
            continue
        segment = ast.get_source_segment(text, node.value)
        if segment:
            out[attr] = FunctionSource(wanted[attr], rel, node.value.lineno, segment)
    return list(out.values())


def _field_defaults(tree: ast.Module, rel: str) -> dict[str, dict[str, object]]:
    """A class body's `name: T = <literal>` (a dataclass's field defaults: the configurator's
    `extra_mamba_cache_bytes_per_req: int = 0`), by class."""
    constants = Evaluator({}, {})
    out: dict[str, dict[str, object]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, (bool, int, float, str))
            ):
                value = constants.constant(stmt.value, rel)
                out.setdefault(cls.name, {})[stmt.target.id] = value
    return out


def _runner_properties(tree: ast.Module, rel: str, lines: list[str]) -> list[FunctionSource]:
    """`ModelRunner`'s `@property def ..._config` (0.5.9's hybrid predicates)."""
    out: list[FunctionSource] = []
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == "ModelRunner"):
            continue
        for item in node.body:
            if (
                isinstance(item, ast.FunctionDef)
                and item.name.endswith(_RUNNER_PROPERTY_SUFFIX)
                and any(ast.unparse(d) == "property" for d in item.decorator_list)
            ):
                start = min(d.lineno for d in item.decorator_list)
                text = "".join(lines[start - 1 : item.end_lineno or item.lineno])
                out.append(FunctionSource(f"ModelRunner.{item.name}", rel, start, text))
    return out


def _references(
    node: ast.FunctionDef,
) -> tuple[set[str], set[str], dict[str, tuple[str, str]]]:
    """In one walk: the plain names a function calls (`f()`, `self.f()`, `mod.f()`), every
    name it reads, and what its own `from sglang... import` lines bring in."""
    calls: set[str] = set()
    names: set[str] = set()
    imports: dict[str, tuple[str, str]] = {}
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            names.add(inner.id)
        elif isinstance(inner, ast.Call):
            func = inner.func
            if isinstance(func, ast.Name):
                calls.add(func.id)
            elif isinstance(func, ast.Attribute):
                calls.add(func.attr)
        elif isinstance(inner, ast.ImportFrom):
            imports.update(sglang_imports(inner))
    return calls, names, imports


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


def _env_defaults(index: TreeIndex) -> dict[str, EnvDefault]:
    """`NAME = EnvInt(100)` in `envs`' class body: the default SGLang reads when unset."""
    if _ENVIRON not in index.entries:
        return {}
    parsed = index.parse_file(_ENVIRON)
    if parsed is None:
        return {}
    constants = Evaluator({}, {})
    out: dict[str, EnvDefault] = {}
    for node in ast.walk(parsed.tree):
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id.startswith("Env")
        ):
            continue
        args = node.value.args
        value = constants.constant(args[0], _ENVIRON) if args else None
        if not isinstance(value, Unknown):
            where = f"{_ENVIRON}:{node.lineno}"
            out[node.targets[0].id] = EnvDefault(node.value.func.id, value, where)
    return out


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

_TABLES: dict[int, tuple[MemorySources, dict[str, Function]]] = {}


def function_table(sources: MemorySources) -> dict[str, Function]:
    """Functions by qualified and by plain name (the first definition of a plain name wins),
    parsed from their kept text with their lines as in the file (once per sources)."""
    kept = _TABLES.get(id(sources))
    if kept is not None and kept[0] is sources:
        return kept[1]
    if len(_TABLES) > 4:
        _TABLES.clear()
    table: dict[str, Function] = {}
    for source in sources.functions:
        try:  # blank lines before it keep the file's line numbers (no second walk)
            module = ast.parse("\n" * (source.line - 1) + textwrap.dedent(source.text))
        except SyntaxError:
            continue
        node = module.body[0] if module.body else None
        if not isinstance(node, ast.FunctionDef):
            continue
        owner = source.qualname.rsplit(".", 1)[0] if "." in source.qualname else ""
        function = Function(source.file, node, owner)
        table.setdefault(source.qualname, function)
        table.setdefault(source.qualname.rsplit(".", 1)[-1], function)
    _TABLES[id(sources)] = (sources, table)
    return table
