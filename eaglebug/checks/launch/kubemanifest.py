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
`workerTemplate`, whose pods LWS's webhook gives `LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE` (the
group's `size`) and `LWS_WORKER_INDEX` (0 for the leader) where a container does not set
them. Other kinds (a Service, a custom resource) run no pod this reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.composefile import scalar, yaml_file

_TEMPLATED = frozenset(
    {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"}
)
_LWS = "LeaderWorkerSet"


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

    @property
    def workload(self) -> str:
        return f"{self.kind}/{self.name}" + (f" ({self.role})" if self.role else "")


def read_pods(files: list[str]) -> list[Pod]:
    """Every pod template of every workload in `files`, in the order written."""
    pods: list[Pod] = []
    for path in files:
        for document in _documents(path):
            pods.extend(_pods(path, document))
    return pods


def _documents(path: str) -> Iterator[dict[str, Any]]:
    """The objects of one manifest file (a `kind: List`'s items one by one)."""
    import yaml

    documents = yaml_file(  # the Python safe loader, not libyaml's (`composefile._loader`)
        path,
        "a Kubernetes manifest",
        "fix the manifest (kubectl apply --dry-run=client -f FILE shows what kubectl reads)",
        lambda data: list(yaml.load_all(data, Loader=yaml.SafeLoader)),
    )
    for document in documents:
        if document is None:
            continue  # an empty document (`---` at the end)
        if not isinstance(document, dict):
            raise InputError(
                f"{path}: a document is not an object (no mapping at its top)",
                "check the manifest",
            )
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            yield from (item for item in document["items"] if isinstance(item, dict))
        else:
            yield document


def _pods(path: str, document: dict[str, Any]) -> list[Pod]:
    kind = str(document.get("kind") or "")
    meta = _mapping(document.get("metadata"))
    name = str(meta.get("name") or meta.get("generateName") or "(unnamed)")
    labels = {str(k): str(v) for k, v in _mapping(meta.get("labels")).items()}
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
        size = group.get("size", 1)
        out: list[Pod] = []
        for role in ("leader", "worker"):
            template = _mapping(_mapping(group.get(f"{role}Template")).get("spec"))
            if not template:
                continue
            given = {"LWS_GROUP_SIZE": str(size)}
            if role == "leader":
                given["LWS_WORKER_INDEX"] = "0"
            out.append(Pod(path, kind, name, labels, template, role, given))
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
        if not isinstance(item, str):
            raise InputError(
                f"{where}[{i}] is {scalar(item)}, not a string: the API server refuses "
                "the manifest",
                f'quote it: "{scalar(item)}"',
            )
    return list(value)
