"""A launch by `kubectl apply -f MANIFEST` (or `create`, `replace`; OpenShift's `oc` alike):
the `docker run` command its SGLang container amounts to, and the GPUs its pod is given.

Why: SGLang's own `docker/k8s-sglang-service.yaml` and `k8s-sglang-distributed-sts.yaml` start
the server in a pod, and multi-node launches run as a StatefulSet or a LeaderWorkerSet
(kubernetes-sigs/lws#391 is SGLang's). The command typed says nothing of the launch: the
container's command, args, variables and mounts are in the manifest. This reads them as the
kubelet starts the container and writes the `docker run` words of it, which the rest of the
checks read like any container launch (`containers.py`): the variables inside, the hostPath
mounts that map `--model-path` to this machine (where this machine is the node).

What Kubernetes does, followed here (kubernetes.io/docs/tasks/inject-data-application):
- `command` replaces the image's entry point, `args` its command; `args` alone run after the
  image's entry point, not known here, and are read as the command (SGLang's images have
  none);
- `$(VAR)` in `command`, `args` and an `env` value is the container's variable (an env value
  sees those listed before it), `$$` is a `$`, a reference to an unset one stays as written
  (kubernetes `third_party/forked/golang/expansion`); one the cluster sets when the pod runs
  (`valueFrom`, LWS's leader address; a service's `X_SERVICE_HOST` where the pod has service
  links, any name where the container has `envFrom`) is written `${VAR}`, which the launch's
  reading takes as set at run time (`command.parse_launch`), in a `sh -c` script as anywhere;
- `env` in order, a later entry of a name winning; a `valueFrom` or `envFrom` value is the
  cluster's at run time: not known here, said;
- `resources.limits` `nvidia.com/gpu: N`: the device plugin gives the container N GPUs of the
  node it lands on, which ones its choice: a count, as a Slurm step's (`devices.Visible`,
  remote). Without a limit, what the container sees is the node runtime's and the image's.
kubectl's own reading: `-f FILE`, a folder's `.json`/`.yaml`/`.yml` files (its subfolders with
`-R`; a folder's links to folders not followed), `-f a.yaml,b.yaml`, `-l` keeping the objects
whose labels match (`key=value`, `key==value`, `key!=value`, `key`, `!key`, `key in (a,b)`,
`key notin (a,b)`). A URL, `-f -` (standard input) and `-k` (kustomize) are not read: said.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.limits import MACHINE_GPUS
from eaglebug.checks.contract.numbers import int_text
from eaglebug.checks.launch.command import SERVER_COMMAND, env_and_argv
from eaglebug.checks.launch.devices import Visible
from eaglebug.checks.launch.kubemanifest import Pod, containers, read_pods, strings, text
from eaglebug.checks.launch.kubevars import RunTime, environment, expand
from eaglebug.checks.launch.wrappers import unwrapped

_STARTS = ("apply", "create", "replace")
_EXTENSIONS = (".json", ".yaml", ".yml")  # kubectl's FileExtensions
_FOLDER_ENTRIES = 10_000  # more than a launch's manifests: past it, a folder given by mistake
# kubectl's global options and apply/create/replace's that take a value (as the next word
# unless written `--opt=value`); `--dry-run`, `--cascade`, `--validate` take one only after `=`.
_VALUES = frozenset(
    {"--kubeconfig", "--context", "--cluster", "--user", "-n", "--namespace", "-s", "--server",
     "--token", "--as", "--as-group", "--as-uid", "--certificate-authority",
     "--client-certificate", "--client-key", "--request-timeout", "--cache-dir",
     "--tls-server-name", "--username", "--password", "-v", "--v", "--log-dir", "--log-file",
     "--vmodule", "--log-file-max-size", "--log-backtrace-at", "--log-flush-frequency",
     "--stderrthreshold", "--profile", "--profile-output", "-f", "--filename", "-k",
     "--kustomize", "-l", "--selector", "-o", "--output", "--field-manager",
     "--prune-allowlist", "--prune-whitelist", "--timeout", "--grace-period", "--template",
     "--subresource", "--raw", "--kuberc", "--applyset"}
)  # fmt: skip
_GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Applied:
    """A kubectl launch read: the `docker run` words of its SGLang container, the files read,
    what was said, which workload and container, and the GPUs its limit gives it."""

    words: list[str]
    files: tuple[str, ...]
    warnings: tuple[str, ...]
    workload: str
    container: str
    gpus: Visible | None
    manifest: str = ""  # the file that defines the workload
    at_run_time: frozenset[str] = frozenset()  # the variables written `${VAR}` in `words`


@dataclass
class _Invocation:
    tool: str
    subcommand: str = ""
    operands: list[str] | None = None
    files: list[str] | None = None
    recursive: bool = False
    selector: str | None = None
    kustomize: str | None = None


def is_kubectl(argv: Sequence[str]) -> bool:
    """`kubectl ...`, `oc ...`, or a distribution's (`microk8s kubectl`, `k3s kubectl`)."""
    head = os.path.basename(argv[0]) if argv else ""
    if head in ("kubectl", "oc"):
        return True
    return head in ("microk8s", "k3s") and argv[1:2] == ["kubectl"]


def kubectl_launch(
    argv: Sequence[str], environ: Mapping[str, str], cwd: str | None = None
) -> Applied | None:
    """`applied` where `argv` (after its `VAR=value` words and wrappers: they run kubectl,
    not the pod) is a kubectl invocation; None for any other command."""
    command = unwrapped(env_and_argv(argv)[1])[1]
    if not is_kubectl(command):
        return None
    return applied(command, cwd if cwd is not None else os.getcwd())


def applied(argv: Sequence[str], cwd: str) -> Applied:
    """The SGLang container `argv` (a kubectl invocation: `is_kubectl`) starts, read from its
    manifests as found from `cwd`."""
    call = _invocation(list(argv))
    files = _files(call, cwd)
    pods = [p for p in read_pods(files) if _selected(p.labels, call.selector)]
    pod, container = _serving(pods, files, call)
    warnings: list[str] = []
    name = text(container.get("name")) or ""
    where = f"{pod.workload}, container {name}"
    later = RunTime(pod, container)
    env = environment(container, pod, where, warnings, later)
    words = ["docker", "run"]
    for key, value in env.items():
        words += ["-e", f"{key}={value}"]
    words += _mounts(container, pod)
    if workdir := text(container.get("workingDir")):
        words += ["-w", workdir]
    command, args = (
        [expand(w, env, later, where) for w in strings(container.get(key), f"{where}: {key}")]
        for key in ("command", "args")
    )
    if not command and not args:
        raise InputError(
            f"{where} sets no command: its image's own is not known here",
            "give the container a command, or check the server's command itself",
        )
    image = text(container.get("image")) or "(no image)"
    return Applied(
        [*words, image, *command, *args],
        tuple(files),
        tuple(warnings),
        pod.workload,
        name,
        _gpus(container),
        pod.file,
        frozenset(later.names),
    )


def _invocation(argv: list[str]) -> _Invocation:
    """kubectl's words as its flag parser (pflag) reads them: options anywhere, a value after
    `=` or as the next word (a short one glued, `-fFILE`, or last in a cluster, `-Rf FILE`)."""
    tool = " ".join(argv[:2]) if os.path.basename(argv[0]) in ("microk8s", "k3s") else argv[0]
    call = _Invocation(os.path.basename(tool), operands=[], files=[])
    words = argv[2:] if " " in tool else argv[1:]
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            if call.subcommand:
                assert call.operands is not None
                call.operands.append(word)
            else:
                call.subcommand = word
            continue
        for name, value in _options(word):
            if value is None and name in _VALUES:
                if i >= len(words):
                    raise InputError(f"{call.tool}: {name} needs a value", f"give {name} VALUE")
                value, i = words[i], i + 1
            _take(call, name, value)
    return call


def _options(word: str) -> list[tuple[str, str | None]]:
    """The options one word holds: `--name[=value]`, or a cluster of short ones where the
    first that takes a value takes the rest of the word."""
    if word.startswith("--"):
        name, eq, value = word.partition("=")
        return [(name, value if eq else None)]
    out: list[tuple[str, str | None]] = []
    for at, letter in enumerate(word[1:], 1):
        name = f"-{letter}"
        if name in _VALUES:
            rest = word[at + 1 :].removeprefix("=")
            out.append((name, rest or None))
            break
        out.append((name, None))
    return out


def _take(call: _Invocation, name: str, value: str | None) -> None:
    assert call.files is not None
    if name in ("-f", "--filename") and value is not None:
        call.files.extend(v for v in value.split(",") if v)  # a string slice: comma-separated
    elif name in ("-R", "--recursive"):
        call.recursive = value is None or value in ("1", "t", "T", "true", "TRUE", "True")
    elif name in ("-l", "--selector"):
        call.selector = value
    elif name in ("-k", "--kustomize"):
        call.kustomize = value


def _files(call: _Invocation, cwd: str) -> list[str]:
    """The manifest files the invocation applies, in kubectl's order."""
    tool = call.tool
    if call.subcommand == "run":
        raise InputError(
            f"{tool} run is not read: its pod has no GPU limit",
            f"write the pod as a manifest ({tool} run ... --dry-run=client -o yaml > pod.yaml), "
            f"then check {tool} apply -f pod.yaml",
        )
    if call.subcommand not in _STARTS:
        raise InputError(
            f"{tool} {call.subcommand or '(no command)'} does not start a server",
            f"pass the command that starts it: {tool} apply -f MANIFEST",
        )
    if call.operands:
        raise InputError(
            f"{tool} {call.subcommand} {call.operands[0]} does not start a server from a file",
            f"write the object as a manifest, then check {tool} apply -f MANIFEST",
        )
    if call.kustomize is not None:
        raise InputError(
            f"{tool} {call.subcommand} -k (kustomize) is not read",
            f"render it first ({tool} kustomize {call.kustomize} > manifest.yaml), then check "
            f"{tool} apply -f manifest.yaml",
        )
    if not call.files:
        raise InputError(
            f"{tool} {call.subcommand} names no manifest", f"give it: {tool} apply -f MANIFEST"
        )
    found: list[str] = []
    for given in call.files:
        if given == "-" or "://" in given:
            what = "standard input" if given == "-" else "a URL"
            raise InputError(
                f"-f {given}: {what} is not read", "save the manifest to a file and give its path"
            )
        path = os.path.join(cwd, given)
        if os.path.isdir(path):
            found += _folder(path, call.recursive)
        elif os.path.exists(path):
            found.append(path)
        else:
            raise InputError(f"-f {given}: not found", "fix the path")
    return found


def _folder(path: str, recursive: bool) -> list[str]:
    """A folder's manifests as kubectl walks it: depth first in lexical order, subfolders only
    with -R (a link to a folder not followed); at most `_FOLDER_ENTRIES` entries looked at
    (`-R -f /` would read the machine)."""
    out: list[str] = []
    seen = 0
    stack = [iter(_entries(path))]
    while stack:
        full = next(stack[-1], None)
        if full is None:
            stack.pop()
            continue
        seen += 1
        if seen > _FOLDER_ENTRIES:
            raise InputError(
                f"-f {path}: more than {_FOLDER_ENTRIES:,} files and folders",
                "give the folder of the launch's manifests",
            )
        if os.path.isdir(full):
            if recursive and not os.path.islink(full):
                stack.append(iter(_entries(full)))
        elif full.endswith(_EXTENSIONS):
            out.append(full)
    return out


def _entries(folder: str) -> list[str]:
    try:
        return [os.path.join(folder, name) for name in sorted(os.listdir(folder))]
    except OSError as exc:
        raise InputError(f"-f {folder}: cannot read it ({exc.strerror})", "fix the path") from None


_SET_TERM = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def _selected(labels: Mapping[str, str], selector: str | None) -> bool:
    """Do `labels` match the selector, each of its terms (apimachinery's `labels.Parse`)?"""
    return not selector or all(_matches(labels, term) for term in _terms(selector))


def _terms(selector: str) -> list[str]:
    """The selector's terms: split at the commas outside a set's parentheses."""
    out, depth, start = [], 0, 0
    for at, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(selector[start:at])
            start = at + 1
    return [t.strip() for t in [*out, selector[start:]] if t.strip()]


def _matches(labels: Mapping[str, str], term: str) -> bool:
    if found := _SET_TERM.match(term):
        key, op, listed = found.groups()
        values = {v.strip() for v in listed.split(",")}
        return (labels.get(key) in values) == (op == "in") and (op == "notin" or key in labels)
    for op in ("!=", "==", "="):
        key, sep, value = term.partition(op)
        if sep:
            same = labels.get(key.strip()) == value.strip()
            return not same if op == "!=" else same
    return term[1:].strip() not in labels if term.startswith("!") else term in labels


def _serving(pods: list[Pod], files: list[str], call: _Invocation) -> tuple[Pod, dict[str, Any]]:
    """The one container that runs SGLang's server: a LeaderWorkerSet's leader before its
    workers (rank 0 serves), else the only one; several workloads: which is asked for."""
    found: dict[tuple[str, str], list[tuple[Pod, dict[str, Any]]]] = {}
    for pod in pods:
        for container in containers(pod):
            words = [
                *strings(container.get("command"), f"{pod.workload}: command"),
                *strings(container.get("args"), f"{pod.workload}: args"),
            ]
            if SERVER_COMMAND.search(" ".join(words)):
                found.setdefault((pod.kind, pod.name), []).append((pod, container))
    shown = ", ".join(os.path.basename(f) for f in files)
    if not found:
        listed = ", ".join(dict.fromkeys(p.workload for p in pods)) or "none"
        raise InputError(
            f"no container in {shown} runs SGLang's server (workloads: {listed})",
            "check the manifest, or give the server's command itself",
        )
    if len(found) > 1:
        names = [f"{kind}/{name}" for kind, name in found]
        raise InputError(
            f"{shown} has {len(found)} workloads that run SGLang's server ({', '.join(names)})",
            f"pick one by its labels: {call.tool} {call.subcommand} -f ... -l {_label(found)}",
        )
    (candidates,) = found.values()
    leaders = [c for c in candidates if c[0].role == "leader"] or candidates
    if len(leaders) > 1:
        containers_named = ", ".join(str(c.get("name")) for _, c in leaders)
        raise InputError(
            f"a pod of {leaders[0][0].workload} runs SGLang's server in {len(leaders)} "
            f"containers ({containers_named})",
            "check one container's command itself",
        )
    return leaders[0]


def _label(found: Mapping[tuple[str, str], list[tuple[Pod, dict[str, Any]]]]) -> str:
    """A label of the first workload the others lack, to name it by; else a placeholder."""
    first, *rest = (entries[0][0].labels for entries in found.values())
    for key, value in first.items():
        if all(other.get(key) != value for other in rest):
            return f"{key}={value}"
    return "KEY=VALUE"


def _mounts(container: dict[str, Any], pod: Pod) -> list[str]:
    """The container's hostPath mounts as `docker run -v` words (a `subPath` within); other
    volumes (a claim, a config map, emptyDir) are not folders of this machine."""
    volumes = pod.spec.get("volumes")
    hosts = {
        text(v.get("name")): path
        for v in (volumes if isinstance(volumes, list) else [])
        if isinstance(v, dict)
        and isinstance(v.get("hostPath"), dict)
        and (path := text(v["hostPath"].get("path")))
    }
    mounts = container.get("volumeMounts")
    out: list[str] = []
    for mount in mounts if isinstance(mounts, list) else []:
        if not isinstance(mount, dict) or (source := hosts.get(text(mount.get("name")))) is None:
            continue
        if "subPathExpr" in mount:
            continue  # a folder within, named when the pod runs: not one of this machine
        target = text(mount.get("mountPath"))
        if not target:
            continue
        if sub := text(mount.get("subPath")):
            source = os.path.join(source, sub)
        mode = ":ro" if mount.get("readOnly") is True else ""
        out += ["-v", f"{source}:{target}{mode}"]
    return out


def _gpus(container: dict[str, Any]) -> Visible | None:
    """The GPUs the container's `nvidia.com/gpu` limit gives it (the API takes an extended
    resource's request only equal to its limit); None without one, or with 0 (the device
    plugin then gives none, and an image's `NVIDIA_VISIBLE_DEVICES=all` may give them all)."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return None
    for key in ("limits", "requests"):
        given = resources.get(key)
        if isinstance(given, dict) and _GPU in given:
            count = int_text(text(given[_GPU]) or "", lo=0, hi=MACHINE_GPUS)
            if not count:  # none: what it sees is the node runtime's and the image's, as without
                return None
            return Visible(None, count, (f"{_GPU}: {count}, the pod's limit",), remote=True)
    return None
