"""The launch command a user is about to run, parsed the way SGLang's argparse would parse it.

Accepts `python -m sglang.launch_server ...`, `sglang serve ...` and bare flags, with
`VAR=value` words in front; `--flag value` and `--flag=value`; and argparse's unambiguous
prefixes (`--tp` for `--tp-size`), since SGLang's parser allows them.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from eaglebug.checks.contract.errors import InputError, closest_hint
from eaglebug.checks.contract.numbers import float_text
from eaglebug.checks.launch import apptainer
from eaglebug.checks.launch.containers import host_path
from eaglebug.checks.launch.flags import FlagSpec, ServeFrontEnd
from eaglebug.checks.launch.shell import (
    expanded_script,
    referenced,
    runs_a_string,
    shell_string,
    split_words,
)
from eaglebug.checks.launch.wrappers import (
    ASSIGNMENT,
    SRUN_PER_TASK,
    WRAPPERS,
    environment,
    unwrapped,
)

# The modules that start SGLang's server: named, because the command is read before any tree
# is found (the tree is the one the command's own python imports: `eaglebug/cli/commands._tree`).
_ENTRY_MODULES = {"sglang.launch_server", "sglang.srt.server", "sglang.launch_server.py"}
_FORMS = "python -m sglang.launch_server ..., sglang serve ..., or bare --flags"
# A command (a compose service's, a pod's container's, its words joined) that starts the server,
# also inside a `bash -c` script, which the launch's reading then takes as its one command.
SERVER_COMMAND = re.compile(r"sglang\.launch_server|sglang\.srt\.server|\bsglang\s+serve\b")


@dataclass(frozen=True)
class LaunchSpec:
    """What a launch command says: the program, env additions and each flag's value."""

    argv: tuple[str, ...]  # the command itself, without the VAR=value words
    program: tuple[str, ...]  # e.g. ("python", "-m", "sglang.launch_server"); () for bare flags
    env_additions: dict[str, str]
    values: dict[str, str | bool | list[str]]  # dest -> value
    spelled: dict[str, str] = field(default_factory=dict)  # dest -> the option as written
    # Flags whose value a variable sets when the launch runs, not known here (a `bash -c`
    # script's `--node-rank $POD_INDEX`, a pod's `valueFrom`): dest -> the value as written;
    # not in `values`.
    at_run_time: dict[str, str] = field(default_factory=dict)

    def get(self, dest: str) -> str | bool | list[str] | None:
        return self.values.get(dest)

    def unknown(self, dest: str) -> str | None:
        """What a check that reads `dest` must say it assumed, where a variable sets the flag
        when the launch runs: the engine reads it as unknown, arithmetic as not given."""
        if dest not in self.at_run_time:
            return None
        option = self.spelled.get(dest, dest)
        return f"{option} {self.at_run_time[dest]}: set when the launch runs, not known here"

    def text(self, dest: str) -> str | None:
        value = self.values.get(dest)
        if isinstance(value, list):
            return " ".join(value)
        return value if isinstance(value, str) else None

    def number(self, dest: str) -> float | None:
        """A flag's value as a finite number (the one reader: `contract/numbers.py`); `nan`,
        `inf` or `1e400` for a length or a size is refused here, as one line."""
        value = self.text(dest)
        if value is None:
            return None
        number = float_text(value)
        if number is None:
            shown = value if len(value) <= 24 else f"{value[:20]}..."
            option = self.spelled.get(dest, dest)
            raise InputError(
                f"{option} {shown}: expected a finite number", f"fix {option} in the launch command"
            )
        return number

    def env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The environment the server would see: ours, plus the words before the command,
        as an `env` among its wrappers changes it."""
        return launch_environment(self.program, {**environ, **self.env_additions})

    def host_path(self, path: str, environ: Mapping[str, str]) -> str | None:
        """Where a path the server names is on this machine, launched from `environ`: itself,
        unless the server runs in a container (then through its binds; None where none maps
        it)."""
        return server_path(self.program, {**environ, **self.env_additions}, path)

    def to_json(self) -> dict[str, object]:
        wrapped = unwrapped(self.program)[0]
        return {
            "argv": list(self.argv),
            "program": list(self.program),
            "wrappers": [
                {"name": w.name, "words": list(w.words), "container": w.container or None}
                for w in wrapped
            ],
            "env_additions": self.env_additions,
            "server_args": self.values,
        }


_PYTHON_OPTS_WITH_VALUE = frozenset({"-X", "-W", "-Q"})


def _program_length(words: list[str]) -> int:
    """How many leading words name the program (before the first server flag): the
    wrappers it runs through (`wrappers.py`: `nohup`, `numactl`, `taskset`, `uv run`,
    `conda run`), then SGLang's entry point."""
    if not words:
        raise InputError("no launch command given", f"pass it after `--`: {_FORMS}")
    wrapped, command = unwrapped(words)
    # `docker run --entrypoint python3 IMAGE -m sglang.launch_server ...`: the words after
    # the image are the entry point's arguments (SGLang's docker/compose.yaml is that shape)
    entry = wrapped[-1].option("--entrypoint") if wrapped and wrapped[-1].container else None
    if entry:
        return len(words) - len(command) + _command_length([entry, *command]) - 1
    if wrapped and command[0].startswith("-"):  # bare flags are a launch of no program
        raise InputError(
            f"`{' '.join(wrapped[-1].words)}` runs no SGLang server command",
            f"expected {_FORMS.rsplit(', or', 1)[0]} after it",
        )
    return len(words) - len(command) + _command_length(command)


def _command_length(words: list[str]) -> int:
    if words[0].startswith("-"):
        return 0
    first = os.path.basename(words[0])
    if first.startswith("python"):
        i = 1
        while i < len(words) and words[i].startswith("-") and words[i] != "-m":
            i += 2 if words[i] in _PYTHON_OPTS_WITH_VALUE else 1  # -u, -O, -X opt, -W arg
        if i + 1 < len(words) and words[i] == "-m" and words[i + 1] in _ENTRY_MODULES:
            return i + 2
        if i < len(words) and words[i].endswith("launch_server.py"):
            return i + 1
        raise InputError(
            f"the launch command runs {' '.join(words[: i + 2])!r}, not SGLang's server",
            f"expected {_FORMS}",
        )
    if first == "sglang" and len(words) >= 2 and words[1] == "serve":
        return 2
    if first == "sglang":
        raise InputError("only `sglang serve` launches a server", f"expected {_FORMS}")
    raise InputError(
        f"cannot read the launch command starting with {words[0]!r}",
        f"expected {_FORMS}, run directly or through {WRAPPERS}; or `docker compose up` "
        "(its service's command)",
    )


def _serve_words(words: list[str], serve: ServeFrontEnd) -> list[str]:
    """Apply what `sglang serve` itself does to argv (this tree's sglang/cli/serve.py)."""
    if serve.model_type_flag:
        kept: list[str] = []
        i = 0
        while i < len(words):
            word = words[i]
            if word == "--model-type" or word.startswith("--model-type="):
                value = (
                    word.partition("=")[2]
                    if "=" in word
                    else (words[i + 1] if i + 1 < len(words) else "")
                )
                if value not in {"auto", "llm", "diffusion"}:
                    raise InputError(
                        f"--model-type {value!r}: sglang serve takes auto, llm or diffusion"
                    )
                i += 1 if "=" in word else 2
                continue
            kept.append(word)
            i += 1
        words = kept
    if serve.positional_model and words and not words[0].startswith("-"):
        words = ["--model-path", *words]
    return words


# Larger than any count or size a launch flag takes; past it, values overflow C code and floats.
_FLAG_INT_LIMIT = 2**63


def _check_type(option: str, value: str, value_type: str | None) -> None:
    """argparse's `type=int` / `type=float` conversions, as SGLang would apply them, plus the
    values argparse lets through that no launch can use (`nan`, `inf`, a 400-digit --tp)."""
    if value_type is None:
        return
    shown = value if len(value) <= 24 else f"{value[:20]}..."
    article = "an integer" if value_type == "int" else "a number"
    try:
        number = int(value) if value_type == "int" else float(value)
    except ValueError:
        raise InputError(
            f"{option} {shown}: expected {article}", f"fix {option} in the launch command"
        ) from None
    if isinstance(number, float) and not math.isfinite(number):
        raise InputError(
            f"{option} {shown}: expected a finite number", f"fix {option} in the launch command"
        )
    if abs(number) >= _FLAG_INT_LIMIT:
        raise InputError(f"{option} {shown}: too large", f"fix {option} in the launch command")


# The flags a variable may set when the launch runs, a number among them: what tells one node
# from another (`--node-rank $POD_INDEX`) and where it listens. Another number (`--tp $TP`, a
# fraction, a length) is one the GPU and memory checks rest on: an input error, never a default
# in its place. A text (a path, a name, a backend) set at run time is read as not given, said.
_NUMBERS_AT_RUN_TIME = frozenset({"node_rank", "port"})


def _at_run_time(option: str, spec: FlagSpec, taken: list[str], names: set[str]) -> str:
    """The value as written, where a variable may set the flag when the launch runs; else the
    input error that it must be known (`names`: the variables in it not known here)."""
    if spec.value_type is None or spec.dest in _NUMBERS_AT_RUN_TIME:
        return " ".join(taken)
    shown = sorted(names)
    raise InputError(
        f"{option} {' '.join(taken)}: {', '.join(shown)} sets it when the launch runs, and the "
        "checks rest on its value",
        f"write its value in the launch, or set {shown[0]} where its words say it (a "
        "container's -e, an env: entry of the manifest)",
    )


def _is_flag(word: str) -> bool:
    """`--x` or `-x`, but not a negative number given as a value."""
    return word.startswith("--") or (
        word.startswith("-") and len(word) == 2 and not word[1].isdigit()
    )


def _lookup(option: str, table: dict[str, FlagSpec], version: str) -> FlagSpec:
    spec = table.get(option)
    if spec is not None:
        return spec
    prefixed = sorted(
        {s.options[0] for o, s in table.items() if o.startswith(option) and option.startswith("--")}
    )
    if len(prefixed) == 1:
        return table[prefixed[0]]
    if len(prefixed) > 1:
        raise InputError(
            f"ambiguous flag {option}: SGLang {version} could mean {', '.join(prefixed[:6])}",
            "spell the flag out in full",
        )
    hint = closest_hint(
        option,
        table,
        "did you mean {}?",
        f"`python -m sglang.launch_server --help` lists SGLang {version}'s flags",
        cutoff=0.7,
    )
    raise InputError(f"unknown flag {option} for SGLang {version}", hint)


def env_and_argv(words: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Split `VAR=value ... [env VAR=value ...] command ...` into the env additions and argv."""
    words = split_words(words)
    env: dict[str, str] = {}
    while words and ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[:1] == ["env"] and ASSIGNMENT.match(words[1] if len(words) > 1 else ""):
        words.pop(0)  # `env VAR=1 python -m ...`; with options, `env` is a wrapper
        while words and ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
    return env, words


def _shell_string_read(
    words: list[str], environ: Mapping[str, str], later: frozenset[str]
) -> tuple[list[str], frozenset[str]]:
    """`words` with a `bash -c STRING` after the wrappers read as the words of STRING (its
    `NAME=VALUE` words in front as an `env` there, so they count inside the wrappers), its
    variables expanded where the shell has them (`shell.expanded_script`): the launch started
    in `environ`, through its wrappers (a container's `-e`); and the variables it has not."""
    wrapped, command = unwrapped(words)
    if not runs_a_string(command):  # read once, after its variables are expanded
        return words, frozenset()
    if any(wrapper.name == "srun" for wrapper in wrapped):  # each task's own, set as it runs
        later = later | frozenset(SRUN_PER_TASK)
    script, unknown = expanded_script(command[2], environment(wrapped, environ), later)
    inner = shell_string([*command[:2], script])
    assert inner is not None
    additions, inner = env_and_argv(inner)
    if inner[:1] == ["exec"]:  # `VAR=1 exec python3 ...`: the shell replaced by the command
        inner = inner[1:]
    assignments = ["env", *(f"{k}={v}" for k, v in additions.items())] if additions else []
    return [*(w for wrapper in wrapped for w in wrapper.words), *assignments, *inner], unknown


def server_path(
    argv: Sequence[str], env: Mapping[str, str], path: str, cwd: str | None = None
) -> str | None:
    """Where a path the command after `argv`'s wrappers names is on this machine, `argv`
    started in `env`: through the binds of the innermost container among them (each sees
    the environment the wrappers before it leave); itself without one."""
    wrapped = unwrapped(argv)[0]
    at = next((i for i in range(len(wrapped) - 1, -1, -1) if wrapped[i].container), None)
    if at is None:
        return path
    container = wrapped[at]
    if container.container == "docker":
        return host_path(container, path)
    here = cwd if cwd is not None else os.getcwd()
    return apptainer.host_path(container, environment(wrapped[:at], env, here), here, path)


def launch_environment(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """The environment the command after `argv`'s wrappers runs in, started in `env` (an
    `env` among them may set, unset or clear: `wrappers.environment`)."""
    return environment(unwrapped(argv)[0], env)


def words_environment(
    words: Sequence[str], environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The environment a launch command's program sees (ours, its `VAR=value` words, what an
    `env` among its wrappers does) and its words without the leading `VAR=value` ones."""
    additions, argv = env_and_argv(words)
    return launch_environment(argv, {**environ, **additions}), argv


def parse_launch(
    words: Sequence[str],
    flags: list[FlagSpec],
    version: str = "this tree",
    serve: ServeFrontEnd | None = None,
    convert: Callable[[FlagSpec, str, str], str] | None = None,
    environ: Mapping[str, str] | None = None,
    later: frozenset[str] = frozenset(),
) -> LaunchSpec:
    """The launch's flags by `dest`; `convert(spec, option, value)` is the release's own
    converter of a flag that has one (`FlagSpec.parser`), run on the value (`launch/types.py`).
    `environ`: what the launch is started in, for the variables of a `bash -c` script; a flag
    whose value still holds one it does not set, or one of `later` (what the launch's form
    sets when it runs, written `${NAME}`: `kubectl.py`), is set at run time
    (`LaunchSpec.at_run_time`)."""
    env, words = env_and_argv(words)
    words, unknown = _shell_string_read(words, {**(environ or {}), **env}, later)
    unknown |= later
    n_program = _program_length(words)
    program = words[:n_program]
    rest = words[n_program:]
    if program[-1:] == ["serve"] and serve is not None:
        rest = _serve_words(rest, serve)
    words = [*program, *rest]
    table = {option: spec for spec in flags for option in spec.options}
    values: dict[str, str | bool | list[str]] = {}
    spelled: dict[str, str] = {}
    at_run_time: dict[str, str] = {}
    i = n_program
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word == "-":
            raise InputError(
                f"unexpected word {word!r} in the launch command",
                "each value must follow its --flag",
            )
        option, has_inline, inline = word.partition("=")
        spec = _lookup(option, table, version)
        spelled[spec.dest] = option
        i += 1
        if spec.nargs == "0":
            if has_inline:
                raise InputError(
                    f"{option} takes no value (got {inline!r})", f"write {option} alone"
                )
            values[spec.dest] = True
            continue
        taken: list[str] = [inline] if has_inline else []
        while i < len(words) and not _is_flag(words[i]):
            if spec.nargs in {"1", "?"} and taken:
                break
            taken.append(words[i])
            i += 1
        if not taken and spec.nargs in {"1", "+"}:
            raise InputError(f"{option} needs a value", f"write {option} VALUE")
        if unknown and (names := {n for v in taken for n in referenced(v)} & unknown):
            at_run_time[spec.dest] = _at_run_time(option, spec, taken, names)
            values.pop(spec.dest, None)  # the last of a repeated flag is the one
            continue
        at_run_time.pop(spec.dest, None)
        if spec.parser is not None and convert is not None:
            taken = [convert(spec, option, value) for value in taken]
        for value in taken:
            _check_type(option, value, spec.value_type)
        if spec.nargs in {"*", "+"}:
            values[spec.dest] = taken
        else:
            values[spec.dest] = taken[0] if taken else True
    return LaunchSpec(tuple(words), tuple(words[:n_program]), env, values, spelled, at_run_time)
