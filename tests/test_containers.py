"""A launch run in a container (`docker run ... IMAGE python3 -m sglang.launch_server ...`).

The commands are the shapes published for SGLang: its install docs' `docker run --gpus all
--shm-size 32g -p 30000:30000 -v ~/.cache/huggingface:/root/.cache/huggingface --env
"HF_TOKEN=<secret>" --ipc=host lmsysorg/sglang:latest python3 -m sglang.launch_server ...`
(sgl-project/sglang docs/get_started/install.md; the same mount in its docker/compose.yaml),
and NVIDIA's DGX playbook (github.com/nvidia/dgx-spark-playbooks, skill sglang-setup):
`docker run -d --name sglang-server --gpus '"device=1"' --ipc host --ulimit memlock=-1 --ulimit
stack=67108864 -p 30000:30000 -e HF_TOKEN=... -v "$HOME/.cache/huggingface/hub:/root/.cache/
huggingface/hub" lmsysorg/sglang:latest-cu130 sglang serve --model-path ...`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from eaglebug.checks import InputError, PreflightResult, preflight
from eaglebug.checks.launch.command import parse_launch, words_environment
from eaglebug.checks.launch.flags import server_flags
from eaglebug.checks.launch.wrappers import unwrapped
from eaglebug.checks.source.index import TreeIndex
from eaglebug.cli.report import print_preflight
from eaglebug.server.launcher import Server
from tests.configs import kimi_k25, kimi_k25_eagle3, write_hub_model, write_model
from tests.synthetic import run_cli
from tests.test_memory import H200

ALLOW = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
DOCS = [
    "docker", "run", "--gpus", "all", "--shm-size", "32g", "-p", "30000:30000",
    "-v", "~/.cache/huggingface:/root/.cache/huggingface", "--env", "HF_TOKEN=<secret>",
    "--ipc=host", "lmsysorg/sglang:latest",
]  # fmt: skip
PLAYBOOK = [
    "docker", "run", "-d", "--name", "sglang-server", "--gpus", '"device=1"', "--ipc", "host",
    "--ulimit", "memlock=-1", "--ulimit", "stack=67108864", "-p", "30000:30000",
    "-e", "HF_TOKEN=hf_x", "-v", "$HOME/.cache/huggingface/hub:/root/.cache/huggingface/hub",
    "lmsysorg/sglang:latest-cu130",
]  # fmt: skip
LAUNCH = ["python3", "-m", "sglang.launch_server"]


@pytest.mark.parametrize(
    "runner",
    [
        DOCS,
        PLAYBOOK,
        ["podman", "container", "run", "-it", "--rm", "-e", "A=1", "--device", "nvidia.com/gpu=all",
         "docker.io/lmsysorg/sglang:latest"],
        ["docker", "run", "-itp8000:8000", "--rm=true", "--", "img"],  # pflag's clusters, `--`
    ],
)  # fmt: skip
def test_the_command_after_the_image_is_the_servers(runner: list[str]) -> None:
    """Every option of the runner is read as its own (a value such as `all`, `host` or
    `"device=1"` is not the program); the image is its operand; what follows is SGLang's."""
    wrapped, command = unwrapped([*runner, *LAUNCH, "--tp", "8"])
    assert [w.container for w in wrapped] == ["docker"]
    assert wrapped[0].words == tuple(runner)
    assert command == [*LAUNCH, "--tp", "8"]


def test_an_entry_point_given_to_the_runner_runs_the_words_after_the_image(
    index_0523: TreeIndex,
) -> None:
    """SGLang's docker/compose.yaml sets `entrypoint: python3 -m sglang.launch_server` and
    passes the flags as the command: as `docker run`, the words after the image are the
    entry point's arguments."""
    version, flags = "0.5.23", server_flags(index_0523)
    runner = ["docker", "run", "--entrypoint", "python3", "--ipc=host", "lmsysorg/sglang"]
    words = [*runner, "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8"]
    launch = parse_launch(words, flags, version)
    assert launch.program == (*runner, "-m", "sglang.launch_server")
    assert launch.text("model_path") == "m"
    with pytest.raises(InputError, match="not SGLang's server"):
        parse_launch([*runner, "-c", "print()", "--tp", "8"], flags, version)


def test_a_bash_c_string_after_the_image_is_read_as_its_words(index_0523: TreeIndex) -> None:
    """As launch scripts in the wild write it (genglinliu/WebCoach
    start_LLM_inference/ASG/start_sglang_server_qwen_vl_7b.sh: `docker run --gpus '"device=5"'
    --shm-size 32g -p 30003:30003 -v ...:/root/.cache/huggingface --env "HF_TOKEN=..."
    --ipc=host lmsysorg/sglang:latest bash -c "python3 -m sglang.launch_server --model-path
    Qwen/Qwen2.5-VL-7B-Instruct --host 0.0.0.0 --port 30003 --tp-size 1
    --mem-fraction-static 0.7"`): the string's words are the command; its `NAME=VALUE` words
    count inside the container; a script (`&&`, a pipe) is not one launch command."""
    version, flags = "0.5.23", server_flags(index_0523)
    runner = [
        "docker", "run", "--gpus", '"device=5"', "--shm-size", "32g", "-p", "30003:30003",
        "--ipc=host", "lmsysorg/sglang:latest",
    ]  # fmt: skip
    string = (
        "python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-VL-7B-Instruct --host 0.0.0.0 "
        "--port 30003 --tp-size 1 --mem-fraction-static 0.7"
    )
    launch = parse_launch([*runner, "bash", "-c", string], flags, version)
    assert launch.program == (*runner, *LAUNCH)
    assert launch.text("model_path") == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert launch.text("mem_fraction_static") == "0.7"
    inner = parse_launch([*runner, "sh", "-lc", f"{ALLOW}=1 exec {string}"], flags, version)
    assert inner.env({ALLOW: "0"}) == {ALLOW: "1", "HOME": "/root"}
    logged = parse_launch(
        [*runner, "bash", "-c", f"{string} > /log/server.log 2>&1"], flags, version
    )
    assert logged.program == launch.program and logged.text("port") == "30003"
    for script in (f"cd /sgl && {string}", f"{string} | tee /log/server.log"):
        with pytest.raises(InputError, match=r"-c string is a shell script \('(&&|\|)' in it\)"):
            parse_launch([*runner, "bash", "-c", script], flags, version)
    quoted = parse_launch(
        [*runner, "bash", "-c", f"{string} --served-model-name ';' > /log/server.log"],
        flags,
        version,
    )
    assert quoted.text("served_model_name") == ";"  # quoted: a value, not a list
    with pytest.raises(InputError, match="not a shell string"):
        Server(Path("/nonexistent")).launch(["bash", "-c", string], {})


def test_the_server_sees_only_what_the_runner_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside, the variables are the `--env-file`'s, then `-e`'s (`NAME` alone: this side's
    value), and HOME is root's: not the shell's, not the `VAR=value` words before `docker`."""
    env_file = tmp_path / "server.env"
    env_file.write_text("# the deployment's\nFROM_FILE=1\n\n  SHARED=file\nPASSED\n")
    monkeypatch.chdir(tmp_path)
    words = [
        "OUTER=1", "docker", "run", "--env-file", "server.env", "-e", "SHARED=flag", "-e", "PASSED",
        "-eMISSING", "img", *LAUNCH, "--model-path", "m",
    ]  # fmt: skip
    env, _ = words_environment(words, {"PASSED": "here", "SECRET": "s", "HOME": "/home/me"})
    assert env == {"FROM_FILE": "1", "SHARED": "flag", "PASSED": "here", "HOME": "/root"}
    user = ["docker", "run", "-u", "1000", "img", *LAUNCH]
    assert words_environment(user, {"HOME": "/home/me"})[0] == {}  # the image's user's: unknown
    prefixed = ["podman", "run", "-e", "SGLANG_*", "img", *LAUNCH]  # podman's, by prefix
    assert words_environment(prefixed, {"SGLANG_X": "1", "B": "2"})[0] == {
        "SGLANG_X": "1",
        "HOME": "/root",
    }
    host = ["podman", "run", "--env-host", "img", *LAUNCH]
    assert words_environment(host, {"B": "2", "HOME": "/home/me"})[0] == {
        "B": "2",
        "HOME": "/home/me",
    }
    with pytest.raises(InputError, match=r"--env-file .*missing\.env: cannot read it"):
        words_environment(["docker", "run", "--env-file", "missing.env", "img", *LAUNCH], {})


def _seed(models: Path) -> tuple[Path, Path]:
    return (
        write_model(models / "Kimi-K2.5", kimi_k25()),
        write_model(models / "Kimi-K2.5-EAGLE3", kimi_k25_eagle3()),
    )


def test_a_containers_model_paths_are_read_through_its_mounts(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """`--model-path /models/...` is the folder a bind mount maps there; the checks read the
    same configs as for the same launch run here, and the variables the container is given
    decide (the draft's shorter context is allowed by `-e`, not by this shell's)."""
    target, draft = _seed(tmp_path / "host" / "models")
    flags = ["--tp", "8", "--speculative-algorithm", "EAGLE3", "--trust-remote-code"]
    direct = [*LAUNCH, "--model-path", str(target), "--speculative-draft-model-path", str(draft)]
    inside = [
        "docker", "run", "--gpus", "all", "-v", f"{tmp_path / 'host' / 'models'}:/models:ro",
        "--ipc=host", "lmsysorg/sglang:v0.5.23", *LAUNCH, "--model-path", "/models/Kimi-K2.5",
        "--speculative-draft-model-path", "/models/Kimi-K2.5-EAGLE3",
    ]  # fmt: skip
    here = preflight(index_0523, [*direct, *flags], {}, H200)
    there = preflight(index_0523, [*inside, *flags], {ALLOW: "1"}, H200)
    assert there.target.path == target and there.target.how == "local folder"
    assert there.draft is not None and there.draft.path == draft
    assert sorted(f.id for f in there.findings) == sorted(f.id for f in here.findings)
    assert _context(there) == "error"  # this shell's ALLOW is not the container's
    assert there.launch.to_json()["wrappers"] == [
        {"name": "docker run", "words": inside[: inside.index("python3")], "container": "docker"}
    ]
    shown = io.StringIO()
    print_preflight(there, Console(file=shown, width=200))
    assert (
        "runs through: docker run · in lmsysorg/sglang:v0.5.23: its variables, its paths "
        "through its binds, its own Python"
    ) in shown.getvalue()
    allowed = [*inside[:2], "-e", f"{ALLOW}=1", *inside[2:], *flags]
    assert _context(preflight(index_0523, allowed, {}, H200)) == "info"  # started, said

    unmounted = [w for w in inside if not w.endswith(":/models:ro") and w != "-v"]
    missed = preflight(index_0523, [*unmounted, *flags], {}, H200)
    assert missed.target.path is None
    assert missed.target.how == (
        "the container's /models/Kimi-K2.5 is not mounted from this machine (no bind mount for it)"
    )


def _context(result: PreflightResult) -> str:
    return next(str(f.severity) for f in result.findings if f.id == "config.context_length")


def test_a_hub_id_is_found_in_the_cache_mounted_at_the_containers(
    index_0523: TreeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hub id resolves in the container's Hugging Face cache (root's, or its HF_HOME), as
    the mount of SGLang's docs (`-v ~/.cache/huggingface:/root/.cache/huggingface`) or the
    playbook's (`$HOME/.cache/huggingface/hub:/root/.cache/huggingface/hub`) brings it in."""
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    hub = tmp_path / "me" / ".cache" / "huggingface" / "hub"
    snapshot = write_hub_model(hub, "moonshotai/Kimi-K2.5", kimi_k25())
    for runner in (DOCS, PLAYBOOK):
        words = [*runner, *LAUNCH, "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8"]
        result = preflight(index_0523, words, {"HF_HOME": "/elsewhere"}, H200)
        assert result.target.path == snapshot, runner
    moved = ["docker", "run", "-e", "HF_HOME=/hf", "--mount", f"type=bind,src={hub.parent},dst=/hf"]
    words = [*moved, "img", *LAUNCH, "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8"]
    assert preflight(index_0523, words, {}, H200).target.path == snapshot
    bare = ["docker", "run", "img", *LAUNCH, "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8"]
    assert preflight(index_0523, bare, {}, H200).target.how == (
        "the container's /root/.cache/huggingface/hub is not mounted from this machine "
        "(no bind mount for it)"
    )


def test_eaglebug_does_not_start_a_container_it_could_not_stop(tmp_path: Path) -> None:
    """The container's processes are the runtime's (containerd's), not children of the
    command: `stop` could not end them. Refused before anything runs or is recorded."""
    server = Server(tmp_path)
    with pytest.raises(InputError) as raised:
        server.launch([*DOCS, *LAUNCH, "--model-path", "m"], {})
    assert str(raised.value).startswith("eaglebug does not start containers (docker run)")
    assert "eaglebug watch --log server.log" in str(raised.value.hint)
    for composed, runtime in (
        (["docker", "compose", "up"], "docker"),
        (["nohup", "docker-compose", "up", "sglang"], "docker"),
        (["podman-compose", "up"], "podman"),
    ):
        with pytest.raises(
            InputError, match=rf"^eaglebug does not start containers \({runtime} compose\)"
        ):
            server.launch(composed, {})
    assert server.state().launches == []
    assert list(tmp_path.iterdir()) == []  # no state, no log folder


def test_a_launch_through_sudo_is_refused_to_a_user_who_could_not_stop_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's eaglebug cannot signal root's processes; root's can (and carries its tag
    through sudo's reset environment: `carrying`)."""
    import eaglebug.server.launcher

    monkeypatch.setattr(eaglebug.server.launcher.os, "geteuid", lambda: 1000)
    with pytest.raises(InputError, match="a launch through sudo runs as root"):
        Server(tmp_path).launch(["sudo", "-n", *LAUNCH, "--model-path", "m"], {})
    assert list(tmp_path.iterdir()) == []


def test_without_sglang_a_container_launch_asks_for_the_images_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    import eaglebug.cli.parser

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real(name, *a)
    )
    words = ["preflight", "--json", "--", *DOCS, *LAUNCH, "--model-path", str(tmp_path)]
    assert eaglebug.cli.parser.main(words) == 2
    err = capsys.readouterr().err
    assert "the launch runs in a container (docker run): its SGLang is the image's" in err
    assert "--sglang" in err


APPTAINER = ["apptainer", "exec", "--nv", "-B", "/scratch/models:/models,/data", "sglang.sif"]


def test_an_apptainer_command_is_read_and_its_environment_is_apptainers(
    tmp_path: Path,
) -> None:
    """`srun apptainer exec --nv ... sglang.sif python3 -m ...` (Slurm with Apptainer, the
    HPC way): this environment passes in but `APPTAINER_*`, `HOME` and `PATH`; injected
    variables (`APPTAINERENV_X`, `--env`) win; `--cleanenv` keeps TERM and the proxies."""
    wrapped, command = unwrapped(["srun", "-N", "1", *APPTAINER, *LAUNCH])
    assert [(w.name, w.container) for w in wrapped] == [
        ("srun", ""),
        ("apptainer exec", "apptainer"),
    ]
    assert command == LAUNCH
    shell = {
        "HOME": "/home/me", "PATH": "/opt/bin", "TERM": "xterm", "SGLANG_X": "1",
        "APPTAINER_BIND": "/x", "APPTAINERENV_A": "a", "SINGULARITYENV_A": "s",
        "SINGULARITYENV_B": "b", "APPTAINERENV_HOME": "/nope",
    }  # fmt: skip
    default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env, _ = words_environment([*APPTAINER, *LAUNCH], shell)
    assert env == {
        "HOME": "/home/me", "PATH": default_path, "TERM": "xterm", "SGLANG_X": "1",
        "A": "a", "B": "b",
    }  # fmt: skip
    clean = ["apptainer", "exec", "-e", "--env", "C=1,D=2", "img.sif", *LAUNCH]
    assert words_environment(clean, shell)[0] == {
        "TERM": "xterm", "LANG": "C", "HOME": "/home/me", "PATH": default_path,
        "A": "a", "B": "b", "C": "1", "D": "2",
    }  # fmt: skip
    singularity = ["singularity", "exec", "--cleanenv", "img.sif", *LAUNCH]  # its own prefix
    assert words_environment(singularity, shell)[0]["A"] == "s"
    passed = words_environment(["singularity", "exec", "img.sif", *LAUNCH], shell)[0]
    assert passed["APPTAINER_BIND"] == "/x" and "SINGULARITYENV_B" not in passed


def test_an_apptainer_containers_files_are_its_binds(
    index_0523: TreeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The home, /tmp, the current folder and the `-B` binds are the container's files
    (`--contain` leaves out the first three); a model elsewhere is not in it."""
    home = tmp_path / "home"
    target, _ = _seed(home / "models")
    elsewhere = write_model(tmp_path / "elsewhere" / "Kimi-K2.5", kimi_k25())
    monkeypatch.chdir(tmp_path)
    shell = {"HOME": str(home)}
    words = [*APPTAINER, *LAUNCH, "--model-path", str(target), "--tp", "8"]
    assert preflight(index_0523, words, shell, H200).target.path == target
    contained = ["apptainer", "exec", "--contain", "sglang.sif", *words[len(APPTAINER) :]]
    assert preflight(index_0523, contained, shell, H200).target.how == (
        f"the container's {target} is not mounted from this machine (no bind mount for it)"
    )
    moved = [*words[:-4], "--model-path", "/models/Kimi-K2.5", "--tp", "8"]
    bound = ["apptainer", "exec", "-B", f"{elsewhere.parent}:/models:ro", "sglang.sif"]
    result = preflight(index_0523, [*bound, *moved[len(APPTAINER) :]], shell, H200)
    assert result.target.path == elsewhere
    monkeypatch.chdir(tmp_path / "elsewhere")  # the current folder is bound too
    relative = [*APPTAINER, *LAUNCH, "--model-path", "Kimi-K2.5", "--tp", "8"]
    assert preflight(index_0523, relative, shell, H200).target.path == elsewhere


def test_an_apptainer_launch_is_started_and_keeps_its_tag_through_cleanenv() -> None:
    """Apptainer's command is a child of the launch (stop reaches it): launched, with the
    tag set by `--env` where `--cleanenv` would drop it."""
    from eaglebug.checks import carrying

    tag = {"T": "1"}
    plain = ["apptainer", "exec", "--nv", "img.sif", *LAUNCH]
    assert carrying(plain, tag) == plain
    clean = ["apptainer", "exec", "--nv", "-e", "img.sif", *LAUNCH]
    assert carrying(clean, tag) == [
        "apptainer", "exec", "--nv", "-e", "--env", "T=1", "img.sif", *LAUNCH,
    ]  # fmt: skip


def test_an_edited_env_file_is_a_new_question(
    tmp_path: Path, sglang_0523: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--env-file` says what the server sees: a reply kept for the file as it was is not the
    answer once it is edited (the CLI keeps replies by the files a launch names, by content)."""
    for name, config in (("kimi", kimi_k25()), ("eagle", kimi_k25_eagle3())):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "config.json").write_text(json.dumps(config))
    (tmp_path / "server.env").write_text(f"{ALLOW}=1\n")
    monkeypatch.chdir(tmp_path)
    words = [
        "docker", "run", "--env-file", "server.env", "-v", f"{tmp_path}/models:/models", "img",
        "python3", *LAUNCH[1:], "--model-path", "/models/kimi", "--speculative-algorithm",
        "EAGLE3", "--speculative-draft-model-path", "/models/eagle", "--tp", "8",
    ]  # fmt: skip
    run = ["preflight", "--sglang", str(sglang_0523), "--json", "--", *words]

    def context_errors() -> list[str]:
        answer = json.loads(run_cli(*run).stdout)
        assert answer["compose"] is None  # a docker run, not a compose service
        return [f["severity"] for f in answer["findings"] if f["id"] == "config.context_length"]

    assert context_errors() == ["info"]  # allowed by the env file: said, not refused
    (tmp_path / "server.env").write_text("# nothing allowed\n")
    assert context_errors() == ["error"]
