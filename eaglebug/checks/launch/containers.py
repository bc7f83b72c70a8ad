"""A launch run in a container (`docker run ... lmsysorg/sglang python3 -m
sglang.launch_server ...`, SGLang's own install instructions): what the server inside sees.

Why: a user pastes the command they run. Inside the container the server sees only the
variables `-e`/`--env`/`--env-file` give it (not the shell's), and paths that a bind mount
(`-v HOST:CONTAINER`, `--mount type=bind,...`) maps to this machine's files: `--model-path
/models/Kimi-K2.5` is `HOST/Kimi-K2.5` here, and the Hugging Face cache it resolves hub ids in
is the container's (`/root/.cache/huggingface` unless its variables say otherwise), mounted
from here or not at all. What the image itself sets (its `ENV` lines, its Python and
transformers) is not known from here: those stay unknown rather than taken from this machine.
An Apptainer image's command is another matter (`apptainer.py`); `through` and `bind_mount`
serve both.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.inputs import OverLimit, read_limited
from eaglebug.checks.contract.limits import LAUNCH_FILE_BYTES, mib

if TYPE_CHECKING:
    from eaglebug.checks.launch.wrappers import Wrapped

# The options of `docker run` and `podman run` that take a value (the others are switches,
# a value only ever attached: `--rm=false`), as Go's pflag reads them: options end at the
# image, clustered shorts (`-it`, `-itp 80:80`). Read from docker/cli 28f7560
# (cli/command/container/run.go, opts.go) and containers/podman c6580b4
# (cmd/podman/containers/run.go, common/create.go, common/netflags.go, the root's persistent
# flags and `utils.AliasFlags`' spellings), hidden and deprecated ones included.
_SHORT_VALUES = frozenset(f"-{short}" for short in "acehlmpuvw")
DOCKER_RUN_VALUES = _SHORT_VALUES | frozenset(
    f"--{name}"
    for name in """
add-host annotation attach blkio-weight blkio-weight-device cap-add cap-drop cgroup-parent
cgroupns cidfile cpu-count cpu-percent cpu-period cpu-quota cpu-rt-period cpu-rt-runtime
cpu-shares cpus cpuset-cpus cpuset-mems detach-keys device device-cgroup-rule
device-read-bps device-read-iops device-write-bps device-write-iops dns dns-opt dns-option
dns-search domainname entrypoint env env-file expose gpus group-add health-cmd
health-interval health-retries health-start-interval health-start-period health-timeout
hostname io-maxbandwidth io-maxiops ip ip6 ipc isolation kernel-memory label label-file link
link-local-ip log-driver log-opt mac-address memory memory-reservation memory-swap
memory-swappiness mount name net net-alias network network-alias oom-score-adj pid
pids-limit platform publish pull restart runtime security-opt shm-size stop-signal
stop-timeout storage-opt sysctl tmpfs ulimit user userns uts volume volume-driver
volumes-from workdir""".split()
)
PODMAN_RUN_VALUES = _SHORT_VALUES | frozenset(
    f"--{name}"
    for name in """
add-host annotation arch attach authfile blkio-weight blkio-weight-device cap-add cap-drop
cdi-spec-dir cert-dir cgroup-conf cgroup-manager cgroup-parent cgroupns cgroups chrootdirs
cidfile conmon conmon-pidfile cpu-period cpu-profile cpu-quota cpu-rt-period cpu-rt-runtime
cpu-shares cpus cpuset-cpus cpuset-mems creds decryption-key default-mounts-file detach-keys
device device-cgroup-rule device-read-bps device-read-iops device-write-bps
device-write-iops dns dns-opt dns-option dns-search entrypoint env env-file env-merge
events-backend expose gidmap gpus group-add group-entry health-cmd health-interval
health-log-destination health-max-log-count health-max-log-size health-on-failure
health-retries health-start-period health-startup-cmd health-startup-interval
health-startup-retries health-startup-success health-startup-timeout health-timeout
healthcheck-command healthcheck-interval healthcheck-retries healthcheck-start-period
healthcheck-timeout hooks-dir hostname hosts-file hostuser image-volume imagestore init-path
ip ip6 ipc kernel-memory label label-file log-driver log-level log-opt mac-address
max-workers memory memory-profile memory-reservation memory-swap memory-swappiness mount
name namespace net network network-alias network-backend network-config-dir oom-score-adj os
override-arch override-os override-variant passwd-entry personality pid pidfile pids-limit
platform pod pod-id-file preserve-fd preserve-fds publish pull pull-option rdt-class
registries-conf requires restart retry retry-delay root runroot runtime runtime-flag
sdnotify seccomp-policy secret security-opt shm-size shm-size-systemd signature-policy
stop-signal stop-timeout storage-driver storage-opt subgidname subuidname sysctl systemd
timeout tmpdir tmpfs tz uidmap ulimit umask unsetenv user userns uts variant volume
volumepath volumes-from workdir""".split()
)
_ROOT_HOME = "/root"  # the home of the image's default user, root (docker's HOME for uid 0)


def inside(wrapper: Wrapped, outside: Mapping[str, str], cwd: str) -> dict[str, str]:
    """The variables the container's command is started with, given the environment the
    container runner is started in: each `--env-file`'s, then each `-e` (`NAME=VALUE`, or
    `NAME`: this side's value, if it has one; podman's `NAME*`, every variable so named), as
    docker merges them; podman's `--env-host` starts from this side's whole environment.
    `HOME` is root's unless `--user` names another user (then not known)."""
    seen: dict[str, str] = {}
    if wrapper.option("-u", "--user") is None:
        seen["HOME"] = _ROOT_HOME
    if wrapper.option("--env-host") is not None:
        seen.update(outside)
    for option, value in wrapper.options:
        if option == "--env-file":
            seen.update(_env_file(Path(cwd, value), outside))
    for option, value in wrapper.options:
        if option in ("-e", "--env"):
            name, eq, given = value.partition("=")
            if eq:
                seen[name] = given
            elif wrapper.name.startswith("podman") and name.endswith("*"):  # podman's prefix
                seen.update((k, v) for k, v in outside.items() if k.startswith(name[:-1]))
            elif name in outside:
                seen[name] = outside[name]
    return seen


def _env_file(path: Path, outside: Mapping[str, str]) -> dict[str, str]:
    """An env file as docker reads it: `NAME=VALUE` lines as written (no quotes removed),
    `NAME` alone for this side's value, blank lines and `#` comments skipped."""
    try:
        data = read_limited(path, LAUNCH_FILE_BYTES)  # a FIFO is not waited on
    except OverLimit:
        raise InputError(
            f"--env-file {path}: over {mib(LAUNCH_FILE_BYTES)}, not an env file",
            "point --env-file at the file of NAME=VALUE lines",
        ) from None
    except OSError as exc:
        raise InputError(
            f"--env-file {path}: cannot read it ({exc.strerror})",
            "the container would not start either: fix the path",
        ) from None
    found: dict[str, str] = {}
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.lstrip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        if eq:
            found[name] = value
        elif name in outside:
            found[name] = outside[name]
    return found


def mounts(wrapper: Wrapped) -> list[tuple[str, str]]:
    """(folder here, folder in the container) of each bind mount, in the order given: `-v`/
    `--volume SRC:DST[:options]` with an absolute SRC (a name is a volume docker keeps, not a
    folder here; `./...` is from the current folder; `~/...` and `$HOME/...` as the shell
    would have expanded them in a command pasted as one string: SGLang's docs write
    `-v ~/.cache/huggingface:/root/.cache/huggingface`), `--mount type=bind,source=SRC,
    target=DST` (`src`, `destination`, `dst`)."""
    found: list[tuple[str, str]] = []
    for option, value in wrapper.options:
        if option in ("-v", "--volume"):
            parts = value.split(":")
            here = os.path.expanduser(os.path.expandvars(parts[0]))
            if here.startswith(("./", "../")) or here in (".", ".."):
                here = os.path.abspath(here)  # docker 23 and later: from the current folder
            if len(parts) >= 2 and here.startswith("/") and parts[1].startswith("/"):
                found.append((here, parts[1]))
        elif option == "--mount" and (bound := bind_mount(value)) is not None:
            found.append((os.path.expanduser(os.path.expandvars(bound[0])), bound[1]))
    return found


def host_path(wrapper: Wrapped, path: str) -> str | None:
    """Where a path the command in a docker or podman container names is on this machine;
    None when no mount holds it (relative: from the image's working folder, not known)."""
    return through(mounts(wrapper), path) if path.startswith("/") else None


def through(binds: list[tuple[str, str]], path: str) -> str | None:
    """`path` (absolute, inside) through the bind of the deepest folder holding it (a later
    bind of the same folder wins); None when none holds it."""
    wanted = posixpath.normpath(path)
    best: tuple[int, str] | None = None
    for source, target in binds:
        target = posixpath.normpath(target)
        holds = wanted == target or wanted.startswith(target.rstrip("/") + "/")
        if holds and (best is None or len(target) >= best[0]):
            rest = wanted[len(target) :].lstrip("/")
            best = (len(target), posixpath.join(source, rest) if rest else source)
    return best[1] if best is not None else None


def bind_mount(value: str) -> tuple[str, str] | None:
    """A `--mount type=bind,source=SRC,target=DST` value's (SRC, DST) (`src`; `destination`,
    `dst`); None for another type."""
    fields = dict(f.partition("=")[::2] for f in value.split(",") if f)
    source = fields.get("source") or fields.get("src")
    target = fields.get("target") or fields.get("destination") or fields.get("dst")
    if fields.get("type") == "bind" and source and target:
        return source, target
    return None
