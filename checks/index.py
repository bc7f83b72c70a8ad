"""A lazy index over one SGLang tree: which file holds what, classes and their bases, consumers.

Speed comes from doing little: every file is read once for a byte-level prefilter (is it worth
parsing, which top-level classes does it define), and only the files an audit needs are parsed.
Everything learned is kept in the parse cache, so a warm audit only stats the tree.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from eaglebug.checks import cache
from eaglebug.checks.classfacts import (
    ClassFacts,
    MethodFacts,
    ModuleFacts,
    module_facts,
    resolve_relative,
)
from eaglebug.checks.consumers import (
    CallEdge,
    Cond,
    ConsumerFacts,
    Origin,
    Use,
    find_function,
    function_params,
    scan_flags,
    scan_module,
    scan_parameter,
)
from eaglebug.checks.tree import SglangTree

_CLASS_NAME_RE = re.compile(rb"class\s+(\w+)")
_RUNTIME = "sglang/srt/"
# Files worth parsing for consumers: `<...>runner[...].model`, or a ModelRunner class.
# (Two patterns, each starting with a literal, so `re` can scan for it instead of trying an
# alternation at every byte.)
_RUNNER_MODEL_RE = re.compile(rb"runner\w*(?:\[[^\]\n]*\]|\([^)\n]*\))?\.model\b")
_RUNNER_CLASS_RE = re.compile(rb"class \w*ModelRunner\b|class \w+\([^)]*ModelRunner\b")
# Parsed trees kept in memory at once (they are ~10x their source's size).
_AST_CACHE_SIZE = 12
# How many calls deep a model reference is followed into helper functions.
_MAX_CALL_DEPTH = 4

# What every torch.nn.Module instance has (torch 2.x), so wrappers need not define it.
NN_MODULE_ATTRS = frozenset(
    """
    T_destination add_module apply bfloat16 buffers call_super_init children compile cpu cuda
    double dump_patches eval extra_repr float forward get_buffer get_extra_state get_parameter
    get_submodule half ipu load_state_dict modules mtia named_buffers named_children
    named_modules named_parameters parameters register_backward_hook register_buffer
    register_forward_hook register_forward_pre_hook register_full_backward_hook
    register_full_backward_pre_hook register_load_state_dict_post_hook
    register_load_state_dict_pre_hook register_module register_parameter
    register_state_dict_post_hook register_state_dict_pre_hook requires_grad_ set_extra_state
    set_submodule share_memory state_dict to to_empty train training type xpu zero_grad
    __call__ __class__ __dict__ __init__ __setattr__ __getattr__ __delattr__ __dir__ __repr__
    _modules _parameters _buffers _apply _load_from_state_dict _forward_hooks
    _forward_pre_hooks _backward_hooks _get_name _named_members
    """.split()
)
_NN_MODULE = {"torch.nn.Module", "torch.nn.modules.module.Module"}
# Bases from these packages derive from torch.nn.Module (PreTrainedModel does).
_MODULE_FAMILIES = ("torch.nn.", "transformers.")
# What every Python object has (`__class__`, `__dict__`, ...).
_OBJECT_ATTRS = frozenset(dir(object)) | {"__dict__", "__module__", "__weakref__"}


def _class_names(data: bytes) -> tuple[str, ...]:
    """Top-level `class X` names, found with bytes.find (a regex over every line is slower)."""
    names: list[str] = []
    pos = 0 if data.startswith(b"class ") else data.find(b"\nclass ")
    while pos != -1:
        start = pos if pos == 0 and data.startswith(b"class ") else pos + 1
        match = _CLASS_NAME_RE.match(data, start)
        if match:
            names.append(match.group(1).decode("ascii", "replace"))
        pos = data.find(b"\nclass ", start + 1)
    return tuple(names)


@dataclass
class FileEntry:
    size: int
    mtime_ns: int
    consumer_candidate: bool
    has_entry_class: bool
    class_names: tuple[str, ...]
    facts: ModuleFacts | None = None
    consumers: ConsumerFacts | None = None
    params: dict[tuple[str, str], ConsumerFacts | None] = field(default_factory=dict)
    param_names: dict[str, list[str] | None] = field(default_factory=dict)
    derived: dict[str, object] = field(default_factory=dict)  # facts other modules compute
    error: str | None = None
    parsed: bool = False


@dataclass(frozen=True)
class ClassRef:
    qualname: str
    file: str  # relative to the tree root
    facts: ClassFacts
    module: ModuleFacts


@dataclass(frozen=True)
class Provider:
    """Where a class gets an attribute from."""

    attribute: str
    owner: str
    kind: str  # method | property | staticmethod | classmethod | class attribute | __init__ attribute | nn.Module | via __getattr__
    file: str | None
    line: int | None
    chain: tuple[str, ...]  # from the audited class up to the owner
    method: MethodFacts | None = None
    via: str | None = None  # the inner attribute a __getattr__ forwards to


@dataclass(frozen=True)
class ResolvedUse:
    """A use of a model reference with the role it was reached in and the call context."""

    use: Use
    file: str
    role: str  # target | draft | any
    context_conds: tuple[Cond, ...] = ()
    context_guards: tuple[str, ...] = ()
    via: tuple[str, ...] = ()  # call sites (file:line) through which the reference arrived
    origin_scope: str | None = None  # the function that took the reference, when passed on

    @property
    def conds(self) -> tuple[Cond, ...]:
        return self.context_conds + self.use.conds

    @property
    def guards(self) -> tuple[str, ...]:
        return self.context_guards + self.use.guards


@dataclass(frozen=True)
class _Pending:
    """A model reference passed into a call, waiting for its callee's parameter summary."""

    edge: CallEdge
    binding: int | str  # positional index or keyword
    role: str
    conds: tuple[Cond, ...]
    guards: tuple[str, ...]
    via: tuple[str, ...]
    origin_scope: str


class TreeIndex:
    def __init__(self, tree: SglangTree, use_cache: bool = True) -> None:
        self.tree = tree
        self.use_cache = use_cache
        self.entries: dict[str, FileEntry] = {}
        self.module_files: dict[str, str] = {}  # module name -> relative file
        self.warnings: list[str] = []
        self._dirty = False
        self._sources: dict[str, bytes] = {}
        self._asts: OrderedDict[str, tuple[ast.Module, str]] = OrderedDict()
        self._consumers: list[ResolvedUse] | None = None
        # Facts that depend on the whole tree, valid while no file changes (see `signature`).
        self.memo: dict[str, object] = {}
        self.signature = ""
        self._scan()

    # -- the byte-level pass --------------------------------------------------------------
    def _walk(self) -> Iterator[os.DirEntry[str]]:
        stack = [str(self.tree.package_dir)]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    for entry in it:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name != "__pycache__" and not entry.name.startswith("."):
                                stack.append(entry.path)
                        elif entry.name.endswith(".py"):
                            if entry.is_file():  # a FIFO or device named *.py never ends
                                yield entry
                            elif not entry.is_dir():
                                rel = os.path.relpath(entry.path, self.tree.root)
                                self.warnings.append(f"{rel}: skipped, not a regular file")
            except OSError as exc:
                self.warnings.append(f"{folder}: cannot list ({exc.strerror})")

    def _scan(self) -> None:
        payload = cache.load(self.tree.root) if self.use_cache else {}
        old: dict[str, FileEntry] = payload.get("entries", {})
        root_len = len(str(self.tree.root)) + 1
        stamps: list[tuple[str, int, int]] = []
        for dirent in self._walk():
            rel = dirent.path[root_len:].replace(os.sep, "/")
            try:
                stat = dirent.stat()
            except OSError:
                continue
            previous = old.get(rel)
            if (
                previous is not None
                and previous.size == stat.st_size
                and previous.mtime_ns == stat.st_mtime_ns
            ):
                entry = previous
            else:
                entry = self._prefilter(rel, dirent.path, stat.st_size, stat.st_mtime_ns)
                self._dirty = True
            self.entries[rel] = entry
            stamps.append((rel, stat.st_size, stat.st_mtime_ns))
            module = rel[:-3].replace("/", ".")
            if module.endswith(".__init__"):
                module = module[: -len(".__init__")]
            self.module_files[module] = rel
        if len(old) != len(self.entries):
            self._dirty = True
        stamps.sort()
        self.signature = hashlib.sha1(repr(stamps).encode()).hexdigest()
        memo = payload.get("memo")
        if payload.get("signature") == self.signature and isinstance(memo, dict):
            self.memo = memo

    def _prefilter(self, rel: str, path: str, size: int, mtime_ns: int) -> FileEntry:
        """Read a runtime file once for what the audit may need; other files only by name.

        Outside `sglang/srt/` (the frontend language, tests, benchmarks, kernels) nothing
        touches a runner's model, so those files are parsed only if an import leads there.
        """
        if not rel.startswith(_RUNTIME):
            return FileEntry(size, mtime_ns, False, False, ())
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            self.warnings.append(f"{rel}: skipped, cannot read ({exc.strerror})")
            return FileEntry(size, mtime_ns, False, False, (), error=str(exc), parsed=True)
        candidate = (
            b"runner" in data and b".model" in data and _RUNNER_MODEL_RE.search(data) is not None
        ) or (b"ModelRunner" in data and _RUNNER_CLASS_RE.search(data) is not None)
        if candidate:
            self._sources[rel] = data
        names = _class_names(data)
        return FileEntry(size, mtime_ns, candidate, b"EntryClass" in data, names)

    def save(self) -> None:
        if self.use_cache and self._dirty:
            cache.save(self.tree.root, self.entries, self.signature, self.memo)
            self._dirty = False

    # -- warnings that a memoised answer must repeat ---------------------------------------
    def _warning_mark(self) -> int:
        return len(self.warnings)

    def _remember_warnings(self, key: str, mark: int) -> None:
        """The warnings computing memo[key] gave, so a warm run that reuses it says them too."""
        table = self.memo.setdefault("warnings", {})
        assert isinstance(table, dict)
        table[key] = list(dict.fromkeys(self.warnings[mark:]))

    def _replay_warnings(self, key: str) -> None:
        table = self.memo.get("warnings")
        if isinstance(table, dict):
            for warning in table.get(key, ()):
                if warning not in self.warnings:
                    self.warnings.append(warning)

    # -- parsing on demand ----------------------------------------------------------------
    def _source(self, rel: str) -> bytes | None:
        data = self._sources.pop(rel, None)
        if data is not None:
            return data
        try:
            return (self.tree.root / rel).read_bytes()
        except OSError as exc:
            self.warnings.append(f"{rel}: skipped, cannot read ({exc.strerror})")
            return None

    def _parse(self, rel: str) -> tuple[ast.Module, str] | None:
        """Parse one file; the last few trees are kept, since summaries revisit them."""
        hit = self._asts.get(rel)
        if hit is not None:
            self._asts.move_to_end(rel)
            return hit
        parsed = self._parse_uncached(rel)
        if parsed is not None:
            self._asts[rel] = parsed
            if len(self._asts) > _AST_CACHE_SIZE:
                self._asts.popitem(last=False)
        return parsed

    def _parse_uncached(self, rel: str) -> tuple[ast.Module, str] | None:
        data = self._source(rel)
        if data is None:
            return None
        try:
            tree = ast.parse(data, filename=rel)
            text = data.decode("utf-8", errors="replace")
        except SyntaxError as exc:
            if "encoding" in exc.msg or "decode" in exc.msg:
                self._skip(rel, f"cannot decode: {exc.msg}")
            elif exc.lineno:
                self._skip(rel, f"syntax error on line {exc.lineno}: {exc.msg}")
            else:
                self._skip(rel, f"cannot parse: {exc.msg}")
            return None
        except (ValueError, UnicodeDecodeError) as exc:
            self._skip(rel, f"cannot decode: {exc}")
            return None
        return tree, text

    def _skip(self, rel: str, why: str) -> None:
        entry = self.entries[rel]
        if entry.error is None:
            entry.error = why
            self._dirty = True
        self.warnings.append(f"{rel}: skipped, {why}")

    def _ensure_parsed(self, rel: str) -> FileEntry:
        entry = self.entries[rel]
        if entry.parsed:
            if entry.error and not any(w.startswith(f"{rel}:") for w in self.warnings):
                self.warnings.append(f"{rel}: skipped, {entry.error}")
            return entry
        entry.parsed = True
        self._dirty = True
        parsed = self._parse(rel)
        if parsed is None:
            return entry
        tree, text = parsed
        module, is_package = self._module_of(rel)
        entry.facts = module_facts(tree, module, is_package)
        entry.facts.lines = text.count("\n") + 1
        if entry.consumer_candidate:
            entry.consumers = scan_module(
                tree, module, entry.facts.imports, entry.facts.functions, text
            )
        return entry

    def _module_of(self, rel: str) -> tuple[str, bool]:
        module = rel[:-3].replace("/", ".")
        if module.endswith(".__init__"):
            return module[: -len(".__init__")], True
        return module, False

    def module(self, name: str) -> ModuleFacts | None:
        rel = self.module_files.get(name)
        if rel is None:
            return None
        return self._ensure_parsed(rel).facts

    # -- classes ----------------------------------------------------------------------------
    def split_qualified(self, qualified: str) -> tuple[str, str] | None:
        """("pkg.module", "Rest.Of.Name") for the longest module prefix in the tree."""
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module in self.module_files:
                return module, ".".join(parts[cut:])
        return None

    def cls(self, qualified: str, _depth: int = 0) -> ClassRef | None:
        """The class a qualified name refers to, following re-exports through imports."""
        split = self.split_qualified(qualified)
        if split is None or _depth > 8:
            return None
        module_name, name = split
        facts = self.module(module_name)
        if facts is None or "." in name:
            return None
        found = facts.classes.get(name)
        if found is not None:
            return ClassRef(f"{module_name}.{name}", self.module_files[module_name], found, facts)
        target = facts.imports.get(name)
        if target and target != qualified:
            return self.cls(target, _depth + 1)
        return None

    def resolve(self, module: ModuleFacts, dotted_name: str) -> str:
        """A dotted name as written in `module`, made absolute through its imports."""
        head, _, rest = dotted_name.partition(".")
        if head in module.classes and not rest:
            return f"{module.module}.{head}"
        target = module.imports.get(head)
        if target:
            return f"{target}.{rest}" if rest else target
        return f"{module.module}.{dotted_name}"

    def classes_named(self, name: str) -> list[ClassRef]:
        """Classes with this short name in the runtime (`sglang/srt/`)."""
        found = []
        for rel, entry in self.entries.items():
            if name in entry.class_names:
                module, _ = self._module_of(rel)
                ref = self.cls(f"{module}.{name}")
                if ref is not None:
                    found.append(ref)
        return found

    def unparsed_files_defining(self, name: str) -> list[tuple[str, str]]:
        """(file, why) for each file that would define class `name` but does not parse."""
        return [
            (rel, entry.error)
            for rel, entry in self.entries.items()
            if name in entry.class_names and entry.error is not None
        ]

    def all_class_names(self) -> set[str]:
        return {name for entry in self.entries.values() for name in entry.class_names}

    def registry(self) -> dict[str, list[ClassRef]]:
        """Architecture name -> the classes exported through `EntryClass` by the model files."""
        exported: dict[str, list[ClassRef]] = {}
        for rel, entry in self.entries.items():
            if not entry.has_entry_class or not rel.startswith(_RUNTIME):
                continue
            facts = self._ensure_parsed(rel).facts
            if facts is None:
                continue
            for name in facts.entry_classes:
                ref = self.cls(self.resolve(facts, name))
                if ref is not None:
                    exported.setdefault(ref.facts.name, []).append(ref)
        return exported

    def exporters_of(self, name: str) -> list[ClassRef]:
        """Registry entries for one architecture, parsing only files that could name it."""
        known = self.memo.setdefault("exporters", {})
        assert isinstance(known, dict)
        if name in known:
            self._replay_warnings(f"exporters:{name}")
            return [r for r in (self.cls(q) for q in known[name]) if r is not None]
        mark = self._warning_mark()
        found = self._exporters_of(name)
        known[name] = [r.qualname for r in found]
        self._remember_warnings(f"exporters:{name}", mark)
        self._dirty = True
        return found

    def _exporters_of(self, name: str) -> list[ClassRef]:
        needle = name.encode()
        found: list[ClassRef] = []
        for rel, entry in self.entries.items():
            if not entry.has_entry_class or not rel.startswith(_RUNTIME):
                continue
            data = self._source(rel)
            if data is None or needle not in data:
                continue
            self._sources[rel] = data
            facts = self._ensure_parsed(rel).facts
            if facts is None:
                continue
            for entry_name in facts.entry_classes:
                if entry_name.rsplit(".", 1)[-1] != name:
                    continue
                ref = self.cls(self.resolve(facts, entry_name))
                if ref is not None:
                    found.append(ref)
        return found

    def bases(self, ref: ClassRef) -> tuple[list[ClassRef], list[str], bool]:
        """(bases inside the tree, bases outside it, derives from torch.nn.Module)."""
        inside: list[ClassRef] = []
        outside: list[str] = []
        nn_module = False
        for base in ref.facts.bases:
            qualified = self.resolve(ref.module, base)
            if qualified in _NN_MODULE:
                nn_module = True
                continue
            if qualified.startswith(_MODULE_FAMILIES):
                nn_module = True  # torch.nn layers and transformers' models are nn.Modules
            found = self.cls(qualified)
            if found is not None:
                inside.append(found)
            elif qualified not in {"object", f"{ref.module.module}.object"}:
                outside.append(qualified)
        return inside, outside, nn_module

    def mro(self, ref: ClassRef) -> tuple[list[ClassRef], list[str], bool]:
        """Depth-first, left to right: the classes whose members `ref` sees, in lookup order."""
        order: list[ClassRef] = []
        externals: list[str] = []
        nn_module = False
        seen: set[str] = set()

        def visit(current: ClassRef) -> None:
            nonlocal nn_module
            if current.qualname in seen:
                return
            seen.add(current.qualname)
            order.append(current)
            inside, outside, is_nn = self.bases(current)
            nn_module = nn_module or is_nn
            externals.extend(o for o in outside if o not in externals)
            for base in inside:
                visit(base)

        visit(ref)
        return order, externals, nn_module

    def lookup(self, ref: ClassRef, attribute: str, _depth: int = 0) -> Provider | None:
        order, _, nn_module = self.mro(ref)
        chain: list[str] = []
        for current in order:
            chain.append(current.qualname)
            facts = current.facts
            method = facts.methods.get(attribute)
            if method is not None:
                return Provider(
                    attribute,
                    current.qualname,
                    method.kind,
                    current.file,
                    method.line,
                    tuple(chain),
                    method,
                )
            if attribute in facts.class_attrs:
                return Provider(
                    attribute,
                    current.qualname,
                    "class attribute",
                    current.file,
                    facts.class_attrs[attribute],
                    tuple(chain),
                )
            if attribute in facts.init_attrs:
                return Provider(
                    attribute,
                    current.qualname,
                    "__init__ attribute",
                    current.file,
                    facts.init_attrs[attribute],
                    tuple(chain),
                )
        if attribute in _OBJECT_ATTRS:
            return Provider(attribute, "object", "object", None, None, (*chain, "object"))
        if nn_module and attribute in NN_MODULE_ATTRS:
            return Provider(
                attribute, "torch.nn.Module", "nn.Module", None, None, (*chain, "torch.nn.Module")
            )
        if _depth < 3:
            for current in order:
                inner_attr = current.facts.getattr_forward
                if not inner_attr:
                    continue
                for inner in self.inner_classes(current, inner_attr):
                    found = self.lookup(inner, attribute, _depth + 1)
                    if found is not None:
                        return Provider(
                            attribute,
                            found.owner,
                            "via __getattr__",
                            found.file,
                            found.line,
                            (*chain, *found.chain),
                            found.method,
                            via=inner_attr,
                        )
        return None

    def inner_classes(self, ref: ClassRef, attribute: str) -> list[ClassRef]:
        """The classes `__init__` (of `ref` or a base) may assign to `self.<attribute>`."""
        order, _, _ = self.mro(ref)
        for current in order:
            inner = current.facts.inner.get(attribute)
            if inner is not None:
                found = [self.resolve_class(current, name) for name in inner.classes]
                return [f for f in found if f is not None]
        return []

    def resolve_class(self, ref: ClassRef, name: str) -> ClassRef | None:
        """A class named inside `ref`'s `__init__`: its own imports first, then the module's."""
        head, _, rest = name.partition(".")
        target = ref.facts.local_imports.get(head)
        if target is None and head in ref.facts.relative_imports:
            level, module, imported = ref.facts.relative_imports[head]
            base = resolve_relative(ref.module.module, ref.module.is_package, level, module)
            target = f"{base}.{imported}"
        if target is not None:
            return self.cls(f"{target}.{rest}" if rest else target)
        return self.cls(self.resolve(ref.module, name))

    def dynamic_getattr(self, ref: ClassRef) -> str | None:
        order, _, _ = self.mro(ref)
        for current in order:
            if current.facts.getattr_dynamic:
                return current.qualname
        return None

    # -- consumers --------------------------------------------------------------------------
    def consumers(self) -> list[ResolvedUse]:
        if self._consumers is not None:
            return self._consumers
        cached = self.memo.get("consumers")
        if isinstance(cached, list):
            self._consumers = cached
            self._replay_warnings("consumers")
            return cached
        mark = self._warning_mark()
        resolved: list[ResolvedUse] = []
        queue: list[_Pending] = []
        for rel, entry in list(self.entries.items()):
            if not entry.consumer_candidate:
                continue
            facts = self._ensure_parsed(rel).consumers
            if facts is None:
                continue
            for use in facts.uses:
                if use.origin[0] == "seed":
                    resolved.append(ResolvedUse(use, rel, use.origin[1]))
            for edge in facts.calls:
                for binding, origin in edge.bindings:
                    if origin[0] == "seed":
                        where = (f"{rel}:{edge.line}",)
                        queue.append(
                            _Pending(
                                edge, binding, origin[1], edge.conds, edge.guards, where, edge.scope
                            )
                        )
        seen: set[tuple[str, str, str, tuple[Cond, ...]]] = set()
        while queue:
            item = queue.pop()
            target = self._callee(item.edge.callee, item.binding)
            if target is None:
                continue
            callee_rel, qualname, param = target
            key = (callee_rel, f"{qualname}:{param}", item.role, item.conds)
            if key in seen:
                continue
            seen.add(key)
            summary = self._param_summary(callee_rel, qualname, param)
            if summary is None:
                continue
            for use in summary.uses:
                resolved.append(
                    ResolvedUse(
                        use,
                        callee_rel,
                        item.role,
                        item.conds,
                        item.guards,
                        item.via,
                        item.origin_scope,
                    )
                )
            if len(item.via) >= _MAX_CALL_DEPTH:
                continue
            for nxt in summary.calls:
                for binding, _origin in nxt.bindings:
                    queue.append(
                        _Pending(
                            nxt,
                            binding,
                            item.role,
                            item.conds + nxt.conds,
                            item.guards + nxt.guards,
                            (*item.via, f"{callee_rel}:{nxt.line}"),
                            item.origin_scope,
                        )
                    )
        self._consumers = resolved
        self.memo["consumers"] = resolved
        self._remember_warnings("consumers", mark)
        self._dirty = True
        return resolved

    def _callee(self, callee: str, binding: int | str) -> tuple[str, str, str] | None:
        """(file, qualname in module, parameter name) that a call edge binds a reference to."""
        split = self.split_qualified(callee)
        if split is None:
            return None
        module_name, qualname = split
        facts = self.module(module_name)
        if facts is None:
            return None
        head = qualname.split(".", 1)[0]
        if head not in facts.functions and head not in facts.classes:
            target = facts.imports.get(head)
            if target and "." not in qualname:
                return self._callee(target, binding)
            return None
        if "." not in qualname and qualname in facts.classes:
            qualname = f"{qualname}.__init__"
        rel = self.module_files[module_name]
        if isinstance(binding, str):
            return rel, qualname, binding
        params = self._params(rel, qualname)
        if params is None:
            return None
        offset = 1 if "." in qualname else 0
        index = binding + offset
        if index >= len(params):
            return None
        return rel, qualname, params[index]

    def _params(self, rel: str, qualname: str) -> list[str] | None:
        entry = self.entries[rel]
        if qualname not in entry.param_names:
            parsed = self._parse(rel)
            found = find_function(parsed[0], qualname) if parsed else None
            entry.param_names[qualname] = function_params(found[1]) if found else None
            self._dirty = True
        return entry.param_names[qualname]

    def parse_file(self, rel: str) -> tuple[ast.Module, str] | None:
        """The syntax tree and text of one file, for analyses that need more than the facts."""
        return self._parse(rel)

    def remember(self, rel: str, key: str, value: object) -> None:
        """Keep a fact derived from one file in the cache, invalidated with the file."""
        self.entries[rel].derived[key] = value
        self._dirty = True

    def _param_summary(self, rel: str, qualname: str, param: str) -> ConsumerFacts | None:
        entry = self._ensure_parsed(rel)
        key = (qualname, param)
        if key in entry.params:
            return entry.params[key]
        summary = None
        parsed = self._parse(rel)
        if parsed is not None and entry.facts is not None:
            tree, text = parsed
            summary = scan_parameter(
                tree,
                entry.facts.module,
                entry.facts.imports,
                entry.facts.functions,
                text,
                qualname,
                param,
            )
        entry.params[key] = summary
        self._dirty = True
        return summary

    def flags(self, names: set[str]) -> dict[str, list[tuple[Cond, ...]]]:
        """Attribute name -> the conditions under which the runtime sets it to something truthy.

        Searched tree-wide, since a flag is often set far from where it guards a use (a
        config object built in one module, read as a parameter in another).
        """
        table = self.memo.setdefault("flags", {})
        assert isinstance(table, dict)
        wanted = frozenset(n for n in names if n not in table and n.isidentifier())
        for name in names:
            if name in table:
                self._replay_warnings(f"flags:{name}")
        if wanted:
            mark = self._warning_mark()
            found: dict[str, list[tuple[Cond, ...]]] = {n: [] for n in wanted}
            alternatives = b"|".join(sorted(n.encode() for n in wanted))
            assigned = re.compile(rb"\.(" + alternatives + rb")\s*=[^=]")
            for rel, entry in self.entries.items():
                if not rel.startswith(_RUNTIME) or entry.error:
                    continue
                data = self._sources.get(rel)
                if data is None:
                    try:
                        data = (self.tree.root / rel).read_bytes()
                    except OSError:
                        continue
                present = frozenset(m.decode() for m in assigned.findall(data))
                if not present:
                    continue
                self._sources[rel] = data
                parsed = self._parse(rel)  # the syntax tree only: no class facts are needed
                if parsed is None:
                    continue
                tree, text = parsed
                module, _ = self._module_of(rel)
                flags = scan_flags(tree, module, {}, set(), text, present)
                for name, conds in flags.items():
                    found[name].extend(conds)
            table.update(found)
            for name in wanted:
                self._remember_warnings(f"flags:{name}", mark)
            self._dirty = True
        return {n: table[n] for n in names if n in table}

    def origin_role(self, origin: Origin, context_role: str) -> str:
        return origin[1] if origin[0] == "seed" else context_role
