"""A flag with the release's own converter is parsed with it: 0.5.23's `--context-length` takes
`human_readable_int` (`32k`, `32Ki`) and refuses `40960.5` with SGLang's own message; 0.5.9's
is a plain `type=int`."""

from __future__ import annotations

from functools import partial

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.command import LaunchSpec, parse_launch
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.launch.types import flag_value
from eaglebug.checks.source.index import TreeIndex


def launch(index: TreeIndex, *flags: str) -> LaunchSpec:
    words = ["python", "-m", "sglang.launch_server", "--model-path", "m", *flags]
    return parse_launch(words, server_flags(index), "x", None, partial(flag_value, index))


@pytest.mark.parametrize(("given", "taken"), [("32k", 32000), ("32Ki", 32768), ("4096", 4096)])
def test_the_releases_own_parser_converts_the_value(
    index_0523: TreeIndex, given: str, taken: int
) -> None:
    parsed = launch(index_0523, "--context-length", given)
    assert parsed.number("context_length") == taken


@pytest.mark.parametrize("given", ["40960.5", "32 k", "1.5Ki"])
def test_what_the_parser_refuses_is_refused_with_its_message(
    index_0523: TreeIndex, given: str
) -> None:
    with pytest.raises(InputError) as refused:
        launch(index_0523, "--context-length", given)
    said = str(refused.value)
    assert "--context-length" in said and "SGLang refuses it (ArgumentTypeError" in said
    assert "Invalid integer value" in said or "Decimals are not allowed" in said


def test_a_release_with_a_plain_int_flag_refuses_a_suffix(index_059: TreeIndex) -> None:
    with pytest.raises(InputError) as refused:
        launch(index_059, "--context-length", "32k")
    assert "expected an integer" in str(refused.value)
    assert launch(index_059, "--context-length", "32768").number("context_length") == 32768
