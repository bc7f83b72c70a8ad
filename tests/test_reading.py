"""One memory reading on small code shapes: the steps it keeps, what it says it could not read,
and a raise with its message (the machine's own rules are in test_pyeval)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from eaglebug.checks.memory.fit import Gpu, MemoryLaunch, model_shape
from eaglebug.checks.memory.plan import Weights, predict
from eaglebug.checks.memory.reading import Flat, Reading, run
from eaglebug.checks.memory.rules import memory_sources
from eaglebug.checks.memory.startup import handed_on
from eaglebug.checks.pyeval.machine import Machine
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import FunctionSite, Instance
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.synthetic import write_tree

PICK = """
def pick(self, gpu_mem):
    if gpu_mem < 20 * 1024:
        if self.chunk is None:
            self.chunk = 2048
    elif gpu_mem < 60 * 1024:
        if self.chunk is None:
            self.chunk = 4096
    else:
        self.chunk = 8192 if self.tp_size < 4 else 16384
    reserved = 512
    reserved += max(self.chunk, 2048) * 1.5
    if self.on_xpu:
        reserved += 2 * 1024
    return round((gpu_mem - reserved) / gpu_mem, 3)
"""


def read(
    tmp_path: Path, code: str, name: str, args: list[object], **values: object
) -> tuple[Reading, dict[str, object]]:
    root = write_tree(tmp_path, {"sglang/srt/mem.py": textwrap.dedent(code)})
    index = TreeIndex(locate(str(root)), use_cache=False)
    site = Source.of(index).function("sglang.srt.mem", name)
    assert site is not None

    def nothing(m: Machine, obj: Instance) -> None:
        pass

    return run(index, site, None, args, dict(values), nothing, frozenset({"reserved"}))


def test_a_condition_chain_is_taken_in_the_trees_order(tmp_path: Path) -> None:
    small, left = read(
        tmp_path / "a", PICK, "pick", [40 * 1024], chunk=None, tp_size=1, on_xpu=False
    )
    assert small.value == round((40 * 1024 - 512 - 4096 * 1.5) / 40960, 3)
    assert left["chunk"] == 4096
    assert [s.value for s in small.steps] == [512, 512 + 6144]
    assert small.steps[1].before == 512 and small.steps[1].code.startswith("reserved +=")
    _, big = read(tmp_path / "b", PICK, "pick", [80 * 1024], chunk=None, tp_size=8, on_xpu=False)
    assert big["chunk"] == 16384


def test_what_cannot_be_known_is_said_not_guessed(tmp_path: Path) -> None:
    made, _ = read(tmp_path, PICK, "pick", [40 * 1024], chunk=None, tp_size=1)
    assert made.value is None and made.unknown is not None  # two answers: neither is given
    assert any("self.on_xpu" in a for a in made.assumed)


def test_a_raise_comes_back_with_its_formatted_message(tmp_path: Path) -> None:
    code = """
    def budget(self, pre):
        rest = self.avail - pre * (1 - self.fraction)
        if rest <= 0:
            need = 1 - self.avail / pre
            raise ValueError(f"raise above {need:.3f} (now {self.fraction=})")
        return int(rest * (1 << 30))
    """
    short, _ = read(tmp_path / "a", code, "budget", [80.0], avail=10.0, fraction=0.8)
    assert short.raised is not None and short.raised.kind == "ValueError"
    assert short.raised.message == "raise above 0.875 (now self.fraction=0.8)"
    enough, _ = read(tmp_path / "b", code, "budget", [80.0], avail=40.0, fraction=0.8)
    assert enough.value == int(24.0 * (1 << 30))


def test_helpers_of_the_same_files_are_evaluated(tmp_path: Path) -> None:
    code = """
    def sizes(max_bs):
        out = list(range(4, 33, 4)) + list(range(48, max_bs + 1, 16))
        return [s for s in out if s <= max_bs]

    def reserve(self):
        return len(sizes(self.max_bs)) * 8
    """
    made, _ = read(tmp_path, code, "reserve", [], max_bs=64)
    assert made.value == (8 + 2) * 8


def test_a_tree_without_the_anchors_says_the_memory_rules_are_missing(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"sglang/srt/server_args.py": "class ServerArgs:\n    pass\n"})
    index = TreeIndex(locate(str(root)), use_cache=False)
    sources = memory_sources(index)
    assert all(anchor == "" for anchor in sources.entries.values())
    shape = model_shape({"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8}, 4096)
    assert not isinstance(shape, str)
    made = predict(
        index, sources, MemoryLaunch("m"), shape, None, Gpu(80 << 30, 79 << 30), Weights(1 << 30, 0)
    )
    assert made.max_total_num_tokens is None
    assert any("handle_gpu_memory_settings" in u for u in made.unknown)


LAZY = """
from typing import Any

_UNSET: Any = object()


def compute(n):
    return n * 2


class Runner:
    def __init__(self, n):
        self.n = n
        self._cache: Any = _UNSET
        self.maybe = None
        if n:
            self.maybe = 3

    def _cached(self):
        if self._cache is _UNSET:
            self._cache = compute(self.n)
        return self._cache

    def budget(self):
        return self._cached() + 1

    def other(self):
        return self.maybe
"""


def test_a_field_the_runners_init_leaves_is_read_as_it_leaves_it(tmp_path: Path) -> None:
    """The flat store stands for a runner whose `__init__` ran: a field it lacks, which
    `__init__` sets once to a module-level sentinel (`object()`), is that sentinel, so the
    lazy cache's `is _UNSET` test is decided (0.5.14's `_linear_attn_registry_cache`) and
    said in `assumed`; a field `__init__` sets twice, once under a test, stays unknown."""
    root = write_tree(tmp_path, {"sglang/srt/mem.py": textwrap.dedent(LAZY)})
    index = TreeIndex(locate(str(root)), use_cache=False)
    source = Source.of(index)

    def reading(name: str) -> Reading:
        site = source.function("sglang.srt.mem", f"Runner.{name}")
        assert site is not None

        def nothing(m: Machine, obj: Instance) -> None:
            pass

        owner = "sglang.srt.mem.Runner"
        return run(index, site, owner, [], {"n": 5}, nothing, frozenset())[0]

    budget = reading("budget")
    assert budget.value == 11
    written = (root / "sglang/srt/mem.py").read_text().splitlines()
    line = written.index("        self._cache: Any = _UNSET") + 1
    assert any(
        f"self._cache as Runner.__init__ leaves it (sglang/srt/mem.py:{line})" in note
        for note in budget.assumed
    ), budget.assumed
    other = reading("other")
    assert other.value is None and other.unknown and "maybe" in other.unknown


RUNNER = """
class ModelRunner:
    def __init__(self, server_args, memory):
        self.server_args = server_args
        kind = "auto"
        self.init_memory_pool(memory, server_args.max_running_requests, max_total_tokens=server_args.max_total_tokens, dtype=kind)

    def init_memory_pool(self, total, max_num_reqs=None, max_total_tokens=None, dtype=None):
        return max_num_reqs, max_total_tokens
"""


def test_the_pool_function_gets_what_the_runner_hands_it(tmp_path: Path) -> None:
    """The arguments the runner's own call hands its pool function from the server args,
    positional and by keyword, as paths of the flat store; one that is not a server-args
    field (a local) keeps its default."""
    root = write_tree(tmp_path, {"sglang/srt/runner.py": textwrap.dedent(RUNNER)})
    index = TreeIndex(locate(str(root)), use_cache=False)
    found = Source.of(index).function("sglang.srt.runner", "ModelRunner.init_memory_pool")
    assert found is not None
    site: FunctionSite = found

    class Ctx:  # the two things `handed_on` asks of a memory reading's context
        def __init__(self) -> None:
            self.index = index

        def site(self, name: str) -> tuple[FunctionSite, str | None] | None:
            return (site, "sglang.srt.runner.ModelRunner") if name == "init_memory_pool" else None

    handed, named = handed_on(Ctx(), "init_memory_pool")  # type: ignore[arg-type]
    assert handed == [Flat("max_running_requests")]
    assert named == {"max_total_tokens": Flat("max_total_tokens")}
