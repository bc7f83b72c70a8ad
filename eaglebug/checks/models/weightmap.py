"""Which checkpoint tensor names a draft class's `load_weights` can place, read from its source.

SGLang's EAGLE draft loaders share one shape: rename legacy names (`name.replace(...)`, often
from a dict of old -> new), skip some names (`if "d2t" in name: ...; continue`), fold stacked
projections (`stacked_params_mapping`), then look the name up in `dict(self.named_parameters())`
as is or with a prefix (`f"model.{name}"`); a name found nowhere is dropped without a word.
That shape is read with `ast`; a loader that does anything else with the name (another loader,
a helper, an unknown rewrite) is not understood, and then no name is judged.

A name can be placed only if its first component is an attribute of the draft class (or, under
a `model.` prefix, of the class `__init__` assigns to `self.model`): that is a necessary
condition for being a key of `named_parameters()`, so a name that fails it is surely dropped.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from eaglebug.checks.models.draft_code import method_node
from eaglebug.checks.source import syntax
from eaglebug.checks.source.classes import ClassRef
from eaglebug.checks.source.index import TreeIndex

_NAME = "name"


@dataclass(frozen=True)
class LoaderShape:
    """What one `load_weights` does to a tensor name."""

    renames: tuple[tuple[str, str], ...]  # applied where the old text occurs
    skips: tuple[tuple[str, int], ...]  # (substring, line): names with it are consumed or dropped
    stacked: tuple[tuple[str, str], ...]  # (param part, checkpoint part)
    prefixes: tuple[str, ...]  # tried in front of the name ("" first)
    read_from: str  # file:line of load_weights

    def skip_line(self, text: str) -> int | None:
        return next((line for sub, line in self.skips if sub == text), None)

    def skip_site(self, text: str) -> str | None:
        """file:line where the loader consumes names holding `text` (d2t), if it does."""
        line = self.skip_line(text)
        return f"{self.read_from.rsplit(':', 1)[0]}:{line}" if line is not None else None


def loader_shape(index: TreeIndex, ref: ClassRef) -> LoaderShape | None:
    provider = index.classes.lookup(ref, "load_weights")
    if provider is None or provider.file is None:
        return None
    node = method_node(index, provider)
    if node is None or len(node.args.args) < 2:
        return None
    return _shape(node, f"{provider.file}:{provider.line}")


def _str(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _pairs(node: ast.expr) -> list[tuple[str, str]] | None:
    """A dict of str -> str, or a list of tuples whose first two items are strings."""
    if isinstance(node, ast.Dict):
        keys = [_str(k) if k is not None else None for k in node.keys]
        values = [_str(v) for v in node.values]
        if None in keys or None in values:
            return None
        return [(k, v) for k, v in zip(keys, values, strict=True) if k and v is not None]
    if isinstance(node, (ast.List, ast.Tuple)):
        out: list[tuple[str, str]] = []
        for elt in node.elts:
            if not isinstance(elt, ast.Tuple) or len(elt.elts) < 2:
                return None
            first, second = _str(elt.elts[0]), _str(elt.elts[1])
            if first is None or second is None:
                return None
            out.append((first, second))
        return out
    return None


def _shape(fn: ast.FunctionDef, where: str) -> LoaderShape | None:
    text = ast.unparse(fn)
    if "params_dict" not in text or ".load_weights(" in text or "WeightsLoader" in text:
        return None
    consts: dict[str, list[tuple[str, str]]] = {}
    renames: list[tuple[str, str]] = []
    skips: list[tuple[str, int]] = []
    stacked: list[tuple[str, str]] = []
    prefixes = [""]
    tables = False
    for node in syntax.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id != _NAME:
                pairs = _pairs(node.value)
                if pairs is not None:
                    consts[target.id] = pairs
            if isinstance(target, ast.Name) and target.id == _NAME:
                kind = _known_rewrite(node.value, renames)
                if kind is None:
                    return None
                tables |= kind == "table"
        if isinstance(node, (ast.If, ast.IfExp, ast.While)) and not _known_test(node.test):
            return None
        if isinstance(node, ast.If):
            sub = _contains_name(node.test)
            if sub is not None and any(isinstance(s, ast.Continue) for s in node.body):
                skips.append((sub, node.lineno))
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            if (
                len(parts) == 2
                and isinstance(parts[0], ast.Constant)
                and isinstance(parts[1], ast.FormattedValue)
                and isinstance(parts[1].value, ast.Name)
                and parts[1].value.id == _NAME
            ):
                prefixes.append(str(parts[0].value))
        if (
            isinstance(node, (ast.For, ast.comprehension))
            and _NAME in _targets(node)
            and not _is_weights_loop(node)
        ):
            return None
    if tables:  # the tables the loops unpack: the stacked mapping, and dicts of old -> new
        if not consts:
            return None
        for key, table in consts.items():
            (stacked if "stack" in key else renames).extend(table)
    return LoaderShape(
        tuple(renames), tuple(skips), tuple(stacked), tuple(dict.fromkeys(prefixes)), where
    )


def _targets(node: ast.For | ast.comprehension) -> set[str]:
    return {n.id for n in syntax.walk(node.target) if isinstance(n, ast.Name)}


def _is_weights_loop(node: ast.For | ast.comprehension) -> bool:
    """`for name, loaded_weight in weights:` (the loop over the checkpoint itself)."""
    return isinstance(node.iter, ast.Name)


def _known_test(test: ast.expr) -> bool:
    """A test on the name this reader understands: `"x" in name` / `x not in name` (a
    substring), `name in params_dict` (the lookup); tests not on the name are fine too. Any
    other test on the name (`name.startswith(...)`, a regex) routes names in ways not read here."""
    mentions = any(isinstance(n, ast.Name) and n.id == _NAME for n in syntax.walk(test))
    if not mentions:
        return True
    if isinstance(test, ast.BoolOp):
        return all(_known_test(v) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _known_test(test.operand)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], (ast.In, ast.NotIn)):
        return False
    left, right = test.left, test.comparators[0]
    substring = isinstance(right, ast.Name) and right.id == _NAME and not _is_name(left)
    lookup = _is_name(left) and isinstance(right, ast.Name) and right.id != _NAME
    return substring or lookup


def _is_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == _NAME


def _contains_name(test: ast.expr) -> str | None:
    """`"x" in name` -> "x"."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and isinstance(test.comparators[0], ast.Name)
        and test.comparators[0].id == _NAME
    ):
        return _str(test.left)
    return None


def _known_rewrite(value: ast.expr, renames: list[tuple[str, str]]) -> str | None:
    """`name = name.replace(a, b)`: "const" (constants, recorded), "table" (the loop variables
    of a table of pairs), None (anything else)."""
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "replace"
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == _NAME
        and len(value.args) == 2
    ):
        return None
    old, new = (_str(a) for a in value.args)
    if old is not None and new is not None:
        renames.append((old, new))
        return "const"
    return "table" if all(isinstance(a, ast.Name) for a in value.args) else None


def unplaceable(
    index: TreeIndex, ref: ClassRef, shape: LoaderShape, names: frozenset[str]
) -> list[str]:
    """Checkpoint names the loader cannot place (sorted); skipped names are not among them."""
    inner = index.classes.inner_classes(ref, "model")
    out = []
    for original in sorted(names):
        name = original
        for old, new in shape.renames:
            if old in name:
                name = name.replace(old, new)
        if any(sub in name for sub, _ in shape.skips):
            continue
        for param, weight in shape.stacked:
            if weight in name:
                name = name.replace(weight, param)
                break
        if not any(_placeable(index, ref, inner, p + name) for p in shape.prefixes):
            out.append(original)
    return out


def _placeable(index: TreeIndex, ref: ClassRef, inner: list[ClassRef], name: str) -> bool:
    head, _, rest = name.partition(".")
    if index.classes.lookup(ref, head) is None:
        return False
    if head != "model" or not inner or not rest:
        return True
    second = rest.split(".", 1)[0]
    return any(index.classes.lookup(c, second) is not None for c in inner)
