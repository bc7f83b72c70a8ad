"""Objects for the memory evaluator: the tree's classes, their instances, methods and fields.

A hybrid model's state size is not flat arithmetic: Qwen3-Next's `Qwen3NextConfig` (the class
SGLang registers for `model_type: qwen3_next`) has a property `mamba2_cache_params` that calls
the static `Mamba2StateShape.create(...)` and builds a `Mamba2CacheParams` dataclass, whose
inherited property `mamba_cache_per_req` sums the state shapes with `np.prod` / `np.sum` and
the dtypes' sizes; `hybrid_gdn_config` is an `isinstance` test against that class. Here those
classes are read from the tree (`ast`, never imported) and given the little Python meaning
the evaluator needs: an instance with its own attribute dict and class, attribute lookup
through the class's bases (properties run, methods bound, class constants, enum members with
`.value`), `@dataclass` construction from the fields (defaults, `default_factory`,
`__post_init__`), `@staticmethod`, and `isinstance` by the class's base names.
"""

from __future__ import annotations

import ast
import contextlib
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eaglebug.checks.pyeval.memops import Ref, Unknown

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.memeval import Evaluator


@dataclass(frozen=True)
class Block:
    """One top-level class or function of the tree, as its text (kept in a tree answer)."""

    name: str
    file: str
    line: int
    text: str


@dataclass(frozen=True)
class ObjectSources:
    """The config class the tree registers for one `model_type`, and what it reaches."""

    model_type: str
    config_class: str  # "" when the tree registers none for this model_type
    class_from: str  # file:line of that class
    registry_from: str  # file:line of the tree's registry of config classes
    classes: tuple[Block, ...] = ()
    functions: tuple[Block, ...] = ()
    # the flags the tree copies into the variables these blocks read (memrules.flag_env)
    flag_env: tuple[tuple[str, str, str], ...] = ()  # (field, variable, file:line)


@dataclass
class ClassInfo:
    name: str
    file: str
    node: ast.ClassDef
    bases: tuple[str, ...]
    decorators: frozenset[str]

    @property
    def is_dataclass(self) -> bool:
        return "dataclass" in self.decorators

    @property
    def is_enum(self) -> bool:
        return any(b.endswith("Enum") for b in self.bases)

    def own(self, name: str) -> ast.stmt | None:
        """The class body's definition of `name` (a method, or an assignment)."""
        for stmt in self.node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return stmt
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in stmt.targets
            ):
                return stmt
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == name
                and stmt.value is not None
                and not self.is_dataclass
            ):
                return stmt
        return None


@dataclass(eq=False)
class Instance:
    """An object of a tree class: its own attributes, its class for the rest."""

    cls: ClassInfo
    attrs: dict[str, object] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<{self.cls.name}>"


@dataclass(frozen=True)
class EnumMember:
    owner: str
    name: str
    value: object


@dataclass(frozen=True)
class Union:
    """`A | B | C` of classes, for `isinstance` (the names are enough: no class is loaded
    that the model's config is not)."""

    names: tuple[str, ...]


MISSING = Unknown("no such attribute")


class ClassTable:
    """The classes and module functions of `ObjectSources`, parsed once."""

    def __init__(self, sources: ObjectSources) -> None:
        self.sources = sources
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self.function_files: dict[str, str] = {}
        for block in sources.classes:
            node = _parse(block)
            if isinstance(node, ast.ClassDef):
                bases = tuple(ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases)
                decorators = frozenset(_decorator(d) for d in node.decorator_list)
                self.classes.setdefault(
                    block.name, ClassInfo(block.name, block.file, node, bases, decorators)
                )
        self.constants: dict[str, object] = {}  # the modules' `NAME = <literal>` lines
        for block in sources.functions:
            if not block.text.startswith(("def ", "@", "async ")):
                with contextlib.suppress(ValueError, SyntaxError):
                    self.constants.setdefault(block.name, ast.literal_eval(block.text))
                continue
            node = _parse(block)
            if isinstance(node, ast.FunctionDef):
                self.functions.setdefault(block.name, node)
                self.function_files.setdefault(block.name, block.file)

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """The class and its in-tree bases, depth first (what these configs need)."""
        out: list[ClassInfo] = []
        todo = [cls]
        while todo:
            current = todo.pop(0)
            if current in out:
                continue
            out.append(current)
            todo.extend(self.classes[b] for b in current.bases if b in self.classes)
        return out

    def names(self, cls: ClassInfo) -> set[str]:
        """Every base name, the out-of-tree ones too (`PretrainedConfig`)."""
        return {c.name for c in self.mro(cls)} | {b for c in self.mro(cls) for b in c.bases}

    def lookup(self, cls: ClassInfo, name: str) -> tuple[ClassInfo, ast.stmt] | None:
        for owner in self.mro(cls):
            found = owner.own(name)
            if found is not None:
                return owner, found
        return None

    def fields(self, cls: ClassInfo) -> list[tuple[str, ast.expr | None]]:
        """A dataclass's fields, the bases' first (as `dataclasses` orders them)."""
        out: dict[str, ast.expr | None] = {}
        for owner in reversed(self.mro(cls)):
            if not owner.is_dataclass:
                continue
            for stmt in owner.node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    out[stmt.target.id] = stmt.value
        return list(out.items())


_TABLES: dict[int, ClassTable] = {}


def class_table(sources: ObjectSources) -> ClassTable:
    """The parsed classes of these sources, once per sources (a prediction makes many)."""
    kept = _TABLES.get(id(sources))
    if kept is not None and kept.sources is sources:
        return kept
    if len(_TABLES) > 4:
        _TABLES.clear()
    _TABLES[id(sources)] = ClassTable(sources)
    return _TABLES[id(sources)]


def _decorator(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(target).rsplit(".", 1)[-1]


def _parse(block: Block) -> ast.stmt | None:
    try:  # blank lines first: the file's own line numbers
        module = ast.parse("\n" * (block.line - 1) + textwrap.dedent(block.text))
    except SyntaxError:
        return None
    return module.body[0] if module.body else None


def kind_of(node: ast.FunctionDef) -> str:
    names = {_decorator(d) for d in node.decorator_list}
    if names & {"property", "cached_property"}:
        return "property"
    if "staticmethod" in names:
        return "static"
    if "classmethod" in names:
        return "class"
    return "method"


# -- what the evaluator asks -------------------------------------------------------------------
def attribute(ev: Evaluator, owner: object, attr: str, where: str) -> object:
    """`owner.attr` for an instance, a class or an enum member."""
    table = ev.objects
    if isinstance(owner, EnumMember):
        return {"value": owner.value, "name": owner.name}.get(attr, Unknown(f"{where}: {attr}"))
    if isinstance(owner, Instance):
        if attr in owner.attrs:
            return owner.attrs[attr]
        cls = owner.cls
    elif isinstance(owner, ClassInfo):
        cls = owner
    else:
        return Unknown(f"{where}: {attr}")
    found = table.lookup(cls, attr) if table is not None else None
    if found is None:
        return Unknown(f"{where}: {cls.name}.{attr} is not in the tree's class")
    home, stmt = found
    if isinstance(stmt, ast.FunctionDef):
        kind = kind_of(stmt)
        if kind == "property" and isinstance(owner, Instance):
            return ev.call_method(home.file, stmt, [], {}, owner)
        return Unknown(f"{where}: {cls.name}.{attr} is a method")
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
    made = ev.value(value, home.file) if value is not None else None
    if home.is_enum and isinstance(owner, ClassInfo):
        return EnumMember(home.name, attr, made)
    return made


def call(
    ev: Evaluator, owner: object, attr: str, args: list[object], kwargs: dict[str, object]
) -> object:
    """`owner.attr(...)`: a method of an instance, a static or class method, a list's
    `append`; MISSING when the owner has no such method the tree defines."""
    if isinstance(owner, list) and attr in {"append", "extend"}:
        getattr(owner, attr)(*args)
        return None
    if isinstance(owner, dict) and attr in {"get", "keys", "values", "items"}:
        made = getattr(owner, attr)(*args)
        return made if attr == "get" else list(made)
    table = ev.objects
    if isinstance(owner, Ref) and table is not None and f"PretrainedConfig.{attr}" in BASE_METHODS:
        # a config the tree registers no class for is transformers' own: its base methods
        return BASE_METHODS[f"PretrainedConfig.{attr}"](ev, [owner, *args], kwargs)
    cls = owner.cls if isinstance(owner, Instance) else owner
    if table is None or not isinstance(cls, ClassInfo):
        return MISSING  # not a tree object: the evaluator's other readings apply
    found = table.lookup(cls, attr)
    if found is None or not isinstance(found[1], ast.FunctionDef):
        base = next(
            (
                BASE_METHODS[f"{n}.{attr}"]
                for n in table.names(cls)
                if f"{n}.{attr}" in BASE_METHODS
            ),
            None,
        )
        return base(ev, [owner, *args], kwargs) if base is not None else MISSING
    home, stmt = found
    assert isinstance(stmt, ast.FunctionDef)
    kind = kind_of(stmt)
    if kind == "static":
        return ev.call_method(home.file, stmt, args, kwargs, None)
    if kind == "class":
        return ev.call_method(home.file, stmt, args, kwargs, cls)
    if isinstance(owner, Instance):
        return ev.call_method(home.file, stmt, args, kwargs, owner)
    return MISSING


def builtin(ev: Evaluator, name: str, args: list[object], where: str) -> object:
    """`isinstance` against tree classes, `getattr` / `hasattr` of a tree object."""
    if name == "isinstance" and len(args) == 2:
        tested = is_instance(ev.objects, args[0], args[1])
        return MISSING if tested is None else tested
    if name in {"getattr", "hasattr"} and len(args) >= 2 and isinstance(args[0], Instance):
        got = attribute(ev, args[0], str(args[1]), where)
        missing = isinstance(got, Unknown)
        if name == "hasattr":
            return not missing
        return (args[2] if len(args) > 2 else got) if missing else got
    return MISSING


def named(ev: Evaluator, name: str, args: list[object], kwargs: dict[str, object]) -> object:
    """`Name(...)`: a tree class constructed, or a module function of the config's modules
    (`mamba2_state_dtype`, `divide`); MISSING when it is neither."""
    table = ev.objects
    if table is None:
        return MISSING
    cls = table.classes.get(name)
    if cls is not None:
        return construct(ev, cls, args, kwargs)
    helper = table.functions.get(name)
    if helper is not None:
        return ev.call_method(table.function_files[name], helper, args, kwargs, None)
    return MISSING


def construct(
    ev: Evaluator, cls: ClassInfo, args: list[object], kwargs: dict[str, object]
) -> object:
    """`Cls(...)`: a dataclass from its fields, else the tree's `__init__` on a new object."""
    table = ev.objects
    assert table is not None
    made = Instance(cls)
    if any(c.is_dataclass for c in table.mro(cls)):
        given = dict(kwargs)
        for (name, _), value in zip(table.fields(cls), args, strict=False):
            given[name] = value
        for name, default in table.fields(cls):
            if name in given:
                made.attrs[name] = given[name]
            elif default is not None:
                made.attrs[name] = _default(ev, default, cls.file)
            else:
                made.attrs[name] = Unknown(f"{cls.name}.{name} not given")
        post = table.lookup(cls, "__post_init__")
        if post is not None and isinstance(post[1], ast.FunctionDef):
            ev.call_method(post[0].file, post[1], [], {}, made)
        return made
    init = table.lookup(cls, "__init__")
    if init is not None and isinstance(init[1], ast.FunctionDef):
        ev.call_method(init[0].file, init[1], args, kwargs, made)
    else:
        made.attrs.update(kwargs)
    return made


def _default(ev: Evaluator, node: ast.expr, file: str) -> object:
    """A field's default: `= v`, `field(default=v)`, `field(default_factory=f)`."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).rsplit(".", 1)[-1] == "field":
        for keyword in node.keywords:
            if keyword.arg == "default":
                return ev.value(keyword.value, file)
            if keyword.arg == "default_factory":
                factory = keyword.value
                if isinstance(factory, ast.Lambda):
                    return ev.value(factory.body, file)
                made = ev.value(ast.Call(func=factory, args=[], keywords=[]), file)
                return made
        return Unknown(f"{file}:{node.lineno}: field() without a default")
    return ev.value(node, file)


def from_config(ev: Evaluator, cls: ClassInfo, config: dict[str, object], where: str) -> Instance:
    """The registered config class made from config.json, as `from_pretrained` does: the
    class's own `__init__` on the keys it takes, every key kept as an attribute (as
    `PretrainedConfig` keeps the rest); a value `__init__` could not work out stays the
    file's."""
    made = Instance(cls, dict(config))
    found = ev.objects.lookup(cls, "__init__") if ev.objects is not None else None
    if found is not None and isinstance(found[1], ast.FunctionDef) and found[0] is cls:
        params = found[1].args
        taken = {a.arg for a in params.args + params.kwonlyargs}
        ev.call_method(
            cls.file, found[1], [], {k: v for k, v in config.items() if k in taken}, made
        )
    for key, value in config.items():
        if isinstance(made.attrs.get(key), (Unknown, Ref)):
            made.attrs[key] = value
    return made


def is_instance(table: ClassTable | None, value: object, kind: object) -> object:
    """`isinstance(x, A | B)` where x is a tree object (True / False) or where the kinds
    are classes (a Ref config is no tree class: False); None: not this module's case."""
    kinds = kind.names if isinstance(kind, Union) else None
    if kinds is None:
        if isinstance(kind, ClassInfo):
            kinds = (kind.name,)
        elif isinstance(kind, Ref) and kind.path[:1].isupper():
            kinds = (kind.path.rsplit(".", 1)[-1],)
        elif isinstance(kind, list) and all(isinstance(k, (Ref, ClassInfo)) for k in kind):
            kinds = tuple(k.name if isinstance(k, ClassInfo) else k.path for k in kind)
        else:
            return None
    if isinstance(value, Instance) and table is not None:
        return bool(table.names(value.cls) & set(kinds))
    if isinstance(value, Ref) and table is not None:
        return False  # the model's config is not a class the tree registers
    if value is None or isinstance(value, (bool, int, float, str, list, tuple, dict)):
        return False  # a plain value is no config class
    return None


def union(a: object, b: object) -> Union | None:
    """`A | B` where both sides are classes (or unions of them)."""
    names: list[str] = []
    for side in (a, b):
        if isinstance(side, Union):
            names.extend(side.names)
        elif isinstance(side, ClassInfo):
            names.append(side.name)
        elif isinstance(side, Ref) and side.path and side.path[:1].isupper():
            names.append(side.path.rsplit(".", 1)[-1])
        else:
            return None
    return Union(tuple(names))


# The out-of-tree base classes' methods the configs call (transformers' `PretrainedConfig`),
# what they answer: `get_text_config()` is the config itself unless it wraps a text config.
def _text_config(ev: Evaluator, args: list[object], kwargs: dict[str, object]) -> object:
    owner = args[0] if args else None
    if isinstance(owner, Instance):
        inner = owner.attrs.get("text_config")
        return inner if isinstance(inner, Instance) else owner
    if isinstance(owner, Ref):  # transformers' own config class: itself, or its text config
        inner = ev.values.get(f"{owner.path}.text_config")
        return Ref(f"{owner.path}.text_config") if isinstance(inner, dict) else owner
    return Unknown("get_text_config of a value")


BASE_METHODS: dict[str, Callable[[Evaluator, list[object], dict[str, object]], object]] = {
    "PretrainedConfig.get_text_config": _text_config,
}
