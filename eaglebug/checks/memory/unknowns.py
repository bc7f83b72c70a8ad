"""The memory check where a flag it reads is set when the launch runs.

`--kv-cache-dtype $D`, `--quantization $Q`, `--speculative-algorithm $A` in a pod's script: the
arithmetic reads such a flag as not given. An error it finds is kept only where the tree's own
list of the flag's values (`choices=`, `args/flagchoices.py`; the algorithms of the tree's enum)
makes it an error for every one of them, each run through the same reading: weights larger
than the GPU are too large whatever the KV cache's dtype. Otherwise the verdict rests on the
value and is not an error on a guess (`resting_on`); every finding says in `assumed` what it
could not know.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from eaglebug.checks.args.flagchoices import flag_choices
from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding, FindingKey, resting_on
from eaglebug.checks.contract.limits import RUN_TIME_TRIES
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.speculative.algorithms import algorithm_facts

_ALGORITHM = "--speculative-algorithm"


class LaunchFlags(Protocol):
    """Flag values by option name (preflight's view of the parsed launch)."""

    def text(self, *options: str) -> str | None: ...
    def number(self, *options: str) -> float | None: ...
    def given(self, *options: str) -> bool: ...
    def unknown(self, *options: str) -> list[str]: ...


class Asked:
    """The flags one memory reading asks for, so that what it could not know is said."""

    def __init__(self, flags: LaunchFlags) -> None:
        self.flags = flags
        self.asked: list[str] = []

    def text(self, *options: str) -> str | None:
        self.asked += options
        return self.flags.text(*options)

    def number(self, *options: str) -> float | None:
        self.asked += options
        return self.flags.number(*options)

    def given(self, *options: str) -> bool:
        self.asked += options
        return self.flags.given(*options)

    def unknown(self, *options: str) -> list[str]:
        return self.flags.unknown(*options)


class Given:
    """The launch's flags with values in place of those set when it runs (None: not given)."""

    def __init__(self, flags: LaunchFlags, values: Mapping[str, str | None]) -> None:
        self.flags = flags
        self.values = values

    def text(self, *options: str) -> str | None:
        for option in options:
            if option in self.values:
                return self.values[option]
        return self.flags.text(*options)

    def number(self, *options: str) -> float | None:
        return self.flags.number(*options)

    def given(self, *options: str) -> bool:
        if any(self.values.get(o) is not None for o in options):
            return True
        return self.flags.given(*options)

    def unknown(self, *options: str) -> list[str]:
        return []


def settled(
    index: TreeIndex,
    findings: list[Finding],
    flags: LaunchFlags,
    asked: Sequence[str],
    again: Callable[[Mapping[str, str | None]], list[Finding]],
) -> list[Finding]:
    """`findings` of a reading that asked for `asked`, each as sure as the flags set when the
    launch runs let it be; `again(values)` is the same reading with those flags given."""
    options = [o for o in dict.fromkeys(asked) if flags.unknown(o)]
    if not options:
        return findings
    unknowns = flags.unknown(*options)
    errors = {f.key for f in findings if f.severity == "error"}
    tried = _values(index, options) if errors else None
    held = _held(errors, options, tried, again) if tried is not None else set()
    read_as = "at its default" if len(options) == 1 else "at their defaults"
    out = []
    for finding in findings:
        if finding.key not in held:
            out.append(resting_on(finding, unknowns, read_as))
            continue
        said = "; ".join(f"{o}: an error for each of its values ({', '.join(map(str, v))})"
                         for o, v in zip(options, tried or [], strict=False))  # fmt: skip
        evidence = finding.evidence if isinstance(finding.evidence, ConfigEvidence) else None
        base = evidence or ConfigEvidence()
        out.append(
            replace(finding, evidence=replace(base, assumed=(*base.assumed, *unknowns, said)))
        )
    return out


def _values(index: TreeIndex, options: list[str]) -> list[tuple[str | None, ...]] | None:
    """Each unknown flag's values as the tree lists them; None where one has no such list."""
    specs = {option: spec for spec in server_flags(index) for option in spec.options}
    out: list[tuple[str | None, ...]] = []
    for option in options:
        if option == _ALGORITHM:
            listed: tuple[str | None, ...] = (None, *algorithm_facts(index).members)
        else:
            spec = specs.get(option)
            listed = flag_choices(index, spec) if spec is not None else ()
        if not listed:
            return None
        out.append(listed)
    return out if math.prod(len(v) for v in out) <= RUN_TIME_TRIES else None


def _held(
    errors: set[FindingKey],
    options: list[str],
    tried: list[tuple[str | None, ...]],
    again: Callable[[Mapping[str, str | None]], list[Finding]],
) -> set[FindingKey]:
    """The errors found again for every combination of the flags' values."""
    held = set(errors)
    for combination in itertools.product(*tried):
        found = again(dict(zip(options, combination, strict=True)))
        held &= {f.key for f in found if f.severity == "error"}
        if not held:
            break
    return held
