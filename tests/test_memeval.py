"""The memory evaluator on small code shapes: what it evaluates, and what it says it could not."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from eaglebug.checks.memory.fit import Gpu, MemoryLaunch, model_shape
from eaglebug.checks.memory.plan import Weights, predict
from eaglebug.checks.memory.rules import memory_sources
from eaglebug.checks.pyeval.memeval import Evaluator, Raised, Ref, Unknown, functions_of
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.synthetic import write_tree


def evaluator(code: str, **values: object) -> Evaluator:
    table = functions_of(ast.parse(textwrap.dedent(code)), "f.py")
    return Evaluator(table, dict(values), watch=frozenset({"reserved"}))


TABLE = """
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
    if get_platform().is_xpu:
        reserved += 2 * 1024
    return round((gpu_mem - reserved) / gpu_mem, 3)
"""


def test_a_condition_chain_is_taken_in_the_trees_order() -> None:
    ev = evaluator(TABLE, chunk=None, tp_size=1)
    assert ev.call("pick", [40 * 1024], {}) == round((40 * 1024 - 512 - 4096 * 1.5) / 40960, 3)
    assert ev.values["chunk"] == 4096
    assert [s.value for s in ev.steps] == [512, 512 + 6144]
    assert ev.steps[1].before == 512 and ev.steps[1].code.startswith("reserved +=")
    big = evaluator(TABLE, chunk=None, tp_size=8)
    big.call("pick", [80 * 1024], {})
    assert big.values["chunk"] == 16384


def test_what_cannot_be_known_is_said_not_guessed() -> None:
    ev = evaluator(TABLE, chunk=None, tp_size=1)
    ev.call("pick", [40 * 1024], {})
    assert any("get_platform().is_xpu" in a for a in ev.assumed)  # taken as false, and said
    unknown = evaluator("def f(self):\n    return self.free * 2\n")
    assert isinstance(unknown.call("f", [], {}), Unknown)


def test_a_raise_comes_back_with_its_formatted_message() -> None:
    ev = evaluator(
        """
        def budget(self, pre):
            rest = self.avail - pre * (1 - self.fraction)
            if rest <= 0:
                need = 1 - self.avail / pre
                raise ValueError(f"raise above {need:.3f} (now {self.fraction=})")
            return int(rest * (1 << 30))
        """,
        avail=10.0,
        fraction=0.8,
    )
    raised = ev.call("budget", [80.0], {})
    assert isinstance(raised, Raised) and raised.exception == "ValueError"
    assert raised.message == "raise above 0.875 (now self.fraction=0.8)"
    ev.values["avail"] = 40.0
    assert ev.call("budget", [80.0], {}) == int(24.0 * (1 << 30))


def test_helpers_of_the_same_files_are_evaluated() -> None:
    ev = evaluator(
        """
        def sizes(max_bs):
            out = list(range(4, 33, 4)) + list(range(48, max_bs + 1, 16))
            return [s for s in out if s <= max_bs]

        def reserve(self):
            return len(sizes(self.max_bs)) * 8
        """,
        max_bs=64,
    )
    assert ev.call("reserve", [], {}) == (8 + 2) * 8
    assert isinstance(Ref("x"), Ref)


def test_a_tree_without_the_anchors_says_the_memory_rules_are_missing(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"sglang/srt/server_args.py": "class ServerArgs:\n    pass\n"})
    sources = memory_sources(TreeIndex(locate(str(root)), use_cache=False))
    assert all(anchor == "" for anchor in sources.entries.values())
    shape = model_shape({"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8}, None)
    assert not isinstance(shape, str)
    made = predict(
        sources, MemoryLaunch("m"), shape, None, Gpu(80 << 30, 79 << 30), Weights(1 << 30, 0)
    )
    assert made.max_total_num_tokens is None
    assert any("handle_gpu_memory_settings" in u for u in made.unknown)
