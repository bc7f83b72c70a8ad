"""The start-up order: which step of SGLang's start-up each finding would stop it at.

Synthetic trees pin each shape the walk follows (a process target handed on, a constructor,
the MRO of `self`, `super()`, the workers `create_worker` returns, an override that does
nothing); the real releases pin the order itself, as each release's own code gives it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from eaglebug.checks.contract.findings import Step, sort_findings
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.checks.startup.receivers import _uses_runner
from eaglebug.checks.startup.steps import Place, step_at, step_text, trace_for
from eaglebug.checks.startup.trace import StartupTrace
from tests.synthetic import audit_tree, findings_for, line_of, write_tree
from tests.test_preflight import LAUNCH, cli, kimi_k25, kimi_k25_eagle3, pair, spec_pair

__all__ = ["cli"]  # the CLI fixture, shared with the preflight tests

LAUNCHER = """
from sglang.srt.entrypoints.http_server import launch_server
from sglang.srt.server_args import prepare_server_args

if __name__ == "__main__":
    server_args = prepare_server_args([])
    launch_server(server_args)
"""
SERVER_ARGS = """
class ServerArgs:
    def __post_init__(self):
        self.check_speculative()

    def check_speculative(self):
        if self.speculative_eagle_topk > 1 and self.page_size > 1:
            raise ValueError("topk > 1 needs page size 1")  # ARGCHECK


def prepare_server_args(argv):
    return ServerArgs()
"""
HTTP_SERVER = """
import multiprocessing as mp
import threading

from sglang.srt.managers.scheduler import run_scheduler_process


def launch_server(server_args, run_scheduler_process_func=run_scheduler_process):
    proc = mp.Process(target=run_scheduler_process_func, args=(server_args,))
    proc.start()
    thread = threading.Thread(target=_wait_and_warmup, args=(server_args,))
    thread.start()


def _wait_and_warmup(server_args):
    send_generate_request(server_args)  # WARMUP
"""
SCHEDULER = """
from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.model_executor.model_config import ModelConfig
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class Scheduler:
    def __init__(self, server_args):
        self.spec_algorithm = SpeculativeAlgorithm.from_string(server_args.speculative_algorithm)
        self.tp_worker = TpModelWorker(server_args)
        DraftWorkerClass = self.spec_algorithm.create_worker(server_args)
        self.draft_worker = DraftWorkerClass(server_args, target_worker=self.tp_worker)

    def event_loop_normal(self):
        while True:
            self.draft_worker.forward_batch_generation(None)


def run_scheduler_process(server_args):
    scheduler = Scheduler(server_args)
    scheduler.event_loop_normal()
"""
TP_WORKER = """
from sglang.srt.model_executor.model_config import ModelConfig
from sglang.srt.model_executor.model_runner import ModelRunner


class TpModelWorker:
    def __init__(self, server_args, is_draft_worker=False):
        self.model_config = ModelConfig.from_server_args(server_args, is_draft_worker)
        self.model_runner = ModelRunner(server_args, is_draft_worker)
"""
MODEL_CONFIG = """
class ModelConfig:
    def __init__(self, is_draft):
        self._derive_context_length(is_draft)

    def _derive_context_length(self, is_draft):
        if is_draft:
            raise ValueError("the draft's context is shorter")  # CONTEXT

    @classmethod
    def from_server_args(cls, server_args, is_draft):
        return cls(is_draft)
"""
MODEL_RUNNER = """
class ModelRunner:
    def __init__(self, server_args, is_draft_worker=False):
        self.init_torch_distributed()
        self.load_model()
        self.init_memory_pool()
        self.init_attention_backend()
        self.init_cuda_graphs()

    def init_torch_distributed(self):
        pass

    def load_model(self):
        self.model = get_model()
        if self.eagle_use_aux_hidden_state:
            self.model.set_eagle3_layers_to_capture([1, 2])  # CAPTURE

    def init_memory_pool(self):
        pass

    def init_attention_backend(self):
        pass

    def init_cuda_graphs(self):
        pass
"""
EAGLE_WORKER = """
from sglang.srt.managers.tp_worker import TpModelWorker


class EAGLEWorker(TpModelWorker):
    def __init__(self, server_args, target_worker):
        self.target_worker = target_worker
        super().__init__(server_args, is_draft_worker=True)
        self.init_lm_head()

    def init_lm_head(self):
        embed, head = self.target_worker.model_runner.model.get_embed_and_head()  # HEAD
        self.model_runner.model.set_embed_and_head(embed, head)

    def forward_batch_generation(self, batch):
        return self.target_worker.model_runner.model.verify_only(batch)  # SERVE
"""
EAGLE_WORKER_V2 = """
from sglang.srt.speculative.eagle_worker import EAGLEWorker


class EAGLEWorkerV2(EAGLEWorker):
    pass
"""
STANDALONE = """
from sglang.srt.speculative.eagle_worker import EAGLEWorker


class StandaloneWorker(EAGLEWorker):
    def init_lm_head(self):
        pass  # the standalone draft keeps its own head: the path to get_embed_and_head ends here
"""
STANDALONE_V2 = """
from sglang.srt.speculative.standalone_worker import StandaloneWorker


class StandaloneWorkerV2(StandaloneWorker):
    pass
"""
MODEL = """
import torch.nn as nn


class Wrapper(nn.Module):
    def forward(self, x):
        return x
"""
EW = "sglang/srt/speculative/eagle_worker.py"
MR = "sglang/srt/model_executor/model_runner.py"


@pytest.fixture()
def startup_tree(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path,
        {
            "sglang/launch_server.py": LAUNCHER,
            "sglang/srt/server_args.py": SERVER_ARGS,
            "sglang/srt/entrypoints/http_server.py": HTTP_SERVER,
            "sglang/srt/managers/scheduler.py": SCHEDULER,
            "sglang/srt/managers/tp_worker.py": TP_WORKER,
            "sglang/srt/model_executor/model_config.py": MODEL_CONFIG,
            "sglang/srt/model_executor/model_runner.py": MODEL_RUNNER,
            EW: EAGLE_WORKER,
            "sglang/srt/speculative/eagle_worker_v2.py": EAGLE_WORKER_V2,
            "sglang/srt/speculative/standalone_worker.py": STANDALONE,
            "sglang/srt/speculative/standalone_worker_v2.py": STANDALONE_V2,
            "sglang/srt/models/wrapper.py": MODEL,
        },
    )


def _trace(root: Path, algorithm: str) -> tuple[TreeIndex, StartupTrace]:
    index = TreeIndex(locate(str(root)), use_cache=False)
    trace = trace_for(index, algorithm)
    assert trace is not None
    return index, trace


def _names(trace: StartupTrace) -> list[tuple[str, str]]:
    """The milestones in the order they begin, each (name, role) once."""
    return list(dict.fromkeys((s.name, s.role) for s in sorted(trace.spans, key=lambda s: s.start)))


def _at(
    root: Path, index: TreeIndex, trace: StartupTrace, rel: str, marker: str, role: str
) -> Step | None:
    return step_at(index, trace, Place(rel, line_of(root, rel, marker), role))


def test_the_walk_follows_the_launcher_into_the_workers_in_source_order(startup_tree: Path) -> None:
    _, trace = _trace(startup_tree, "EAGLE3")
    assert _names(trace) == [
        ("arguments", "target"),
        ("distributed_init", "target"),
        ("target_load", "target"),
        ("kv_pools", "target"),
        ("attention_backends", "target"),
        ("cuda_graphs", "target"),
        ("distributed_init", "draft"),  # the draft worker, from create_worker, in the draft role
        ("draft_load", "draft"),
        ("kv_pools", "draft"),
        ("attention_backends", "draft"),
        ("cuda_graphs", "draft"),
        ("lm_head", "draft"),
        ("serving", "target"),  # the event loop, after the scheduler is built
        ("warmup", "target"),  # the thread the launcher starts after the scheduler process
    ]


def test_each_place_gets_the_step_it_runs_in_and_the_loads_before_it(startup_tree: Path) -> None:
    index, trace = _trace(startup_tree, "EAGLE3")
    root = startup_tree
    argcheck = _at(root, index, trace, "sglang/srt/server_args.py", "ARGCHECK", "target")
    assert argcheck is not None and (argcheck.name, argcheck.within, argcheck.after) == (
        "arguments",
        True,
        (),
    )
    capture = _at(root, index, trace, MR, "CAPTURE", "target")
    assert capture is not None and (capture.name, capture.role, capture.after) == (
        "target_load",
        "target",
        (),
    )
    # The draft's config check runs in a file the walk never enters (it does not touch the
    # model): it runs when the draft worker first names its class, after the target's load.
    context = _at(
        root, index, trace, "sglang/srt/model_executor/model_config.py", "CONTEXT", "draft"
    )
    assert context is not None
    assert (context.name, context.role, context.within, context.after) == (
        "distributed_init",
        "draft",
        False,
        ("target",),
    )
    head = _at(root, index, trace, EW, "HEAD", "draft")
    assert head is not None and (head.name, head.role, head.within, head.after) == (
        "lm_head",
        "draft",
        True,
        ("target", "draft"),
    )
    assert "after the target and draft weight loads" in step_text(head)
    assert argcheck.order < capture.order < context.order < head.order


def test_a_method_only_the_event_loop_calls_is_not_part_of_the_start_up(
    startup_tree: Path,
) -> None:
    index, trace = _trace(startup_tree, "EAGLE3")
    serve = _at(startup_tree, index, trace, EW, "SERVE", "draft")
    # forward_batch_generation is named by the event loop: the step is serving, after both loads.
    assert serve is not None and serve.name == "serving" and serve.after == ("target", "draft")


def test_an_override_that_does_nothing_cuts_the_path(startup_tree: Path) -> None:
    """STANDALONE's worker overrides init_lm_head with `pass`: the call to get_embed_and_head in
    the base class never runs in the start-up (and is not placed by its name either)."""
    index, trace = _trace(startup_tree, "STANDALONE")
    assert _at(startup_tree, index, trace, EW, "HEAD", "draft") is None
    assert ("draft_load", "draft") in _names(trace)  # the worker itself was walked


def test_without_speculative_decoding_no_draft_is_started(startup_tree: Path) -> None:
    _, trace = _trace(startup_tree, "NONE")
    assert all(role == "target" for _, role in _names(trace))
    assert ("target_load", "target") in _names(trace)


def test_a_tree_without_a_launcher_gives_no_steps(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"sglang/srt/models/wrapper.py": MODEL})
    index = TreeIndex(locate(str(root)), use_cache=False)
    assert trace_for(index, "EAGLE3") is None


def test_audit_findings_carry_their_step_and_sort_by_it(startup_tree: Path) -> None:
    result = audit_tree(startup_tree, "Wrapper", "EAGLE3")
    capture = findings_for(result, "set_eagle3_layers_to_capture")[0]
    head = findings_for(result, "get_embed_and_head")[0]
    assert capture.step is not None and capture.step.name == "target_load"
    assert head.step is not None and head.step.name == "lm_head"
    ordered = [f.attribute for f in sort_findings(list(result.findings))]
    assert ordered.index("set_eagle3_layers_to_capture") < ordered.index("get_embed_and_head")
    data = head.to_json()["step"]
    assert data["name"] == "lm_head" and data["after_loads"] == ["target", "draft"]


def test_the_trace_is_a_tree_answer(
    startup_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = TreeIndex(locate(str(startup_tree)))
    cold = trace_for(first, "EAGLE3")
    first.save()
    second = TreeIndex(locate(str(startup_tree)))
    assert second.answers.has("startup:EAGLE3")
    warm = trace_for(second, "EAGLE3")
    assert cold is not None and warm is not None and warm.spans == cold.spans


# -- the real releases ----------------------------------------------------------------------
def _first(trace: StartupTrace, name: str, role: str) -> int:
    return min(s.start for s in trace.spans if s.name == name and s.role == role)


@pytest.mark.parametrize("release", ["sglang_059", "sglang_0514", "sglang_0522", "sglang_0523"])
def test_each_release_starts_in_its_own_order(release: str, request: pytest.FixtureRequest) -> None:
    root: Path = request.getfixturevalue(release)
    index = TreeIndex(locate(str(root)), use_cache=False)
    trace = trace_for(index, "EAGLE3")
    assert trace is not None
    first = {
        key: _first(trace, *key) for key in dict.fromkeys((s.name, s.role) for s in trace.spans)
    }
    # Every release: arguments, then the target's distributed init and load, then the draft's.
    assert first[("arguments", "target")] < first[("distributed_init", "target")]
    assert first[("distributed_init", "target")] < first[("target_load", "target")]
    assert first[("target_load", "target")] < first[("draft_load", "draft")]
    assert first[("draft_load", "draft")] < first[("cuda_graphs", "draft")]
    assert first[("target_load", "target")] < first[("kv_pools", "target")]
    assert max(first.values()) in (first[("warmup", "target")], first.get(("serving", "target")))


def test_0509_sizes_the_targets_pools_before_the_draft_loads_and_0523_after(
    sglang_059: Path, sglang_0523: Path
) -> None:
    """0.5.9's ModelRunner sizes its own pools right after its load; 0.5.23's scheduler loads
    both models first and then sizes the pools (init_memory_pools): the trace reads which."""
    old = trace_for(TreeIndex(locate(str(sglang_059)), use_cache=False), "EAGLE3")
    new = trace_for(TreeIndex(locate(str(sglang_0523)), use_cache=False), "EAGLE3")
    assert old is not None and new is not None
    assert _first(old, "kv_pools", "target") < _first(old, "draft_load", "draft")
    assert _first(new, "kv_pools", "target") > _first(new, "draft_load", "draft")


def kimi_tp8_launch(tmp_path: Path) -> tuple[str, ...]:
    """Kimi-K2.5 with its EAGLE3 draft at --tp 8, the checkpoints' indexes saying 120 GiB and
    1 GiB a GPU: the launch whose findings the start-up order places."""
    target, draft = pair(tmp_path, kimi_k25(), kimi_k25_eagle3())
    sizes = {target: 8 * 120 * 1024**3, draft: 8 * 1024**3}
    for folder, size in sizes.items():
        index = {"metadata": {"total_size": size}, "weight_map": {}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return (*LAUNCH, *spec_pair(target, draft), "--tp", "8", "--trust-remote-code")


def test_seed_preflight_lists_the_findings_in_start_up_order_with_their_cost(
    sglang_059: Path, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    words = kimi_tp8_launch(tmp_path)
    code, out, err = cli(
        "preflight", "--sglang", str(sglang_059), "--gpu-mem-gib", "141", "--json", "--", *words
    )
    assert code == 1, err
    findings = [f for f in json.loads(out)["findings"] if f["severity"] == "error" and f["step"]]
    by_name = {f["attribute"]: f["step"] for f in findings}
    capture = by_name["set_eagle3_layers_to_capture"]
    context = by_name["max_position_embeddings"]
    head = by_name["get_embed_and_head"]
    # 0.5.9: the target's CUDA graphs ask for the capture layers before the draft worker starts;
    # the draft's ModelConfig refuses the context before the draft loads; the lm head is shared
    # after both loads.
    assert capture["after_loads"] == ["target"] and capture["loaded_bytes_per_gpu"] == 120 * 1024**3
    assert context["role"] == "draft" and context["after_loads"] == ["target"]
    assert head["name"] == "lm_head" and head["after_loads"] == ["target", "draft"]
    assert head["loaded_bytes_per_gpu"] == 121 * 1024**3
    orders = [f["step"]["order"] for f in findings]
    assert orders == sorted(orders)
    code, text, _ = cli(
        "preflight", "--sglang", str(sglang_059), "--gpu-mem-gib", "141", "--", *words
    )
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("in start-up order")))
    listed = lines[start + 1 : lines.index("", start)]

    def at(name: str) -> int:
        return next(i for i, line in enumerate(listed) if f" {name} " in line)

    capture_line, context_line, head_line = (
        at("set_eagle3_layers_to_capture"),
        at("config.context_length"),
        at("get_embed_and_head"),
    )
    assert capture_line < context_line < head_line
    assert "120.0 GiB per GPU" in listed[capture_line]
    assert "121.0 GiB per GPU" in listed[head_line]
    # The KV pools are sized (0.5.9: in the target's ModelRunner) before its CUDA graphs.
    assert at("config.memory") < capture_line and "KV pools" in listed[at("config.memory")]


def test_0523_places_the_kv_budget_after_both_loads_through_the_workers_runner_property(
    sglang_0523: Path, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """0.5.23's TpModelWorker hands its runner out through a property (`model_runner` returns
    `self._model_runner`): the walk follows it into ModelRunner.alloc_memory_pool and the
    KV-cache configurator, so a fraction too small for the weights is placed at the KV pools,
    after the target's and the draft's loads, with both loads' cost."""
    words = kimi_tp8_launch(tmp_path)
    flags = ("--sglang", str(sglang_0523), "--gpu-mem-gib", "141", "--json", "--")
    code, out, err = cli("preflight", *flags, *words, "--mem-fraction-static", "0.5")
    assert code == 1, err
    memory = next(f for f in json.loads(out)["findings"] if f["id"] == "config.memory")
    assert memory["severity"] == "error", memory["message"]
    step = memory["step"]
    assert step["name"] == "kv_pools" and step["after_loads"] == ["target", "draft"]
    assert step["loaded_bytes_per_gpu"] == 121 * 1024**3


@pytest.mark.parametrize(
    ("source", "uses"),
    [
        (b"self.model_runner.forward()", True),  # at the file's first byte
        (b"x = 1\n    self.tp_worker = w\n", True),
        (b"(self.draft_worker)", True),
        (b"return self.target_worker\n", True),
        (b"myself.model_runner = 1\n", False),  # `self` must be a whole word
        (b"_self.model_runner = 1\n", False),
        (b"self.model_runner_config = 1\n", False),  # and the attribute too
        (b"myself.model_runner; self.tp_worker", True),  # a later match still counts
        (b"self . model_runner", False),
    ],
)
def test_a_file_uses_a_runner_where_self_is_a_whole_word(source: bytes, uses: bool) -> None:
    assert _uses_runner(source) is uses
