"""The GPU layer: NVML through a stand-in module, psutil through a stand-in process table,
the simulated source on an injected clock, and the sampler stepped by hand (no sleeps)."""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import FrozenInstanceError

import psutil
import pynvml  # type: ignore[import-untyped]
import pytest

from eaglebug.gpu import (
    MIN_INTERVAL_S,
    BoxSnapshot,
    GpuProcess,
    GpuSnapshot,
    GpuSource,
    NvmlSource,
    Sampler,
    SimulatedSource,
    keyframe_curve,
    sglang_role,
)
from eaglebug.gpu.nvml import smallest_gpu_memory
from eaglebug.gpu.processes import inspect_process
from tests.fake_nvml import (
    GIB,
    FakeGpu,
    FakeNvml,
    NVMLError_DriverNotLoaded,
    NVMLError_LibraryNotFound,
    NVMLError_NoPermission,
    NVMLError_Timeout,
    NVMLError_Unknown,
    ProcessInfo,
    eight_gpus,
)

ProcessEntry = tuple[str, list[str]] | type[Exception]


class FakeClock:
    def __init__(self, now_s: float = 1000.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


@pytest.fixture
def procs(monkeypatch: pytest.MonkeyPatch) -> dict[int, ProcessEntry]:
    """A process table that psutil.Process reads instead of /proc: pid -> (name, cmdline), or
    the exception every read raises; pids not in it do not exist."""
    table: dict[int, ProcessEntry] = {}

    class FakeProcess:
        def __init__(self, pid: int) -> None:
            if pid not in table:
                raise psutil.NoSuchProcess(pid)
            self.pid = pid

        def oneshot(self) -> contextlib.AbstractContextManager[None]:
            return contextlib.nullcontext()

        def _entry(self) -> tuple[str, list[str]]:
            entry = table[self.pid]
            if isinstance(entry, type):
                raise entry(self.pid)
            return entry

        def name(self) -> str:
            return self._entry()[0]

        def cmdline(self) -> list[str]:
            return self._entry()[1]

    monkeypatch.setattr(psutil, "Process", FakeProcess)
    for rank in range(8):
        title = f"sglang::scheduler_TP{rank}"
        table[1000 + rank] = (title[:15], [title, "", ""])
    return table


def launch_argv() -> list[str]:
    return ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8"]


# -- NVML: normal sampling ----------------------------------------------------------------
def test_eight_gpus_are_sampled_with_every_field(procs: dict[int, ProcessEntry]) -> None:
    nvml = FakeNvml()
    nvml.gpus[3].name = b"NVIDIA H200"  # older pynvml returned bytes
    source = NvmlSource(nvml)
    box = source.sample()

    assert box.unavailable is None and box.unsupported == frozenset()
    assert [gpu.index for gpu in box.gpus] == list(range(8))
    gpu = box.gpus[3]
    assert gpu == GpuSnapshot(
        index=3,
        name="NVIDIA H200",
        uuid="GPU-fake-3",
        used_bytes=73 * GIB,
        total_bytes=141 * GIB,
        utilization_pct=53,
        temperature_c=43,
        power_mw=303_000,
        state="ok",
    )
    assert gpu.used_fraction == pytest.approx(73 / 141)
    assert [(p.pid, p.gpu_index, p.role) for p in box.processes] == [
        (1000 + i, i, f"scheduler_TP{i}") for i in range(8)
    ]
    assert box.processes_on(5)[0].used_bytes == 75 * GIB - GIB // 2
    assert box.processes[0].cmdline == ("sglang::scheduler_TP0",)  # title padding dropped
    assert source.describe() == "NVML"
    with pytest.raises(FrozenInstanceError):
        gpu.used_bytes = 0  # type: ignore[misc]


def test_nvml_starts_lazily_once_and_close_shuts_it_down(procs: dict[int, ProcessEntry]) -> None:
    nvml = FakeNvml()
    source = NvmlSource(nvml)
    assert nvml.count("nvmlInit") == 0  # nothing happens before the first sample
    source.sample()
    source.sample()
    assert nvml.count("nvmlInit") == 1 and nvml.initialised == 1
    source.close()
    assert nvml.count("nvmlShutdown") == 1 and nvml.initialised == 0
    assert len(source.sample().gpus) == 8  # sampling after close starts NVML again
    assert nvml.count("nvmlInit") == 2


def test_slow_fields_are_cached(procs: dict[int, ProcessEntry]) -> None:
    clock = FakeClock()
    nvml = FakeNvml()
    source = NvmlSource(nvml, static_ttl_s=30.0, clock=clock)
    for _ in range(5):
        source.sample()
        clock.advance(1.0)
    assert nvml.count("nvmlDeviceGetName", 0) == 1
    assert nvml.count("nvmlDeviceGetUUID", 7) == 1
    assert nvml.count("nvmlDeviceGetHandleByIndex", 2) == 1
    assert nvml.count("nvmlDeviceGetCount") == 1
    assert nvml.count("nvmlDeviceGetMemoryInfo", 0) == 5  # memory is read every time
    clock.advance(30.0)
    source.sample()
    assert nvml.count("nvmlDeviceGetCount") == 2  # the count is re-read after its TTL


# -- NVML: no library, no driver ------------------------------------------------------------
@pytest.mark.parametrize("error", [NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded])
def test_no_driver_is_a_state_not_an_exception(error: type[Exception]) -> None:
    nvml = FakeNvml(init_error=error)
    source = NvmlSource(nvml)
    box = source.sample()
    assert box.gpus == () and box.processes == ()
    assert box.unavailable == f"no NVIDIA driver on this host ({error()})"
    assert source.sample().unavailable == box.unavailable
    assert nvml.count("nvmlInit") == 1  # not retried every second
    source.close()
    assert nvml.count("nvmlShutdown") == 0  # never started, nothing to shut down
    assert smallest_gpu_memory(nvml) is None


def test_missing_pynvml_module_is_a_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    box = NvmlSource().sample()
    assert box.gpus == ()
    assert box.unavailable is not None and "nvidia-ml-py is not installed" in box.unavailable


def test_real_pynvml_never_raises_here() -> None:
    """On this host, GPUs or not, the real module gives a snapshot: GPUs or a reason."""
    source = NvmlSource(with_processes=False)
    try:
        box = source.sample()
    finally:
        source.close()
    assert box.gpus or box.unavailable


# -- NVML: fields a GPU cannot give ---------------------------------------------------------
def test_unsupported_field_is_na_reported_once_and_not_asked_again(
    procs: dict[int, ProcessEntry], caplog: pytest.LogCaptureFixture
) -> None:
    nvml = FakeNvml()
    nvml.gpus[2].unsupported.add("nvmlDeviceGetPowerUsage")
    source = NvmlSource(nvml)
    with caplog.at_level(logging.INFO, logger="eaglebug.gpu.nvml_source"):
        first = source.sample()
        second = source.sample()

    for box in (first, second):
        assert box.gpus[2].power_mw is None and box.gpus[2].state == "ok"
        assert box.gpus[2].used_bytes == 72 * GIB  # the rest of that GPU is still read
        assert box.gpus[3].power_mw == 303_000  # other GPUs are unaffected
        assert box.unsupported == {(2, "power_mw")}
        assert box.is_unsupported(2, "power_mw") and not box.is_unsupported(3, "power_mw")
    assert nvml.count("nvmlDeviceGetPowerUsage", 2) == 1
    assert nvml.count("nvmlDeviceGetPowerUsage", 3) == 2
    reports = [r for r in caplog.records if "power_mw" in r.getMessage()]
    assert len(reports) == 1 and "GPU 2" in reports[0].getMessage()


def test_memory_not_supported_marks_used_and_total(procs: dict[int, ProcessEntry]) -> None:
    nvml = FakeNvml()
    nvml.gpus[0].unsupported.add("nvmlDeviceGetMemoryInfo")  # as on some integrated GPUs
    box = NvmlSource(nvml).sample()
    assert (box.gpus[0].used_bytes, box.gpus[0].total_bytes) == (0, 0)
    assert {(0, "used_bytes"), (0, "total_bytes")} <= box.unsupported
    assert box.gpus[0].used_fraction == 0.0


def test_passing_error_is_na_for_one_sample_only(procs: dict[int, ProcessEntry]) -> None:
    nvml = FakeNvml()
    nvml.gpus[4].errors["nvmlDeviceGetTemperature"] = NVMLError_Timeout
    source = NvmlSource(nvml)
    box = source.sample()
    assert box.gpus[4].temperature_c is None and box.gpus[4].state == "ok"
    assert box.unsupported == frozenset()  # not "unsupported": it will be asked again
    del nvml.gpus[4].errors["nvmlDeviceGetTemperature"]
    assert source.sample().gpus[4].temperature_c == 44


# -- NVML: a GPU lost mid-run -----------------------------------------------------------------
@pytest.mark.parametrize("how", ["gpu_is_lost", "unknown"])
def test_lost_gpu_is_a_state_and_the_others_go_on(procs: dict[int, ProcessEntry], how: str) -> None:
    nvml = FakeNvml()
    source = NvmlSource(nvml)
    assert source.sample().gpus[5].state == "ok"

    if how == "gpu_is_lost":
        nvml.gpus[5].lost = True
    else:  # the driver often says Unknown for a GPU that fell off the bus
        nvml.gpus[5].errors["nvmlDeviceGetMemoryInfo"] = NVMLError_Unknown
    for gpu in nvml.gpus:
        gpu.used_bytes += GIB
    box = source.sample()

    lost = box.gpus[5]
    assert lost.state == "lost"
    assert (lost.name, lost.uuid) == ("NVIDIA H200", "GPU-fake-5")
    assert lost.used_bytes == 75 * GIB  # the last value it reported, not a made-up 0
    assert lost.utilization_pct is None and lost.power_mw is None
    assert [g.state for g in box.gpus].count("ok") == 7
    assert box.gpus[6].used_bytes == 77 * GIB  # the others are read as usual
    assert 1005 not in {p.pid for p in box.processes} and len(box.processes) == 7
    assert box.unavailable is None

    nvml.gpus[5].lost = False  # e.g. after a reset: the handle is opened again
    nvml.gpus[5].errors.clear()
    again = source.sample()
    assert again.gpus[5].state == "ok" and again.gpus[5].used_bytes == 76 * GIB


def test_gpu_lost_before_first_sample(procs: dict[int, ProcessEntry]) -> None:
    nvml = FakeNvml()
    nvml.gpus[0].lost = True
    box = NvmlSource(nvml).sample()
    assert box.gpus[0] == GpuSnapshot(0, "GPU 0", None, 0, 0, state="lost")
    assert box.gpus[1].state == "ok"


# -- NVML: processes ------------------------------------------------------------------------
def test_processes_of_other_users_are_hidden_and_exited_ones_skipped(
    procs: dict[int, ProcessEntry],
) -> None:
    nvml = FakeNvml()
    nvml.gpus[7].compute += [ProcessInfo(2001, 4 * GIB), ProcessInfo(2002, GIB)]
    nvml.gpus[6].compute.append(ProcessInfo(2003, None))  # NVML hides per-process memory
    procs[2001] = psutil.AccessDenied  # another user's (or container's) job
    procs[2003] = ("python3", launch_argv())
    box = NvmlSource(nvml).sample()

    by_pid = {p.pid: p for p in box.processes}
    assert by_pid[2001] == GpuProcess(pid=2001, gpu_index=7, used_bytes=4 * GIB, hidden=True)
    assert 2002 not in by_pid  # exited between NVML's list and psutil's look
    assert by_pid[2003].role == "launcher" and by_pid[2003].used_bytes is None
    assert by_pid[2003].name == "python3" and not by_pid[2003].hidden
    assert not by_pid[1007].hidden


def test_process_denied_at_open_is_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(pid: int) -> None:
        raise psutil.AccessDenied(pid)

    monkeypatch.setattr(psutil, "Process", denied)
    info = inspect_process(4242)
    assert info is not None and info.hidden and info.name is None and info.role is None


def test_compute_and_graphics_lists_are_merged_per_pid(procs: dict[int, ProcessEntry]) -> None:
    nvml = FakeNvml(eight_gpus()[:2])
    nvml.gpus[0].graphics.append(ProcessInfo(1000, 3 * GIB))
    nvml.gpus[1].graphics.append(ProcessInfo(1000, GIB))  # same pid on another GPU
    box = NvmlSource(nvml).sample()
    assert [(p.pid, p.gpu_index) for p in box.processes] == [(1000, 0), (1000, 1), (1001, 1)]
    assert box.processes_on(0)[0].used_bytes == 70 * GIB - GIB // 2


def test_processes_not_supported_leave_the_gpu_readable(procs: dict[int, ProcessEntry]) -> None:
    nvml = FakeNvml()
    nvml.gpus[1].unsupported.add("nvmlDeviceGetGraphicsRunningProcesses")
    source = NvmlSource(nvml)
    source.sample()
    box = source.sample()
    assert box.is_unsupported(1, "graphics_processes")
    assert box.processes_on(1)[0].pid == 1001
    assert nvml.count("nvmlDeviceGetGraphicsRunningProcesses", 1) == 1


def test_process_details_are_cached_briefly(
    procs: dict[int, ProcessEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    looked: list[int] = []
    real = psutil.Process

    def counting(pid: int) -> object:
        looked.append(pid)
        return real(pid)

    monkeypatch.setattr(psutil, "Process", counting)
    clock = FakeClock()
    source = NvmlSource(FakeNvml(eight_gpus()[:1]), process_ttl_s=5.0, clock=clock)
    source.sample()
    clock.advance(1.0)
    source.sample()
    assert looked == [1000]
    clock.advance(5.0)
    source.sample()
    assert looked == [1000, 1000]


# -- SGLang roles ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "cmdline", "role"),
    [
        ("sglang::schedul", ["sglang::scheduler_TP3"], "scheduler_TP3"),
        ("sglang::schedul", ["sglang::scheduler_DP0_TP3_EP3", "", ""], "scheduler_DP0_TP3_EP3"),
        ("sglang::schedul", None, "schedul"),  # cmdline unreadable: the comm is all there is
        ("sglang::detoken", ["sglang::detokenizer"], "detokenizer"),
        ("sglang::tokeniz", ["sglang::tokenizer_worker:4711"], "tokenizer_worker"),
        ("sglang::data_pa", ["sglang::data_parallel_controller"], "data_parallel_controller"),
        ("sgl_diffusion::", ["sgl_diffusion::scheduler_0"], "scheduler_0"),
        ("python3", ["python3", "-m", "sglang.launch_server", "--tp", "8"], "launcher"),
        ("python", ["/venv/bin/python", "/src/sglang/launch_server.py"], "launcher"),
        ("sglang", ["/venv/bin/sglang", "serve", "--model-path", "m"], "launcher"),
        ("python3", ["python3", "-m", "sglang_router.launch_server", "--dp", "2"], "router"),
        ("python3", ["python3", "-m", "sglang.bench_one_batch", "--model", "m"], "bench"),
        ("python3", ["python3", "train.py", "--sglang-compat"], None),
        ("python3", ["python3", "-m", "vllm.entrypoints.openai.api_server"], None),
        (None, None, None),
    ],
)
def test_sglang_role(name: str | None, cmdline: list[str] | None, role: str | None) -> None:
    assert sglang_role(name, cmdline) == role


# -- smallest_gpu_memory (preflight) ---------------------------------------------------------
def test_smallest_gpu_memory_through_the_fake_module() -> None:
    gpus = [FakeGpu(name="NVIDIA H200", total_bytes=141 * GIB) for _ in range(4)]
    gpus[2] = FakeGpu(name="NVIDIA H100 80GB HBM3", total_bytes=80 * GIB)
    gpus[1].used_bytes = 100 * GIB  # someone else's process: the least free is 41 GiB
    nvml = FakeNvml(gpus)
    found = smallest_gpu_memory(nvml)
    assert found is not None
    assert found[:5] == (80 * GIB, "NVML (4 x NVIDIA H100 80GB HBM3)", 41 * GIB, "NVML", 4)
    # each GPU by NVML's index, for a launch that sees only some of them
    assert [(index, name, total, free) for index, _, name, total, free in found[5]] == [
        (0, "NVIDIA H200", 141 * GIB, 141 * GIB),
        (1, "NVIDIA H200", 141 * GIB, 41 * GIB),
        (2, "NVIDIA H100 80GB HBM3", 80 * GIB, 80 * GIB),
        (3, "NVIDIA H200", 141 * GIB, 141 * GIB),
    ]
    assert nvml.initialised == 0  # it shut NVML down again
    assert nvml.count("nvmlDeviceGetComputeRunningProcesses", 0) == 0  # no process lists

    gpus[2].lost = True  # a lost GPU does not count
    found = smallest_gpu_memory(nvml)
    assert found is not None
    assert found[:5] == (141 * GIB, "NVML (4 x NVIDIA H200)", 41 * GIB, "NVML", 3)
    assert [gpu[0] for gpu in found[5]] == [0, 1, 3]
    gpus[1].lost = True
    found = smallest_gpu_memory(nvml)
    assert found is not None
    assert found[:5] == (141 * GIB, "NVML (4 x NVIDIA H200)", 141 * GIB, "NVML", 2)
    assert smallest_gpu_memory(FakeNvml([])) is None


# -- the simulated source -------------------------------------------------------------------
def test_simulated_curves_are_deterministic_with_a_clock() -> None:
    clock = FakeClock()
    curve = [(0.0, 0.0), (10.0, 0.5), (20.0, 0.5), (30.0, 1.0)]
    source = SimulatedSource(gpus=3, total_bytes=100 * GIB, curve=curve, clock=clock)
    used = []
    for _ in range(4):
        used.append([gpu.used_bytes for gpu in source.sample().gpus])
        clock.advance(5.0)
    assert used == [[0] * 3, [25 * GIB] * 3, [50 * GIB] * 3, [50 * GIB] * 3]
    clock.advance(100.0)
    assert source.sample().gpus[0].used_bytes == 100 * GIB  # held after the last keyframe

    twin = SimulatedSource(gpus=3, total_bytes=100 * GIB, curve=curve, clock=FakeClock())
    clock_b = FakeClock()
    again = SimulatedSource(gpus=3, total_bytes=100 * GIB, curve=curve, clock=clock_b)
    clock_b.advance(7.0)
    assert again.sample().gpus == again.sample().gpus
    assert twin.sample().gpus[0].used_bytes == 0


def test_simulated_default_launch_looks_alive() -> None:
    clock = FakeClock()
    source = SimulatedSource(clock=clock)  # 8 x H200, the default launch curve
    idle = source.sample()
    assert len(idle.gpus) == 8 and idle.processes == ()
    assert idle.gpus[0].name == "NVIDIA H200 (simulated)"
    assert idle.gpus[0].total_bytes == 141 * GIB and idle.gpus[0].utilization_pct == 0

    clock.advance(20.0)  # loading weights: memory rising, GPUs busy
    loading = source.sample()
    gpu = loading.gpus[0]
    assert 0.1 < gpu.used_fraction < 0.6
    assert gpu.utilization_pct is not None and gpu.utilization_pct > 20
    assert gpu.power_mw is not None and gpu.power_mw > idle.gpus[0].power_mw  # type: ignore[operator]
    assert loading.gpus[7].used_bytes < loading.gpus[0].used_bytes  # ranks a little apart
    assert [p.role for p in loading.processes] == [f"scheduler_TP{i}" for i in range(8)]

    clock.advance(100.0)  # serving: memory steady, GPUs idle
    ready = source.sample()
    assert ready.gpus[0].used_fraction == pytest.approx(0.93)
    assert ready.gpus[0].utilization_pct == 0

    source.restart()  # a relaunch starts the curve again
    assert source.sample().gpus[0].used_bytes == idle.gpus[0].used_bytes
    assert "simulated" in source.describe()


def test_simulated_lose_recover_unsupported_and_foreign() -> None:
    clock = FakeClock()
    hidden = GpuProcess(pid=9, gpu_index=1, used_bytes=GIB, hidden=True)
    source = SimulatedSource(
        gpus=2,
        curve=lambda gpu, t: int(t) * GIB,
        unsupported=[(0, "power_mw")],
        foreign=[hidden],
        clock=clock,
    )
    clock.advance(10.0)
    box = source.sample()
    assert box.gpus[0].power_mw is None and box.is_unsupported(0, "power_mw")
    assert box.gpus[1].power_mw is not None
    assert hidden in box.processes

    source.lose(1)
    clock.advance(5.0)
    box = source.sample()
    assert box.gpus[1].state == "lost" and box.gpus[1].used_bytes == 10 * GIB
    assert box.gpus[0].state == "ok" and box.gpus[0].used_bytes == 15 * GIB
    assert box.processes_on(1) == ()  # a lost GPU lists no processes

    source.recover(1)
    assert source.sample().gpus[1].used_bytes == 15 * GIB


def test_simulated_single_gpu_scheduler_has_no_rank_suffix() -> None:
    source = SimulatedSource(gpus=1, curve=[(0.0, 0.5)], clock=FakeClock())
    assert [p.role for p in source.sample().processes] == ["scheduler"]
    assert keyframe_curve([(0.0, 0.25)], 4 * GIB)(0, 123.0) == GIB
    with pytest.raises(ValueError):
        keyframe_curve([], GIB)


def test_sources_satisfy_the_protocol() -> None:
    sources: list[GpuSource] = [SimulatedSource(gpus=1), NvmlSource(FakeNvml([]))]
    assert [s.describe() for s in sources] == ["simulated (demo)", "NVML"]


# -- the sampler ----------------------------------------------------------------------------
def test_sampler_history_is_bounded_per_gpu() -> None:
    clock = FakeClock()
    source = SimulatedSource(gpus=2, curve=lambda gpu, t: int(t) * GIB + gpu, clock=clock)
    seen: list[BoxSnapshot] = []
    sampler = Sampler(source, history=3, on_snapshot=seen.append)
    assert sampler.latest() is None and sampler.history(0) == ()
    for _ in range(5):
        sampler.step()
        clock.advance(1.0)
    assert sampler.history(0) == (2 * GIB, 3 * GIB, 4 * GIB)
    assert sampler.history(1) == (2 * GIB + 1, 3 * GIB + 1, 4 * GIB + 1)
    assert sampler.history(7) == ()
    assert len(seen) == 5 and sampler.latest() is seen[-1]

    source.lose(1)
    sampler.step()
    assert sampler.history(1) == (2 * GIB + 1, 3 * GIB + 1, 4 * GIB + 1)  # lost adds nothing
    assert sampler.history(0)[-1] == 5 * GIB


@pytest.mark.parametrize(("asked", "used"), [(0.01, MIN_INTERVAL_S), (0.0, 0.25), (2.0, 2.0)])
def test_sampler_interval_floor(asked: float, used: float) -> None:
    sampler = Sampler(SimulatedSource(gpus=1), interval_s=asked)
    assert sampler.interval_s == used
    sampler.interval_s = 0.1
    assert sampler.interval_s == MIN_INTERVAL_S


class BrokenSource:
    def __init__(self) -> None:
        self.calls = 0

    def sample(self) -> BoxSnapshot:
        self.calls += 1
        raise RuntimeError("boom")

    def close(self) -> None:
        return None

    def describe(self) -> str:
        return "broken"


def test_sampler_turns_a_failing_source_into_a_state(caplog: pytest.LogCaptureFixture) -> None:
    sampler = Sampler(BrokenSource(), clock=FakeClock(5.0))
    with caplog.at_level(logging.ERROR, logger="eaglebug.gpu.sampler"):
        box = sampler.step()
    assert box.unavailable == "GPU source failed: RuntimeError: boom"
    assert box.gpus == () and box.taken_at_s == 5.0
    assert "boom" in caplog.text  # logged with its traceback, not swallowed


# A ceiling on waits for the sampler's thread, never a duration the test expects: each wait
# ends when the thread acts, however loaded the machine is.
WAIT_S = 240.0  # only a hung test waits this long


def wait_for(
    count: int,
) -> tuple[Callable[[BoxSnapshot], None], threading.Event, list[BoxSnapshot]]:
    got: list[BoxSnapshot] = []
    done = threading.Event()

    def on_snapshot(box: BoxSnapshot) -> None:
        got.append(box)
        if len(got) >= count:
            done.set()

    return on_snapshot, done, got


@pytest.fixture
def quiet_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover


@pytest.mark.usefixtures("quiet_threads")
def test_sampler_thread_runs_survives_errors_and_stops() -> None:
    on_snapshot, done, got = wait_for(1)
    source = BrokenSource()
    sampler = Sampler(source, interval_s=60.0, on_snapshot=on_snapshot)
    sampler.start()
    sampler.start()  # a second start is a no-op
    try:
        assert done.wait(WAIT_S)
        assert sampler.running  # the exception did not end the thread
    finally:
        assert sampler.stop(timeout_s=WAIT_S)  # immediate: the 60 s wait is interrupted
    assert not sampler.running and source.calls == 1
    assert got[0].unavailable is not None

    on_snapshot2, done2, _ = wait_for(2)
    sim = Sampler(SimulatedSource(gpus=8), interval_s=0.25, on_snapshot=on_snapshot2)
    sim.start()
    try:
        assert done2.wait(WAIT_S)  # samples keep coming at the floor interval
    finally:
        sim.stop()
    assert len(sim.history(7)) >= 2


# -- the stand-in matches pynvml -----------------------------------------------------------
def test_fake_nvml_mirrors_pynvml_names_and_signatures() -> None:
    fake = FakeNvml()
    for name in dir(FakeNvml):
        if name.startswith(("nvml", "NVML")):
            assert hasattr(pynvml, name), name
            if name.startswith("nvml"):
                ours = list(inspect.signature(getattr(fake, name)).parameters)
                theirs = list(inspect.signature(getattr(pynvml, name)).parameters)
                assert ours == theirs, name
    assert pynvml.NVML_TEMPERATURE_GPU == FakeNvml.NVML_TEMPERATURE_GPU
    assert issubclass(pynvml.NVMLError_GpuIsLost, pynvml.NVMLError)


def test_gpu_this_container_may_not_open_is_left_out(procs: dict[int, ProcessEntry]) -> None:
    nvml = FakeNvml()
    nvml.gpus[6].errors["nvmlDeviceGetHandleByIndex"] = NVMLError_NoPermission
    box = NvmlSource(nvml).sample()
    assert [gpu.index for gpu in box.gpus] == [0, 1, 2, 3, 4, 5, 7]
    assert box.is_unsupported(6, "handle")


def test_function_missing_from_an_older_pynvml_is_unsupported(
    procs: dict[int, ProcessEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(FakeNvml, "nvmlDeviceGetGraphicsRunningProcesses")
    box = NvmlSource(FakeNvml()).sample()
    assert box.is_unsupported(0, "graphics_processes") and len(box.processes) == 8
