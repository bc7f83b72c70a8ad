"""The evaluator's values: Python's own for what is known, and a closed set of kinds for the rest.

Known values are plain Python (None, bool, int, float, str, tuple, list, dict, set, range). What
the reading cannot know is `Top`: one unknown for every reason, carrying that reason and the
inputs it was computed from, so a finding can say why it could not decide and what would decide
it. `Top` has no truth value: testing it with `if` raises, so no caller can take an unknown as
false by accident (astroid's falsy `Uninferable` is the trap this avoids); `truth()` answers
True, False or None. Two branches that wrote different known values give `OneOf`.

The objects of the tree are values too: a class (`ClassVal`, the index's `ClassRef`), an object
of one (`Instance`, whose attributes live in the run's heap so that a branch can be forked and
merged), an enum member, a function (`FuncVal`, bound or not), a module, and the inputs a caller
hands in (`Bag`: an object whose attributes are dotted paths of one flat store, such as the
server args or a model's config.json). `Intrinsic` is an object outside the tree whose meaning a
plug-in gives (torch's dtypes, the platform).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eaglebug.checks.source.classes import ClassRef


@dataclass(frozen=True)
class Top:
    """A value the reading cannot know. `why` names the line and the reason; `reads` the inputs
    (server-args fields, config keys) it was computed from; `truth` is set when only its truth
    is known (`x or "auto"` with x unknown is truthy)."""

    why: str
    reads: frozenset[str] = frozenset()
    truth: bool | None = None
    # The exception Python's builtin raised on known values (`int("40960.5")`: ValueError): a
    # `try` around the call runs its matching `except` (`machine.py`); elsewhere, unknown.
    error: str | None = None
    # How it reads where only its text is wanted (a raise's message): an f-string with an
    # unknown part, `{expression}` in place of that part. The value itself stays unknown.
    text: str | None = None

    def __bool__(self) -> bool:
        raise TypeError(f"an unknown value has no truth value ({self.why}): use truth()")

    def __repr__(self) -> str:
        return f"Top({self.why!r})"


@dataclass(frozen=True)
class OneOf:
    """One of a few known values (two branches wrote different ones). Never holds a `Top`
    (a merge with an unknown is unknown) and never a single value. `reads` names the inputs
    that chose among them (the undecided tests' reads), as `Top.reads` does for an unknown:
    a finding that rests on the choice can say what decides it."""

    values: tuple[Any, ...]
    reads: frozenset[str] = field(default=frozenset(), compare=False)

    def __bool__(self) -> bool:
        raise TypeError("OneOf has no single truth value: use truth()")


@dataclass(frozen=True)
class ClassVal:
    """A class: of the audited tree (`ref`), or outside it, known by its qualified name."""

    qualname: str
    ref: ClassRef | None = field(default=None, compare=False, hash=False)

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Instance:
    """An object made by the run. Its attributes live in the heap under `oid`; `path` is set for
    a `Bag` view into a flat store (`model_config.hf_config`)."""

    oid: int
    cls: ClassVal | None
    path: str = ""

    def child(self, attr: str) -> Instance:
        return Instance(self.oid, self.cls, f"{self.path}.{attr}" if self.path else attr)

    def key(self, attr: str) -> str:
        return f"{self.path}.{attr}" if self.path else attr


@dataclass(frozen=True)
class EnumMember:
    """`Backend.DISABLED`: compared by identity (class and name), `.name` and `.value` known."""

    cls: ClassVal
    name: str
    value: Any = field(compare=False, hash=False)


@dataclass(frozen=True)
class FunctionSite:
    """A function of the tree: where it is, and its node (parsed once per file per run)."""

    rel: str  # the file, relative to the tree root
    module: str
    qualname: str  # `Class.method` or `function`
    # None until the function runs: a module function found from the file's facts is parsed
    # only when called (`Source.node_of`), so a name that is only passed around costs nothing.
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | None = field(
        default=None, compare=False, hash=False
    )
    line: int = field(default=0, compare=False, hash=False)

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def where(self) -> str:
        return f"{self.rel}:{self.node.lineno if self.node is not None else self.line}"


@dataclass(frozen=True)
class FuncVal:
    """A function of the tree, maybe bound (`self.m`: `bound` is the object, `owner` the class
    whose body defines it, for `super()` and `self.other()`)."""

    site: FunctionSite
    owner: ClassVal | None = None
    bound: Any = field(default=None, compare=False, hash=False)
    kind: str = "function"  # function | method | static | class | property
    closure: tuple[tuple[str, Any], ...] = field(default=(), compare=False, hash=False)


@dataclass(frozen=True)
class ModuleVal:
    """A module of the tree (or outside it): attributes are its top-level names."""

    name: str


@dataclass(frozen=True)
class Intrinsic:
    """An object outside the tree that a plug-in gives meaning to, by qualified name
    (`torch.float16`, `torch.cuda`): attributes and calls go to the plug-in."""

    qualname: str
    data: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class Raised:
    """A raise (or failing assert) the tree would reach: where, what, why, and whether every
    test on the path to it was decided (`definite`), or it rests on undecided ones."""

    rel: str
    line: int
    function: str
    kind: str  # ValueError | AssertionError | ...
    message: str | None
    reads: frozenset[str] = frozenset()  # the inputs its path's tests read
    condition: str = ""  # those tests, as written
    definite: bool = True


class PartialDict(dict[str, Any]):
    """A dict of which only some keys are known to be absent (`known`): the server's
    environment, where eaglebug knows the variables SGLang declares but not every other one
    the shell exports. A key it lacks is absent when in `known`, else unknown."""

    def __init__(self, items: dict[str, Any], known: frozenset[str]) -> None:
        super().__init__(items)
        self.known = known

    def absent(self, key: Any) -> bool | None:
        if key in self:
            return False
        return True if key in self.known else None


UNSET: Any = object()  # a parameter with no argument and no default
MISSING: Any = object()  # an attribute the object certainly lacks


def is_known(value: Any) -> bool:
    """A value with no unknown in it (a tuple of knowns is known; OneOf is not)."""
    if isinstance(value, (Top, OneOf)):
        return False
    if isinstance(value, (tuple, list, set, frozenset)):
        return all(is_known(v) for v in value)
    if isinstance(value, dict):
        return all(is_known(k) and is_known(v) for k, v in value.items())
    return True


def first_top(values: Iterable[Any]) -> Top | None:
    for value in values:
        if isinstance(value, Top):
            return value
    return None


def reads_of(*values: Any) -> frozenset[str]:
    out: set[str] = set()
    for value in values:
        if isinstance(value, (Top, OneOf)):
            out |= value.reads
    return frozenset(out)


def truth(value: Any) -> bool | None:
    """Python's truth of a value, or None when it is not known."""
    if isinstance(value, Top):
        return value.truth
    if isinstance(value, OneOf):
        truths = {truth(v) for v in value.values}
        return truths.pop() if len(truths) == 1 else None
    if isinstance(value, (ClassVal, Instance, EnumMember, FuncVal, ModuleVal)):
        return True
    if isinstance(value, Intrinsic):
        return True
    try:
        return bool(value)
    except Exception:  # an object whose truth the reading cannot have
        return None


def same(a: Any, b: Any) -> bool:
    """Equal and of the same type (1 and True and 1.0 are three values for a merge)."""
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def alternatives(value: Any) -> tuple[Any, ...]:
    return value.values if isinstance(value, OneOf) else (value,)


def one_of(values: Iterable[Any], limit: int, chosen_by: frozenset[str] = frozenset()) -> Any:
    """The merge of several values: the value itself when they agree, `OneOf` of up to `limit`
    distinct ones, else unknown (with the reads of every unknown among them). `chosen_by`: what
    the test that split the paths read; a `OneOf` or unknown made here carries it."""
    out: list[Any] = []
    reads: set[str] = set(chosen_by)
    for value in values:
        if isinstance(value, OneOf):
            reads |= value.reads
        for v in alternatives(value):
            if isinstance(v, Top):
                reads |= v.reads
                out.append(v)
            elif not any(same(v, seen) for seen in out):
                out.append(v)
    tops = [v for v in out if isinstance(v, Top)]
    if tops:
        truths = {truth(v) for v in out}
        joint = truths.pop() if len(truths) == 1 else None
        return Top(tops[0].why, frozenset(reads), joint)
    if len(out) == 1:
        return out[0]
    if len(out) > limit:
        return Top(f"more than {limit} alternatives", frozenset(reads))
    return OneOf(tuple(out), frozenset(reads))


def merged_mapping(
    a: Mapping[Any, Any], b: Mapping[Any, Any], limit: int, chosen_by: frozenset[str], one_path: str
) -> dict[Any, Any]:
    """Two paths' mappings (locals, an object's attributes, a dict's items) as one, in `a`'s
    order then `b`'s: a key both hold, the value or its alternatives (`one_of`); a key one
    holds, unknown, said by `one_path` (formatted with `key`)."""
    out: dict[Any, Any] = {}
    for key in [*a, *(k for k in b if k not in a)]:
        if key in a and key in b:
            x, y = a[key], b[key]
            out[key] = x if x is y else one_of((x, y), limit, chosen_by)
        else:
            out[key] = Top(one_path.format(key=key), chosen_by)
    return out


def message_text(value: Any) -> str | None:
    """A value as a message reads it: a string, or an f-string's text with its unknown parts
    left as `{expression}` (`Top.text`); None for anything else."""
    if isinstance(value, str):
        return value
    return value.text if isinstance(value, Top) else None
