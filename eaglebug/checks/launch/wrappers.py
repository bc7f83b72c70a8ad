"""The commands a launch is often run through before SGLang's own: `nohup`, `numactl`,
`taskset`, `uv run`, `conda run` (`taskset -c 0-7 uv run python -m sglang.launch_server ...`,
as launch scripts in the wild write it).

Why: a user pastes the launch command they run. Refused at its first word, the preflight
said nothing about a launch that is fine apart from its wrapper; stripped blindly, a wrapper's
own option value would be read as the program. Each wrapper here is read by its own grammar
(which of its options take a value, how many operands precede the command), so the words
after it are the server's program and flags, and the launch still runs with the wrapper.
Which Python a wrapper runs (`uv run`: the project's environment; `conda run -n`: that
environment's) is `sitepaths.py`'s, from `Wrapped`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class _Grammar:
    words: int  # how many words name the wrapper (`uv run`: 2)
    with_value: frozenset[str]  # options whose value is the next word (unless `--opt=value`)
    operands: int = 0  # words between the options and the command (`taskset`'s CPU list)
    all_take_values: bool = False  # every option takes a value but the `without` ones
    without: frozenset[str] = frozenset()


_NUMACTL_SWITCHES = frozenset(
    {"-l", "--localalloc", "-a", "--all", "-b", "--balancing", "-s", "--show", "-H",
     "--hardware", "--strict"}
)  # fmt: skip
_UV_RUN_VALUES = frozenset(
    {"--with", "--with-editable", "--with-requirements", "--python", "-p", "--project",
     "--directory", "--extra", "--group", "--only-group", "--no-group", "--env-file", "--index",
     "--default-index", "--index-url", "--extra-index-url", "--find-links", "-f", "--package",
     "--config-file", "--cache-dir", "--prerelease", "--resolution", "--index-strategy",
     "--keyring-provider", "--link-mode", "--refresh-package", "--reinstall-package",
     "--upgrade-package", "-P", "--no-binary-package", "--no-build-package", "--exclude-newer",
     "--color", "--allow-insecure-host"}
)  # fmt: skip
_CONDA_RUN_VALUES = frozenset({"-n", "--name", "-p", "--prefix", "--cwd"})
_GRAMMARS: dict[tuple[str, ...], _Grammar] = {
    ("nohup",): _Grammar(1, frozenset()),
    ("numactl",): _Grammar(1, frozenset(), all_take_values=True, without=_NUMACTL_SWITCHES),
    ("taskset",): _Grammar(1, frozenset(), operands=1),
    ("uv", "run"): _Grammar(2, _UV_RUN_VALUES),
    ("conda", "run"): _Grammar(2, _CONDA_RUN_VALUES),
}

WRAPPERS = ", ".join(f"`{' '.join(names)}`" for names in _GRAMMARS)


@dataclass(frozen=True)
class Wrapped:
    """One wrapper of a launch: its words, its name (`uv run`) and the options it was given
    (option -> value, `""` for a switch)."""

    words: tuple[str, ...]
    name: str
    options: tuple[tuple[str, str], ...]

    def option(self, *names: str) -> str | None:
        return next((value for option, value in self.options if option in names), None)


def unwrapped(words: Sequence[str]) -> tuple[list[Wrapped], list[str]]:
    """The wrappers in front of a command (outermost first) and the command they run; words
    that do not read as a known wrapper's are the command (no wrapper)."""
    rest = list(words)
    found: list[Wrapped] = []
    while rest:
        taken = _one(rest)
        if taken is None:
            break
        found.append(taken)
        rest = rest[len(taken.words) :]
    return found, rest


def _one(words: list[str]) -> Wrapped | None:
    head = os.path.basename(words[0]) if words else ""
    for names, grammar in _GRAMMARS.items():
        if (head, *words[1 : len(names)]) != names:
            continue
        i = grammar.words
        options: list[tuple[str, str]] = []
        while i < len(words) and words[i].startswith("-") and words[i] != "-":
            word = words[i]
            if word == "--":
                i += 1
                break
            option, eq, value = word.partition("=")
            takes = option in grammar.with_value or (
                grammar.all_take_values
                and option not in grammar.without
                and not (len(option) > 2 and not option.startswith("--"))  # `-N0`
            )
            if eq or not takes:
                options.append((option, value))
                i += 1
            elif i + 1 < len(words):
                options.append((option, words[i + 1]))
                i += 2
            else:
                return None
        i += grammar.operands
        if i >= len(words):
            return None  # nothing left to run: not a wrapped launch
        return Wrapped(tuple(words[:i]), " ".join(names), tuple(options))
    return None
