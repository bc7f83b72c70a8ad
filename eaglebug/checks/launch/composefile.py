"""A Compose project's files read and merged: the services as `docker compose config` would
give the keys a launch reads.

Each file is YAML (PyYAML's safe loader, with Compose's `!reset` and `!override` tags),
interpolated before the merge (`composevars.py`); a later file's service merges into an
earlier one's as the Compose specification's merge rules say for those keys: variables by
name, binds by target, env files appended, the rest replaced. `extends` and `include` are not
read: said, never guessed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.inputs import read_named
from eaglebug.checks.launch.composevars import Interpolation


def read_services(
    files: list[str], variables: dict[str, str], warnings: list[str]
) -> dict[str, dict[str, Any]]:
    """The services of `files` (in merge order), each file interpolated from `variables`
    (what is unset goes to `warnings`), merged; only the keys a launch reads."""
    merged: dict[str, dict[str, Any]] = {}
    for path in files:
        services = _read(path).get("services") or {}
        if not isinstance(services, dict):
            raise InputError(f"{path}: `services` is not a mapping", "check the compose file")
        interpolated = Interpolation(path, variables, warnings)
        for name, service in services.items():
            if not isinstance(service, dict):
                continue
            merged[str(name)] = _merge(
                merged.get(str(name), {}), _read_service(interpolated, service)
            )
    return merged


def _read(path: str) -> dict[str, Any]:
    """A compose file's YAML (Compose's `!reset` and `!override` tags kept for the merge)."""
    import yaml

    loaded = yaml_file(
        path,
        "a compose file",
        "fix the compose file (docker compose config shows what compose reads)",
        lambda data: yaml.load(data, Loader=_loader()),
    )
    if not isinstance(loaded, dict):
        raise InputError(f"{path}: not a compose file (no mapping at the top)", "check -f")
    if "include" in loaded:
        raise InputError(
            f"{path}: uses `include`, which eaglebug does not read",
            "pass the docker run command it amounts to (docker compose config shows it)",
        )
    return loaded


def yaml_file(path: str, kind: str, hint: str, load: Callable[[bytes], Any]) -> Any:
    """`load` of the file's bytes (at most `LAUNCH_FILE_BYTES`), its failures one line each."""
    import yaml

    data = read_named(Path(path), kind)
    try:
        return load(data)
    except RecursionError:  # `[[[[...]]]]`: Python's frames end it, one line
        raise InputError(
            f"{path}: nested too deeply to be {kind}", f"check the {kind.split(' ', 1)[1]}"
        ) from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise InputError(
            f"{path}: not YAML{line}: {getattr(exc, 'problem', None) or exc}", hint
        ) from None


class _Reset:
    """`!reset`: the merge drops the value the earlier files gave."""


@dataclass(frozen=True)
class _Override:
    """`!override VALUE`: the merge replaces the earlier value instead of merging into it."""

    value: Any


@functools.cache
def _loader() -> type:
    """PyYAML's safe loader, with Compose's two tags. The Python one, not libyaml's: the C
    loader's composer recurses on the C stack, and a file of 200,000 nested `[` crashed the
    process (SIGSEGV); in Python the recursion limit ends it as an error. A compose file is
    a few KiB: the Python loader reads the largest fixture (37 KB) in milliseconds."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def reset(loader: Any, node: Any) -> _Reset:
        return _Reset()

    def override(loader: Any, node: Any) -> _Override:
        if isinstance(node, yaml.MappingNode):
            return _Override(loader.construct_mapping(node, deep=True))
        if isinstance(node, yaml.SequenceNode):
            return _Override(loader.construct_sequence(node, deep=True))
        return _Override(loader.construct_scalar(node))

    Loader.add_constructor("!reset", reset)
    Loader.add_constructor("!override", override)
    return Loader


_KEYS = frozenset(
    {"image", "entrypoint", "command", "environment", "env_file", "volumes", "user",
     "working_dir", "profiles", "build", "gpus", "deploy"}
)  # fmt: skip


def _read_service(interpolation: Interpolation, service: dict[str, Any]) -> dict[str, Any]:
    """The keys of a service a launch reads, interpolated (Compose's tags kept)."""
    if "extends" in service:
        raise InputError(
            f"{interpolation.where}: a service uses `extends`, which eaglebug does not read",
            "pass the docker run command it amounts to (docker compose config shows it)",
        )
    out: dict[str, Any] = {}
    for key, value in service.items():
        if key not in _KEYS:
            continue
        if isinstance(value, _Override):
            out[key] = _Override(interpolation.value(value.value))
        else:
            out[key] = value if isinstance(value, _Reset) else interpolation.value(value)
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """A later file's service over an earlier one's, as Compose merges the keys read here:
    variables by name, binds by target, env files appended, the rest replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, _Reset):
            out.pop(key, None)
        elif isinstance(value, _Override):
            out[key] = value.value
        elif key == "environment" and key in out:
            theirs = environment_map(value)
            out[key] = {
                k: v for k, v in {**environment_map(out[key]), **theirs}.items() if v is not _RESET
            }
        elif key == "volumes" and key in out:
            mine = {_target(v): v for v in out[key]}
            out[key] = list({**mine, **{_target(v): v for v in value}}.values())
        elif key == "env_file" and key in out:
            out[key] = [*listed(out[key]), *listed(value)]
        elif key == "deploy" and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _mapping_over(out[key], value)  # a memory limit keeps the GPUs
        else:
            out[key] = value
    return out


def _mapping_over(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Mappings merged key by key, all the way down, as Compose merges them; anything else
    (a list, a scalar) the later file's."""
    out = dict(base)
    for key, value in over.items():
        mine = out.get(key)
        if isinstance(mine, dict) and isinstance(value, dict):
            value = _mapping_over(mine, value)
        out[key] = value
    return out


def listed(value: Any) -> list[Any]:
    """A value compose takes as one item or a list of them, as a list."""
    return value if isinstance(value, list) else [value]


def _target(volume: Any) -> str:
    if isinstance(volume, dict):
        return str(volume.get("target", ""))
    parts = str(volume).split(":")
    return parts[1] if len(parts) > 1 else parts[0]


_RESET = "\0reset"  # a variable an override file `!reset`s: dropped by the merge


def environment_map(value: Any) -> dict[str, str | None]:
    """`environment` as a map (its list form `NAME=VALUE` / `NAME`); None: the shell's."""
    if isinstance(value, dict):
        return {
            str(k): None if v is None else _RESET if isinstance(v, _Reset) else scalar(v)
            for k, v in value.items()
        }
    out: dict[str, str | None] = {}
    for item in listed(value or []):
        name, eq, given = str(item).partition("=")
        out[name] = given if eq else None
    return out


def scalar(value: Any) -> str:
    """A YAML scalar as Compose passes it on: `true`, not Python's `True`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
