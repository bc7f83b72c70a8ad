"""Several nodes' logs read as one launch (`diagnose --log node0.log --log node1.log`).

The node logs are built from the repository's 0.5.9-shaped launch log: node 0 prints TP0-TP7
past the weight load and then dies in an NCCL watchdog timeout (its lines from the watchdog
fixture); node 1 prints the same start with SGLang's global ranks of a second node (TP8-TP15)
and stops during the load. One analyzer over both: the ranks stay distinct, the lines merge by
time, and `log.rank_desync` names node 1 as the one behind.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eaglebug.checks.logs.nodes import analyze_nodes, node_tag, with_nodes
from tests.clirun import cli

FIXTURES = Path(__file__).parent / "fixtures" / "logs"


def _renumber(line: str, by: int) -> str:
    return re.sub(r" TP(\d+)\]", lambda m: f" TP{int(m.group(1)) + by}]", line)


@pytest.fixture
def node_logs(tmp_path: Path) -> tuple[Path, Path]:
    ready = (FIXTURES / "launch_ready_059.log").read_text().splitlines(keepends=True)
    load_end = next(i for i, line in enumerate(ready) if "Load weight end" in line)
    watchdog = (FIXTURES / "nccl_watchdog.log").read_text().splitlines(keepends=True)
    crash = next(i for i, line in enumerate(watchdog) if "Watchdog caught" in line)
    node0 = tmp_path / "slurm-42_node0.log"
    node0.write_text("".join(ready[: load_end + 12] + watchdog[crash:]))
    node1 = tmp_path / "slurm-42_node1.log"
    node1.write_text("".join(_renumber(line, 8) for line in ready[1 : load_end - 20]))
    return node0, node1


def test_tags_come_from_the_file_names_else_the_order(tmp_path: Path) -> None:
    assert node_tag(tmp_path / "run_node3.log", 0) == "node3"
    assert node_tag(tmp_path / "node1.out", 5) == "node1"
    assert node_tag(tmp_path / "server.log", 2) == "node2"


def test_the_node_behind_is_named(node_logs: tuple[Path, Path]) -> None:
    analyzer, rank_nodes, tags = analyze_nodes(list(node_logs))
    assert tags == ["node0", "node1"]
    assert rank_nodes["TP0"] == "node0" and rank_nodes["TP15"] == "node1"
    findings = with_nodes(analyzer.findings(), rank_nodes)
    [desync] = [f for f in findings if f.id == "log.rank_desync"]
    behind = desync.log.get("behind") if desync.log else None
    assert isinstance(behind, tuple) and set(behind) == {f"TP{n}" for n in range(8, 16)}
    assert "on node1" in desync.message and "node0" not in desync.message.split("(on ")[-1]


def test_one_log_alone_shows_no_desync(node_logs: tuple[Path, Path]) -> None:
    analyzer, rank_nodes, _ = analyze_nodes([node_logs[0]])
    assert not [f for f in analyzer.findings() if f.id == "log.rank_desync"]
    assert set(rank_nodes.values()) == {"node0"}


def test_diagnose_takes_several_logs(
    node_logs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = cli(capsys, "diagnose", "--log", str(node_logs[0]), "--log", str(node_logs[1]), "--json")
    data = json.loads(run.out)
    assert data["nodes"] == {"node0": str(node_logs[0]), "node1": str(node_logs[1])}
    desync = next(f for f in data["findings"] if f["id"] == "log.rank_desync")
    assert desync["details"]["nodes"] == ["node1"] and "on node1" in desync["message"]
