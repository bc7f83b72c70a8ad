"""A launch by `docker compose up` (or `run`): the `docker run` command it amounts to (podman's
compose: `podman run`).

Why: SGLang's own `docker/compose.yaml` starts the server as a compose service, and users run
it so (three logs of the corpus come from compose). The command a user types says nothing of
the launch: the service's image, entry point, command, variables and binds are in the compose
file. This reads them as Docker Compose does and writes the equivalent `docker run` words,
which the rest of the checks read like any container launch (`containers.py`): the variables
inside, the binds that map `--model-path` to this machine.

What Compose does, followed here (the Compose specification, docs.docker.com/reference/
compose-file): the files are `-f`'s, else `COMPOSE_FILE`, else the first of `compose.yaml`,
`compose.yml`, `docker-compose.yaml`, `docker-compose.yml` in this folder or the nearest one
above, with its `compose.override.*` merged; variables are interpolated in each file before
the merge (`$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`,
`${VAR?error}`, `${VAR:+alt}`, `${VAR+alt}`, nested, `$$` a dollar) from the shell, then the
project's `.env` (or `--env-file`); a service's variables are its `env_file`s' then its
`environment`'s; an entry point replaces the image's and its command. What is not read
(`extends`, `include`, a service without a command) is said, never guessed.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.command import SERVER_COMMAND, env_and_argv
from eaglebug.checks.launch.composefile import environment_map, listed, read_services, scalar
from eaglebug.checks.launch.composevars import read_dotenv
from eaglebug.checks.launch.kubectl import Applied, kubectl_launch
from eaglebug.checks.launch.wrappers import environment, unwrapped

_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
_OVERRIDES = (
    "compose.override.yaml",
    "compose.override.yml",
    "docker-compose.override.yaml",
    "docker-compose.override.yml",
)
# `docker compose`'s own options (docker/compose cmd/compose/compose.go), `up`'s and `run`'s
# (cmd/compose/up.go, run.go) that take a value; the others are switches.
_GLOBAL_VALUES = frozenset(
    {"-f", "--file", "-p", "--project-name", "--project-directory", "--env-file", "--profile",
     "--ansi", "--progress", "--parallel", "-c", "--context", "-H", "--host", "--log-level"}
)  # fmt: skip
_UP_VALUES = frozenset(
    {"--scale", "-t", "--timeout", "--exit-code-from", "--attach", "--no-attach", "--pull",
     "--wait-timeout"}
)  # fmt: skip
_RUN_VALUES = frozenset(
    {"-e", "--env", "--env-from-file", "--entrypoint", "-v", "--volume", "-u", "--user", "-w",
     "--workdir", "--name", "-p", "--publish", "-l", "--label", "--pull", "--cap-add",
     "--cap-drop"}
)  # fmt: skip


@dataclass(frozen=True)
class Composed:
    """A compose launch read: the `docker run` words, the files read, what was said, and the
    service they are of."""

    words: list[str]
    files: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    service: str = ""  # the service read


@dataclass
class _Invocation:
    runtime: str = "docker"
    files: list[str] = field(default_factory=list)
    project_dir: str | None = None
    env_file: str | None = None
    profiles: list[str] = field(default_factory=list)
    subcommand: str = ""
    services: list[str] = field(default_factory=list)
    options: list[tuple[str, str]] = field(default_factory=list)
    run_command: list[str] = field(default_factory=list)


_RUNTIMES = ("docker", "podman")


def is_compose(argv: Sequence[str]) -> bool:
    """`docker compose ...`, `docker-compose ...`, or podman's (`podman compose`,
    `podman-compose`)."""
    head = os.path.basename(argv[0]) if argv else ""
    if head in _RUNTIMES:
        return argv[1:2] == ["compose"]
    return head in (f"{runtime}-compose" for runtime in _RUNTIMES)


def _runtime(argv: Sequence[str]) -> str:
    """The container runtime a compose invocation starts its containers with."""
    return os.path.basename(argv[0]).partition("-")[0]


def composed(argv: Sequence[str], environ: Mapping[str, str], cwd: str) -> Composed:
    """The `docker run` words `argv` (a compose invocation: `is_compose`) starts its SGLang
    service with, compose run in `environ` from `cwd`."""
    call = _invocation(list(argv))
    if call.subcommand not in ("up", "run", "create", "start"):
        raise InputError(
            f"{call.runtime} compose {call.subcommand or '(no command)'} does not start a server",
            "pass the command that starts it: docker compose up [SERVICE]",
        )
    files = _compose_files(call, environ, cwd)
    project = Path(cwd, call.project_dir) if call.project_dir else Path(files[0]).parent
    variables, said = _variables(call, project, environ, cwd)
    warnings: list[str] = []
    merged = read_services(files, variables, warnings)
    name = _service(call, merged, files[0], environ)
    read: list[str] = []
    words = _run_words(name, merged[name], call, project, environ, read)
    return Composed(words, (*files, *said, *read), tuple(dict.fromkeys(warnings)), name)


def _invocation(argv: list[str]) -> _Invocation:
    """The compose options, subcommand, its options and its operands, as compose's cobra
    parser reads them (a value after `=` or as the next word)."""
    call = _Invocation(runtime=_runtime(argv))
    rest = argv[2:] if os.path.basename(argv[0]) in _RUNTIMES else argv[1:]
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        option, value, i = _option(rest, i, _GLOBAL_VALUES, "docker compose")
        if option in ("-f", "--file"):
            call.files.append(value)
        elif option == "--project-directory":
            call.project_dir = value
        elif option == "--env-file":
            call.env_file = value
        elif option == "--profile":
            call.profiles.append(value)
    if i == len(rest):
        return call
    call.subcommand, i = rest[i], i + 1
    takes = _RUN_VALUES if call.subcommand == "run" else _UP_VALUES
    while i < len(rest):
        word = rest[i]
        if word == "--":
            call.services.extend(rest[i + 1 :])
            break
        if word.startswith("-") and not (call.subcommand == "run" and call.services):
            option, value, i = _option(rest, i, takes, f"docker compose {call.subcommand}")
            call.options.append((option, value))
            continue
        if call.subcommand == "run" and call.services:  # `run SERVICE COMMAND...`
            call.run_command = rest[i:]
            break
        call.services.append(word)
        i += 1
    return call


def _option(words: list[str], i: int, takes: frozenset[str], who: str) -> tuple[str, str, int]:
    option, eq, value = words[i].partition("=")
    if eq or option not in takes:
        return option, value, i + 1
    if i + 1 >= len(words):
        raise InputError(f"{who} {option}: no value after it", "complete the command")
    return option, words[i + 1], i + 2


def _compose_files(call: _Invocation, environ: Mapping[str, str], cwd: str) -> list[str]:
    """The compose files, in merge order, as absolute paths (named ones from the current
    folder; found ones from the project's folder, or the current one, and up)."""
    named = call.files
    if not named and environ.get("COMPOSE_FILE"):
        named = environ["COMPOSE_FILE"].split(environ.get("COMPOSE_PATH_SEPARATOR", ":"))
    if named:
        return [os.path.normpath(os.path.join(cwd, f)) for f in named if f]
    folder = Path(cwd, call.project_dir or ".").resolve()
    for place in (folder, *folder.parents):
        found = next((place / f for f in _FILES if (place / f).exists()), None)
        if found is not None:
            override = next((place / f for f in _OVERRIDES if (place / f).exists()), None)
            return [str(found)] + ([str(override)] if override else [])
    raise InputError(
        f"no compose file in {folder} or a folder above it ({', '.join(_FILES)})",
        "run eaglebug from the compose project's folder, or pass -f FILE to docker compose",
    )


def _variables(
    call: _Invocation, project: Path, environ: Mapping[str, str], cwd: str
) -> tuple[dict[str, str], list[str]]:
    """What interpolation reads: the shell's variables over the project's `.env` (or the
    `--env-file` given, from the current folder); and the file read, if any."""
    path = Path(cwd, call.env_file) if call.env_file else project / ".env"
    if not path.exists():
        if call.env_file:
            raise InputError(f"--env-file {path}: not found", "fix the path")
        return dict(environ), []
    return {**read_dotenv(path, environ), **environ}, [str(path)]


def _service(
    call: _Invocation, services: dict[str, Any], file: str, environ: Mapping[str, str]
) -> str:
    """The service that runs SGLang's server: the one named, else the one whose command is,
    among those `up` starts (a service in a profile only with that profile active)."""
    unknown = [s for s in call.services if s not in services]
    if unknown:
        raise InputError(
            f"{file} has no service {unknown[0]} (it has {', '.join(services) or 'none'})",
            "name one of its services",
        )
    active = set(call.profiles) | set(filter(None, environ.get("COMPOSE_PROFILES", "").split(",")))
    pool = call.services or [
        s for s, d in services.items() if not d.get("profiles") or active & set(d["profiles"])
    ]
    serving = [s for s in pool if _serves(services[s])]
    if len(serving) == 1:
        return serving[0]
    if len(serving) > 1:
        raise InputError(
            f"{file} has {len(serving)} services that run SGLang's server ({', '.join(serving)})",
            f"name the one to check: docker compose up {serving[0]}",
        )
    profiled = [s for s in services if s not in pool and _serves(services[s])]
    if profiled:
        shown = ", ".join(f"{s} ({'/'.join(map(str, services[s]['profiles']))})" for s in profiled)
        first = services[profiled[0]]["profiles"][0]
        raise InputError(
            f"the SGLang services of {file} run only with a profile: {shown}",
            f"name one: docker compose --profile {first} up {profiled[0]}",
        )
    raise InputError(
        f"no service of {file} runs SGLang's server ({', '.join(pool) or 'none'})",
        "name the service after `up`, or give the server's command itself",
    )


def _serves(service: dict[str, Any]) -> bool:
    """Does the service start SGLang's server: its entry point and command name it (also
    inside a `bash -c` script, which the launch's reading then reports as one)?"""
    words = [*_words(service.get("entrypoint")), *_words(service.get("command"))]
    return SERVER_COMMAND.search(" ".join(words)) is not None


def _words(value: Any) -> list[str]:
    """A command or entry point: its list as written, a string split as a shell would (no
    shell runs it: quotes only)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [scalar(v) for v in value]
    try:
        return shlex.split(scalar(value))
    except ValueError as exc:
        raise InputError(f"a compose command does not parse: {exc}", "check its quoting") from None


def _run_words(
    name: str,
    service: dict[str, Any],
    call: _Invocation,
    project: Path,
    environ: Mapping[str, str],
    read: list[str],
) -> list[str]:
    """`docker run` with the service's user, variables, binds and working folder, its image,
    then the entry point's words and the command's; the env files it reads go to `read`."""
    run = dict(call.options)
    out = [call.runtime, "run"]
    if user := run.get("-u") or run.get("--user") or service.get("user"):
        out += ["--user", scalar(user)]
    variables: dict[str, str | None] = {}
    for env_file in listed(service.get("env_file") or []):
        path = env_file.get("path") if isinstance(env_file, dict) else env_file
        required = not isinstance(env_file, dict) or env_file.get("required", True)
        full = project / str(path)
        if full.exists() or required:
            variables.update(read_dotenv(full, environ))
            read.append(str(full))
    variables.update(environment_map(service.get("environment")))
    variables.update(environment_map([v for o, v in call.options if o in ("-e", "--env")]))
    for key, value in variables.items():
        out += ["-e", key if value is None else f"{key}={value}"]
    for volume in [*(service.get("volumes") or []), *_run_volumes(call)]:
        out += _volume(volume, project, environ.get("HOME"))
    if workdir := run.get("-w") or run.get("--workdir") or service.get("working_dir"):
        out += ["-w", scalar(workdir)]
    out += _gpus(service)
    entrypoint = _words(run.get("--entrypoint") or service.get("entrypoint"))
    command = call.run_command or _words(service.get("command"))
    if entrypoint:
        out += ["--entrypoint", entrypoint[0]]
    if not entrypoint and not command:
        raise InputError(
            f"service {name} sets no command: its image's own is not known here",
            "give the service a command, or check the server's command itself",
        )
    image = service.get("image")
    if not image:  # built here: compose names it for the project; else it has none to run
        image = f"{project.name}-{name}" if service.get("build") else "(no image)"
    return [*out, scalar(image), *entrypoint[1:], *command]


def _gpus(service: dict[str, Any]) -> list[str]:
    """The service's GPUs as `docker run --gpus` words, where one request names them: its
    `gpus:` (`all`, or a list), else a `deploy.resources.reservations.devices` entry with the
    `gpu` capability. `device_ids` are those GPUs, `count` the first N, neither all of them
    (the Compose specification's `deploy`); several requests are not read."""
    requests = service.get("gpus")
    if requests == "all":
        return ["--gpus", "all"]
    if not isinstance(requests, list):
        deploy = service.get("deploy")
        resources = deploy.get("resources") if isinstance(deploy, dict) else None
        reserved = resources.get("reservations") if isinstance(resources, dict) else None
        devices = reserved.get("devices") if isinstance(reserved, dict) else None
        requests = [
            d
            for d in (devices if isinstance(devices, list) else [])
            if isinstance(d, dict) and "gpu" in [scalar(c) for c in listed(d.get("capabilities"))]
        ]
    if len(requests) != 1 or not isinstance(requests[0], dict):
        return []
    ids, count = requests[0].get("device_ids"), requests[0].get("count")
    if isinstance(ids, list) and count is None:
        return ["--gpus", '"device={}"'.format(",".join(scalar(i) for i in ids))]
    if ids is None and count is not None and scalar(count) != "all":
        return ["--gpus", scalar(count)]
    return ["--gpus", "all"] if ids is None else []


def _run_volumes(call: _Invocation) -> list[str]:
    return [v for o, v in call.options if o in ("-v", "--volume")]


def _volume(volume: Any, project: Path, home: str | None) -> list[str]:
    """A service's volume as `docker run -v` words: a bind's folder from the project's folder
    (`./models`) or the home (`~`: compose's `$HOME`); a named volume stays a name (not a
    folder here)."""
    if isinstance(volume, dict):
        source, target = volume.get("source"), volume.get("target")
        if volume.get("type") != "bind" or not source or not target:
            return []
        return ["-v", f"{_host(str(source), project, home)}:{target}"]
    source, colon, rest = str(volume).partition(":")
    if not colon:
        return []  # an anonymous volume: nothing of this machine
    return ["-v", f"{_host(source, project, home)}:{rest}"]


def _host(source: str, project: Path, home: str | None) -> str:
    if source == "~" or source.startswith("~/"):
        return (home or os.path.expanduser("~")) + source[1:]
    if source.startswith((".", "/")):
        return os.path.normpath(os.path.join(project, source))
    return source  # a named volume


def compose_launch(
    argv: Sequence[str], environ: Mapping[str, str], cwd: str | None = None
) -> Composed | None:
    """`composed` where `argv` (after its `VAR=value` words and wrappers) is a compose
    invocation; None for any other command."""
    additions, words = env_and_argv(argv)
    wrapped, command = unwrapped(words)
    if not is_compose(command):
        return None
    seen = environment(wrapped, {**environ, **additions})
    done = composed(command, seen, cwd if cwd is not None else os.getcwd())
    front: list[str] = [f"{k}={v}" for k, v in additions.items()]
    front += [w for wrapper in wrapped for w in wrapper.words]
    return Composed([*front, *done.words], done.files, done.warnings, done.service)


def file_launch(
    argv: Sequence[str], environ: Mapping[str, str], cwd: str | None = None
) -> Composed | Applied | None:
    """A launch whose files say what it runs, read: `docker compose up` (`composed`), or
    `kubectl apply -f` (`kubectl.applied`); None for any other command."""
    return compose_launch(argv, environ, cwd) or kubectl_launch(argv, environ, cwd)


def launch_files(
    argv: Sequence[str], environ: Mapping[str, str], cwd: str | None = None
) -> list[str]:
    """The files reading the launch reads besides the command (a compose launch's compose
    files, `.env` and env files; a kubectl launch's manifests; a container runner's
    `--env-file`s): a kept answer is for them as they were."""
    here = cwd if cwd is not None else os.getcwd()
    found: list[str] = []
    described = file_launch(argv, environ, here)
    if described is not None:
        found += described.files
        argv = described.words
    for wrapper in unwrapped(env_and_argv(argv)[1])[0]:
        if wrapper.container:
            found += [os.path.join(here, v) for o, v in wrapper.options if o == "--env-file"]
    return found
