"""A launch command with flag fixes applied: what the next launch runs and preflight checks.

A flag fix accepted in the TUI (`p` on a finding whose fix is a `FlagFix`) is kept as pending
in the state file and applied to the launch words here: an earlier `--flag value` (or
`--flag=value`, or the bare switch) of the same spelling goes, the fix's words go at the end,
where argparse's last-one-wins makes them count even over another spelling of the flag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from eaglebug.checks.launch.shell import split_words

SWITCH = ""  # the value of a pending flag that takes none


def with_flags(words: Sequence[str], flags: Mapping[str, str]) -> list[str]:
    """`words` with each of `flags` (option -> value, or SWITCH) set once, at the end."""
    out = split_words(words)
    if not flags:
        return out
    kept: list[str] = []
    skip = False
    for word in out:
        if skip:
            skip = False
            if not word.startswith("-"):
                continue
        option = word.split("=", 1)[0]
        if option in flags:
            skip = "=" not in word and flags[option] != SWITCH
            continue
        kept.append(word)
    for option, value in flags.items():
        kept.extend([option] if value == SWITCH else [option, value])
    return kept
