"""The embedded default: the scratch SGLang tree, the stand-in server that runs it, the story.

The stand-in imports the scratch tree and runs a launch through it, so each crash here is a
real exception from that tree's code; fixing the tree (a real commit) or setting the env var
moves the story on exactly as it does on a real 0.5.9 box. Launches use the fast knob (about
a second to ready); every wait polls with a deadline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.logs.parse import analyze_file
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.cli.parser import main as cli_main
from eaglebug.demo import DemoScenario, memory_curve, memory_path, read_memory
from eaglebug.demo import scenario as scenario_module
from eaglebug.demo.memfile import DRIVER_IDLE_BYTES, PHASE_LOAD, MemoryBoard, load_curve
from eaglebug.gpu.simulated import SimulatedSource
from eaglebug.server.launcher import Server
from eaglebug.server.state import LaunchRecord, load_state, save_state
from tests import gitrepo
from tests.live import hermetic_demo_env, kill_launches, session_pids, wait_for

ENV_VAR = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
MISSING_SET_EAGLE3 = (
    "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute "
    "'set_eagle3_layers_to_capture'"
)
CONTEXT_REFUSAL = (
    "ValueError: Warning: Target model's context_length (262144) is greater than the derived "
    "context_length (131072)"
)
READY = "The server is fired up and ready to roll!"
SIGQUIT = "Received sigquit from a child process. It usually means the child failed."


def log_text(record: LaunchRecord) -> str:
    return Path(record.log).read_text(encoding="utf-8", errors="replace")


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    hermetic_demo_env(monkeypatch)


@pytest.fixture
def server(scenario: DemoScenario) -> Iterator[Server]:
    srv = Server(scenario.workdir)
    yield srv
    kill_launches(srv.workdir)


def launch_until_exit(server: Server, scenario: DemoScenario) -> tuple[LaunchRecord, int]:
    record = server.launch(scenario.launch_argv, scenario.env)
    wait_for(lambda: server.poll_exit(record) is not None, "the stand-in to exit")
    code = server.poll_exit(record)
    assert code is not None
    return record, code


def apply_fix(scenario: DemoScenario) -> None:
    words = ["fix", "--sglang", str(scenario.sglang_root), "--apply", "--"]
    assert cli_main([*words, *scenario.preflight_words]) == 0


# -- the scenario ---------------------------------------------------------------------------


def test_prepare_makes_a_clean_repository_with_the_tree_and_the_models(
    scenario: DemoScenario,
) -> None:
    repo = git.Repo(scenario.sglang_root)
    assert not repo.is_dirty(untracked_files=True)
    assert len(list(repo.iter_commits())) == 1
    assert repo.active_branch.name == "main"
    tracked = set(repo.git.ls_files().splitlines())
    assert "python/sglang/srt/models/kimi_k25.py" in tracked
    assert ".gitignore" in tracked
    target = json.loads((scenario.model_path / "config.json").read_text())
    assert target["architectures"] == ["KimiK25ForConditionalGeneration"]
    index = json.loads((scenario.model_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == 64
    draft = json.loads((scenario.draft_path / "config.json").read_text())
    assert draft["max_position_embeddings"] == 131072
    assert scenario.workdir.is_dir()
    assert not scenario.workdir.is_relative_to(scenario.sglang_root)


def test_launch_words_env_and_description(scenario: DemoScenario) -> None:
    argv = scenario.launch_argv
    assert argv[:3] == [sys.executable, "-m", "eaglebug.demo.standin_server"]
    assert argv[3:] == scenario.server_flags == scenario.preflight_words[3:]
    assert scenario.preflight_words[:3] == ["python", "-m", "sglang.launch_server"]
    assert "--speculative-algorithm" in argv and "EAGLE3" in argv and "8" in argv
    assert scenario.env["EAGLEBUG_DEMO_SGLANG"] == str(scenario.sglang_python)
    assert scenario.env["EAGLEBUG_DEMO_FAST"] == "1"
    text = scenario.describe()
    assert text.startswith("demo: simulated GPUs")
    assert "stand-in server" in text and str(scenario.sglang_root) in text


def test_open_reads_back_a_prepared_scenario(scenario: DemoScenario, tmp_path: Path) -> None:
    assert DemoScenario.open(scenario.root) == scenario
    with pytest.raises(InputError, match="no prepared demo"):
        DemoScenario.open(tmp_path)


def test_prepare_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        DemoScenario.prepare(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["something"]


def test_a_missing_tree_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scenario_module, "tree_candidates", lambda: [tmp_path / "nowhere"])
    with pytest.raises(InputError, match="examples/sglang-mini") as caught:
        DemoScenario.prepare(tmp_path / "demo")
    assert caught.value.hint is not None and "pip install -e ." in caught.value.hint
    assert not (tmp_path / "demo").exists() or not any((tmp_path / "demo").iterdir())
    monkeypatch.setenv(scenario_module.TREE_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match=scenario_module.TREE_ENV):
        DemoScenario.prepare(tmp_path / "demo")


def test_preflight_reports_the_three_launch_blockers(scenario: DemoScenario) -> None:
    index = TreeIndex(locate(str(scenario.sglang_root)))
    result = preflight(index, scenario.preflight_words, {}, None)
    errors = sorted((f.id, f.attribute) for f in result.findings if f.severity == "error")
    assert errors == [
        ("config.context_length", "max_position_embeddings"),
        ("interface.missing", "get_embed_and_head"),
        ("interface.missing", "set_eagle3_layers_to_capture"),
    ]
    with_env = preflight(index, scenario.preflight_words, {ENV_VAR: "1"}, None)
    assert [f.id for f in with_env.findings if f.severity == "error"] == [
        "interface.missing",
        "interface.missing",
    ]


# -- the story ------------------------------------------------------------------------------


def test_first_launch_crashes_in_the_trees_cuda_graph_runner(
    scenario: DemoScenario, server: Server
) -> None:
    record, code = launch_until_exit(server, scenario)
    text = log_text(record)
    assert code != 0
    assert MISSING_SET_EAGLE3 in text
    assert text.count("Scheduler hit an exception: Traceback (most recent call last):") == 8
    assert SIGQUIT in text
    # The way there: the target loaded, then CUDA graph capture began (and never ended).
    assert "Loading safetensors checkpoint shards: 100% Completed | 64/64" in text
    assert "Load weight end." in text and "KV Cache is allocated." in text
    assert "Capture cuda graph begin." in text and "Capture cuda graph end." not in text
    for rank in range(8):
        assert f" TP{rank}] Scheduler hit an exception" in text
    assert session_pids(record.pid) == set()
    report = read_memory(memory_path(record.log))
    assert report is not None and report.state == "exited"
    assert report.used_bytes == (0,) * 8


def test_the_log_reads_as_sglangs_to_eaglebugs_own_log_analysis(
    scenario: DemoScenario, server: Server
) -> None:
    record, _ = launch_until_exit(server, scenario)
    analysis = analyze_file(record.log)
    assert analysis.phase == "crashed" and analysis.crashed_during == "cuda_graph"
    findings = analysis.findings()
    assert [(f.id, f.attribute) for f in findings] == [
        ("log.missing_interface_method", "set_eagle3_layers_to_capture")
    ]
    progress = analysis.progress
    assert progress is not None and (progress.done, progress.total) == (64, 64)


def test_the_traceback_comes_from_the_scratch_trees_code(
    scenario: DemoScenario, server: Server
) -> None:
    record, _ = launch_until_exit(server, scenario)
    lines = log_text(record).splitlines()
    runner = str(scenario.sglang_python / "sglang/srt/model_executor/cuda_graph_runner.py")
    at = next(i for i, line in enumerate(lines) if line.startswith(f'  File "{runner}", line '))
    assert lines[at].endswith(", in __init__")
    assert lines[at + 1].strip() == "self.model_runner.model.set_eagle3_layers_to_capture()"
    # Nothing was written into the tree by running it.
    assert not git.Repo(scenario.sglang_root).is_dirty(untracked_files=True)


def test_a_marker_planted_in_the_tree_is_what_the_launch_raises(
    scenario: DemoScenario, server: Server
) -> None:
    kimi = scenario.sglang_python / "sglang/srt/models/kimi_k25.py"
    source = kimi.read_text()
    planted = source.replace(
        "    def load_weights(self, weights: Any) -> int:",
        "    def set_eagle3_layers_to_capture(self, layer_ids: Any = None) -> None:\n"
        '        raise RuntimeError("marker 7f3a planted in the scratch tree")\n\n'
        "    def load_weights(self, weights: Any) -> int:",
    )
    assert planted != source
    kimi.write_text(planted)
    record, code = launch_until_exit(server, scenario)
    text = log_text(record)
    assert code != 0
    assert "RuntimeError: marker 7f3a planted in the scratch tree" in text
    assert f'File "{kimi}"' in text
    assert "has no attribute 'set_eagle3_layers_to_capture'" not in text


def test_after_fix_apply_the_next_launch_crashes_on_the_context_length(
    scenario: DemoScenario, server: Server
) -> None:
    launch_until_exit(server, scenario)  # the first crash
    apply_fix(scenario)
    repo = git.Repo(scenario.sglang_root)
    assert len(list(repo.iter_commits())) == 2
    assert gitrepo.changed_files(scenario.sglang_root) == ["python/sglang/srt/models/kimi_k25.py"]
    assert not repo.is_dirty(untracked_files=True)
    record, code = launch_until_exit(server, scenario)
    text = log_text(record)
    assert code != 0
    assert CONTEXT_REFUSAL in text
    assert "object has no attribute" not in text
    assert "Capture cuda graph end." in text  # the whole target loaded first, as on a real box
    model_config = scenario.sglang_python / "sglang/srt/configs/model_config.py"
    assert f'File "{model_config}"' in text
    assert SIGQUIT in text


def test_with_the_env_var_pending_the_next_launch_is_ready(
    scenario: DemoScenario, server: Server
) -> None:
    apply_fix(scenario)
    state = load_state(scenario.workdir)
    state.pending_env = {ENV_VAR: "1"}
    save_state(scenario.workdir, state)
    record = server.launch(scenario.launch_argv, scenario.env)
    assert record.env_additions[ENV_VAR] == "1"
    wait_for(lambda: READY in log_text(record), "the server to be ready")
    text = log_text(record)
    assert "Scheduler hit an exception" not in text
    assert "Warning: Target model's context_length (262144) is greater than" in text
    assert "type=LlamaForCausalLMEagle3" in text and "Capture draft cuda graph end." in text
    assert server.attached() is not None
    report = read_memory(memory_path(record.log))
    assert report is not None and report.state == "ready" and report.pid == record.pid
    assert len(report.used_bytes) == 8 and min(report.used_bytes) > 100 * 2**30
    assert max(report.used_bytes) < report.total_bytes
    result = server.stop(record, grace_s=5.0)
    assert result.survivors == () and result.killed == ()
    assert session_pids(record.pid) == set()
    stopped = read_memory(memory_path(record.log))
    assert stopped is not None and stopped.state == "exited" and stopped.used_bytes == (0,) * 8


def test_stop_while_loading_ends_it_at_once(scenario: DemoScenario, server: Server) -> None:
    slow = {**scenario.env, "EAGLEBUG_DEMO_FAST": "0", "EAGLEBUG_DEMO_SECONDS": "40"}
    record = server.launch(scenario.launch_argv, slow)
    path = memory_path(record.log)

    def loading() -> bool:
        report = read_memory(path)
        return report is not None and report.phase == "loading"

    wait_for(loading, "the weights to start loading")
    result = server.stop(record, grace_s=5.0)
    # SIGTERM ended it (nothing needed SIGKILL) while it was loading: the load never finished,
    # so it did not run out the 40 s load first, and its memory was released.
    assert result.survivors == () and result.killed == ()
    assert record.pid in result.terminated
    text = log_text(record)
    assert "Load weight begin." in text
    assert "Load weight end." not in text
    assert "| 64/64" not in text
    report = read_memory(path)
    assert report is not None and report.state == "exited"
    assert report.used_bytes == (0,) * len(report.used_bytes)


def test_memory_rises_while_the_shards_load(scenario: DemoScenario, server: Server) -> None:
    slow = {**scenario.env, "EAGLEBUG_DEMO_FAST": "0", "EAGLEBUG_DEMO_SECONDS": "12"}
    record = server.launch(scenario.launch_argv, slow)
    path = memory_path(record.log)
    seen: list[int] = []

    def risen_three_times() -> bool:
        report = read_memory(path)
        loading = report is not None and report.phase == "loading"
        if report is not None and loading and (not seen or report.used_bytes[0] > seen[-1]):
            seen.append(report.used_bytes[0])
        return len(seen) >= 3

    wait_for(risen_three_times, "memory to rise during loading")
    assert seen == sorted(seen)
    assert "Loading safetensors checkpoint shards:" in log_text(record)
    server.stop(record, grace_s=5.0)


# -- the stand-in on its own ----------------------------------------------------------------


def test_standin_without_a_tree_is_a_usage_error(scenario: DemoScenario) -> None:
    run = subprocess.run(
        scenario.launch_argv, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: EAGLEBUG_DEMO_SGLANG is not set")
    assert "hint: " in run.stderr


def test_standin_parses_flags_with_the_trees_own_parser(scenario: DemoScenario) -> None:
    run = subprocess.run(
        [*scenario.launch_argv, "--no-such-flag"],
        env={**os.environ, **scenario.env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in run.stderr


def test_memory_board_and_curve(tmp_path: Path) -> None:
    path = tmp_path / "launch.log.mem.json"
    current: list[Path | None] = [None]
    curve = memory_curve(lambda: current[0])
    assert curve(0, 0.0) == DRIVER_IDLE_BYTES
    board = MemoryBoard(path, gpus=2, total_bytes=10 * 2**30, min_interval_s=0.0)
    board.add(1, 3 * 2**30, "loading")
    current[0] = path
    assert curve(0, 1.0) == DRIVER_IDLE_BYTES
    assert curve(1, 1.0) == DRIVER_IDLE_BYTES + 3 * 2**30
    assert curve(5, 1.0) == DRIVER_IDLE_BYTES  # not one of the server's GPUs
    board.finish("exited", "exited")
    report = read_memory(path)
    assert report is not None and report.used_bytes == (0, 0) and report.state == "exited"
    path.write_text("{half a file")
    assert read_memory(path) is None
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


def test_a_new_board_writes_at_once_whatever_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first write is never held back by the interval: on a machine booted minutes ago
    (`time.monotonic()` small) a board that writes sizes once an hour still writes its first."""
    monkeypatch.setattr("eaglebug.demo.memfile.time.monotonic", lambda: 60.0)
    path = tmp_path / "launch.log.mem.json"
    board = MemoryBoard(path, gpus=2, total_bytes=10 * 2**30, min_interval_s=3600.0)
    board.add(1, 2**30)
    report = read_memory(path)
    assert report is not None and report.used_bytes == (0, 2**30)
    board.add(1, 2**30)  # a size within the interval: not written yet
    report = read_memory(path)
    assert report is not None and report.used_bytes == (0, 2**30)


def test_the_simulated_gpus_are_as_busy_as_the_standins_phase(tmp_path: Path) -> None:
    """The demo's GPUs as `tui.demo.demo_gpus` builds them, over the file the stand-in's
    board writes: idle, then loading, the KV cache, capture (busy) and serving (busy)."""
    path = tmp_path / "launch.log.mem.json"
    current: list[Path | None] = [None]
    now = [0.0]
    gpus = SimulatedSource(
        gpus=2,
        total_bytes=10 * 2**30,
        curve=memory_curve(lambda: current[0]),
        load=load_curve(lambda: current[0]),
        processes=False,
        clock=lambda: now[0],
    )

    def utilisation(seconds: int = 12) -> list[int]:
        """Each GPU's utilisation once a second for a while (the sampler's clock)."""
        seen = []
        for _ in range(seconds):
            now[0] += 1.0
            seen += [gpu.utilization_pct or 0 for gpu in gpus.sample().gpus]
        return seen

    assert set(utilisation()) == {0}  # no launch yet
    # Sizes are written at most once an hour here; a new phase is written at once.
    board = MemoryBoard(path, gpus=2, total_bytes=10 * 2**30, min_interval_s=3600.0)
    current[0] = path
    for phase in ("launching", "loading", "kv_cache", "cuda_graph"):
        board.add(0, 0, phase)  # a step starts (the stand-in says so before its first byte)
        low, high = PHASE_LOAD[phase]
        seen = utilisation()
        assert round(100 * low) <= min(seen) and max(seen) <= round(100 * high), phase
        assert len(set(seen)) > 1 or high == low, phase  # it moves, as a real GPU's does
    assert min(seen) >= 85  # capturing CUDA graphs: busy
    board.finish("ready", "ready")
    assert min(utilisation()) >= 55  # serving
    board.finish("exited", "exited")
    assert set(utilisation()) == {0}
