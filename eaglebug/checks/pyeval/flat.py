"""The flat store's attributes it does not hold: what a runtime object's field is when no
launch figure names it.

Why: SGLang's memory and argument code runs here on one flat object (`memory/reading.py`), the
launch's figures, standing for the runtime objects whose methods read them. A field the store
lacks is unknown, unless the classes the object stands for say more, each said in `assumed`:
- its `__init__` leaves it a constant or a module-level name (`_as_init_leaves_it`);
- it is a declared field whose class's own fields are the launch's figures (`ps:
  ParallelState`), so the store stands for it as it does for `self.server_args`;
- the running method is the one that fills it on first use (`unset_cache`: `if not
  hasattr(self, "_cache"): self._cache = ...`), so it is not set yet.

A config.json's nested mapping is held as dotted keys (`rope_scaling.factor`), read as
attributes where transformers makes a sub-config object of it (`text_config.num_hidden_layers`)
and as the dict it is where the code uses a dict's protocol on it (`as_mapping`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from eaglebug.checks.pyeval.values import MISSING, ClassVal, Instance, Top
from eaglebug.checks.source import syntax

if TYPE_CHECKING:
    from eaglebug.checks.pyeval.machine import Machine
    from eaglebug.checks.source.classes import ClassRef


def missing_field(m: Machine, cls: ClassVal, obj: Instance, attr: str, where: str) -> Any:
    """A field of the flat object that the store lacks, from the running class `cls`; else
    `MISSING`."""
    found = _as_init_leaves_it(m, cls, attr, where)
    if found is MISSING:
        found = _view_of_the_store(m, cls, obj, attr, where)
    return found


def unset_cache(m: Machine, owner: Any, attr: str, where: str) -> bool:
    """`hasattr(self, attr)` is false: the store lacks the attribute, and the running method
    assigns `self.<attr>` itself (0.5.11's `_get_linear_attn_registry_result`: `if not
    hasattr(self, "_linear_attn_registry_cache"): self._linear_attn_registry_cache = ...`).
    Taken as its first call; a later one would find what this call computes."""
    if not isinstance(owner, Instance) or owner.path or owner.oid not in m.heap.flat:
        return False
    if owner.key(attr) in m.heap.objects.get(owner.oid, {}):
        return False
    frame = m.stack[-1] if m.stack else None
    node = m.source.node_of(frame.site) if frame is not None and frame.site else None
    if node is None or isinstance(node, ast.Lambda):
        return False
    fills = bool(_self_stores(node, attr))
    if fills:
        m.assume(f"{where}: self.{attr} taken as not yet set (this method fills it on first use)")
    return fills


# The methods of a dict that only read it, answered on a config.json's nested mapping, and
# those that change it (after which it is unknown: `spoil`).
DICT_READS = frozenset({"get", "keys", "values", "items", "copy"})
DICT_WRITES = frozenset({"update", "pop", "popitem", "setdefault", "clear"})


def as_mapping(m: Machine, value: Any) -> dict[str, Any] | None:
    """A path of a complete input object (a config.json, `closed`) under which its store holds
    deeper keys, as the dict config.json has there; None for anything else.

    Why: the store cannot tell a nested mapping that stays a dict (`rope_scaling`,
    `quantization_config`, an EAGLE-3 draft's `eagle_config`) from one transformers makes a
    sub-config object of (`text_config`): both are dotted keys. The code that reads it says
    which: `rope_scaling.get("factor", 1)`, `"original_max_position_embeddings" in
    rope_scaling`, `quantization_config["quant_method"]` are a dict's protocol (a sub-config
    object has no `get` and no `[]`), so they are answered from the dict, a key it lacks absent
    as config.json is complete; an attribute read stays a read of the path. Nested mappings
    come back as dicts, in config.json's order. A write goes to the path: `d[k] = v` to its
    key, anything else makes the whole mapping unknown (`spoil`)."""
    if not isinstance(value, Instance) or not value.path:
        return None
    store = m.heap.objects.get(value.oid, {})
    if value.path in store:  # set as a whole (or spoilt): its keys below are not it
        return None
    if not m.heap.is_closed(value.oid, value.path) or not m.heap.deeper.under(store, value.path):
        return None
    out: dict[str, Any] = {}
    prefix = f"{value.path}."
    for key, held in store.items():
        if not key.startswith(prefix):
            continue
        head, deeper, _ = key[len(prefix) :].partition(".")
        if not deeper:
            out[head] = held
        elif head not in out:
            out[head] = as_mapping(m, value.child(head))
    return out


def view(m: Machine, value: Any) -> dict[str, Any] | Top | None:
    """What a dict's protocol on `value` reads: its mapping (`as_mapping`), or the unknown it
    became where it was spoilt; None for anything else."""
    if isinstance(value, Instance) and value.path:
        held = m.heap.objects.get(value.oid, {}).get(value.path)
        if isinstance(held, Top) and m.heap.is_closed(value.oid, value.path):
            return held
    return as_mapping(m, value)


def set_item(m: Machine, value: Any, key: Any, item: Any, rel: str, line: int) -> bool:
    """`mapping[key] = item` on a config.json's nested mapping (`as_mapping`): the key written
    where it is a plain name, else the mapping spoilt; False when `value` is no such mapping."""
    if as_mapping(m, value) is None:
        return False
    assert isinstance(value, Instance)
    if isinstance(key, str) and key and "." not in key:
        m.write(value, key, item, rel, line)
    else:
        spoil(m, value, f"{rel}:{line}: a key of {value.path} written")
    return True


def spoil(m: Machine, value: Instance, why: str) -> None:
    """The mapping at `value`'s path changed in a way the reading does not follow: it is
    unknown from here on (its path set as a whole, which reads take before its keys)."""
    m.heap.set(value.oid, value.path, Top(why))


def mapping_read(m: Machine, value: Any, attr: str) -> dict[str, Any] | Top | None:
    """The dict `value.attr(...)` reads, where `attr` is a reading method of a dict and the
    path holds no key of that name (`view`); else None."""
    if attr not in DICT_READS or not isinstance(value, Instance) or not value.path:
        return None
    store = m.heap.objects.get(value.oid, {})
    key = value.key(attr)
    if key in store or m.heap.deeper.under(store, key):
        return None
    return view(m, value)


# A declared field whose class shares at least this many field names with the flat store is
# read as a view of the store (`_view_of_the_store`).
_SHARED_FIELDS = 3


def _view_of_the_store(m: Machine, cls: ClassVal, obj: Instance, attr: str, where: str) -> Any:
    """A declared field of the running class (`ps: ParallelState`, a dataclass field no
    `__init__` assigns) whose class's own fields are the launch's figures the flat store holds
    (`tp_size`, `pp_size`, `attn_dp_size`, ...): the flat store itself, as `self.server_args`
    is (0.5.17-0.5.20's `KVCacheConfigurator.ps`, read as `self.ps.attn_dp_size`). A field of
    it the store lacks stays unknown. Said in `assumed`, with the fields it shares."""
    if cls.ref is None:
        return MISSING
    key = (f"{cls.ref.qualname}:view", attr)
    if key not in m.class_values:
        m.class_values[key] = _store_view(m, cls.ref, obj, attr)
    shared = m.class_values[key]
    if shared is MISSING:
        return MISSING
    holder, names = shared
    m.assume(
        f"{where}: self.{attr} ({holder}) read as the launch's own figures, the fields it "
        f"shares with them: {', '.join(names)}"
    )
    return obj


def _store_view(m: Machine, ref: ClassRef, obj: Instance, attr: str) -> Any:
    store = m.heap.objects.get(obj.oid, {})
    order, _ = m.source.mro(ref)
    for owner in order:
        node = m.source.class_node(owner)
        annotation = next(
            (
                stmt.annotation
                for stmt in (node.body if node is not None else [])
                if isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == attr
            ),
            None,
        )
        if annotation is None:
            continue
        name = annotation.value if isinstance(annotation, ast.Constant) else None
        name = annotation.id if isinstance(annotation, ast.Name) else name
        held = m.resolve(owner.module.module, name) if isinstance(name, str) else None
        held_node = (
            m.source.class_node(held.ref) if isinstance(held, ClassVal) and held.ref else None
        )
        fields = [
            stmt.target.id
            for stmt in (held_node.body if held_node is not None else [])
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
        ]
        names = [f for f in fields if f in store]
        if len(names) >= _SHARED_FIELDS and isinstance(held, ClassVal):
            return held.qualname.rsplit(".", 1)[-1], names
        return MISSING
    return MISSING


def _as_init_leaves_it(m: Machine, cls: ClassVal, attr: str, where: str) -> Any:
    """The value the class's `__init__` gives `self.<attr>`, where the flat store (the runtime
    object whose `__init__` ran) has none: only where that is the one assignment to it in
    `__init__`, a statement of its own body (not under a test or loop), of a constant or a
    module-level name (0.5.14's `self._linear_attn_registry_cache: Any = _UNSET`, a sentinel
    a lazy method tests with `is`). Said in `assumed`: a method run before this one may have
    changed it. Decided once per class and attribute in a run, a refusal too: a flat store
    misses many attributes its classes' `__init__` sets, each read many times."""
    if cls.ref is None:
        return MISSING
    order, _ = m.source.mro(cls.ref)
    ref = next((r for r in order if attr in r.facts.init_attrs), None)
    if ref is None:
        return MISSING
    key = (f"{ref.qualname}.__init__", attr)
    if key not in m.class_values:
        m.class_values[key] = _init_value(m, ref, attr)
    found, line = m.class_values[key]
    if found is not MISSING:
        m.assume(
            f"{where}: self.{attr} as {ref.qualname.rsplit('.', 1)[-1]}.__init__ leaves it "
            f"({ref.file}:{line}); a method run before this one may have changed it"
        )
    return found


def _init_value(m: Machine, ref: ClassRef, attr: str) -> tuple[Any, int]:
    """(the value, its line) of `__init__`'s one top-level `self.<attr> = <constant or
    name>`; (`MISSING`, 0) where `__init__` sets it otherwise, or to what is not known."""
    site = m.source.method(ref, "__init__")
    init = m.source.node_of(site) if site is not None else None
    if init is None or isinstance(init, ast.Lambda):
        return MISSING, 0
    stores = _self_stores(init, attr)
    own = [
        stmt
        for stmt in init.body
        if isinstance(stmt, (ast.Assign, ast.AnnAssign))
        and (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]) == stores
    ]
    if len(stores) != 1 or len(own) != 1:
        return MISSING, 0
    value = own[0].value
    if not isinstance(value, (ast.Constant, ast.Name)):
        return MISSING, 0
    with m.module_frame(ref.module.module):
        found = m.expr(value)
    return (MISSING, 0) if isinstance(found, Top) else (found, own[0].lineno)


def _self_stores(function: ast.AST, attr: str) -> list[ast.Attribute]:
    """Every `self.<attr>` the function assigns (any statement, any depth)."""
    return [
        node
        for node in syntax.walk(function)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ]
