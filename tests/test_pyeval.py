"""The one evaluator on small code shapes: each rule of `eaglebug/checks/pyeval` shown on a few lines."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.pyeval.budget import Budget
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine, Observer, Policy, Result
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.state import Deeper
from eaglebug.checks.pyeval.values import UNSET, OneOf, Top, truth
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate


def machine(tmp_path: Path, files: dict[str, str], **options: Any) -> Machine:
    for rel, text in files.items():
        path = tmp_path / "sglang" / "srt" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for folder in [tmp_path / "sglang", *(tmp_path / "sglang").rglob("*")]:
        if folder.is_dir() and not (folder / "__init__.py").exists():
            (folder / "__init__.py").write_text("")
    index = TreeIndex(locate(str(tmp_path)), use_cache=False)
    return Machine(Source(index), options.pop("intrinsics", None) or Intrinsics(), **options)


def run(m: Machine, module: str, qualname: str, *args: Any, **kwargs: Any) -> Result:
    site = m.source.function(f"sglang.srt.{module}", qualname)
    assert site is not None, qualname
    return m.run(site, list(args), kwargs)


def test_arithmetic_and_strings(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(x):
            y = x * 2 + 1
            return f"{y:.2f}", "a" + "b", y // 2, 2 ** 10
    """
        },
    )
    assert run(m, "a", "f", 3).value == ("7.00", "ab", 3, 1024)


def test_an_unknown_stays_unknown_through_every_operation(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        import torch
        def f(x, w):
            return x.float(), w.int(), x.max(), -x, x + 1, [x][0] * 2, len([x]), max(x, 1)
    """
        },
    )
    value = run(m, "a", "f", Top("x"), Top("w")).value
    assert isinstance(value, tuple)
    assert all(isinstance(v, Top) for v in value[:6]), value
    assert value[6] == 1  # the list's length is known though its element is not
    assert isinstance(value[7], Top)


def test_an_undecided_test_forks_and_merges(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(flag):
            if flag:
                x = 1
            else:
                x = 2
            return x
    """
        },
    )
    result = run(m, "a", "f", Top("flag"))
    assert isinstance(result.value, OneOf) and set(result.value.values) == {1, 2}
    assert any("undecided: flag" in note for note in result.assumed)


def test_an_undecided_branch_that_changes_nothing_is_not_said(tmp_path: Path) -> None:
    """0.5.3's `log_info_on_rank0`: `if torch.distributed.is_initialized() and rank == 0:
    logger.info(msg)` is undecided on every reading, and either way the run goes on with the
    same state: no verdict rests on it, so `assumed` does not say it. A branch that writes an
    attribute, binds a name, may raise or ends a path is still said, in its place, and so is
    any where the observer hears what the run does (a call site)."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        import logging
        logger = logging.getLogger(__name__)
        class Box:
            def __init__(self):
                self.size = 0
        def log(flag, msg):
            if flag:
                logger.info(msg)
        def f(flag, other):
            log(flag, "x")
            box = Box()
            if other:
                box.size = 1
            y = 0
            if flag:
                y = 1
            if flag:
                if other:
                    raise ValueError(y)
            if flag:
                return y
            return box.size
    """
        },
    )
    assert run(m, "a", "log", Top("flag"), "m").assumed == ()
    said = run(m, "a", "f", Top("flag"), Top("other")).assumed
    assert said == (
        "sglang/srt/a.py:13: undecided: other (other)",  # an attribute written
        "sglang/srt/a.py:16: undecided: flag (flag)",  # a name bound
        "sglang/srt/a.py:18: undecided: flag (flag)",  # a raise that may happen under it
        "sglang/srt/a.py:19: undecided: other (other)",
        "sglang/srt/a.py:21: undecided: flag (flag)",  # a path ended
    )

    class Sites(Observer):  # hears each call: a call under the branch is something
        def on_call(self, call: Any) -> Any:
            return UNSET

    heard = Machine(m.source, Intrinsics(), observer=Sites())
    assert run(heard, "a", "log", Top("flag"), "m").assumed == (
        "sglang/srt/a.py:8: undecided: flag (flag)",
    )


def test_a_truthy_unknown_decides_a_test(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(x):
            backend = x or "auto"
            if backend:
                return 1
            return 2
    """
        },
    )
    assert run(m, "a", "f", Top("x")).value == 1


def test_unknown_has_no_truth_value() -> None:
    with pytest.raises(TypeError):
        bool(Top("x"))
    assert truth(Top("x")) is None


def test_a_raise_on_an_undecided_path_is_not_definite(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(tp, flag):
            if tp > 8:
                raise ValueError(f"tp {tp} too large")
            if flag:
                raise ValueError("maybe")
            return tp
    """
        },
    )
    sure = run(m, "a", "f", 16, False)
    assert [(r.message, r.definite) for r in sure.raised] == [("tp 16 too large", True)]
    maybe = machine(
        tmp_path / "b",
        {
            "a.py": """
        def f(tp, flag):
            if flag:
                raise ValueError("maybe")
            return tp
    """
        },
    )
    result = run(maybe, "a", "f", 4, Top("flag"))
    assert [(r.message, r.definite) for r in result.raised] == [("maybe", False)]
    assert result.value == 4


def test_stop_at_raise_ends_the_run(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def g(n):
            if n < 1:
                raise ValueError("no KV cache")
            return n
        def f(n):
            g(n)
            return "after"
    """
        },
        policy=Policy(stop_at_raise=True),
    )
    result = run(m, "a", "f", 0)
    assert result.definite_raise is not None and isinstance(result.value, Top)


def test_a_budget_that_runs_out_says_incomplete(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f():
            x = 0
            for i in range(100):
                x = x + i
            return x
    """
        },
        budget=Budget(steps=50),
    )
    result = run(m, "a", "f")
    assert result.incomplete and "steps" in result.incomplete
    assert isinstance(result.value, Top)


def test_names_resolve_through_imports_by_qualified_name(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "utils/common.py": "def helper(x):\n    return x + 1\nLIMIT = 3 * 4\n",
            "utils/__init__.py": "from sglang.srt.utils.common import helper, LIMIT\n",
            "a.py": "from sglang.srt.utils import helper, LIMIT\ndef f():\n    return helper(LIMIT)\n",
        },
    )
    assert run(m, "a", "f").value == 13


def test_an_intrinsic_matches_the_qualified_name(tmp_path: Path) -> None:
    hooks = Intrinsics()
    hooks.call_in("sglang.srt.utils*", "get_device_memory_capacity", lambda call: 81559.0)
    m = machine(
        tmp_path,
        {
            "utils/common.py": "def get_device_memory_capacity():\n    raise RuntimeError\n",
            "other.py": "def get_device_memory_capacity():\n    return 1\n",
            "a.py": """
            from sglang.srt.utils.common import get_device_memory_capacity
            from sglang.srt import other
            def f():
                return get_device_memory_capacity(), other.get_device_memory_capacity()
        """,
        },
        intrinsics=hooks,
    )
    assert run(m, "a", "f").value == (81559.0, 1)  # the same last name in another module is not it


def test_classes_dataclasses_properties_enums(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        from dataclasses import dataclass, field
        from enum import Enum
        class Backend(Enum):
            FULL = "full"
            DISABLED = "disabled"
        @dataclass
        class Shape:
            heads: int
            dim: int = 128
            extra: list = field(default_factory=list)
            @property
            def size(self):
                return self.heads * self.dim
        class Base:
            def __init__(self, n):
                self.n = n
            def twice(self):
                return self.n * 2
        class Child(Base):
            def __init__(self, n):
                super().__init__(n + 1)
            @staticmethod
            def s(x):
                return x - 1
        def f():
            shape = Shape(8)
            c = Child(4)
            return shape.size, c.twice(), Child.s(3), Backend.DISABLED.value, Backend.FULL is Backend.FULL, isinstance(c, Base)
    """
        },
    )
    assert run(m, "a", "f").value == (1024, 10, 2, "disabled", True, True)


def test_an_input_bag_reads_and_writes(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(args, config):
            if args.page_size is None:
                args.page_size = 64 if config.text_config.heads > 8 else 1
            return getattr(config, "missing", "dflt"), hasattr(config, "text_config")
    """
        },
    )
    args = m.bag({"page_size": None}, track=True)
    config = m.bag({"text_config.heads": 16})
    result = m.run(m.source.function("sglang.srt.a", "f"), [args, config], {})
    assert result.value == ("dflt", True)
    assert m.fields(args)["page_size"] == 64


def test_a_configs_nested_mapping_reads_as_a_dict_and_as_an_object(tmp_path: Path) -> None:
    """config.json's nested mappings are dotted keys of the bag: `text_config` is read as the
    object transformers makes of it, `rope_scaling` with a dict's protocol (`get`, `in`, `[]`,
    `keys`), each as the code uses it; a key the mapping lacks is absent (config.json is
    whole), and an open bag, whose keys are not all known, answers no dict at all."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(config):
            rope = getattr(config.text_config, "rope_scaling", None)
            factor = rope.get("factor", 1)
            if "original_max_position_embeddings" in rope:
                factor = 1
            return (
                config.text_config.heads,
                factor,
                rope["rope_type"],
                rope.get("missing", "dflt"),
                "mscale" in rope,
                list(rope.keys()),
                rope.get("yarn")["beta"],
            )
    """
        },
    )
    fields = {
        "text_config.heads": 16,
        "text_config.rope_scaling.rope_type": "yarn",
        "text_config.rope_scaling.factor": 4.0,
        "text_config.rope_scaling.yarn.beta": 32,
    }
    site = m.source.function("sglang.srt.a", "f")
    assert site is not None
    value = m.run(site, [m.bag(fields)], {}).value
    assert value == (16, 4.0, "yarn", "dflt", False, ["rope_type", "factor", "yarn"], 32)
    fields["text_config.rope_scaling.original_max_position_embeddings"] = 4096
    assert m.run(site, [m.bag(fields)], {}).value[1] == 1
    opened = m.run(site, [m.bag(fields, closed=False)], {}).value
    assert opened[0] == 16 and all(isinstance(v, Top) for v in opened[1:]), opened


def test_a_configs_nested_mapping_written_is_read_as_written(tmp_path: Path) -> None:
    """`rope["factor"] = 2.0` is the mapping's new key; a change the reading does not follow
    (`update`, `del`, a key not known) leaves the mapping unknown from there on, for every
    name that holds it, rather than the config.json it no longer is."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(config, key, how):
            rope = config.rope_scaling
            rope["factor"] = 2.0
            written = rope.get("factor"), "factor" in rope, config.rope_scaling["factor"]
            if how == "update":
                rope.update({"x": 1})
            elif how == "del":
                del config.rope_scaling["factor"]
            else:
                rope[key] = 1
            return written, rope.get("factor"), "factor" in rope, config.rope_scaling["type"]
    """
        },
    )
    site = m.source.function("sglang.srt.a", "f")
    assert site is not None
    for how in ("update", "del", "key"):
        config = m.bag({"rope_scaling.factor": 8.0, "rope_scaling.type": "linear"})
        written, *after = m.run(site, [config, Top("key"), how], {}).value
        assert written == (2.0, True, 2.0)
        assert all(isinstance(v, Top) for v in after), (how, after)


def test_an_item_written_at_an_unknown_key_leaves_the_container_unknown(tmp_path: Path) -> None:
    """`d[key] = v` or `del d[key]` with `key` unknown may have changed any item: the name (or
    attribute) the dict was read from is unknown afterwards, not the dict it was before; a
    known key is written or deleted as it is."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        class Box:
            def __init__(self):
                self.table = {"a": 1}

        def f(key):
            d = {"a": 1}
            d["b"] = 2
            known = dict(d)
            d[key] = 3
            box = Box()
            box.table[key] = 4
            return known, d, box.table

        def g(key):
            d = {"a": 1, "b": 2}
            del d["a"]
            known = dict(d)
            del d[key]
            return known, d
    """
        },
    )
    known, d, table = run(m, "a", "f", Top("key")).value
    assert known == {"a": 1, "b": 2}
    assert isinstance(d, Top) and isinstance(table, Top)
    known, d = run(m, "a", "g", Top("key")).value
    assert known == {"b": 2}  # a known key deleted is gone
    assert isinstance(d, Top)


def test_a_change_the_reading_cannot_make_leaves_the_container_unknown(tmp_path: Path) -> None:
    """`layers.extend(more)` with `more` unknown (it raised TypeError in the reading),
    `d.update(other)` or `d.pop(key)` with either unknown, and the changes it does not model
    (`layers.pop()`, `d.clear()`): the name or attribute the container was read from is
    unknown afterwards, not the list or dict it was before; known changes are made."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        class Box:
            def __init__(self):
                self.layers = [1]

        def f(more, key):
            layers = [1]
            layers.extend([2, 3])
            layers.insert(0, 0)
            known = list(layers)
            layers.extend(more)
            box = Box()
            box.layers.extend(more)
            popped = [1, 2]
            popped.pop()
            d = {"a": 1}
            d.update({"b": 2})
            d.setdefault("c", 3)
            seen = dict(d)
            d.update(more)
            e = {"a": 1}
            e.pop(key)
            cleared = {"a": 1}
            cleared.clear()
            return known, layers, box.layers, popped, seen, d, e, cleared
    """
        },
    )
    known, layers, held, popped, seen, d, e, cleared = run(m, "a", "f", Top("m"), Top("k")).value
    assert known == [0, 1, 2, 3] and seen == {"a": 1, "b": 2, "c": 3}
    unknown = (layers, held, popped, d, e, cleared)
    assert all(isinstance(v, Top) for v in unknown), unknown


def test_method_on_a_class_of_the_tree_is_not_a_builtin(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(x):
            return x.upper(), "ab".upper(), {"a": 1}.get("b", 2)
    """
        },
    )
    value = run(m, "a", "f", Top("x")).value
    assert isinstance(value[0], Top) and value[1:] == ("AB", 2)


def test_loops_unroll_known_sequences_and_havoc_unknown_ones(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(items):
            total = 0
            for i in [1, 2, 3]:
                if i == 2:
                    continue
                total += i
            other = 5
            for j in items:
                other = j
            return total, other
    """
        },
    )
    result = run(m, "a", "f", Top("items"))
    assert result.value[0] == 4 and isinstance(result.value[1], Top)
    assert any("not run" in note for note in result.assumed)


def test_enum_member_identity(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        import enum
        class Algo(enum.Enum):
            EAGLE = enum.auto()
            NONE = enum.auto()
            def is_eagle(self):
                return self == Algo.EAGLE
        def f():
            return Algo.EAGLE.is_eagle(), Algo.NONE.is_eagle()
    """
        },
    )
    assert run(m, "a", "f").value == (True, False)


def test_a_decided_branch_that_ends_an_undecided_path_ends_it(tmp_path: Path) -> None:
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(runtime, kind):
            if runtime is not None:
                return runtime
            if kind == "frozen":
                return "frozen worker"
            return "eagle worker"
    """
        },
    )
    result = run(m, "a", "f", Top("runtime"), "frozen")
    assert isinstance(result.value, Top)  # the runtime's path returns what only the run knows
    values = []

    class Returns(Observer):
        def on_return(self, frame: Any, value: Any) -> None:
            values.append(value)

    m.observer = Returns()
    run(m, "a", "f", Top("runtime"), "frozen")
    assert "eagle worker" not in values and "frozen worker" in values


def test_an_observer_sees_the_statements_each_path_runs(tmp_path: Path) -> None:
    """`on_statement` sees a statement only where a path runs it, with that path's tests: a
    decided early return hides what follows; an undecided one leaves it on an undecided path
    (0.5.3's `init_device_graphs` with CUDA graphs off: decided for a draft on a GPU, undecided
    where the device is not known)."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(device, off):
            if device != "cpu" and off:
                return None
            built = "graph runner"
            return built
    """
        },
    )
    seen: list[tuple[int, bool]] = []

    class Statements(Observer):
        def on_statement(self, frame: Any, stmt: Any) -> None:
            if stmt.lineno == 5:
                seen.append((stmt.lineno, all(t.definite for t in frame.tests)))

    m.observer = Statements()
    run(m, "a", "f", "cuda", True)
    assert seen == []  # returned before it
    run(m, "a", "f", "cuda", False)
    assert seen == [(5, True)]
    seen.clear()
    run(m, "a", "f", Top("device"), True)
    assert seen == [(5, False)]  # run, on the path where the return was not taken


def test_a_fork_does_not_write_through_to_the_other_path(tmp_path: Path) -> None:
    """Copy on write: the path run first must not change the object the second path starts
    from (0.5.9's TRT-LLM page size must not leak into the path without that backend)."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        class A:
            def __init__(self, c):
                self.c = c
                self.page_size = None
                if self.c == "trtllm":
                    self.page_size = 64
        def f(c):
            return A(c).page_size
    """
        },
    )
    made = run(m, "a", "f", Top("the backend")).value
    assert isinstance(made, OneOf) and set(made.values) == {64, None}


def test_a_test_narrows_what_it_names_on_each_path(tmp_path: Path) -> None:
    """`if x is None: x = 1` leaves (1, 64) of (64, None), not (1, 64, None); an `and`
    narrows each part on its true side; a call in the test is not run twice."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        calls = []
        def g():
            calls.append(1)
            return 3
        def f(c, d):
            x = 64 if c else None
            if x is None:
                x = 1
            y = 2 if d else 5
            z = 0
            if y != 2 and x == 64:
                z = y + x
            if y == g():
                z = -1
            return x, z
    """
        },
    )
    x, z = run(m, "a", "f", Top("c"), Top("d")).value
    assert isinstance(x, OneOf) and set(x.values) == {1, 64}
    assert isinstance(z, OneOf) and set(z.values) == {0, 69}  # 5 + 64 only, never 2 + ...


def test_dict_of_keywords_knows_its_keys_where_its_values_are_unknown(tmp_path: Path) -> None:
    """sglang 0.5.7's scheduler builds `draft_worker_kwargs = dict(gpu_id=self.gpu_id, ...)` and
    adds `enable_overlap` to it: the keys are the shape, so `**draft_worker_kwargs` is known
    and a factory's `kwargs.pop("enable_overlap", False)` stays undecided rather than lost."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(x):
            made = dict(a=x, b=2)
            made["c"] = x
            return sorted(made), made.pop("a", False), made["b"], dict(x)
    """
        },
    )
    keys, popped, b, whole = run(m, "a", "f", Top("x")).value
    assert keys == ["a", "b", "c"]
    assert isinstance(popped, Top) and b == 2
    assert isinstance(whole, Top)  # `dict(x)` of an unknown: its keys are not known


def test_none_has_no_attributes(tmp_path: Path) -> None:
    """`getattr(None, "x", d)` is d and `hasattr(None, "x")` is false: None is no unknown (0.5.6's
    `getattr(quant_config, "kv_cache_quant_algo", None)` on a model without quantization)."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(config):
            algo = getattr(config, "kv_cache_quant_algo", None)
            return algo, hasattr(config, "kv_cache_quant_algo"), isinstance(algo, str)
    """
        },
    )
    assert run(m, "a", "f", None).value == (None, False, False)
    attribute = run(m, "a", "f", Top("a config not read")).value
    assert all(isinstance(v, Top) for v in attribute[:2])


def test_super_reaches_a_plug_in_of_a_base_outside_the_tree(tmp_path: Path) -> None:
    """`super().__init__(**kwargs)` past the tree's classes runs the plug-in registered for
    the outside base (transformers' `PretrainedConfig.__init__`: every keyword kept as an
    attribute, and nothing else); without one it stays unknown."""
    from eaglebug.checks.pyeval import brains

    files = {
        "a.py": """
        from transformers import PretrainedConfig
        class Text(PretrainedConfig):
            def __init__(self, layers=2, **kwargs):
                super().__init__(**kwargs)
                self.layers = layers
        def f():
            t = Text(layers=4, interval=3)
            return t.layers, t.interval, hasattr(t, "text_config")
    """
    }
    hooks = Intrinsics()
    brains.register_transformers(hooks)
    m = machine(tmp_path, files, intrinsics=hooks)
    assert run(m, "a", "f").value == (4, 3, False)
    bare = machine(tmp_path / "bare", files)
    layers, interval, _ = run(bare, "a", "f").value
    assert layers == 4 and isinstance(interval, Top)


def test_an_f_string_of_an_unknown_is_unknown_and_its_message_still_reads(tmp_path: Path) -> None:
    """`f"{len(x)}"` with `x` unknown is no known string (a comparison with it decides
    nothing: 0.5.7's eagle_worker.py:127 builds such a string), yet a raise's message built
    from it reads with the unknown part as written."""
    m = machine(
        tmp_path,
        {
            "a.py": """
        def f(x):
            made = f"{{\\"n\\": {len(x)}}}"
            same = made == '{"n": 3}'
            if x.big:
                raise ValueError(f"too many: {len(x)} items")
            return made, same, f"{3:>3}"
    """
        },
    )
    result = run(m, "a", "f", Top("x"))
    made, same, known = result.value
    assert isinstance(made, Top) and made.text == '{"n": {len(x)}}' and made.truth is True
    assert isinstance(same, Top)  # not False on a guess
    assert known == "  3"
    assert [r.message for r in result.raised] == ["too many: {len(x)} items"]


def test_a_session_variable_is_unknown_to_the_evaluated_code(tmp_path: Path) -> None:
    """The environment a check takes (`contract/environ.py`) leaves out the variables that
    name a shell session: code that reads one gets an unknown, not this pane's value, so a
    reply kept without them holds in every pane."""
    from eaglebug.checks.contract.environ import launch_environ
    from eaglebug.checks.pyeval.brains import register_os

    shell = {"TMUX_PANE": "%3", "SSH_CONNECTION": "10.0.0.1 5 10.0.0.2 22", "HOME": "/root"}
    hooks = Intrinsics()
    register_os(hooks, launch_environ(shell), known={"SGLANG_X"})
    m = machine(
        tmp_path,
        {
            "a.py": """
        import os
        def f():
            return os.getenv("TMUX_PANE"), os.environ.get("SSH_CONNECTION"), os.getenv("HOME")
    """
        },
        intrinsics=hooks,
    )
    pane, connection, home = run(m, "a", "f").value
    assert isinstance(pane, Top) and isinstance(connection, Top)
    assert home == "/root"  # any other variable is read as it is set


def test_a_dict_updated_from_a_partly_known_environment_is_unknown(tmp_path: Path) -> None:
    """`env.update(os.environ)` where only some variables are known: the copy cannot say that
    any other variable is unset (it would read as absent), so it is unknown, where a known
    dict's update is followed."""
    from eaglebug.checks.pyeval.brains import register_os

    hooks = Intrinsics()
    register_os(hooks, {"SGLANG_X": "1"}, known={"SGLANG_X", "SGLANG_Y"})
    m = machine(
        tmp_path,
        {
            "a.py": """
        import os
        def f():
            env = {"A": "1"}
            env.update({"B": "2"})
            known = dict(env)
            env.update(os.environ)
            return known, env, env.get("OTHER")
    """
        },
        intrinsics=hooks,
    )
    known, env, other = run(m, "a", "f").value
    assert known == {"A": "1", "B": "2"}
    assert isinstance(env, Top) and isinstance(other, Top)


def test_let_go_drops_only_the_tables_of_files_whose_trees_are_gone(tmp_path: Path) -> None:
    """`Source.let_go` (the matrix, between its steps): the tables built from a file whose
    tree the index let go are made again from a new parse, and say the same; the others stay."""
    m = machine(
        tmp_path,
        {
            "a.py": "class A:\n    def f(self):\n        return 1\ndef h():\n    return A().f() + 1\n",
            "b.py": "def g():\n    return 2\n",
        },
    )
    source, files = m.source, m.source.index.files
    files.kept_bytes = 1  # one tree at a time: parsing b lets a's go
    a = source.table("sglang.srt.a")
    b = source.table("sglang.srt.b")
    assert a is not None and b is not None
    assert files.peek("sglang/srt/a.py") is None and files.peek("sglang/srt/b.py") is not None
    source.let_go()
    assert source.table("sglang.srt.b") is b, "a file still kept keeps its table"
    again = source.table("sglang.srt.a")
    assert again is not None and again is not a and again.definitions.keys() == a.definitions.keys()
    assert run(m, "a", "h").value == 2 and run(m, "b", "g").value == 2


def test_deeper_keys_answer_as_a_scan_of_the_store_would() -> None:
    """`Deeper` answers from what it learnt of a store, and must say what a scan of the store
    says now: after keys are added to the same dict (the new ones learnt), for a copy of it
    (its own answers), and for keys that only share a spelling (`model` vs `model_config`)."""
    deeper = Deeper()

    def scanned(store: dict[str, Any], key: str) -> bool:
        return any(k.startswith(key + ".") for k in store)

    store: dict[str, Any] = {"tp_size": 8, "model_config.hf_config.num_layers": 61}
    keys = ["tp_size", "model", "model_config", "model_config.hf_config", "hf_config", "x"]
    for key in keys:
        assert deeper.under(store, key) == scanned(store, key)
    copy = dict(store)
    store["hf_config.vocab_size"] = 1  # added to the dict it learnt: learnt again, its end
    store["draft.model.x"] = 2
    copy["model.y"] = 3
    for key in [*keys, "draft", "draft.model", "model.y"]:
        assert deeper.under(store, key) == scanned(store, key), key
        assert deeper.under(copy, key) == scanned(copy, key), key
    assert deeper.under({}, "") is False
