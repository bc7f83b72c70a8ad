"""A launch flag's value as the audited release's own converter makes it.

SGLang gives some flags a converting function of its own (0.5.23's `--context-length` takes
`human_readable_int`: `32k` is 32000, `32Ki` 32768, `40960.5` is refused). That function runs in
the one evaluator on the value written in the launch: what it returns is the value, what it
raises is SGLang's refusal, with SGLang's message; where it cannot be read, the value stays as
written.
"""

from __future__ import annotations

import math

from eaglebug.checks.contract.errors import InputError, one_line
from eaglebug.checks.launch.flags import FlagSpec
from eaglebug.checks.pyeval import brains, objects
from eaglebug.checks.pyeval.intrinsics import Intrinsics
from eaglebug.checks.pyeval.machine import Machine, Policy
from eaglebug.checks.pyeval.scope import Source
from eaglebug.checks.pyeval.values import FuncVal
from eaglebug.checks.source.facts import module_name
from eaglebug.checks.source.index import TreeIndex

_MESSAGE_CHARS = 240  # of SGLang's refusal, on the one `error:` line


def flag_value(index: TreeIndex, spec: FlagSpec, option: str, value: str) -> str:
    """`value` converted by the flag's own parser (as text), or InputError where it refuses."""
    if spec.parser is None:
        return value
    hooks = Intrinsics()
    brains.register_all(hooks)
    m = Machine(Source.of(index), hooks, policy=Policy(stop_at_raise=True))
    module, _ = module_name(spec.file)
    head, *rest = spec.parser.split(".")
    parser = m.resolve(module, head)
    for part in rest:
        parser = objects.attribute(m, parser, part, spec.file)
    if not isinstance(parser, FuncVal):
        return value
    result = m.run(parser, [value], {})
    raised = result.definite_raise
    shown = value if len(value) <= 24 else f"{value[:20]}..."
    if raised is not None:
        # SGLang's message echoes the value: a 5,000-digit one is shown cut, as above.
        message = one_line(raised.message.replace(value, shown)) if raised.message else ""
        if len(message) > _MESSAGE_CHARS:
            message = f"{message[: _MESSAGE_CHARS - 3]}..."
        said = f": {message}" if message else ""
        raise InputError(
            f"{option} {shown}: SGLang refuses it ({raised.kind}{said})",
            f"fix {option} in the launch command",
        )
    made = result.value
    if isinstance(made, bool) or not isinstance(made, (int, float, str)):
        return value  # not read here: the value as written
    if isinstance(made, float) and not math.isfinite(made):
        raise InputError(
            f"{option} {shown}: expected a finite number", f"fix {option} in the launch command"
        )
    return str(made)


__all__ = ["flag_value"]
