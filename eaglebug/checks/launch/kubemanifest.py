"""Kubernetes manifests read for the pods they run: each workload's pod template, its
containers, and the variables a controller gives them.

Why apart from `kubectl.py`: the command line says which files and which objects; this reads
what is in them, as the API server would take it. Each file is YAML (one or many documents,
`kind: List` too), read with PyYAML's Python safe loader (as compose files are: the C
loader's recursion crashes on a hostile file), capped at `LAUNCH_FILE_BYTES`. Where a pod
template sits is the API's (kubernetes.io/docs/reference/kubernetes-api/workload-resources):
a Pod's `spec`; the `spec.template.spec` of a Deployment, StatefulSet, DaemonSet, ReplicaSet,
ReplicationController or Job; a CronJob's `spec.jobTemplate.spec.template.spec`; a
LeaderWorkerSet's (sigs.k8s.io/lws) `spec.leaderWorkerTemplate.leaderTemplate` (optional) and
`workerTemplate` (the leader's too where it has no template of its own), whose pods LWS's
webhook gives `LWS_LEADER_ADDRESS` (known only when it runs), `LWS_GROUP_SIZE` (the group's
`size`) and `LWS_WORKER_INDEX` (0 for the leader) where a container does not set them. Other
kinds (a Service, a custom resource) run no pod this reads. An object defined twice (the same
file given twice, a folder holding two versions) is the last one, as the cluster keeps it.

YAML as Kubernetes reads it (sigs.k8s.io/yaml, go-yaml v2), not as YAML 1.1 would: a date
(`2024-01-01`) and a base-60 number (`1:30`) stay strings, a null is an empty string where a
string is taken. A scalar is only ever turned into text: a list or a mapping in its place (an
alias may make one huge) is not a value.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.composefile import scalar, yaml_file

_TEMPLATED = frozenset(
    {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"}
)
_LWS = "LeaderWorkerSet"
_OBJECTS = 10_000  # more than any launch's manifests hold


@dataclass(frozen=True)
class Pod:
    """One pod template of a workload: where it is, its spec, and the variables its
    controller adds to each container (not set there already)."""

    file: str
    kind: str
    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    role: str = ""  # a LeaderWorkerSet's "leader" or "worker"
    given: dict[str, str] = field(default_factory=dict)
    later: frozenset[str] = frozenset()  # what the controller sets only when the pod runs

    @property
    def workload(self) -> str:
        return f"{self.kind}/{self.name}" + (f" ({self.role})" if self.role else "")


def read_pods(files: list[str]) -> list[Pod]:
    """Every pod template of every workload in `files`, in the order written, each object
    the last definition of its kind, namespace and name."""
    pods: dict[tuple[str, str, str], list[Pod]] = {}
    for path in files:
        for document in _documents(path):
            meta = _mapping(document.get("metadata"))
            key = (
                text(document.get("kind")) or "",
                text(meta.get("namespace")) or "",
                text(meta.get("name")) or f"(unnamed {len(pods)})",
            )
            pods.pop(key, None)
            pods[key] = _pods(path, document)
    return [pod for found in pods.values() for pod in found]


def _documents(path: str) -> Iterator[dict[str, Any]]:
    """The objects of one manifest file (a `kind: List`'s items one by one)."""
    import yaml

    documents = yaml_file(  # the Python safe loader, not libyaml's (`composefile._loader`)
        path,
        "a Kubernetes manifest",
        "fix the manifest (kubectl apply --dry-run=client -f FILE shows what kubectl reads)",
        lambda data: list(yaml.load_all(data, Loader=_loader())),
    )
    for document in documents:
        if document is None:
            continue  # an empty document (`---` at the end)
        if not isinstance(document, dict):
            raise InputError(
                f"{path}: a document is not an object (no mapping at its top)",
                "check the manifest",
            )
        yield from _items(document, path)


def _items(document: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """An object, or a list's (`kind: List`, `PodList`, any kind with `items`) objects, as
    kubectl flattens them; at most `_OBJECTS` looked at (lists of lists by alias: a few lines
    can name millions)."""
    out: list[dict[str, Any]] = []
    todo = [document]
    seen = 0
    while todo:
        item = todo.pop()
        seen += 1
        if seen > _OBJECTS:
            raise InputError(f"{path}: more than {_OBJECTS:,} objects", "check the manifest")
        items = item.get("items")
        if (text(item.get("kind")) or "").endswith("List") and isinstance(items, list):
            todo.extend(reversed([i for i in items if isinstance(i, dict)]))
        else:
            out.append(item)
    return out


@functools.cache
def _loader() -> type:
    """PyYAML's Python safe loader (not libyaml's: `composefile._loader` says why), reading
    scalars as go-yaml v2 does where YAML 1.1 differs: no timestamps, no base-60 numbers."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def as_text(loader: Any, node: Any) -> str:
        return str(loader.construct_scalar(node))

    def number(base: Any) -> Any:
        def construct(loader: Any, node: Any) -> Any:
            return as_text(loader, node) if ":" in str(node.value) else base(loader, node)

        return construct

    Loader.add_constructor("tag:yaml.org,2002:timestamp", as_text)
    Loader.add_constructor("tag:yaml.org,2002:int", number(Loader.construct_yaml_int))
    Loader.add_constructor("tag:yaml.org,2002:float", number(Loader.construct_yaml_float))
    return Loader


def text(value: Any) -> str | None:
    """A scalar of the manifest as text; None for none, a list or a mapping."""
    if value is None or isinstance(value, (list, dict)):
        return None
    return scalar(value)


def shown(value: Any) -> str:
    """A value for a message, bounded: a list or a mapping by its kind, never its text."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "a mapping"
    return "null" if value is None else scalar(value)


def _pods(path: str, document: dict[str, Any]) -> list[Pod]:
    kind = text(document.get("kind")) or ""
    meta = _mapping(document.get("metadata"))
    name = text(meta.get("name")) or text(meta.get("generateName")) or "(unnamed)"
    labels = {
        str(k): found
        for k, v in _mapping(meta.get("labels")).items()
        if (found := text(v)) is not None
    }
    spec = _mapping(document.get("spec"))
    if kind == "Pod":
        return [Pod(path, kind, name, labels, spec)]
    if kind == "CronJob":
        spec = _mapping(_mapping(spec.get("jobTemplate")).get("spec"))
    if kind in _TEMPLATED or kind == "CronJob":
        template = _mapping(_mapping(spec.get("template")).get("spec"))
        return [Pod(path, kind, name, labels, template)] if template else []
    if kind == _LWS:
        group = _mapping(spec.get("leaderWorkerTemplate"))
        size = text(group.get("size")) or "1"
        worker = _mapping(_mapping(group.get("workerTemplate")).get("spec"))
        leader = _mapping(_mapping(group.get("leaderTemplate")).get("spec")) or worker
        address = frozenset({"LWS_LEADER_ADDRESS"})
        out: list[Pod] = []
        if leader:  # rank 0, from the worker template where the leader has none
            given = {"LWS_GROUP_SIZE": size, "LWS_WORKER_INDEX": "0"}
            out.append(Pod(path, kind, name, labels, leader, "leader", given, address))
        if worker and worker is not leader:
            later = address | {"LWS_WORKER_INDEX"}
            given = {"LWS_GROUP_SIZE": size}
            out.append(Pod(path, kind, name, labels, worker, "worker", given, later))
        return out
    return []


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def containers(pod: Pod) -> list[dict[str, Any]]:
    """The pod's (app) containers: init containers end before the server starts."""
    found = pod.spec.get("containers")
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def strings(value: Any, where: str) -> list[str]:
    """A container's `command` or `args`: a list of strings, as the API takes them. A number
    or a boolean there is refused by the API server (`cannot unmarshal number into ... of
    type string`): said here before a launch finds out."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{where} is not a list", "write it as a YAML list of strings")
    for i, item in enumerate(value):
        if item is not None and not isinstance(item, str):
            raise InputError(
                f"{where}[{i}] is {shown(item)}, not a string: the API server refuses the manifest",
                f'quote it: "{shown(item)}"',
            )
    return ["" if item is None else item for item in value]
