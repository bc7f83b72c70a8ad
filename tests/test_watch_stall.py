"""A launch that stopped moving, live: `log.stalled` from the watch and the GPU sampler.

No test waits for a clock: the watch and the sampler take theirs (`clock=`), and the tests move
it by minutes between explicit beats (`step()`), as the threads would over real time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eaglebug.gpu.sampler import MOVED_BYTES, Sampler
from eaglebug.gpu.simulated import SimulatedSource
from eaglebug.server.state import state_dir
from eaglebug.session.session import Session, SessionConfig
from eaglebug.session.watch import LaunchWatch, WatchSnapshot
from tests.test_watch import Collect, launched, record

MINUTE = 60.0
LOADING = (
    "[2026-01-30 10:36:06 TP0] Load weight begin. avail mem=138.52 GB\n"
    "Loading safetensors checkpoint shards:   5% Completed | 3/64 [00:03<01:10, 1.13s/it]\n"
)
GRAPHS = (
    "[2026-01-30 10:37:12 TP0] Memory pool end. avail mem=14.02 GB\n"
    "[2026-01-30 10:37:13 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
)


# The wall clock a test pins for the watch (file times are compared with it); tests that leave
# it the real one write their logs now, so the two agree.
WALL_NOW = 1_769_769_434.0


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float = 10_000.0) -> None:
        self.now = now

    def __call__(self, *_: object) -> float:  # also `memory_moved_at(gpus)`
        return self.now


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    (state_dir(path) / "logs").mkdir(parents=True)
    return path


def launch_log(workdir: Path, text: str) -> Path:
    log = state_dir(workdir) / "logs" / "launch-001.log"
    log.write_text(text)
    launched(workdir, record(workdir, 1, log))
    return log


def watching(
    workdir: Path,
    clock: Clock,
    memory: Clock | None = None,
    limits: dict[str, float] | None = None,
    wall_clock: Clock | None = None,
) -> tuple[LaunchWatch, Collect]:
    got = Collect()
    watch = LaunchWatch(
        Session(SessionConfig(workdir, readonly=True)),
        got.snapshot,
        on_problem=got.problem,
        memory_moved_at=memory,
        stall_limits=limits,
        clock=clock,
        **({"wall_clock": wall_clock} if wall_clock is not None else {}),
    )
    return watch, got


def stalled(snap: WatchSnapshot) -> list[str]:
    return [f.message for f in snap.findings if f.id == "log.stalled"]


def test_silence_in_loading_is_a_warning_until_a_line_comes(workdir: Path) -> None:
    log = launch_log(workdir, LOADING)
    clock = Clock()
    watch, got = watching(workdir, clock)
    watch.step()
    assert got.snapshots[-1].phase == "loading" and not stalled(got.snapshots[-1])
    clock.now += 9 * MINUTE
    watch.step()
    assert not stalled(got.snapshots[-1])  # within the 10 minutes loading is given
    clock.now += 2 * MINUTE
    watch.step()
    (message,) = stalled(got.snapshots[-1])
    assert "11 min in loading" in message
    finding = next(f for f in got.snapshots[-1].findings if f.id == "log.stalled")
    assert finding.severity == "warning" and finding.fix is not None
    # A minute on: the same warning says so (one snapshot a minute, not one a beat).
    count = len(got.snapshots)
    clock.now += 20
    watch.step()
    assert len(got.snapshots) == count
    clock.now += MINUTE
    watch.step()
    assert "12 min" in stalled(got.snapshots[-1])[0]
    # The launch moves again: the warning goes.
    with log.open("a") as out:
        out.write("Loading safetensors checkpoint shards:   6% Completed | 4/64 [10:00<01:10]\n")
    watch.step()
    assert not stalled(got.snapshots[-1])


def test_gpu_memory_that_moves_is_not_a_stall_and_limits_come_from_the_flags(
    workdir: Path,
) -> None:
    launch_log(workdir, LOADING + GRAPHS)
    clock, memory = Clock(), Clock()
    watch, got = watching(workdir, clock, memory, limits={"cuda_graph": 2 * MINUTE})
    watch.step()
    assert got.snapshots[-1].phase == "cuda_graph"
    clock.now += 3 * MINUTE
    memory.now = clock.now - 30  # the capture allocates: memory moved half a minute ago
    watch.step()
    assert not stalled(got.snapshots[-1])
    clock.now += 2 * MINUTE  # two and a half minutes without either
    watch.step()
    (message,) = stalled(got.snapshots[-1])
    assert "in cuda_graph" in message and "2 min a cuda_graph step is given" in message
    memory.now = clock.now
    watch.step()
    assert not stalled(got.snapshots[-1])


def test_a_crashed_or_ready_launch_never_stalls(workdir: Path, tmp_path: Path) -> None:
    crash = Path(__file__).parent / "fixtures" / "logs" / "missing_method_8ranks.log"
    launch_log(workdir, crash.read_text())
    clock = Clock()
    watch, got = watching(workdir, clock)
    while watch.step():
        pass
    clock.now += 24 * 60 * MINUTE
    watch.step()
    assert got.snapshots[-1].phase == "crashed"
    assert not stalled(got.snapshots[-1])


def test_a_log_already_quiet_when_watched_counts_from_its_modification_time(
    workdir: Path,
) -> None:
    log = launch_log(workdir, LOADING + GRAPHS)
    quiet = WALL_NOW - 20 * MINUTE
    os.utime(log, (quiet, quiet))
    watch, got = watching(workdir, Clock(), wall_clock=Clock(WALL_NOW))
    watch.step()
    (message,) = stalled(got.snapshots[-1])
    assert "20 min in cuda_graph" in message


def test_the_sampler_says_when_gpu_memory_last_moved() -> None:
    used = [10 * 1024**3]
    clock = Clock(0.0)
    source = SimulatedSource(gpus=2, curve=lambda _gpu, _t: used[0], processes=False)
    sampler = Sampler(source, clock=clock)
    sampler.step()
    assert sampler.memory_moved_at() is None  # one sample: nothing moved yet
    clock.now, used[0] = 5.0, used[0] + MOVED_BYTES // 2
    sampler.step()
    assert sampler.memory_moved_at() is None  # jitter, not a launch moving
    clock.now, used[0] = 9.0, used[0] + 2 * MOVED_BYTES
    sampler.step()
    assert sampler.memory_moved_at() == 9.0
    clock.now = 20.0
    sampler.step()
    assert sampler.memory_moved_at() == 9.0


def test_the_sampler_says_when_each_gpus_memory_last_moved() -> None:
    """A neighbour's job on GPU 0 moves its memory; the launch on GPU 1 does not."""
    used = {0: 10 * 1024**3, 1: 10 * 1024**3}
    clock = Clock(0.0)
    source = SimulatedSource(gpus=2, curve=lambda gpu, _t: used[gpu], processes=False)
    sampler = Sampler(source, clock=clock)
    sampler.step()
    clock.now, used[0] = 7.0, used[0] + 2 * MOVED_BYTES
    sampler.step()
    assert sampler.memory_moved_at() == 7.0  # any GPU
    assert sampler.memory_moved_at(frozenset({0})) == 7.0
    assert sampler.memory_moved_at(frozenset({1})) is None  # the launch's: never moved
    clock.now, used[1] = 9.0, used[1] + 2 * MOVED_BYTES
    sampler.step()
    assert sampler.memory_moved_at(frozenset({0, 1})) == 9.0


def test_a_launch_on_some_gpus_stalls_by_their_memory_not_a_neighbours(workdir: Path) -> None:
    """`CUDA_VISIBLE_DEVICES=1 python -m sglang.launch_server ...`: the watch asks the sampler
    for GPU 1 only, so a neighbour moving GPU 0's memory cannot hide a hung capture."""
    log = state_dir(workdir) / "logs" / "launch-001.log"
    log.write_text(LOADING + GRAPHS)
    launch = record(workdir, 1, log)
    launch.env_additions = {"CUDA_VISIBLE_DEVICES": "1"}
    launched(workdir, launch)
    asked: list[frozenset[int] | None] = []

    def memory(gpus: frozenset[int] | None) -> float | None:
        asked.append(gpus)
        return None  # the launch's GPU never moved (GPU 0's did: not asked)

    clock = Clock()
    watch, got = watching(workdir, clock, limits={"cuda_graph": 2 * MINUTE})
    watch.memory_moved_at = memory
    watch.session.latest_gpus = SimulatedSource(gpus=2, processes=False).sample()
    watch.step()
    clock.now += 3 * MINUTE
    watch.step()
    assert asked[-1] == frozenset({1})
    (message,) = stalled(got.snapshots[-1])
    assert "in cuda_graph" in message
    # a launch that names no GPUs watches them all
    launch.env_additions = {}
    launched(workdir, launch)
    watch.step()
    assert asked[-1] is None
