"""The evaluator's objects on small code shapes: a config class with properties over its
bases, a dataclass built from its fields, a static constructor, enum members, module
constants, `isinstance` by class, numpy's reductions, and what stays unknown."""

from __future__ import annotations

import ast
import textwrap

from eaglebug.checks.pyeval.memeval import Evaluator, Ref, Unknown
from eaglebug.checks.pyeval.memobjects import (
    Block,
    ClassTable,
    Instance,
    ObjectSources,
    attribute,
    from_config,
)

# One module's shapes, as a config module and its state helpers are written in the tree.
MODULE = """
import enum
import numpy as np
from dataclasses import dataclass, field

ATTENTION = "*"


class LayerKind(enum.Enum):
    full = "full_attention"
    linear = "linear_attention"


@dataclass(kw_only=True, frozen=True)
class StateDType:
    conv: object
    temporal: object


def state_dtype(config=None):
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    return StateDType(conv=torch.bfloat16, temporal=table.get(config.ssm, torch.float32))


@dataclass(kw_only=True, frozen=True)
class BaseParams:
    dtype: StateDType = field(default_factory=lambda: state_dtype(None))
    layers: list

    @property
    def per_req(self):
        conv = int(np.sum([np.prod(s) for s in self.shape.conv]))
        return (conv * self.dtype.conv.itemsize + int(np.prod(self.shape.temporal))
                * self.dtype.temporal.itemsize) * len(self.layers)


@dataclass(kw_only=True, frozen=True)
class Shape:
    conv: list
    temporal: tuple

    @staticmethod
    def create(*, tp, heads, dim):
        return Shape(conv=[(heads * dim // tp, 3)], temporal=(heads // tp, dim, dim))


@dataclass(kw_only=True, frozen=True)
class Params(BaseParams):
    shape: Shape


class BaseConfig(PretrainedConfig):
    @property
    def kinds(self):
        out = []
        for i in range(self.num_hidden_layers):
            if self.pattern[i] == ATTENTION:
                out.append(LayerKind.full.value)
            else:
                out.append(LayerKind.linear.value)
        return out


class HybridConfig(BaseConfig):
    model_type = "hybrid"

    def __init__(self, heads=8, ssm="float32", **kwargs):
        self.heads = heads
        self.ssm = ssm
        super().__init__(**kwargs)

    @property
    def full_ids(self):
        return [i for i, k in enumerate(self.kinds) if k == LayerKind.full.value]

    @property
    def params(self):
        shape = Shape.create(tp=get_tp(), heads=self.heads, dim=self.dim)
        linear = [i for i, k in enumerate(self.kinds) if k != LayerKind.full.value]
        return Params(shape=shape, layers=linear, dtype=state_dtype(self))


def is_hybrid(config):
    return isinstance(config, HybridConfig | OtherConfig)
"""


def table() -> ClassTable:
    text = textwrap.dedent(MODULE)
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    classes, functions = [], []
    for node in tree.body:
        start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
        block = Block(
            getattr(node, "name", ""), "m.py", start, "".join(lines[start - 1 : node.end_lineno])
        )
        if isinstance(node, ast.ClassDef):
            classes.append(block)
        elif isinstance(node, ast.FunctionDef):
            functions.append(block)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            functions.append(
                Block(node.targets[0].id, "m.py", node.lineno, ast.unparse(node.value))
            )
    sources = ObjectSources(
        "hybrid", "HybridConfig", "m.py:1", "r.py:1", tuple(classes), tuple(functions)
    )
    return ClassTable(sources)


def evaluator(classes: ClassTable, tp: int = 2) -> Evaluator:
    values: dict[str, object] = {"torch.bfloat16.itemsize": 2, "torch.float32.itemsize": 4}
    stubs = {"get_tp": lambda ev, args, kwargs: tp}
    return Evaluator({}, values, stubs, objects=classes)


CONFIG = {"num_hidden_layers": 8, "pattern": "MMM*MMM*", "heads": 4, "dim": 16}


def test_a_config_object_runs_its_properties_through_its_bases() -> None:
    classes = table()
    ev = evaluator(classes)
    config = from_config(ev, classes.classes["HybridConfig"], CONFIG, "m.py:1")
    assert config.attrs["ssm"] == "float32"  # the class's own __init__ default
    assert attribute(ev, config, "full_ids", "t") == [3, 7]  # module constant, enum .value
    params = attribute(ev, config, "params", "t")
    assert isinstance(params, Instance) and params.cls.name == "Params"
    shape = params.attrs["shape"]
    assert isinstance(shape, Instance) and list(shape.attrs["temporal"]) == [2, 16, 16]
    # conv (4 * 16 / 2) x 3 bfloat16 + (2 x 16 x 16) float32, for 6 linear layers
    assert attribute(ev, params, "per_req", "t") == (32 * 3 * 2 + 512 * 4) * 6


def test_the_config_and_the_width_change_the_state() -> None:
    classes = table()
    ev = evaluator(classes, tp=1)
    half = from_config(ev, classes.classes["HybridConfig"], {**CONFIG, "ssm": "bfloat16"}, "")
    params = attribute(ev, half, "params", "t")
    assert attribute(ev, params, "per_req", "t") == (64 * 3 * 2 + 1024 * 2) * 6


def test_isinstance_is_by_the_class_and_its_bases() -> None:
    classes = table()
    ev = evaluator(classes)
    config = from_config(ev, classes.classes["HybridConfig"], CONFIG, "")
    node = next(
        n for n in ast.parse(textwrap.dedent(MODULE)).body if getattr(n, "name", "") == "is_hybrid"
    )
    assert isinstance(node, ast.FunctionDef)
    assert ev.call_method("m.py", node, [config], {}, None) is True
    # A config the tree registers no class for (transformers' own) is none of them.
    assert ev.call_method("m.py", node, [Ref("model_config.hf_config")], {}, None) is False


def test_what_the_class_does_not_define_stays_unknown() -> None:
    classes = table()
    ev = evaluator(classes)
    config = from_config(ev, classes.classes["HybridConfig"], CONFIG, "")
    missing = attribute(ev, config, "no_such_field", "t")
    assert isinstance(missing, Unknown) and "HybridConfig.no_such_field" in missing.why
