"""The commands a launch is often run through before SGLang's own: `nohup`, `numactl`,
`taskset`, `timeout`, `stdbuf`, `env`, `srun`, `sudo`, `uv run`, `conda run`, `docker run`,
`podman run`, `apptainer exec` (`taskset -c 0-7 uv run python -m sglang.launch_server ...`, `nohup env
CUDA_VISIBLE_DEVICES=0,1 python3 -m ...`, `srun -N 1 --gres=gpu:8 python3 -m ...`, as launch
scripts in the wild write it; a container's, as SGLang's install docs do).

Why: a user pastes the launch command they run. Refused at its first word, the preflight
said nothing about a launch that is fine apart from its wrapper; stripped blindly, a wrapper's
own option value would be read as the program. Each wrapper here is read by its own grammar
(which of its options take a value, how many operands precede the command), so the words
after it are the server's program and flags, and the launch still runs with the wrapper.
Which Python a wrapper runs (`uv run`: the project's environment; `conda run -n`: that
environment's) is `sitepaths.py`'s, from `Wrapped`; what an `env` in the chain does to the
server's environment (its `NAME=VALUE` words, `-u NAME`, `-i`) is `environment`'s.
"""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eaglebug.checks.launch import apptainer
from eaglebug.checks.launch.apptainer import APPTAINER_EXEC_VALUES, SINGULARITY_EXEC_VALUES
from eaglebug.checks.launch.containers import DOCKER_RUN_VALUES, PODMAN_RUN_VALUES, inside

ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # a `NAME=value` word


@dataclass(frozen=True)
class _Grammar:
    words: int  # how many words name the wrapper (`uv run`: 2)
    with_value: frozenset[str]  # options whose value is the next word (unless `--opt=value`)
    operands: int = 0  # words between the options and the command (`taskset`'s CPU list)
    all_take_values: bool = False  # every option takes a value but the `without` ones
    without: frozenset[str] = frozenset()
    assignments: bool = False  # `NAME=VALUE` words before the command (`env`'s)
    unreadable: frozenset[str] = frozenset()  # options whose effect is not read: no launch
    # runs the command in a container: "docker" (docker, podman: the runtime's processes,
    # `containers.py`) or "apptainer" (apptainer, singularity: a child's, `apptainer.py`)
    container: str = ""


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
# GNU coreutils' (`timeout --help`, `stdbuf --help`, `env --help`): the options that take a
# value as the next word; a short one may have it attached (`-k5`, `-oL`: one word).
_TIMEOUT_VALUES = frozenset({"-k", "--kill-after", "-s", "--signal"})
_STDBUF_VALUES = frozenset({"-i", "--input", "-o", "--output", "-e", "--error"})
_ENV_VALUES = frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})
# Slurm's `srun` (src/common/slurm_opt.c at SchedMD/slurm 284c3b9: the `common_options[]` with
# a srun setter and `required_argument`); its getopt string starts with `+`, so the command is
# the first word that is not an option. An optional argument is only ever attached
# (`--exclusive=user`, `-K1`): one word, as a switch is. Options a SPANK plugin adds (pyxis's
# `--container-image`) are read as switches unless written `--option=value`.
_SRUN_VALUES = frozenset(
    [f"-{short}" for short in "ABCDFGJLMNSTWbcdeimnopqrtwx"]
    + [
        f"--{name}"
        for name in """
accel-bind account acctg-freq autocomplete bb bbf bcast-exclude begin chdir cluster
cluster-constraint clusters comment constraint container container-id context core-spec
cores-per-socket cpu-bind cpu-freq cpu_bind cpus-per-gpu cpus-per-task deadline delay-boot
dependency distribution epilog error exclude export extra extra-node-info gpu-bind
gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags het-group hint
ignore-signals input job-name jobid licenses mail-type mail-user mcs-label mem mem-bind
mem-per-cpu mem-per-gpu mem-update mincpus mpi msg-timeout network nodefile nodelist nodes
ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks-per-tres
open-mode output pack-group partition prefer priority profile prolog qos relative
reservation resources runtime segment signal slurmd-debug sockets-per-node switches
task-epilog task-prolog tasks-per-node thread-spec threads threads-per-core time time-min
tmp treewidth tres-bind tres-per-task wait wckey""".split()
    ]
)
# sudo 1.9's (src/parse_args.c: getopt `+Aa:BbC:c:D:Eeg:Hh::iKklNnPp:R:r:SsT:t:U:u:Vv` and its
# long options): those that take a value; `-h HOST` and `--preserve-env=LIST` only attached.
# `NAME=VALUE` words may follow the options. The modes that do not run the command as written
# (edit, list, validate, version, remove the timestamp, a chroot every path is read in) are
# not read.
_SUDO_VALUES = frozenset(
    {"-a", "-C", "-c", "-D", "-g", "-p", "-R", "-r", "-T", "-t", "-U", "-u", "--auth-type",
     "--close-from", "--login-class", "--chdir", "--group", "--host", "--prompt", "--chroot",
     "--role", "--type", "--command-timeout", "--other-user", "--user"}
)  # fmt: skip
_SUDO_UNREADABLE = frozenset(
    {"-e", "--edit", "-l", "--list", "-v", "--validate", "-V", "--version", "-K",
     "--remove-timestamp", "-R", "--chroot"}
)  # fmt: skip
_GRAMMARS: dict[tuple[str, ...], _Grammar] = {
    ("nohup",): _Grammar(1, frozenset()),
    ("numactl",): _Grammar(1, frozenset(), all_take_values=True, without=_NUMACTL_SWITCHES),
    ("taskset",): _Grammar(1, frozenset(), operands=1),
    ("timeout",): _Grammar(1, _TIMEOUT_VALUES, operands=1),  # the duration
    ("stdbuf",): _Grammar(1, _STDBUF_VALUES),
    # `-S` splits its value into more words by a shell-like syntax of its own: not read.
    ("env",): _Grammar(
        1, _ENV_VALUES, assignments=True, unreadable=frozenset({"-S", "--split-string"})
    ),
    ("srun",): _Grammar(1, _SRUN_VALUES),
    ("sudo",): _Grammar(1, _SUDO_VALUES, assignments=True, unreadable=_SUDO_UNREADABLE),
    ("uv", "run"): _Grammar(2, _UV_RUN_VALUES),
    ("conda", "run"): _Grammar(2, _CONDA_RUN_VALUES),
    # The command after the image (the operand) runs inside the container.
    ("docker", "run"): _Grammar(2, DOCKER_RUN_VALUES, operands=1, container="docker"),
    ("docker", "container", "run"): _Grammar(3, DOCKER_RUN_VALUES, operands=1, container="docker"),
    ("podman", "run"): _Grammar(2, PODMAN_RUN_VALUES, operands=1, container="docker"),
    ("podman", "container", "run"): _Grammar(3, PODMAN_RUN_VALUES, operands=1, container="docker"),
    ("apptainer", "exec"): _Grammar(2, APPTAINER_EXEC_VALUES, operands=1, container="apptainer"),
    ("singularity", "exec"): _Grammar(
        2, SINGULARITY_EXEC_VALUES, operands=1, container="apptainer"
    ),
}

WRAPPERS = ", ".join(f"`{' '.join(names)}`" for names in _GRAMMARS)


@dataclass(frozen=True)
class Wrapped:
    """One wrapper of a launch: its words, its name (`uv run`), the options it was given
    (option -> value, `""` for a switch), for `env` the variables it sets, and whether the
    command runs in a container (`docker run`, `podman run`: `containers.py`)."""

    words: tuple[str, ...]
    name: str
    options: tuple[tuple[str, str], ...]
    assignments: tuple[tuple[str, str], ...] = ()
    container: str = ""  # the command runs in a container: its kind (`_Grammar.container`)

    def option(self, *names: str) -> str | None:
        return next((value for option, value in self.options if option in names), None)


def environment(
    wrapped: Sequence[Wrapped], env: Mapping[str, str], cwd: str | None = None
) -> dict[str, str]:
    """The environment the command after `wrapped` runs in, given the one they are started
    in: each `env` in turn clears it (`-i`, a lone `-`), unsets (`-u NAME`) and sets (its
    `NAME=VALUE` words), as `env` does; a container runner starts the command with the
    variables it is given (`containers.inside`); the other wrappers pass it on."""
    seen = dict(env)
    for wrapper in wrapped:
        if wrapper.container == "docker":
            seen = inside(wrapper, seen, cwd if cwd is not None else os.getcwd())
            continue
        if wrapper.container == "apptainer":
            seen = apptainer.inside(wrapper, seen)
            continue
        if wrapper.name == "srun" and (export := _srun_export(wrapper, seen)) is not None:
            seen = _exported(export, seen)
            continue
        if wrapper.name == "sudo":
            seen = _sudo(wrapper, seen)
            continue
        if wrapper.name != "env":
            continue
        clears, unset = _drops(wrapper)
        if clears:
            seen.clear()
        for name in unset:
            seen.pop(name, None)
        seen.update(wrapper.assignments)
    return seen


def _sudo(wrapper: Wrapped, env: Mapping[str, str]) -> dict[str, str]:
    """What sudo's command sees with sudoers' defaults (`env_reset`): only what `-E` (all) or
    `--preserve-env=LIST` keeps, `HOME`, `USER` and `LOGNAME` the target user's (`-u`, root by
    default), and its `NAME=VALUE` words. What a site's sudoers adds (`env_keep`) is not
    readable by a user and not assumed."""
    preserve = wrapper.option("-E", "--preserve-env")
    if preserve == "":  # -E, or --preserve-env without a list
        kept = dict(env)
    else:
        kept = {name: env[name] for name in (preserve or "").split(",") if name in env}
        user = wrapper.option("-u", "--user") or "root"
        kept.update(USER=user, LOGNAME=user)
        home = _home_of(user)
        if home is not None:
            kept["HOME"] = home
        else:
            kept.pop("HOME", None)
    kept.update(wrapper.assignments)
    return kept


def _home_of(user: str) -> str | None:
    """A user's home folder on this machine (`#1000`: by uid), None when there is no such."""
    try:
        found = pwd.getpwuid(int(user[1:])) if user.startswith("#") else pwd.getpwnam(user)
    except (KeyError, ValueError):
        return None
    return found.pw_dir


# What srun sets in each task's environment, differently for each task (srun(1), "OUTPUT
# ENVIRONMENT VARIABLES": https://slurm.schedmd.com/srun.html). Run from inside an allocation,
# the shell srun starts in has its own values (its batch step's: `SLURM_NODEID=0`); a task's
# `--node-rank $SLURM_NODEID` reads the task's, known only when it runs (`command.py` reads a
# script run by srun with these set at run time).
SRUN_PER_TASK = (
    "SLURM_GTIDS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_PROCID",
    "SLURM_TASK_PID",
    "SLURMD_NODENAME",
    "SLURM_TOPOLOGY_ADDR",
)


def _srun_export(wrapper: Wrapped, env: Mapping[str, str]) -> str | None:
    """What srun exports: its `--export`, else `SLURM_EXPORT_ENV` (srun's input variable for
    the same); None for Slurm's default, everything."""
    return wrapper.option("--export") or env.get("SLURM_EXPORT_ENV")


def _exported(export: str, env: Mapping[str, str]) -> dict[str, str]:
    """What `srun --export=...` passes to the step (Slurm's `--export={[ALL,]VARS|ALL|NONE}`):
    `ALL` everything, `NONE` none but Slurm's own `SLURM_*`; otherwise the variables named
    (`NAME`, or `NAME=VALUE` to set one), with everything when `ALL` is among them."""
    items = [item for item in export.split(",") if item]
    everything = "ALL" in items
    kept = {k: v for k, v in env.items() if everything or k.startswith("SLURM_")}
    for item in items:
        name, eq, value = item.partition("=")
        if eq:
            kept[name] = value
        elif name not in ("ALL", "NONE") and name in env:
            kept[name] = env[name]
    return kept


def _drops(wrapper: Wrapped) -> tuple[bool, set[str]]:
    """What an `env` takes away: everything (`-i`, a lone `-`), and the variables it unsets."""
    clears = any(o in ("-i", "--ignore-environment", "-") for o, _ in wrapper.options)
    return clears, {v for o, v in wrapper.options if o in ("-u", "--unset")}


def carrying(
    argv: Sequence[str], variables: Mapping[str, str], env: Mapping[str, str] | None = None
) -> list[str]:
    """`argv`, started in `env`, with `variables` set again by each wrapper that would drop
    them: an `env`'s `-i`, a lone `-` or `-u NAME` (after its own `NAME=VALUE` words), sudo's
    reset (as its `NAME=VALUE` words), Apptainer's `--cleanenv` (`--env`), an srun export
    list without `ALL` (`--export=NONE`, or `SLURM_EXPORT_ENV` in `env`: in the list), so the
    command sees them. For what a launcher must pass to every process of the launch whatever
    the command does to its environment (the tag `stop` finds them by)."""
    wrapped, command = unwrapped(argv)
    out: list[str] = []
    for at, wrapper in enumerate(wrapped):
        if wrapper.container == "apptainer":
            out += apptainer.carried(wrapper, variables)
        elif wrapper.name == "srun":
            out += _srun_carried(wrapper, variables, environment(wrapped[:at], env or {}))
        else:
            out += wrapper.words
        if wrapper.name == "sudo":  # its env_reset drops them: set as its own words
            out += [f"{k}={v}" for k, v in variables.items()]
        if wrapper.name != "env":
            continue
        clears, unset = _drops(wrapper)
        out += [f"{k}={v}" for k, v in variables.items() if clears or k in unset]
    return out + command


def _srun_carried(
    wrapper: Wrapped, variables: Mapping[str, str], env: Mapping[str, str]
) -> tuple[str, ...]:
    """srun's words with `variables` in an export list that lacks `ALL` (Slurm sets each
    `NAME=VALUE` of the list; `NONE` is the empty list), the user's names kept."""
    export = _srun_export(wrapper, env)
    if export is None or "ALL" in export.split(","):
        return wrapper.words
    kept = [item for item in export.split(",") if item and item != "NONE"]
    listed = ",".join([*kept, *(f"{k}={v}" for k, v in variables.items())])
    words = list(wrapper.words)
    for i, word in enumerate(words):
        if word.startswith("--export="):
            words[i] = f"--export={listed}"
        elif word == "--export" and i + 1 < len(words):
            words[i + 1] = listed
    if wrapper.option("--export") is None:  # from SLURM_EXPORT_ENV: said as an option
        words.insert(1, f"--export={listed}")
    return tuple(words)


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
        read = _options(words, grammar)
        if read is None:
            return None
        options, i = read
        i += grammar.operands
        assignments: list[tuple[str, str]] = []
        while grammar.assignments and i < len(words) and ASSIGNMENT.match(words[i]):
            name, _, value = words[i].partition("=")
            assignments.append((name, value))
            i += 1
        if i >= len(words):
            return None  # nothing left to run: not a wrapped launch
        name = " ".join(names)
        return Wrapped(
            tuple(words[:i]), name, tuple(options), tuple(assignments), grammar.container
        )
    return None


def _options(words: list[str], grammar: _Grammar) -> tuple[list[tuple[str, str]], int] | None:
    """The wrapper's options as getopt (and Go's pflag) read them, and where they end: a long
    one's value after `=` or the next word; short ones clustered in one word (`-it`), the
    first that takes a value taking the rest of the word (`-k5`, `-oL`, `-itp8000`) or the
    next word. None when one is not read here or lacks its value."""
    i = grammar.words
    options: list[tuple[str, str]] = []
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        if word == "--":
            return options, i + 1
        if word == "-":  # `env -`: `-i`'s old spelling; for the others, the command
            if not grammar.assignments:
                break
            options.append((word, ""))
            i += 1
            continue
        if word.startswith("--"):
            option, eq, inline = word.partition("=")
            pending: list[tuple[str, str | None]] = [(option, inline if eq else None)]
        else:
            pending = []
            for at in range(1, len(word)):
                option = f"-{word[at]}"
                if _takes(option, grammar):
                    rest = word[at + 1 :]
                    if grammar.container and rest.startswith("="):
                        rest = rest[1:]  # pflag's `-p=8000:8000`
                    pending.append((option, rest or None))
                    break
                pending.append((option, ""))
        i += 1
        for option, attached in pending:
            if option in grammar.unreadable:
                return None
            if attached is None and _takes(option, grammar):
                if i >= len(words):
                    return None
                attached = words[i]
                i += 1
            options.append((option, attached or ""))
    return options, i


def _takes(option: str, grammar: _Grammar) -> bool:
    return option in grammar.with_value or (
        grammar.all_take_values and option not in grammar.without
    )
