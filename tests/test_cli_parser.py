"""The command line built for one command (what `main` does: a warm audit cannot afford every
subcommand's options) is that command as the whole parser has it."""

from __future__ import annotations

import pytest

from eaglebug.cli import options, parser


def _help(built: options.Parser, words: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        built.parse_args(words)
    assert exit_.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(options.COMMANDS))
def test_a_command_built_alone_helps_as_in_the_whole_parser(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = _help(options.build_parser(), [command, "--help"], capsys)
    alone = _help(options.build_parser(only=command), [command, "--help"], capsys)
    assert alone == whole
    assert f"usage: eaglebug {command}" in alone


def test_main_refuses_an_unknown_command_with_every_command_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parser.main(["audt"])
    assert exit_.value.code == options.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: argument COMMAND: invalid choice: 'audt'")
    assert all(f"'{name}'" in err for name in options.COMMANDS)
