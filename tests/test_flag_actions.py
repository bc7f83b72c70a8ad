"""Launch flags whose argparse action is a class of the tree (`action=DeprecatedStoreTrueAction`).

Whether such a flag takes a value is what its class's `__init__` gives `nargs` by default
(`nargs=0`: a switch), read from the tree. Before, every custom action was read as taking a
value, so `--disable-cuda-graph --attention-backend fa3` on 0.5.14+ was refused with
"--disable-cuda-graph needs a value".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.synthetic import write_tree


def flags_of(tree: Path) -> TreeIndex:
    return TreeIndex(locate(str(tree)), use_cache=False)


@pytest.mark.parametrize(
    ("release", "switch"),
    [
        ("sglang_0514", "--disable-cuda-graph"),
        ("sglang_0522", "--enable-dp-attention"),
        ("sglang_0523", "--disable-cuda-graph"),
    ],
)
def test_deprecated_store_true_is_a_switch(
    release: str, switch: str, request: pytest.FixtureRequest
) -> None:
    index = flags_of(request.getfixturevalue(release))
    specs = server_flags(index)
    words = ["--model-path", "/m", switch, "--attention-backend", "fa3"]
    launch = parse_launch(words, specs)
    dest = next(s.dest for s in specs if switch in s.options)
    assert launch.get(dest) is True
    assert launch.text("attention_backend") == "fa3"


def test_a_deprecated_alias_still_takes_its_value(sglang_0514: Path) -> None:
    specs = server_flags(flags_of(sglang_0514))
    [spec] = [s for s in specs if "--cuda-graph-max-bs" in s.options and s.custom_action]
    assert spec.nargs == "1"


ACTIONS = """
import argparse


class Switch(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)


class Store(argparse.Action):
    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
"""

SERVER_ARGS = """
from sglang.srt.actions import Store, Switch


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--old-switch", action=Switch)
        parser.add_argument("--old-value", action=Store)
        parser.add_argument("--listed", action=Store, nargs="+")
"""


def test_nargs_comes_from_the_action_class(tmp_path: Path) -> None:
    tree = write_tree(
        tmp_path,
        {"sglang/srt/actions.py": ACTIONS, "sglang/srt/server_args.py": SERVER_ARGS},
    )
    specs = {s.options[0]: s for s in server_flags(flags_of(tree))}
    assert (specs["--old-switch"].nargs, specs["--old-value"].nargs) == ("0", "1")
    assert specs["--listed"].nargs == "+"  # given at the call: the class is not asked
    launch = parse_launch(
        ["--old-switch", "--old-value", "x", "--model-path", "/m"], list(specs.values())
    )
    assert (launch.get("old_switch"), launch.text("old_value")) == (True, "x")
