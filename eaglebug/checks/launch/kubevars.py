"""A Kubernetes container's variables as kubelet makes them, before it runs.

Its controller's first (LWS's group size and index), then `env` in order, each value's
`$(VAR)` expanded from those before it (kubernetes `third_party/forked/golang/expansion`); and
which are the cluster's when the pod runs, not known here (`RunTime`): a `valueFrom`, the
controller's leader address, a service's host and port with service links on, any name with
`envFrom`. `kubectl.py` writes the `docker run` of the container from them.
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.limits import LAUNCH_FILE_BYTES
from eaglebug.checks.launch.kubemanifest import Pod, shown, text

# The variables kubelet gives a pod for each service of its namespace (`enableServiceLinks`, on
# by default), Docker links' names, that a `$(VAR)` sees (kubelet puts them first): only those
# that are a host or a port, `MY_SVC_SERVICE_HOST`, `MY_SVC_SERVICE_PORT[_NAME]`,
# `MY_SVC_PORT_8000_TCP_PORT|_ADDR`. `MY_SVC_PORT` is `tcp://10.0.0.1:8000`, never a port: a
# user's own `$(MASTER_PORT)` the manifest forgot to set is not taken for one.
_SERVICE_LINK = re.compile(
    r"[A-Z_][A-Z0-9_]*_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?"
    r"|PORT_\d+_(?:TCP|UDP|SCTP)_(?:PORT|ADDR))"
)


class RunTime:
    """The variables a `$(VAR)` may name that the cluster sets when the pod runs: the
    controller's (LWS's leader address), a `valueFrom`'s, and, for a reference the manifest does
    not set, any name where the container has `envFrom` (a config map's keys are not read
    here), or a service's where the pod has service links. `names` grows with each one read."""

    def __init__(self, pod: Pod, container: dict[str, Any]) -> None:
        self.names = set(pod.later)
        self.open_ended = bool(container.get("envFrom"))
        self.links = pod.spec.get("enableServiceLinks") is not False

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self.names:
            return True
        if self.open_ended or (self.links and _SERVICE_LINK.fullmatch(name)):
            self.names.add(name)
            return True
        return False


def environment(
    container: dict[str, Any], pod: Pod, where: str, warnings: list[str], later: RunTime
) -> dict[str, str]:
    """The container's variables as known before it runs: the controller's first (where the
    container does not set them), then `env` in order, each value expanded; those set only
    when it runs (`valueFrom`, the controller's) go to `later`, and to `warnings` too, with
    `envFrom`'s."""
    listed = container.get("env")
    entries = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
    own = {text(e.get("name")) for e in entries}
    env = {k: v for k, v in pod.given.items() if k not in own}
    later.names -= own
    runtime: list[str] = []
    for entry in entries:
        name = text(entry.get("name")) or ""
        if "valueFrom" in entry:
            env.pop(name, None)
            later.names.add(name)
            runtime.append(name)
            continue
        value = entry.get("value")
        if value is not None and not isinstance(value, str):
            raise InputError(
                f"{where}: env {name} is {shown(value)}, not a string: the API server refuses "
                "the manifest",
                f'quote it: value: "{shown(value)}"',
            )
        env[name] = expand(value or "", env, later, where)
        later.names.discard(name)
    if runtime:
        warnings.append(
            f"{where}: {', '.join(runtime)} set by the cluster at run time (valueFrom): "
            "not known here"
        )
    sources = container.get("envFrom")
    if isinstance(sources, list) and sources:
        warnings.append(f"{where}: the variables of envFrom are the cluster's: not read")
    return env


def expand(value: str, env: Mapping[str, str], later: Container[str], where: str) -> str:
    """Kubernetes' `$(VAR)` expansion: `$$` a `$`, `$(NAME)` the variable (`${NAME}` where
    the cluster sets it when the pod runs: `RunTime`), an unset one or an unclosed `$(` left
    as written.
    What it makes is bounded: each value may refer to those before it, and doubling one in
    each of forty variables would make a terabyte."""
    out: list[str] = []
    size = 0
    i = 0
    closes = True  # a `)` may follow: once none does, no later `$(` is searched again
    while i < len(value):
        if value[i] != "$" or i + 1 >= len(value):
            piece, i = value[i], i + 1
        elif value[i + 1] == "$":
            piece, i = "$", i + 2
        elif value[i + 1] == "(" and closes and (close := value.find(")", i + 2)) != -1:
            name = value[i + 2 : close]
            if name in env:
                piece = env[name]
            else:
                piece = f"${{{name}}}" if name in later else value[i : close + 1]
            i = close + 1
        else:
            closes = closes and value[i + 1] != "("
            piece, i = value[i : i + 2], i + 2
        size += len(piece)
        if size > LAUNCH_FILE_BYTES:
            raise InputError(
                f"{where}: a value expands past {LAUNCH_FILE_BYTES >> 20} MiB",
                "check the $(VAR) references of its env and args",
            )
        out.append(piece)
    return "".join(out)
