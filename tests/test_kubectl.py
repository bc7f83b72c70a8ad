"""A launch by `kubectl apply -f MANIFEST`: read as the `docker run` its SGLang container
amounts to, with the GPUs its pod's `nvidia.com/gpu` limit gives it.

Real material (tests/fixtures/kubernetes/README.md names each file's source): SGLang's own
docker/k8s-sglang-service.yaml (a Deployment, one GPU) and k8s-sglang-distributed-sts.yaml (a
two-node StatefulSet, `--tp 16` over pods of 8 GPUs, the node rank from a `valueFrom`). The
LeaderWorkerSet shape is kubernetes-sigs/lws#391's SGLang container (`--nnodes
$LWS_GROUP_SIZE`); sglang#9451 is a pod of 8 GPUs launched with more ranks than that
("CUDA error: invalid device ordinal").
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.compose import launch_files
from eaglebug.checks.launch.devices import Visible
from eaglebug.checks.launch.flags import FlagSpec, server_flags
from eaglebug.checks.launch.kubectl import applied, kubectl_launch
from eaglebug.checks.launch.kubevars import expand
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.server.launcher import Server
from eaglebug.session.stamps import question
from tests.configs import kimi_k25, kimi_k25_eagle3
from tests.test_preflight import pair

FIXTURES = Path(__file__).with_name("fixtures") / "kubernetes"
APPLY = ["kubectl", "apply", "-f"]


@pytest.fixture(scope="module")
def flags(index_0523: TreeIndex) -> list[FlagSpec]:
    return server_flags(index_0523)


def manifest(tmp_path: Path, fixture: str, *edits: tuple[str, str]) -> Path:
    """The fixture in `tmp_path`, each (old, new) of `edits` replaced once."""
    text = (FIXTURES / fixture).read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / fixture
    path.write_text(text)
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_sglangs_own_service_manifest_is_the_docker_run_of_its_container(
    tmp_path: Path, flags: list[FlagSpec]
) -> None:
    """docker/k8s-sglang-service.yaml: a RuntimeClass, a Deployment and a Service; the
    container's command and args, its variable, its hostPath mounts, one GPU."""
    shutil.copy(FIXTURES / "sglang_service.yaml", tmp_path)
    found = kubectl_launch([*APPLY, "sglang_service.yaml"], {}, str(tmp_path))
    assert found is not None
    assert found.words == [
        "docker", "run", "-e", "HF_TOKEN=<secret>",
        "-v", "/root/.cache/huggingface:/root/.cache/huggingface:ro",
        "-v", "/etc/localtime:/etc/localtime:ro",
        "docker.io/lmsysorg/sglang:latest", "python3", "-m", "sglang.launch_server",
        "--model-path", "meta-llama/Meta-Llama-3.1-8B-Instruct", "--host", "0.0.0.0",
        "--port", "30000",
    ]  # fmt: skip
    assert found.workload == "Deployment/meta-llama-31-8b-instruct-sglang"
    assert found.container == "meta-llama-31-8b-instruct-sglang"
    assert found.gpus == Visible(None, 1, ("nvidia.com/gpu: 1, the pod's limit",), remote=True)
    assert found.warnings == ()
    launch = parse_launch(found.words, flags, "0.5.23")
    assert launch.text("port") == "30000"
    assert launch.env({"HF_TOKEN": "mine"}) == {"HOME": "/root", "HF_TOKEN": "<secret>"}
    assert launch_files(["kubectl", "apply", "-f", "sglang_service.yaml"], {}, str(tmp_path)) == [
        str(tmp_path / "sglang_service.yaml")
    ]
    # a command that is not kubectl's is not read here
    assert kubectl_launch(["python3", "-m", "sglang.launch_server"], {}) is None


def test_the_distributed_statefulset_runs_its_script_with_the_node_rank_unknown(
    tmp_path: Path, flags: list[FlagSpec]
) -> None:
    """docker/k8s-sglang-distributed-sts.yaml: `/bin/bash -c` and the script in `args`; the
    node rank is `$POD_INDEX`, a `valueFrom` the cluster fills: said, and not set."""
    path = manifest(tmp_path, "sglang_distributed_sts.yaml")
    found = applied(["kubectl", "apply", "-f", str(path)], str(tmp_path))
    where = "StatefulSet/distributed-sglang, container sglang-container"
    assert found.warnings == (
        f"{where}: POD_INDEX set by the cluster at run time (valueFrom): not known here",
    )
    assert found.words[:7] == ["docker", "run", "-e", "NCCL_DEBUG=INFO", "-v", "/llm-folder:/llm-folder", "docker.io/lmsysorg/sglang:latest"]  # fmt: skip
    assert found.words[7:9] == ["/bin/bash", "-c"]
    assert found.gpus is not None and found.gpus.count == 8  # the limit is the string "8"
    launch = parse_launch(found.words, flags, "0.5.23")
    assert (launch.text("tp_size"), launch.text("nnodes")) == ("16", "2")
    assert launch.text("model_path") == "/llm-folder"


def test_a_pod_given_fewer_gpus_than_its_ranks_fails_before_launch(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """Eight GPUs a pod hold the StatefulSet's 16 ranks over two nodes; one does not:
    `config.gpu_count`, worded for the pod, whatever this host has."""
    target = pair(tmp_path, kimi_k25(), kimi_k25_eagle3())[0]
    mount = ("path: /llm-folder #", f"path: {target} #")

    def counted(limit: str) -> tuple[list[Any], dict[str, Any] | None]:
        path = manifest(tmp_path, "sglang_distributed_sts.yaml", mount, ('"8"', limit))
        result = preflight(index_0523, [*APPLY, str(path)], {}, None)
        assert result.target.found, result.target
        assert result.kubernetes == (
            "StatefulSet/distributed-sglang",
            "sglang-container",
            str(path),
            (str(path),),
        )
        assert "--node-rank $POD_INDEX: set when the launch runs, not known here" in (
            " ".join(result.warnings)
        )
        return [f for f in result.findings if f.id == "config.gpu_count"], result.gpus_seen

    assert counted('"8"')[0] == []
    [short], seen = counted('"1"')
    assert short.severity == "error"
    assert "puts 8 GPUs per node (--tp 16 x --pp 1 / --nnodes 2)" in short.message
    assert "it sees at most 1 GPU (nvidia.com/gpu: 1, the pod's limit)" in short.message
    assert "nvidia.com/gpu limit" in str(short.fix)
    assert seen == {
        "count": 1,
        "exact": False,
        "nvml_indices": None,
        "by": "nvidia.com/gpu: 1, the pod's limit",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--nnodes $(SIZE)", "--nnodes 2"),
        ("$(SIZE)$(SIZE)", "22"),
        ("$$(SIZE) stays", "$(SIZE) stays"),  # `$$` is a `$`
        ("$(UNSET) stays", "$(UNSET) stays"),
        ("$(SIZE unclosed", "$(SIZE unclosed"),
        ("a $ alone, a $x, and $", "a $ alone, a $x, and $"),  # only `$(` and `$$` expand
        ("$$$(SIZE)", "$2"),
        ("--node-rank $(RANK)", "--node-rank ${RANK}"),  # the cluster's, when the pod runs
        ("$( $(SIZE)", "$( $(SIZE)"),  # the name runs to the first `)`: " $(SIZE", unset
        ("$(x $(y $$", "$(x $(y $"),  # unclosed, and `$$` still a `$` after them
    ],
)
def test_kubernetes_expands_its_own_references(text: str, expected: str) -> None:
    """Kubernetes' `$(VAR)`, not the shell's `$VAR` (a `sh -c` script expands that)."""
    assert expand(text, {"SIZE": "2"}, frozenset({"RANK"}), "here") == expected


def test_a_leaderworkerset_runs_its_leader_with_the_groups_variables(tmp_path: Path) -> None:
    """LWS gives each container `LWS_GROUP_SIZE` (the group's size) and the leader
    `LWS_WORKER_INDEX=0`; `$(...)` in args and env values sees them, a container's own
    setting wins, and the leader's pod is the one read (rank 0 serves)."""
    server = "python3 -m sglang.launch_server --model-path /m --tp 16"
    path = write(
        tmp_path / "lws.yaml",
        f"""apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: sglang}}
spec:
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
        - name: sglang-leader
          image: lmsysorg/sglang:v0.5.5
          command: [sh, -c]
          args: ["{server} --nnodes $(LWS_GROUP_SIZE) --node-rank $(LWS_WORKER_INDEX)"]
          env:
          - {{name: RANKS, value: "nodes=$(LWS_GROUP_SIZE)"}}
          resources: {{limits: {{nvidia.com/gpu: 8}}}}
    workerTemplate:
      spec:
        containers:
        - name: sglang-worker
          image: lmsysorg/sglang:v0.5.5
          command: [sh, -c]
          args: ["{server} --nnodes $(LWS_GROUP_SIZE) --node-rank $(LWS_WORKER_INDEX)"]
          env:
          - {{name: LWS_GROUP_SIZE, value: "4"}}
""",
    )
    found = applied([*APPLY, str(path)], str(tmp_path))
    assert (found.workload, found.container) == ("LeaderWorkerSet/sglang (leader)", "sglang-leader")
    assert found.words[-1] == f"{server} --nnodes 2 --node-rank 0"
    assert "RANKS=nodes=2" in found.words
    # without a leader template the leader is made from the workers': index 0 there too, and
    # the container's own LWS_GROUP_SIZE wins
    write(path, path.read_text().replace("    leaderTemplate:", "    leaderTemplat:"))
    worker = applied([*APPLY, str(path)], str(tmp_path))
    assert worker.workload == "LeaderWorkerSet/sglang (leader)"
    assert worker.words[-1] == f"{server} --nnodes 4 --node-rank 0"
    assert worker.gpus is None  # no limit: what it sees is the node's runtime's


def test_kubectls_own_reading_of_its_words(tmp_path: Path) -> None:
    """Options anywhere, glued or clustered (`-Rf`); a folder's manifests in lexical order,
    its subfolders with -R only; `kind: List`; `oc` and `microk8s kubectl` alike."""
    server = "args: [python3, -m, sglang.launch_server, --model-path, /m]"
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  containers:\n  - name: c\n    image: i\n    %s\n"
    write(tmp_path / "m" / "a.yaml", "kind: Service\nmetadata: {name: s}\n")
    write(tmp_path / "m" / "b.txt", pod % ("ignored", server))
    write(tmp_path / "m" / "deep" / "c.yml", pod % ("deep", server))
    one = ["-n", "ns", "--context=prod", "apply", "--server-side", "-Rf", "m", "--wait"]
    found = applied(["kubectl", *one], str(tmp_path))
    assert found.workload == "Pod/deep"
    assert found.files == (str(tmp_path / "m/a.yaml"), str(tmp_path / "m/deep/c.yml"))
    with pytest.raises(InputError, match=r"no container in a.yaml runs SGLang's server"):
        applied(["kubectl", "apply", "-f", "m"], str(tmp_path))  # without -R
    listed = write(
        tmp_path / "list.json",
        json.dumps({"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "command": ["sglang", "serve"]}]}}]}),
    )  # fmt: skip
    for tool in (["oc"], ["microk8s", "kubectl"]):
        got = applied([*tool, "create", f"--filename={listed.name}"], str(tmp_path))
        assert (got.workload, got.words) == ("Pod/p", ["docker", "run", "i", "sglang", "serve"])
    assert applied(["kubectl", "replace", "-f=list.json"], str(tmp_path)).workload == "Pod/p"


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["kubectl", "get", "pods"], "kubectl get does not start a server"),
        (["kubectl", "run", "x", "--image=i"], "kubectl run is not read"),
        (["kubectl", "create", "deployment", "x"], "create deployment does not start a server"),
        (["kubectl", "apply", "-k", "overlay"], "-k (kustomize) is not read"),
        (["kubectl", "apply", "-f", "-"], "-f -: standard input is not read"),
        (["kubectl", "apply", "-f", "https://x/y.yaml"], "a URL is not read"),
        (["kubectl", "apply"], "kubectl apply names no manifest"),
        (["kubectl", "apply", "-f"], "-f needs a value"),
        (["kubectl", "apply", "-f", "absent.yaml"], "-f absent.yaml: not found"),
    ],
)
def test_what_kubectl_is_not_read_for_says_so(tmp_path: Path, words: list[str], said: str) -> None:
    with pytest.raises(InputError, match=re.escape(said)):
        applied(words, str(tmp_path))


def test_two_serving_workloads_are_told_apart_by_a_label(tmp_path: Path) -> None:
    """A prefill and a decode Deployment in one file: which to check is asked, with a label
    that picks one; `-l` then picks it, as kubectl applies only the objects it selects."""

    def deployment(role: str) -> str:
        return f"""---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {role}
  labels: {{app: sglang, role: {role}}}
spec:
  template:
    spec:
      containers:
      - name: server
        image: i
        command: [python3, -m, sglang.launch_server, --disaggregation-mode, {role}]
"""

    write(tmp_path / "pd.yaml", deployment("prefill") + deployment("decode"))
    with pytest.raises(InputError) as raised:
        applied([*APPLY, "pd.yaml"], str(tmp_path))
    assert "2 workloads that run SGLang's server (Deployment/prefill, Deployment/decode)" in str(
        raised.value
    )
    assert "-l role=prefill" in raised.value.hint
    for selector, picked in (("role=decode", "decode"), ("app=sglang,role!=decode", "prefill")):
        got = applied([*APPLY, "pd.yaml", "-l", selector], str(tmp_path))
        assert got.workload == f"Deployment/{picked}"
    assert applied([*APPLY, "pd.yaml", "-lrole==decode"], str(tmp_path)).words[-1] == "decode"


def test_what_the_api_server_refuses_is_said_before_a_launch(tmp_path: Path) -> None:
    """A number where Kubernetes takes a string (an arg, an env value): the API server
    refuses the manifest ("cannot unmarshal number into ... of type string")."""
    base = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n"
    write(
        tmp_path / "a.yaml", base + "    args: [python3, -m, sglang.launch_server, --port, 8000]\n"
    )
    with pytest.raises(InputError, match=r"Pod/p: args\[4\] is 8000, not a string") as raised:
        applied([*APPLY, "a.yaml"], str(tmp_path))
    assert raised.value.hint == 'quote it: "8000"'
    env = "    command: [sglang, serve]\n    env: [{name: N, value: 1}]\n"
    write(tmp_path / "e.yaml", base + env)
    with pytest.raises(InputError, match="env N is 1, not a string"):
        applied([*APPLY, "e.yaml"], str(tmp_path))
    write(tmp_path / "bad.yaml", "kind: Pod\nspec: [unclosed\n")
    with pytest.raises(InputError, match=r"bad.yaml: not YAML \(line 3\)"):
        applied([*APPLY, "bad.yaml"], str(tmp_path))
    write(tmp_path / "deep.yaml", "[" * 5000)
    with pytest.raises(InputError, match="nested too deeply"):
        applied([*APPLY, "deep.yaml"], str(tmp_path))


def test_an_edited_manifest_is_a_new_question(tmp_path: Path, monkeypatch: Any) -> None:
    """A kept preflight answer is keyed by the manifest's content, as a compose file's."""
    monkeypatch.chdir(tmp_path)
    path = manifest(tmp_path, "sglang_service.yaml")
    words = [*APPLY, path.name]
    before = question(words, {}, None, None, None)
    assert question(words, {}, None, None, None) == before
    manifest(tmp_path, "sglang_service.yaml", ("nvidia.com/gpu: 1", "nvidia.com/gpu: 2"))
    assert question(words, {}, None, None, None) != before


def test_eaglebug_neither_starts_a_pod_nor_guesses_its_sglang(
    tmp_path: Path, monkeypatch: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import eaglebug.cli.parser

    with pytest.raises(InputError, match=r"does not start pods \(kubectl\)"):
        Server(tmp_path).launch([*APPLY, "pod.yaml"], {})
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    code = eaglebug.cli.parser.main(["preflight", "--", *APPLY, "pod.yaml"])
    assert code == 2
    assert "runs in a container (a Kubernetes pod): its SGLang is the image's" in (
        capsys.readouterr().err
    )


def test_a_scripts_variables_are_the_shells_where_the_launch_sets_them(
    flags: list[FlagSpec],
) -> None:
    """In `bash -c "..."` the shell expands `$NAME` from its environment: a container's is its
    `-e` words, not this shell's; a flag whose value a variable unknown here sets (the STS's
    `--node-rank $POD_INDEX`) is set at run time, read as not given, never a type error."""
    script = "python3 -m sglang.launch_server --model-path /m --tp $TP --node-rank ${RANK}"
    boxed = parse_launch(
        ["docker", "run", "-e", "TP=4", "img", "bash", "-c", script],
        flags,
        "0.5.23",
        environ={"TP": "8", "RANK": "1"},  # this shell's: not the container's
    )
    assert boxed.text("tp_size") == "4"
    assert boxed.text("node_rank") is None
    assert boxed.at_run_time == {"node_rank": "${RANK}"}
    here = parse_launch(["bash", "-c", script], flags, "0.5.23", environ={"TP": "2", "RANK": "1"})
    assert (here.text("tp_size"), here.text("node_rank"), here.at_run_time) == ("2", "1", {})
    # exec'd words reach SGLang as written: only a script's are a shell's to expand
    plain = parse_launch([*"python3 -m sglang.launch_server --served-model-name $x".split()], flags)
    assert plain.text("served_model_name") == "$x"
    # a value the checks rest on, set only when the script runs: said, never a guess
    with pytest.raises(InputError, match=r"--tp \$TP: TP sets it when the launch runs"):
        parse_launch(["bash", "-c", script], flags, "0.5.23", environ={"RANK": "1"})


def test_what_the_cluster_sets_when_the_pod_runs_is_read_as_set_then(
    tmp_path: Path, flags: list[FlagSpec]
) -> None:
    """The exec form's `--node-rank $(POD_INDEX)` (a `valueFrom`), and in a `sh -c` script the
    `$(LWS_LEADER_ADDRESS)` the kubelet writes in before the shell runs: set at run time, not
    a wrong type, not a shell script's `(`."""
    pod = """kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: i
    command: %s
    env: [{name: POD_INDEX, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
"""
    exec_form = "[python3, -m, sglang.launch_server, --model-path, /m, --node-rank, $(POD_INDEX)]"
    write(tmp_path / "e.yaml", pod % exec_form)
    found = applied([*APPLY, "e.yaml"], str(tmp_path))
    assert found.words[-2:] == ["--node-rank", "${POD_INDEX}"]
    launch = parse_launch(found.words, flags, "0.5.23", later=found.at_run_time)
    assert launch.at_run_time == {"node_rank": "${POD_INDEX}"}
    lws = """kind: LeaderWorkerSet
metadata: {name: l}
spec:
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
        - name: c
          image: i
          command: [sh, -c]
          args: ["python3 -m sglang.launch_server --model-path /m --tp 16 --dist-init-addr $(LWS_LEADER_ADDRESS):20000 --nnodes $LWS_GROUP_SIZE --node-rank $(LWS_WORKER_INDEX)"]
"""
    write(tmp_path / "l.yaml", lws)
    found = applied([*APPLY, "l.yaml"], str(tmp_path))
    launch = parse_launch(found.words, flags, "0.5.23", later=found.at_run_time)
    assert (launch.text("nnodes"), launch.text("node_rank")) == ("2", "0")
    assert launch.at_run_time == {"dist_init_addr": "${LWS_LEADER_ADDRESS}:20000"}


@pytest.mark.parametrize(
    ("spec", "container", "expected", "later"),
    [
        # A service's variables: kubelet gives the pod those of each service of its namespace
        # (enableServiceLinks, on by default), and `$(VAR)` sees them.
        ("", "", "${LEADER_SERVICE_HOST}:20000", {"dist_init_addr": "${LEADER_SERVICE_HOST}:20000"}),
        ("enableServiceLinks: false", "", "$(LEADER_SERVICE_HOST):20000", {}),
        # envFrom: a config map's keys are not read here, so any name may be among them.
        ("enableServiceLinks: false", "envFrom: [{configMapRef: {name: cm}}]",
         "${LEADER_SERVICE_HOST}:20000", {"dist_init_addr": "${LEADER_SERVICE_HOST}:20000"}),
    ],
)  # fmt: skip
def test_a_reference_to_a_variable_the_cluster_may_set_is_read_as_set_then(
    tmp_path: Path,
    flags: list[FlagSpec],
    spec: str,
    container: str,
    expected: str,
    later: dict[str, str],
) -> None:
    """`--dist-init-addr $(LEADER_SERVICE_HOST):20000`, the manifest not setting it: the
    service's address when the pod runs, not the text `$(LEADER_SERVICE_HOST)` read as a known
    address. Where nothing can set it, Kubernetes leaves it as written, and so does this."""
    pod = f"""kind: Pod
metadata: {{name: p}}
spec:
  {spec or "restartPolicy: Never"}
  containers:
  - name: c
    image: i
    {container or "workingDir: /"}
    command: [python3, -m, sglang.launch_server, --model-path, /m, --tp, "16", --nnodes, "2",
              --node-rank, "0", --dist-init-addr, "$(LEADER_SERVICE_HOST):20000",
              --served-model-name, "$(SERVED_NAME)"]
"""
    write(tmp_path / "p.yaml", pod)
    found = applied([*APPLY, "p.yaml"], str(tmp_path))
    launch = parse_launch(found.words, flags, "0.5.23", later=found.at_run_time)
    assert found.words[-3] == expected
    assert {k: v for k, v in launch.at_run_time.items() if k != "served_model_name"} == later
    # A name no service gives (and no envFrom): as written, as the pod gets it.
    named = launch.text("served_model_name") or launch.at_run_time.get("served_model_name")
    assert named == ("${SERVED_NAME}" if container else "$(SERVED_NAME)")


def test_a_forgotten_port_variable_is_not_taken_for_a_services(
    tmp_path: Path, flags: list[FlagSpec]
) -> None:
    """`--port $(SGLANG_PORT)` with no env entry: a service `sglang` would give `SGLANG_PORT`
    as `tcp://10.0.0.1:30000`, never a port; Kubernetes passes the text as written, which is
    not a number (the API server takes it; the server's argparse refuses it)."""
    pod = """kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: i
    command: [python3, -m, sglang.launch_server, --model-path, /m, --port, "$(SGLANG_PORT)"]
"""
    write(tmp_path / "p.yaml", pod)
    found = applied([*APPLY, "p.yaml"], str(tmp_path))
    assert found.words[-1] == "$(SGLANG_PORT)" and found.at_run_time == frozenset()
    with pytest.raises(InputError, match=r"--port \$\(SGLANG_PORT\)"):
        parse_launch(found.words, flags, "0.5.23", later=found.at_run_time)


@pytest.mark.parametrize(
    ("script", "environ", "flag", "value"),
    [
        # single quotes keep a `$` (bash expands nothing there); an escaped one is a `$` too
        ("--api-key 'ab$cd'", {}, "api_key", "ab$cd"),
        ("--api-key ab\\$cd", {}, "api_key", "ab$cd"),
        # a value is taken as itself: never expanded again, its quotes not the script's
        ('--api-key "$KEY"', {"KEY": "ab$cd"}, "api_key", "ab$cd"),
        ("--api-key $KEY", {"KEY": "x'y"}, "api_key", "x'y"),
        (
            '--json-model-override-args \'{"x":"$b"}\'',
            {"b": "S"},
            "json_model_override_args",
            '{"x":"$b"}',
        ),
        # unquoted, a value splits into words as bash splits it; empty, it is no word
        (
            "$EXTRA --tp 2",
            {"EXTRA": "--trust-remote-code  --enable-metrics"},
            "enable_metrics",
            True,
        ),
        ("$EMPTY --tp 2", {"EMPTY": ""}, "tp_size", "2"),
        ('--served-model-name "a $NAME"', {"NAME": "b c"}, "served_model_name", "a b c"),
        # a default where it is unset (`:-` also where empty)
        ("--tp ${TP:-4}", {}, "tp_size", "4"),
        ("--tp ${TP:-4}", {"TP": ""}, "tp_size", "4"),
        ("--tp ${TP-4}", {"TP": "8"}, "tp_size", "8"),
    ],
)
def test_a_script_expands_as_bash_does(
    flags: list[FlagSpec], script: str, environ: dict[str, str], flag: str, value: object
) -> None:
    server = "python3 -m sglang.launch_server --model-path /m"
    launch = parse_launch(["bash", "-c", f"{server} {script}"], flags, "0.5.23", environ=environ)
    assert launch.values.get(flag) == value
    assert launch.at_run_time == {}


def test_kubectls_reading_as_the_cluster_keeps_it(tmp_path: Path) -> None:
    """`-f a,b`; set-based selectors; the same object twice is the last one; a folder's link
    to a folder is not followed; YAML scalars as go-yaml reads them (a date, `1:30`, a null
    value are strings); a manifest whose aliases make a huge label is still read in bounds."""
    pod = """kind: Pod
metadata:
  name: p
  labels: {engine: %s}
spec:
  containers:
  - name: c
    image: i
    command: [sglang, serve]
    env: [{name: A, value: 2024-01-01}, {name: B, value: 1:30}, {name: C, value: }]
"""
    write(tmp_path / "a.yaml", pod % "sglang")
    write(tmp_path / "b.yaml", "kind: Service\nmetadata: {name: s}\n")
    found = applied([*APPLY, "b.yaml,a.yaml"], str(tmp_path))
    assert found.words[2:8] == ["-e", "A=2024-01-01", "-e", "B=1:30", "-e", "C="]
    assert found.manifest == str(tmp_path / "a.yaml")
    for selector in ("engine in (vllm,sglang,trt)", "engine notin (a,b,c),engine"):
        assert applied([*APPLY, "a.yaml", "-l", selector], str(tmp_path)).workload == "Pod/p"
    with pytest.raises(InputError, match="no container"):
        applied([*APPLY, "a.yaml", "-l", "engine notin (x,sglang,y)"], str(tmp_path))
    assert applied([*APPLY, "a.yaml", "-f", "a.yaml"], str(tmp_path)).workload == "Pod/p"
    write(tmp_path / "m" / "p.yaml", pod % "sglang")
    (tmp_path / "m" / "loop").symlink_to(tmp_path / "m")
    assert applied(["kubectl", "apply", "-R", "-f", "m"], str(tmp_path)).files == (
        str(tmp_path / "m" / "p.yaml"),
    )
    aliases = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9))
    bomb = "x-l0: &l0 [lol]\n" + aliases + (pod % "*l8").replace("kind: Pod\n", "kind: Pod\n", 1)
    write(tmp_path / "bomb.yaml", bomb)
    assert applied([*APPLY, "bomb.yaml"], str(tmp_path)).workload == "Pod/p"


def test_a_value_that_expands_without_bound_is_refused(tmp_path: Path) -> None:
    env = ["{name: A0, value: xxxxxxxxxxxxxxxx}"] + [
        f"{{name: A{k}, value: $(A{k - 1})$(A{k - 1})}}" for k in range(1, 40)
    ]
    write(
        tmp_path / "b.yaml",
        "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n"
        f"    command: [sglang, serve]\n    env: [{', '.join(env)}]\n",
    )
    with pytest.raises(InputError, match="a value expands past 1 MiB"):
        applied([*APPLY, "b.yaml"], str(tmp_path))


def test_a_list_kind_a_zero_limit_and_a_model_path_set_when_it_runs(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """A `PodList` is its pods, as kubectl flattens any list kind; `nvidia.com/gpu: 0` gives no
    GPU count (the device plugin gives none; the image's runtime may give all); a model path
    a variable sets when the pod runs is a model not known here, the rest still checked."""
    listed = {
        "kind": "PodList",
        "items": [
            {
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "i",
                            "command": ["sh", "-c"],
                            "args": ["python3 -m sglang.launch_server --model-path $MODEL --tp 2"],
                            "env": [{"name": "MODEL", "valueFrom": {"secretKeyRef": {}}}],
                            "resources": {"limits": {"nvidia.com/gpu": "0"}},
                        }
                    ]
                },
            }
        ],
    }
    write(tmp_path / "list.json", json.dumps(listed))
    found = applied(["kubectl", "apply", "--recursive=1", "-f", "list.json"], str(tmp_path))
    assert (found.workload, found.gpus) == ("Pod/p", None)
    result = preflight(index_0523, [*APPLY, str(tmp_path / "list.json")], {}, None)
    assert not result.target.found
    assert (result.target.given, result.target.how) == (
        "$MODEL",
        "set when the launch runs, not known here",
    )
    assert [f.id for f in result.findings if f.id == "config.model_unavailable"] == [
        "config.model_unavailable"
    ]
    assert result.gpus_seen is None


@pytest.mark.parametrize(
    ("script", "environ", "flag", "value"),
    [
        # a text a variable sets when it runs: not given here, never an exit 2
        ("--tokenizer-path $TOK", {}, "tokenizer_path", None),
        # an assignment is one word, whatever its value holds
        ("--tp 2", {"V": "a b"}, "tp_size", "2"),
        ("--tp 2", {"V": "a$b"}, "tp_size", "2"),
        # a default that quotes or refers is not read: the words as the shell-less reading
        # always gave them
        ('--served-model-name ${X:-"a b"}', {}, "served_model_name", "${X:-a b}"),
        ("--served-model-name ${X:-${Y}}", {"Y": "y"}, "served_model_name", "${X:-${Y}}"),
        # a command substitution is left as written, its quotes its own
        ('--served-model-name "$(echo "$A")"', {"A": "a b"}, "served_model_name", "$(echo $A)"),
        ("--served-model-name `hostname`", {}, "served_model_name", "`hostname`"),
        # bash splits at spaces, tabs and newlines only
        ("--served-model-name $A", {"A": "a\u00a0b"}, "served_model_name", "a\u00a0b"),
    ],
)
def test_what_bash_would_not_split_or_expand_stays_one_word(
    flags: list[FlagSpec], script: str, environ: dict[str, str], flag: str, value: object
) -> None:
    server = "python3 -m sglang.launch_server --model-path /m"
    words = ["bash", "-c", f"NCCL_X=$V {server} {script}"]
    launch = parse_launch(words, flags, "0.5.23", environ=environ)
    assert launch.values.get(flag) == value
    assert launch.env({}).get("NCCL_X") == environ.get("V", "$V")  # unset here: as written


def test_run_time_values_the_last_flag_and_bounds(flags: list[FlagSpec], tmp_path: Path) -> None:
    server = "python3 -m sglang.launch_server --model-path /m"
    # what the cluster sets when the pod runs is not its default here
    later = frozenset({"POD_INDEX", "POD_IP"})
    script = f"{server} --node-rank ${{POD_INDEX:-0}} --dist-init-addr ${{POD_IP:-127.0.0.1}}:5000"
    launch = parse_launch(["sh", "-c", script], flags, "0.5.23", later=later)
    assert launch.at_run_time == {
        "node_rank": "${POD_INDEX:-0}",
        "dist_init_addr": "${POD_IP:-127.0.0.1}:5000",
    }
    # the last of a repeated flag is the one argparse keeps
    again = parse_launch(["sh", "-c", f"{server} --tokenizer-path /a --tokenizer-path $T"], flags)
    assert (again.values.get("tokenizer_path"), again.at_run_time) == (
        None,
        {"tokenizer_path": "$T"},
    )
    back = parse_launch(["sh", "-c", f"{server} --tokenizer-path $T --tokenizer-path /a"], flags)
    assert (back.values.get("tokenizer_path"), back.at_run_time) == ("/a", {})
    # a script longer than one argument can be, or one that expands past it: refused at once
    big = {"A": "x" * 100_000}
    with pytest.raises(InputError, match="expands past 128 KiB"):
        parse_launch(
            ["sh", "-c", f"{server} --served-model-name {'$A' * 2000}"], flags, environ=big
        )
    with pytest.raises(InputError, match="over 128 KiB"):
        parse_launch(["sh", "-c", f"{server} --served-model-name {'x' * 140_000}"], flags)
    # a subPathExpr mount is a folder named when the pod runs: no bind of this machine
    write(
        tmp_path / "p.yaml",
        """kind: Pod
metadata: {name: p}
spec:
  volumes: [{name: d, hostPath: {path: /data}}]
  containers:
  - name: c
    image: i
    command: [sglang, serve, --model-path, /models/m]
    volumeMounts: [{name: d, mountPath: /models, subPathExpr: $(POD_NAME)}]
""",
    )
    assert "-v" not in applied([*APPLY, "p.yaml"], str(tmp_path)).words


def test_lists_of_lists_by_alias_are_bounded(tmp_path: Path) -> None:
    """Eight levels of ten aliases to a `kind: List` would name a hundred million pods."""
    levels = "".join(
        f"l{i}: &l{i} {{kind: List, items: [{', '.join([f'*l{i - 1}'] * 10)}]}}\n"
        for i in range(1, 9)
    )
    pod = "{kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, command: [sglang, serve]}]}}"
    write(
        tmp_path / "b.yaml",
        f"kind: List\nx: &l0 {{kind: List, items: [{pod}]}}\n{levels}items: [*l8]\n",
    )
    with pytest.raises(InputError, match="more than 10,000 objects"):
        applied([*APPLY, "b.yaml"], str(tmp_path))


def test_a_folder_is_walked_as_kubectl_walks_it(tmp_path: Path, monkeypatch: Any) -> None:
    """Depth first in lexical order (the last definition of an object wins, so the order
    matters), and bounded: a folder given by mistake (`-R -f /`) is said, not read."""
    pod = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: c, image: %s, command: [sglang, serve]}\n"
    write(tmp_path / "m" / "a.yaml", pod % "first")
    write(tmp_path / "m" / "b" / "c.yaml", pod % "second")
    write(tmp_path / "m" / "z.yaml", "kind: Service\nmetadata: {name: s}\n")
    found = applied(["kubectl", "apply", "-R", "-f", "m"], str(tmp_path))
    assert [Path(f).relative_to(tmp_path / "m").as_posix() for f in found.files] == [
        "a.yaml",
        "b/c.yaml",
        "z.yaml",
    ]
    assert "second" in found.words  # b/c.yaml's Pod/p, read after a.yaml's
    monkeypatch.setattr("eaglebug.checks.launch.kubectl._FOLDER_ENTRIES", 3)
    with pytest.raises(InputError, match="more than 3 files and folders"):
        applied(["kubectl", "apply", "-R", "-f", "m"], str(tmp_path))
