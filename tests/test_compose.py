"""A launch by `docker compose up`: read as the `docker run` the service amounts to.

The compose files are real ones (tests/fixtures/compose/README.md names each one's source):
SGLang's own docker/compose.yaml, and nine that users run SGLang with, speculative decoding
among them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.command import parse_launch
from eaglebug.checks.launch.compose import compose_launch, launch_files
from eaglebug.checks.launch.composevars import Interpolation, read_dotenv
from eaglebug.checks.launch.flags import FlagSpec, server_flags
from eaglebug.checks.source.index import TreeIndex
from tests.configs import kimi_k25, kimi_k25_eagle3
from tests.synthetic import run_cli

FIXTURES = Path(__file__).with_name("fixtures") / "compose"
LAUNCH = ["-m", "sglang.launch_server"]


@pytest.fixture(scope="module")
def flags(index_0523: TreeIndex) -> list[FlagSpec]:
    return server_flags(index_0523)


def project(tmp_path: Path, fixture: str, **files: str) -> Path:
    """A compose project: the fixture as its compose.yaml, and `files` (path -> text)."""
    shutil.copy(FIXTURES / fixture, tmp_path / "compose.yaml")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def compose(words: list[str], cwd: Path, environ: dict[str, str] | None = None) -> list[str]:
    composed = compose_launch(words, environ or {}, str(cwd))
    assert composed is not None
    return composed.words


def test_sglangs_own_compose_file_is_the_docker_run_it_starts(
    tmp_path: Path, flags: list[FlagSpec]
) -> None:
    """sgl-project/sglang docker/compose.yaml: the entry point a string, the flags its command;
    the bind from `${HOME}`, the variables its `environment` map."""
    here = project(tmp_path, "sglang_official.yaml")
    words = compose(["docker", "compose", "up", "-d"], here, {"HOME": "/home/me"})
    assert words == [
        "docker", "run", "-e", "HF_TOKEN=<secret>",
        "-v", "/home/me/.cache/huggingface:/root/.cache/huggingface",
        "--gpus", '"device=0"',  # its deploy's device_ids
        "--entrypoint", "python3", "lmsysorg/sglang:latest", *LAUNCH,
        "--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--host", "0.0.0.0", "--port", "30000",
    ]  # fmt: skip
    launch = parse_launch(words, flags, "0.5.23")
    assert launch.text("model_path") == "meta-llama/Llama-3.1-8B-Instruct"
    assert launch.env({"HOME": "/home/me", "HF_HOME": "/elsewhere"}) == {
        "HOME": "/root",  # the container's, not this shell's
        "HF_TOKEN": "<secret>",
    }
    hub = "/root/.cache/huggingface/hub"
    assert launch.host_path(hub, {}) == "/home/me/.cache/huggingface/hub"
    assert launch_files(["docker", "compose", "up"], {"HOME": "/h"}, str(here)) == [
        str(here / "compose.yaml")
    ]


def test_the_shell_the_words_in_front_and_dotenv_set_what_is_interpolated(
    tmp_path: Path, flags: list[FlagSpec]
) -> None:
    """niushuai1991/qwen3.6-27b sweeps NEXTN's steps as its header says:
    `SPEC_STEPS=4 SPEC_DRAFT_TOKENS=5 docker compose -f docker-compose.sglang.yml up -d`;
    unset, the file's defaults (3, 4); the project's .env under the shell's variables."""
    shutil.copy(FIXTURES / "nextn_speculative_folded.yaml", tmp_path / "docker-compose.sglang.yml")
    run = ["docker", "compose", "-f", "docker-compose.sglang.yml", "up", "-d"]

    def steps(words: list[str], environ: dict[str, str]) -> tuple[str | None, str | None]:
        launch = parse_launch(compose(words, tmp_path, environ), flags, "0.5.23")
        return launch.text("speculative_num_steps"), launch.text("speculative_num_draft_tokens")

    assert steps(run, {}) == ("3", "4")
    assert steps(["SPEC_STEPS=4", "SPEC_DRAFT_TOKENS=5", *run], {}) == ("4", "5")
    (tmp_path / ".env").write_text("SPEC_STEPS=6\nSPEC_DRAFT_TOKENS='7'  # quoted\n")
    assert steps(run, {}) == ("6", "7")
    assert steps(run, {"SPEC_STEPS": "2"}) == ("2", "7")  # the shell's over the .env
    launch = parse_launch(compose(run, tmp_path), flags, "0.5.23")
    assert launch.text("speculative_algorithm") == "NEXTN"
    assert launch.env({})["SGLANG_ENABLE_SPEC_V2"] == "1"  # a list item, its comment left out
    assert launch.host_path("/models/Qwen3.6-27B-FP8", {}) == "/data/models/Qwen3.6-27B-FP8"


@pytest.mark.parametrize(
    ("text", "variables", "expected"),
    [
        ("${A}-$A-${A:-x}", {"A": "1"}, "1-1-1"),
        ("${E:-x}|${E-x}|${U-x}", {"E": ""}, "x||x"),
        ("${E:+on}|${E+on}|${A:+--flag ${A}}", {"E": "", "A": "1"}, "|on|--flag 1"),
        ("${U:-${V:-deep}}", {}, "deep"),
        ("$$A and $${A} and a$ lone", {"A": "1"}, "$A and ${A} and a$ lone"),
        ("${A?set it}", {"A": ""}, ""),
    ],
)
def test_interpolation_reads_what_the_compose_specification_gives(
    text: str, variables: dict[str, str], expected: str
) -> None:
    assert Interpolation("f", variables, []).text(text) == expected


def test_an_unset_variable_is_empty_and_said_a_required_one_is_one_line() -> None:
    warnings: list[str] = []
    assert Interpolation("compose.yaml", {}, warnings).text("a${MODEL}b") == "ab"
    assert warnings == ["compose.yaml: MODEL is not set: read as empty, as docker compose does"]
    for text in ("${MODEL:?give a hub id}", "${MODEL?give a hub id}"):
        with pytest.raises(InputError, match=r"^compose.yaml: MODEL is required: give a hub id$"):
            Interpolation("compose.yaml", {}, []).text(text)
    for broken in ("${A", "${A/x/y}", "${}"):
        with pytest.raises(InputError, match=r"^compose\.yaml: "):
            Interpolation("compose.yaml", {"A": "1"}, []).text(broken)


def test_a_required_model_and_an_alternative_flag(tmp_path: Path, flags: list[FlagSpec]) -> None:
    """whitecircle/halo: `--model-path ${SGLANG_MODEL:?...}`, and `${VAR:+--flag ${VAR}}`
    adds a flag only where the variable is set."""
    shutil.copy(FIXTURES / "interpolation_required_alt.yaml", tmp_path / "compose.yaml")
    with pytest.raises(InputError, match=r"SGLANG_MODEL is required: set SGLANG_MODEL to a hub"):
        compose(["docker", "compose", "up"], tmp_path)
    words = compose(
        ["SGLANG_MODEL=Qwen/Qwen3-0.6B", "SGLANG_TP=2", "docker", "compose", "up"], tmp_path
    )
    launch = parse_launch(words, flags, "0.5.23")
    assert launch.text("model_path") == "Qwen/Qwen3-0.6B"
    assert launch.text("tp_size") == "2"
    assert launch.env({})["CUDA_VISIBLE_DEVICES"] == "7"  # `${SGLANG_CUDA_DEVICES:-7}`


def test_a_service_in_a_profile_runs_only_with_it(tmp_path: Path, flags: list[FlagSpec]) -> None:
    """dw-flyingw/GLM-SGLANG: three workers, each in a profile, built on a `<<: *worker-base`
    anchor that holds the entry point; `up` alone starts none of them."""
    here = project(tmp_path, "anchors_entrypoint_exec_spec_eagle.yaml")
    with pytest.raises(InputError, match=r"run only with a profile: worker \(cache\), ") as caught:
        compose(["docker", "compose", "up"], here)
    assert caught.value.hint == "name one: docker compose --profile cache up worker"
    flash = compose(["docker", "compose", "--profile", "flash", "up"], here)
    launch = parse_launch(flash, flags, "0.5.23")
    assert launch.program[-3:] == ("lmsysorg/sglang:glm-5.3-flash", *LAUNCH)
    assert launch.text("model_path") == "zai-org/GLM-5.3-Flash"
    named = compose(["docker", "compose", "up", "--no-deps", "worker"], here)
    assert parse_launch(named, flags, "0.5.23").text("speculative_algorithm") == "EAGLE"
    both = ["docker", "compose", "--profile", "cache", "--profile", "flash", "up"]
    with pytest.raises(InputError, match="2 services that run SGLang's server"):
        compose(both, here)


def test_an_override_file_merges_as_compose_merges(tmp_path: Path, flags: list[FlagSpec]) -> None:
    """compose.override.yaml: variables by name, binds by target, the command replaced;
    `!reset` drops, `!override` replaces."""
    here = project(
        tmp_path,
        "sglang_official.yaml",
        **{
            "compose.override.yaml": (
                "services:\n"
                "  sglang:\n"
                "    environment:\n"
                "      - SGLANG_ENABLE_SPEC_V2=1\n"
                "      - HF_TOKEN\n"
                "    volumes:\n"
                "      - ./models:/root/.cache/huggingface\n"
                "    command: --model-path /root/.cache/huggingface/kimi --tp 8\n"
            )
        },
    )
    words = compose(["docker", "compose", "up"], here, {"HOME": "/h", "HF_TOKEN": "mine"})
    launch = parse_launch(words, flags, "0.5.23")
    assert launch.text("model_path") == "/root/.cache/huggingface/kimi"
    assert launch.text("port") is None  # the base file's command is replaced whole
    assert launch.env({"HF_TOKEN": "mine"}) == {
        "HOME": "/root",
        "HF_TOKEN": "mine",  # `HF_TOKEN` alone: the shell's
        "SGLANG_ENABLE_SPEC_V2": "1",
    }
    assert launch.host_path("/root/.cache/huggingface/kimi", {}) == str(here / "models/kimi")
    (here / "compose.override.yaml").write_text(
        "services:\n"
        "  sglang:\n"
        "    environment:\n"
        "      HF_TOKEN: !reset null\n"
        "    volumes: !override\n"
        "      - /data/hf:/hf\n"
        "    image: !override lmsysorg/sglang:dev\n"
    )
    reset = parse_launch(compose(["docker", "compose", "up"], here), flags, "0.5.23")
    assert reset.program[-3:] == ("lmsysorg/sglang:dev", *LAUNCH)
    assert reset.env({}) == {"HOME": "/root"}
    assert reset.host_path("/hf/x", {}) == "/data/hf/x"
    assert reset.host_path("/root/.cache/huggingface/x", {}) is None


def test_a_service_that_runs_a_script_is_said_to(tmp_path: Path, flags: list[FlagSpec]) -> None:
    """twangodev/radiotalk: `command: [bash, -c, |...]` warms a cache, then `exec`s the server:
    a script, which the reading says rather than guesses through."""
    here = project(tmp_path, "bash_c_block_literal.yaml")
    words = compose(["docker", "compose", "up"], here, {"HOME": "/h"})
    assert words[-3:-1] == ["bash", "-c"] and "exec python3 -m sglang.launch_server" in words[-1]
    with pytest.raises(InputError, match=r"-c string is a shell script"):
        parse_launch(words, flags, "0.5.23")


def test_env_files_and_the_dotenv_syntax(tmp_path: Path) -> None:
    """av/harbor: the project's .env is both what is interpolated and an `env_file`; a second
    env file overrides it; `${HARBOR_SGLANG_EXTRA_ARGS}` unset leaves no word."""
    here = project(
        tmp_path,
        "harbor_env_file.yaml",
        **{
            ".env": (
                "# harbor\n"
                "export HARBOR_SGLANG_VERSION=v0.5.23\n"
                'HARBOR_SGLANG_MODEL="Qwen/Qwen3-8B"\n'
                "HARBOR_HF_CACHE=~/.cache/huggingface # the hub cache\n"
                "HARBOR_HF_TOKEN='$not_interpolated'\n"
                "HARBOR_SGLANG_EXTRA_ARGS=\n"
                'MULTI="a\n'
                'b"\n'
            ),
            "services/sglang/override.env": "HARBOR_SGLANG_MODEL=Qwen/Qwen3-32B\n",
        },
    )
    composed = compose_launch(["docker", "compose", "up"], {"HOME": "/home/me"}, str(here))
    assert composed is not None
    words = composed.words
    assert words[words.index("--model-path") + 1] == "Qwen/Qwen3-8B"  # interpolated from .env
    assert words[-1] == "30000"  # the empty extra arguments are no word
    assert "lmsysorg/sglang:v0.5.23" in words
    assert "HF_TOKEN=$not_interpolated" in words
    assert "HARBOR_SGLANG_MODEL=Qwen/Qwen3-32B" in words  # env files in order: the later wins
    assert "/home/me/.cache/huggingface:/root/.cache/huggingface" in words
    assert composed.files == (
        str(here / "compose.yaml"),
        str(here / ".env"),
        str(here / ".env"),
        str(here / "services/sglang/override.env"),
    )
    assert read_dotenv(here / ".env", {})["MULTI"] == "a\nb"
    (here / ".env").write_text("NOT A LINE\n")
    with pytest.raises(InputError, match=r"\.env: `NOT A LINE` is not NAME=VALUE"):
        compose_launch(["docker", "compose", "up"], {}, str(here))


def test_an_image_built_here_or_not_named(tmp_path: Path) -> None:
    """AMD-melliott/ai-infra-summit names its image `$SGLANG_IMAGE`: unset, there is none
    (said as such, with the warning); a service that builds its own is the project's."""
    here = project(tmp_path, "amd_anchors_env_file.yaml", **{".env": ""})
    composed = compose_launch(["docker", "compose", "up"], {}, str(here))
    assert composed is not None
    assert composed.words[composed.words.index("python3") - 1] == "(no image)"
    assert composed.warnings[0].endswith(
        "SGLANG_IMAGE is not set: read as empty, as docker compose does"
    )
    (here / "compose.yaml").write_text(
        "services:\n  srv:\n    build: .\n    command: python3 -m sglang.launch_server\n"
    )
    built = compose(["docker", "compose", "up"], here)
    assert built[-4] == f"{here.name}-srv"


def test_podmans_compose_runs_podman(tmp_path: Path, flags: list[FlagSpec]) -> None:
    """`podman compose` and `podman-compose` start the service with podman: its reading
    (podman's options, its variables inside) is podman run's."""
    here = project(tmp_path, "sglang_official.yaml")
    for words in (["podman", "compose", "up"], ["podman-compose", "up", "sglang"]):
        run = compose(words, here, {"HOME": "/h"})
        assert run[:2] == ["podman", "run"]
        launch = parse_launch(run, flags, "0.5.23")
        assert launch.program[:2] == ("podman", "run")
        assert launch.host_path("/root/.cache/huggingface/hub", {}) == "/h/.cache/huggingface/hub"


def test_paths_are_taken_as_compose_takes_them(tmp_path: Path, flags: list[FlagSpec]) -> None:
    """`-f` and `--env-file` from the current folder; the project's folder (its `.env`, its
    relative binds) is the first file's, or `--project-directory`."""
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    shutil.copy(FIXTURES / "nextn_speculative_folded.yaml", deploy / "sglang.yml")
    (deploy / ".env").write_text("SPEC_STEPS=5\n")
    (tmp_path / "sweep.env").write_text("SPEC_STEPS=6\n")

    def steps(words: list[str]) -> str | None:
        return parse_launch(compose(words, tmp_path), flags, "0.5.23").text("speculative_num_steps")

    assert steps(["docker", "compose", "-f", "deploy/sglang.yml", "up"]) == "5"
    with_env = ["docker", "compose", "--env-file", "sweep.env", "-f", "deploy/sglang.yml", "up"]
    assert steps(with_env) == "6"
    elsewhere = ["docker", "compose", "--project-directory", ".", "-f", "deploy/sglang.yml", "up"]
    assert steps(elsewhere) == "3"  # the project is here: no .env here


def test_what_compose_would_refuse_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no compose file in .* or a folder above it"):
        compose(["docker", "compose", "up"], tmp_path)
    nested = tmp_path / "deploy" / "sglang"
    nested.mkdir(parents=True)
    project(tmp_path, "sglang_official.yaml")
    assert compose(["docker-compose", "up"], nested, {"HOME": "/h"})[:2] == ["docker", "run"]
    with pytest.raises(InputError, match=r"has no service web \(it has sglang\)"):
        compose(["docker", "compose", "up", "web"], tmp_path)
    with pytest.raises(InputError, match="docker compose down does not start a server"):
        compose(["docker", "compose", "down"], tmp_path)
    with pytest.raises(InputError, match=r"^cannot read the launch command") as other:
        parse_launch(["docker", "exec", "sglang", "python3", *LAUNCH], [], "0.5.23")
    assert str(other.value.hint).endswith("; or `docker compose up` (its service's command)")
    (tmp_path / "compose.yaml").write_text("services:\n  sglang: [\n")
    with pytest.raises(InputError, match=r"compose.yaml: not YAML \(line 3\)"):
        compose(["docker", "compose", "up"], tmp_path)
    (tmp_path / "compose.yaml").write_text("services:\n  a:\n    extends: {service: b}\n")
    with pytest.raises(InputError, match="uses `extends`, which eaglebug does not read"):
        compose(["docker", "compose", "up"], tmp_path)


def test_a_compose_file_cannot_take_the_memory_or_the_time(tmp_path: Path) -> None:
    """YAML aliases make a 1 KiB file a tree of 10^9 values (a "billion laughs"); a huge file
    is not a compose file. Both end in one line, at once."""
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = "\n".join(lines) + "\nservices:\n  s:\n    command: *a8\n"
    (tmp_path / "compose.yaml").write_text(bomb)
    started = time.process_time()
    with pytest.raises(InputError, match=r"over 100,000 values in its services"):
        compose(["docker", "compose", "up"], tmp_path)
    assert time.process_time() - started < 10  # stopped by the count, not by the machine
    (tmp_path / "compose.yaml").write_text("# " + "x" * (1 << 20) + "\n")
    with pytest.raises(InputError, match=r"over 1 MiB, not a compose file"):
        compose(["docker", "compose", "up"], tmp_path)


def test_a_deeply_nested_file_is_one_line_not_a_crash(tmp_path: Path, sglang_0523: Path) -> None:
    """200,000 nested `[` (600 KB): libyaml's loader recursed on the C stack and the process
    died of SIGSEGV; read in a child process, so a crash fails this test, not the run."""
    depth = 200_000
    (tmp_path / "compose.yaml").write_text(
        "services:\n  s:\n    command: " + "[" * depth + "]" * depth + "\n"
    )
    run = ["preflight", "--sglang", str(sglang_0523), "--", "docker", "compose"]
    crashed = run_cli(*run, "--project-directory", str(tmp_path), "up")
    assert crashed.returncode == 2, crashed.stderr[-300:]
    assert crashed.stderr.splitlines() == [
        f"error: {tmp_path / 'compose.yaml'}: nested too deeply to be a compose file",
        "hint: check the compose file",
    ]


def test_a_fifo_named_as_a_compose_or_env_file_is_not_waited_on(
    tmp_path: Path, sglang_0523: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of a FIFO blocks until someone writes: refused as not a regular file (in a
    child process with a time limit, so a hang would fail this test, not the run)."""
    os.mkfifo(tmp_path / "compose.yaml")
    monkeypatch.chdir(tmp_path)
    run = ["preflight", "--sglang", str(sglang_0523), "--"]
    composed = run_cli(*run, "docker", "compose", "up")
    assert composed.returncode == 2
    assert composed.stderr.splitlines()[0] == (
        f"error: {tmp_path / 'compose.yaml'}: cannot read it (not a regular file)"
    )
    os.mkfifo(tmp_path / "server.env")
    docker = ["docker", "run", "--env-file", "server.env", "img", "python3", *LAUNCH]
    env_file = run_cli(*run, *docker, "--model-path", "m")
    assert env_file.returncode == 2
    assert "server.env: cannot read it (not a regular file)" in env_file.stderr.splitlines()[0]


def _models(here: Path) -> None:
    for name, config in (("kimi", kimi_k25()), ("eagle", kimi_k25_eagle3())):
        (here / "models" / name).mkdir(parents=True)
        (here / "models" / name / "config.json").write_text(json.dumps(config))


def test_preflight_of_a_compose_launch_reads_its_file_each_time(
    tmp_path: Path, sglang_0523: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path, as a user runs it: the models through the service's bind, the tensor
    parallelism from the project's .env; the .env edited, the answer is new (a kept one was
    for the old file); a required variable unset, one line and exit 2."""
    _models(tmp_path)
    (tmp_path / "compose.yaml").write_text(
        "services:\n"
        "  sglang:\n"
        "    image: lmsysorg/sglang:v0.5.23\n"
        "    volumes: [./models:/models]\n"
        "    entrypoint: [python3, -m, sglang.launch_server]\n"
        "    command: >\n"
        "      --model-path /models/kimi --speculative-algorithm EAGLE3\n"
        "      --speculative-draft-model-path /models/eagle --tp ${TP:?set TP} --trust-remote-code\n"
    )
    (tmp_path / ".env").write_text("TP=8\n")
    monkeypatch.chdir(tmp_path)
    run = ["preflight", "--sglang", str(sglang_0523), "--json", "--gpu-mem-gib", "141"]
    first = run_cli(*run, "--", "docker", "compose", "up")
    assert first.returncode in (0, 1), first.stderr
    answer = json.loads(first.stdout)
    assert answer["target"]["path"] == str(tmp_path / "models" / "kimi")
    assert answer["launch"]["server_args"]["tp_size"] == "8"
    assert answer["launch"]["wrappers"][0]["container"] == "docker"
    compose_yaml, dotenv = str(tmp_path / "compose.yaml"), str(tmp_path / ".env")
    assert answer["compose"] == {"service": "sglang", "files": [compose_yaml, dotenv]}
    text = run_cli(*[w for w in run if w != "--json"], "--", "docker", "compose", "up").stdout
    assert "runs through: compose service sglang (compose.yaml), as docker run · in " in text
    assert not [f for f in answer["findings"] if f["id"] == "config.tp_divisibility"]
    (tmp_path / ".env").write_text("TP=7\n")
    second = json.loads(run_cli(*run, "--", "docker", "compose", "up").stdout)
    assert second["launch"]["server_args"]["tp_size"] == "7"
    assert [f for f in second["findings"] if f["id"] == "config.tp_divisibility"]
    (tmp_path / ".env").unlink()
    missing = run_cli(*run, "--", "docker", "compose", "up")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.splitlines() == [
        f"error: {tmp_path / 'compose.yaml'}: TP is required: set TP",
        "hint: set TP (in the shell or the project's .env)",
    ]
    unnamed = run_cli("preflight", "--", "docker", "compose", "up")
    assert unnamed.returncode == 2
    assert "the launch runs in a container (docker compose)" in unnamed.stderr


def test_a_services_gpus_are_the_containers(tmp_path: Path) -> None:
    """The GPUs a service reserves become `--gpus`, so a launch's GPU count and memory are its
    own (`launch/devices.py`): niushuai1991's reserves one (`count: 1`), GLM-SGLANG's file says
    `gpus: all`, and ids or the list form of `gpus:` name GPUs of the host."""
    from eaglebug.checks.launch.devices import visible_gpus

    def gpus(fixture: str, text: str | None = None) -> list[str]:
        folder = tmp_path / fixture.replace(".", "_")
        folder.mkdir()
        if text is None:
            shutil.copy(FIXTURES / fixture, folder / "compose.yaml")
        else:
            (folder / "compose.yaml").write_text(text)
        words = compose(["docker", "compose", "up"], folder, {"HOME": "/h"})
        at = words.index("--gpus") if "--gpus" in words else None
        return [] if at is None else words[at : at + 2]

    assert gpus("nextn_speculative_folded.yaml") == ["--gpus", "1"]
    assert gpus("bash_c_block_literal.yaml") == ["--gpus", "all"]
    assert gpus("sglang_official.yaml") == ["--gpus", '"device=0"']  # SGLang's own: GPU 0
    service = """
services:
  sglang:
    image: lmsysorg/sglang
    command: python3 -m sglang.launch_server --model-path /m --tp 4
"""
    ids = (
        service
        + """    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["4", "5"]
              capabilities: [gpu]
"""
    )
    assert gpus("ids.yaml", ids) == ["--gpus", '"device=4,5"']
    listed = service + "    gpus:\n      - driver: nvidia\n        count: 2\n"
    assert gpus("listed.yaml", listed) == ["--gpus", "2"]
    both = ids.replace('device_ids: ["4", "5"]', 'device_ids: ["4"]\n              count: 1')
    assert gpus("both.yaml", both) == []  # compose refuses count with ids: not read
    folder = tmp_path / "ids_yaml"
    seen = visible_gpus(compose(["docker", "compose", "up"], folder, {"HOME": "/h"}), {})
    assert seen is not None and (seen.ids, seen.count) == (("4", "5"), 2)
    # an override file's memory limit merges into deploy: the GPUs stay
    (folder / "compose.override.yaml").write_text(
        "services:\n  sglang:\n    deploy:\n      resources:\n        limits:\n"
        "          memory: 64g\n"
    )
    words = compose(["docker", "compose", "up"], folder, {"HOME": "/h"})
    assert words[words.index("--gpus") + 1] == '"device=4,5"'
