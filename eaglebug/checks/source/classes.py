"""Classes of one tree: resolving names through imports, bases, and where an attribute comes from.

Answers "does class C provide attribute X, and from where": its own methods, properties,
class attributes and `self.x = ...` in `__init__`, then its bases in lookup order (following
imports, absolute and relative, to the files that define them), then what every object and
every `torch.nn.Module` has, then what a forwarding `__getattr__` reaches on an inner object.
Also the model registry: which classes each `EntryClass` exports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from eaglebug.checks.source.answers import Answers
from eaglebug.checks.source.classfacts import (
    ClassFacts,
    InnerAssignment,
    MethodFacts,
    ModuleFacts,
    resolve_relative,
)
from eaglebug.checks.source.external import ExternalRule
from eaglebug.checks.source.facts import RUNTIME
from eaglebug.checks.source.files import SourceFiles
from eaglebug.checks.source.package import PackageFiles

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
# How deep a forwarding `__getattr__` is followed into inner objects.
_MAX_FORWARD_DEPTH = 3


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
class RegistryPick:
    """An inner class picked through the model registry from a config, as Llava picks its
    language model: where the tree asks the registry, and what was read to choose."""

    file: str
    line: int
    config: str  # the config expression handed over, e.g. `self.text_config`
    architecture: str | None  # read from the model's config; None: every candidate counts
    config_read: bool = False  # a model's config.json was read (and named no architecture)


@dataclass(frozen=True)
class Choice:
    """One class an inner attribute may hold, and what picks it."""

    ref: ClassRef
    when: str | None
    pick: RegistryPick | None = None


class ClassIndex:
    def __init__(self, files: SourceFiles, answers: Answers) -> None:
        self.files = files
        self.answers = answers
        # Config expression's last name (`text_config`) -> the architecture its `config.json`
        # names: how a registry pick is resolved when the model's config is known.
        self.config_architectures: dict[str, str] = {}
        self.config_known = False  # a model's config.json was read (--model-path)
        self._candidates: dict[str, list[ClassRef]] = {}
        # An out-of-tree model package the registry loads (`external.py`), and how it does.
        self.external: PackageFiles | None = None
        self.external_rule: ExternalRule | None = None
        # Lookup orders by class, for this index's files: an audit of every registered class
        # asks for the same few hundred orders hundreds of thousands of times.
        self._orders: dict[str, tuple[tuple[ClassRef, ...], tuple[str, ...], bool]] = {}

    def use_external(self, files: PackageFiles, rule: ExternalRule) -> None:
        self.external = files
        self.external_rule = rule
        self._candidates = {}
        self._orders = {}  # a base may now resolve into the package

    def use_model_config(self, config: Mapping[str, object]) -> None:
        """With the target's `config.json` known, a class the registry picks from one of its
        sub-configs (`text_config`) is the one that sub-config's `architectures[0]` names."""
        self.config_known = True
        self.config_architectures = {}
        for key, value in config.items():
            archs = value.get("architectures") if isinstance(value, dict) else None
            if isinstance(archs, list) and archs and isinstance(archs[0], str):
                self.config_architectures[key] = archs[0]

    @property
    def choice_key(self) -> str:
        """What the answers about classes depend on besides the tree (the model's config)."""
        key = self.external.stamp_key if self.external is not None else ""
        if not self.config_known:
            return key
        picks = ",".join(f"{k}={v}" for k, v in sorted(self.config_architectures.items()))
        return f"{key}|config:{picks}"

    @property
    def external_key(self) -> str:
        return self.external.stamp_key if self.external is not None else ""

    # -- names ------------------------------------------------------------------------------
    def cls(self, qualified: str, _depth: int = 0) -> ClassRef | None:
        """The class a qualified name refers to, following re-exports through imports."""
        external = self.external
        if external is not None and external.package.owns_module(qualified.rpartition(".")[0]):
            split = external.split_qualified(qualified)
            files: SourceFiles | PackageFiles = external
        else:
            split = self.files.split_qualified(qualified)
            files = self.files
        if split is None or _depth > 8:
            return None
        module_name, name = split
        facts = files.module(module_name)
        if facts is None or "." in name:
            return None
        found = facts.classes.get(name)
        if found is not None:
            rel = files.module_files[module_name]
            return ClassRef(f"{module_name}.{name}", rel, found, facts)
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

    def classes_named(self, name: str) -> list[ClassRef]:
        """Classes with this short name anywhere in the tree (and the external package)."""
        found = []
        if self.external is not None:
            for _, facts in self.external.class_files():
                if name in facts.classes:
                    ref = self.cls(f"{facts.module}.{name}")
                    if ref is not None:
                        found.append(ref)
        for rel, entry in self.files.entries.items():
            if name in entry.class_names:
                module, _ = self.files.module_of(rel)
                ref = self.cls(f"{module}.{name}")
                if ref is not None:
                    found.append(ref)
        return found

    def unparsed_files_defining(self, name: str) -> list[tuple[str, str]]:
        """(file, why) for each file that would define class `name` but does not parse."""
        broken = [
            (rel, entry.error)
            for rel, entry in self.files.entries.items()
            if name in entry.class_names and entry.error is not None
        ]
        if self.external is not None:
            broken += [
                (str(self.external.package.root / rel), why)
                for rel, why in self.external.errors().items()
                if f"class {name}".encode() in (self.external.package.root / rel).read_bytes()
            ]
        return broken

    def all_class_names(self) -> set[str]:
        names = {name for entry in self.files.entries.values() for name in entry.class_names}
        if self.external is not None:
            names.update(n for _, facts in self.external.class_files() for n in facts.classes)
        return names

    # -- the registry -----------------------------------------------------------------------
    def registry(self) -> dict[str, list[ClassRef]]:
        """Architecture name -> the classes exported through `EntryClass` by the model files."""
        exported: dict[str, list[ClassRef]] = {}
        for rel, entry in self.files.entries.items():
            if not entry.has_entry_class or not rel.startswith(RUNTIME):
                continue
            facts = self.files.ensure_parsed(rel).facts
            if facts is None:
                continue
            for name in facts.entry_classes:
                ref = self.cls(self.resolve(facts, name))
                if ref is not None:
                    exported.setdefault(ref.facts.name, []).append(ref)
        for name, refs in self._external_exports().items():
            if self.external_rule is not None and self.external_rule.overrides:
                exported[name] = refs
            else:
                exported.setdefault(name, []).extend(refs)
        return exported

    def _external_exports(self) -> dict[str, list[ClassRef]]:
        """Architecture name -> the classes the external package's modules export."""
        exported: dict[str, list[ClassRef]] = {}
        if self.external is None:
            return exported
        for _, facts in self.external.entry_modules(self.external_rule):
            for name in facts.entry_classes:
                ref = self.cls(self.resolve(facts, name))
                if ref is not None:
                    exported.setdefault(ref.facts.name, []).append(ref)
        return exported

    def exporter_names(self, name: str) -> list[str]:
        """The qualified classes registered for one architecture (kept as a tree answer):
        the external package's first, and only they where its classes override."""
        external = [r.qualname for r in self._external_exports().get(name, [])]
        if external and self.external_rule is not None and self.external_rule.overrides:
            return external
        built_in = self.answers.answer(
            f"exporters:{name}",
            list[str],
            self.files.warnings,
            lambda: [r.qualname for r in self._exporters_of(name)],
        )
        return [*built_in, *external]

    def is_external(self, ref: ClassRef) -> bool:
        return self.external is not None and self.external.owns(ref.file)

    def exporters_of(self, name: str) -> list[ClassRef]:
        """Registry entries for one architecture, parsing only files that could name it."""
        return [r for r in (self.cls(q) for q in self.exporter_names(name)) if r is not None]

    def _exporters_of(self, name: str) -> list[ClassRef]:
        needle = name.encode()
        found: list[ClassRef] = []
        for rel, entry in self.files.entries.items():
            if not entry.has_entry_class or not rel.startswith(RUNTIME):
                continue
            data = self.files.source(rel)
            if data is None or needle not in data:
                continue
            self.files.keep_source(rel, data)
            facts = self.files.ensure_parsed(rel).facts
            if facts is None:
                continue
            for entry_name in facts.entry_classes:
                if entry_name.rsplit(".", 1)[-1] != name:
                    continue
                ref = self.cls(self.resolve(facts, entry_name))
                if ref is not None:
                    found.append(ref)
        return found

    # -- bases and lookup -------------------------------------------------------------------
    def bases(self, ref: ClassRef) -> tuple[list[ClassRef], list[str], bool]:
        """(bases inside the tree, bases outside it, derives from torch.nn.Module)."""
        inside: list[ClassRef] = []
        outside: list[str] = []
        nn_module = False
        for base in ref.facts.bases:
            qualified = self.resolve(ref.module, base)
            if qualified == ref.qualname and base in ref.module.imports:
                qualified = ref.module.imports[base]  # `class X(X)`: the X it imports
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
        found = self._orders.get(ref.qualname)
        if found is None or found[0][0].facts is not ref.facts:  # the same class, as parsed here
            order: list[ClassRef] = []
            externals: list[str] = []
            nn_module = self._visit(ref, order, externals, set())
            found = self._orders[ref.qualname] = (tuple(order), tuple(externals), nn_module)
        return list(found[0]), list(found[1]), found[2]

    def _visit(
        self, current: ClassRef, order: list[ClassRef], externals: list[str], seen: set[str]
    ) -> bool:
        """One class of the lookup order, then its bases; derives from torch.nn.Module?
        (A method, not a recursive closure: a closure that calls itself is a cycle, never
        freed by the CLI, which runs with the cyclic collector off.)"""
        if current.qualname in seen:
            return False
        seen.add(current.qualname)
        order.append(current)
        inside, outside, nn_module = self.bases(current)
        externals.extend(o for o in outside if o not in externals)
        for base in inside:
            nn_module = self._visit(base, order, externals, seen) or nn_module
        return nn_module

    def lookup(self, ref: ClassRef, attribute: str, _depth: int = 0) -> Provider | None:
        order, _, nn_module = self.mro(ref)
        chain: list[str] = []
        for current in order:
            chain.append(current.qualname)
            found = _own(current, attribute, tuple(chain))
            if found is not None:
                return found
        if attribute in _OBJECT_ATTRS:
            return Provider(attribute, "object", "object", None, None, (*chain, "object"))
        if nn_module and attribute in NN_MODULE_ATTRS:
            return Provider(
                attribute, "torch.nn.Module", "nn.Module", None, None, (*chain, "torch.nn.Module")
            )
        if _depth < _MAX_FORWARD_DEPTH:
            for current in order:
                inner_attr = current.facts.getattr_forward
                if not inner_attr:
                    continue
                # The inner object may be any of its classes: forwarded only what all provide.
                inner = self.inner_classes(current, inner_attr)
                found_all = [self.lookup(c, attribute, _depth + 1) for c in inner]
                if not found_all or any(f is None for f in found_all):
                    continue
                found = found_all[0]
                assert found is not None
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
                return [c.ref for c in self.inner_choices(current, inner)]
        return []

    def inner_choices(self, current: ClassRef, inner: InnerAssignment) -> list[Choice]:
        """The classes one `self.x = ...` of `current`'s `__init__` may assign, with what
        picks each; a class the registry picks from a config is resolved here."""
        out: list[Choice] = []
        seen: set[str] = set()
        for written, when in zip(inner.classes, inner.conditions, strict=True):
            if written.startswith("@self:"):
                found = []  # made by a method of the instance: `interface/delegates.py` runs it
            elif written.startswith("@registry:"):
                found = self._registry_choices(current, written)
            else:
                ref = self.resolve_class(current, written)
                found = [Choice(ref, when)] if ref is not None else []
            for choice in found:
                if choice.ref.qualname not in seen:
                    seen.add(choice.ref.qualname)
                    out.append(choice)
        return out

    def _registry_choices(self, current: ClassRef, written: str) -> list[Choice]:
        """`cls = self.m(config, Auto...)`, `self.x = cls(...)`: if `m` asks the registry,
        the class the model's config names (when known), else every class the registry
        could give for that kind of model (`AutoModelForCausalLM`: the causal LMs)."""
        _, method_name, config, kind = written.split(":", 3)
        method = None
        for owner in self.mro(current)[0]:
            method = owner.facts.methods.get(method_name)
            if method is not None:
                break
        if method is None or method.registry_line is None:
            return []
        key = config.rsplit(".", 1)[-1]
        architecture = self.config_architectures.get(key)
        pick = RegistryPick(
            owner.file, method.registry_line, config, architecture, self.config_known
        )
        if architecture is not None:
            refs = self.exporters_of(architecture)[:1]
        elif kind.rsplit(".", 1)[-1] == "AutoModelForCausalLM":
            # The language models the wrapper's own module names come first (Llava imports
            # Llama, Qwen2, Mistral): they lead what the finding lists, and give the fix's
            # signature.
            named = set(current.module.imports.values())
            refs = sorted(self.causal_lms(), key=lambda r: r.qualname not in named)
        else:
            refs = []
        return [Choice(ref, None, pick) for ref in refs]

    def causal_lms(self) -> list[ClassRef]:
        """The registered `*ForCausalLM` classes: what the registry may give a text config."""
        if "causal" not in self._candidates:
            names = self.answers.answer(
                f"registry:causal_lms{self.external_key}",
                list[str],
                self.files.warnings,
                lambda: sorted(
                    ref.qualname
                    for name, refs in self.registry().items()
                    if name.endswith("ForCausalLM")
                    for ref in refs[:1]
                ),
            )
            self._candidates["causal"] = [r for r in (self.cls(q) for q in names) if r]
        return self._candidates["causal"]

    def dynamic_getattr(self, ref: ClassRef) -> str | None:
        order, _, _ = self.mro(ref)
        for current in order:
            if current.facts.getattr_dynamic:
                return current.qualname
        return None


def _own(current: ClassRef, attribute: str, chain: tuple[str, ...]) -> Provider | None:
    """The attribute as `current` itself defines it: a method, a class attribute, or an
    attribute its `__init__` assigns."""
    facts = current.facts
    method = facts.methods.get(attribute)
    if method is not None:
        return Provider(
            attribute, current.qualname, method.kind, current.file, method.line, chain, method
        )
    if attribute in facts.class_attrs:
        line = facts.class_attrs[attribute]
        return Provider(attribute, current.qualname, "class attribute", current.file, line, chain)
    if attribute in facts.init_attrs:
        line = facts.init_attrs[attribute]
        return Provider(
            attribute, current.qualname, "__init__ attribute", current.file, line, chain
        )
    return None
