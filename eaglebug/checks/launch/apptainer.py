"""A launch run in an Apptainer (or SingularityCE) image, the container of HPC clusters:
`srun apptainer exec --nv sglang.sif python3 -m sglang.launch_server ...`.

Why: unlike docker's, Apptainer's command runs as a child of the command that started it,
in this user's environment and files, so eaglebug reads and launches it; but what the server
sees is not this shell's. Read from apptainer/apptainer 917d665 and sylabs/singularity ec04331
(`internal/pkg/util/env/create.go`, `clean.go`; `action_script.sh`; the engines'
`container_linux.go`; `config/bind.go`, `mount.go`):

- The variables: this environment's, but `APPTAINER_*`/`SINGULARITY_*` and `HOME`, `PATH`,
  `LD_LIBRARY_PATH` (`HOME` is the home it binds, `PATH` the image's default); `--cleanenv`
  (`-e`, and `--containall`, `--compat`) keeps only `TERM` and the proxy variables and sets
  `LANG=C`. `APPTAINERENV_NAME` (`SINGULARITYENV_NAME`; Apptainer reads both, its own first)
  and `--env NAME=VALUE,...` set `NAME` in either case. An image's own `%environment` lies
  between the two and is not known here; `--env-file` is run by a shell interpreter: not read.
- The files: bound at the same path unless moved, `$HOME` (not with `--no-home`, `--contain`),
  `/tmp` and `/var/tmp` (not with `--contain`), the current folder (not with `--contain`), the
  `bind path` lines of this machine's apptainer.conf (not with `--contain`), and each
  `-B/--bind SRC[:DST[:OPTS]],...` and `--mount type=bind,src=...,dst=...` (also given as
  `APPTAINER_BIND`). A path under none of them is not in the container.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from eaglebug.checks.launch.containers import bind_mount, through

if TYPE_CHECKING:
    from eaglebug.checks.launch.wrappers import Wrapped

# `exec`'s options that take a value (cmd/internal/cli/action_flags.go of each; the global
# options before `exec` are not the launch's): the others are switches.
_SHORT_VALUES = frozenset({"-B", "-H", "-S", "-W", "-o"})
_SHARED = """
add-caps app apply-cgroups authfile bind blkio-weight blkio-weight-device cdi-dirs
containlibs cpu-shares cpus cpuset-cpus cpuset-mems cwd device dns docker-host
docker-password docker-username drop-caps env env-file fusemount home hostname memory
memory-reservation memory-swap mount netns-path network network-args no-mount overlay
pem-path pids-limit pwd scratch security tmpdir workdir"""
APPTAINER_EXEC_VALUES = _SHORT_VALUES | frozenset(f"--{n}" for n in (*_SHARED.split(), "no-env"))
SINGULARITY_EXEC_VALUES = _SHORT_VALUES | frozenset(
    f"--{n}" for n in (*_SHARED.split(), "data", "proot")
)

_OMITTED = frozenset({"HOME", "PATH", "LD_LIBRARY_PATH"})
_CLEAN_KEPT = frozenset(
    {"TERM", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
     "all_proxy", "ALL_PROXY"}
)  # fmt: skip
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CONF_BYTES = 1 << 20


def _prefixes(wrapper: Wrapped) -> tuple[str, ...]:
    """The prefixes of the variables it injects, the first winning: SingularityCE reads only
    its own."""
    return ("SINGULARITYENV_",) if wrapper.words[0].endswith("singularity") else (
        "APPTAINERENV_", "SINGULARITYENV_"
    )  # fmt: skip


def _clean(wrapper: Wrapped) -> bool:
    return wrapper.option("-e", "--cleanenv", "-C", "--containall", "--compat") is not None


def _contained(wrapper: Wrapped) -> bool:
    return wrapper.option("-c", "--contain", "-C", "--containall", "--compat") is not None


def inside(wrapper: Wrapped, outside: Mapping[str, str]) -> dict[str, str]:
    """The variables the image's command is started with (the module's docstring)."""
    if _clean(wrapper):
        seen = {k: v for k, v in outside.items() if k in _CLEAN_KEPT}
        seen["LANG"] = "C"
    else:
        blocked = {
            name for option, value in wrapper.options if option == "--no-env"
            for name in value.split(",")
        }  # fmt: skip
        # its own settings and injections (SingularityCE knows no APPTAINER_ names)
        skipped = tuple(p for prefix in _prefixes(wrapper) for p in (prefix, prefix[:-4] + "_"))
        seen = {
            k: v
            for k, v in outside.items()
            if not k.startswith(skipped) and k not in _OMITTED and k not in blocked
        }
    home = _home(wrapper, outside)
    if home is not None:
        seen["HOME"] = home
    seen["PATH"] = _DEFAULT_PATH
    injected: dict[str, str] = {}
    for prefix in reversed(_prefixes(wrapper)):  # the first prefix's value wins
        injected.update((k[len(prefix) :], v) for k, v in outside.items() if k.startswith(prefix))
    for option, value in wrapper.options:
        if option == "--env":
            injected.update(_pairs(value))
    for name, value in injected.items():
        if name and name not in ("HOME", "PATH"):
            seen[name] = value
    return seen


def _pairs(value: str) -> list[tuple[str, str]]:
    """`--env A=1` or `--env A=1,B=2` (pflag's stringToString: split on commas only when
    more than one `=`)."""
    items = value.split(",") if value.count("=") > 1 else [value]
    return [(k, v) for k, _, v in (item.partition("=") for item in items)]


def _home(wrapper: Wrapped, outside: Mapping[str, str]) -> str | None:
    """The home inside: `-H SRC[:DST]`'s destination, else this user's."""
    given = wrapper.option("-H", "--home")
    if given:
        return given.split(":", 1)[-1]
    return outside.get("HOME") or None


def binds(wrapper: Wrapped, outside: Mapping[str, str], cwd: str) -> list[tuple[str, str]]:
    """(folder here, folder inside) of everything bound, by default and as asked."""
    contained = _contained(wrapper)
    skipped = {
        item for option, value in wrapper.options if option == "--no-mount"
        for item in value.split(",")
    }  # fmt: skip
    found: list[tuple[str, str]] = []
    home = outside.get("HOME")
    given_home = wrapper.option("-H", "--home")
    if given_home:
        source, _, target = given_home.partition(":")
        found.append((source, target or source))
    elif home and not contained and wrapper.option("--no-home") is None and "home" not in skipped:
        found.append((home, home))
    if not contained and "tmp" not in skipped:
        found += [("/tmp", "/tmp"), ("/var/tmp", "/var/tmp")]
    if not contained and "cwd" not in skipped and cwd != "/":
        found.append((cwd, cwd))
    if not contained and "bind-paths" not in skipped:
        found += [b for b in _configured(wrapper) if b[1] not in skipped]
    specs = [v for o, v in wrapper.options if o in ("-B", "--bind")]
    for name in (
        "APPTAINER_BIND",
        "APPTAINER_BINDPATH",
        "SINGULARITY_BIND",
        "SINGULARITY_BINDPATH",
    ):
        if outside.get(name):
            specs.append(outside[name])
    for spec in specs:
        found += _bind_specs(spec)
    found += [b for o, v in wrapper.options if o == "--mount" and (b := bind_mount(v))]
    return [(os.path.abspath(os.path.join(cwd, s)), t) for s, t in found]


def _bind_specs(spec: str) -> list[tuple[str, str]]:
    """`SRC[:DST[:OPTS]]`, several separated by commas; a token after a spec's second field
    that is one of its options (`ro`, `rw`, `image-src=...`, `id=...`) belongs to it."""
    found: list[tuple[str, str]] = []
    for token in spec.split(","):
        option = token in ("ro", "rw") or token.startswith(("image-src=", "id="))
        if not token or (found and option):
            continue
        parts = token.split(":")
        if parts[0]:
            found.append((parts[0], parts[1] if len(parts) > 1 and parts[1] else parts[0]))
    return found


def _configured(wrapper: Wrapped) -> list[tuple[str, str]]:
    """The `bind path = SRC[:DST]` lines of this machine's configuration; its defaults
    (`/etc/localtime`, `/etc/hosts`) where there is none."""
    name = "singularity" if wrapper.words[0].endswith("singularity") else "apptainer"
    for folder in ("/etc", "/usr/local/etc"):
        path = Path(folder, name, f"{name}.conf")
        try:
            with open(path, "rb") as handle:
                text = handle.read(_CONF_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        found = []
        for line in text.splitlines():
            key, eq, value = line.partition("=")
            if eq and key.strip() == "bind path" and not line.lstrip().startswith("#"):
                source, _, target = value.strip().partition(":")
                found.append((source, target or source))
        return found
    return [("/etc/localtime", "/etc/localtime"), ("/etc/hosts", "/etc/hosts")]


def host_path(wrapper: Wrapped, outside: Mapping[str, str], cwd: str, path: str) -> str | None:
    """Where a path the image's command names is here (it starts in the same folder, bound):
    through the bind of the deepest folder holding it; None when nothing binds it (the
    image's own files)."""
    return through(binds(wrapper, outside, cwd), posixpath.join(cwd, path))


def carried(wrapper: Wrapped, variables: Mapping[str, str]) -> list[str]:
    """The wrapper's words with `variables` set inside even under `--cleanenv`: as `--env`
    options before its image."""
    if not _clean(wrapper):
        return list(wrapper.words)
    extra = [w for k, v in variables.items() for w in ("--env", f"{k}={v}")]
    return [*wrapper.words[:-1], *extra, wrapper.words[-1]]
