"""`eaglebug preflight --gpu-arch` and the GPU's compute capability from NVML.

The architecture is what the attention rules are decided against: `--gpu-arch sm90|sm100|...`,
else NVML's `nvmlDeviceGetCudaComputeCapability` (through the one NVML choke point, here the
fake library of `tests/fake_nvml.py`), else unknown (the check says how to tell it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import eaglebug.gpu.nvml
from tests import clirun
from tests.clirun import Run, cli
from tests.configs import eagle3, llama, write_model
from tests.fake_nvml import FakeGpu, FakeNvml, NVMLError_DriverNotLoaded, eight_gpus

FIXTURES = Path(__file__).parent / "fixtures"
LAUNCH = ["python", "-m", "sglang.launch_server"]
COMPUTE_CAPABILITY = (
    eaglebug.gpu.nvml.compute_capability
)  # the real one, before any test patches it


@pytest.fixture
def models(tmp_path: Path) -> Path:
    write_model(tmp_path / "llama", llama())
    write_model(tmp_path / "draft", eagle3())
    (tmp_path / "dsv3").mkdir()
    shutil.copy(FIXTURES / "configs" / "deepseek-v3.config.json", tmp_path / "dsv3" / "config.json")
    return tmp_path


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """This host's NVML (if any) never decides a case unless a test says what it reports."""
    monkeypatch.setattr(eaglebug.gpu.nvml, "smallest_gpu_memory", lambda: None)
    monkeypatch.setattr(eaglebug.gpu.nvml, "compute_capability", lambda: None)


def preflight(capsys: pytest.CaptureFixture[str], sglang: Path, *words: str) -> Run:
    """Preflight --json with options before `--` and the launch's flags after it."""
    split = words.index("--")
    return cli(
        capsys,
        "preflight",
        "--sglang",
        str(sglang),
        "--json",
        *words[:split],
        "--",
        *LAUNCH,
        *words[split + 1 :],
    )


def attention(run: Run) -> list[dict[str, Any]]:
    return [f for f in json.loads(run.out)["findings"] if f["id"] == "config.attention_backend"]


def deepseek_eagle3(models: Path) -> list[str]:
    return [
        "--model-path",
        str(models / "dsv3"),
        "--tp",
        "8",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        str(models / "draft"),
    ]


@pytest.mark.parametrize("value", ["h100", "sm9", "ampere", "sm90 sm100"])
def test_bad_gpu_arch_is_one_line_and_exit_2(
    value: str, sglang_059: Path, models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = preflight(
        capsys, sglang_059, "--gpu-arch", value, "--", "--model-path", str(models / "llama")
    )
    clirun.refused(run, "--gpu-arch", "not a GPU architecture", "sm90")


def test_gpu_arch_decides_the_draft_backend_finding(
    sglang_059: Path, models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DeepSeek-V3 + an EAGLE-3 draft on 0.5.9: on sm100 the auto MLA backend fails the draft
    after the load (exit 1); on sm90 it does not (exit 0, the auto pick as info)."""
    blackwell = preflight(
        capsys,
        sglang_059,
        "--gpu-mem-gib",
        "141",
        "--gpu-arch",
        "sm100",
        "--",
        *deepseek_eagle3(models),
    )
    [error] = [f for f in attention(blackwell) if f["severity"] == "error"]
    assert error["role"] == "draft"
    assert error["fix_detail"] == {
        "kind": "flag",
        "flag": "--speculative-draft-attention-backend",
        "value": "flashinfer",
        "tradeoff": error["fix_detail"]["tradeoff"],
    }
    assert error["details"]["read_from"].startswith(
        "sglang/srt/layers/attention/attention_registry.py:"
    )
    assert error["details"]["gpu_arch"] == "sm100"
    assert error["details"]["gpu_arch_from"] == "--gpu-arch sm100"
    hopper = preflight(
        capsys,
        sglang_059,
        "--gpu-mem-gib",
        "141",
        "--gpu-arch",
        "sm90",
        "--",
        *deepseek_eagle3(models),
    )
    assert [f["severity"] for f in attention(hopper)] == ["info"]
    assert attention(hopper)[0]["details"]["attention_backend"] == "fa3"


def test_nvml_capability_is_used_without_the_flag(
    sglang_059: Path,
    models: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        eaglebug.gpu.nvml, "compute_capability", lambda: ((10, 0), "NVML (8 x NVIDIA B200)")
    )
    run = preflight(capsys, sglang_059, "--gpu-mem-gib", "141", "--", *deepseek_eagle3(models))
    [error] = [f for f in attention(run) if f["severity"] == "error"]
    assert error["details"]["gpu_arch_from"] == "NVML (8 x NVIDIA B200)"
    monkeypatch.setattr(eaglebug.gpu.nvml, "compute_capability", lambda: None)
    unknown = preflight(capsys, sglang_059, "--gpu-mem-gib", "141", "--", *deepseek_eagle3(models))
    [info] = attention(unknown)
    assert info["severity"] == "info" and "--gpu-arch" in info["message"]


# -- NVML ------------------------------------------------------------------------------------
def test_compute_capability_from_fake_nvml() -> None:
    gpus = eight_gpus()
    assert COMPUTE_CAPABILITY(FakeNvml(gpus)) == ((9, 0), "NVML (8 x NVIDIA H200)")
    mixed = [
        FakeGpu(name="NVIDIA B200", capability=(10, 0)),
        FakeGpu(name="NVIDIA H100", capability=(9, 0)),
    ]
    assert COMPUTE_CAPABILITY(FakeNvml(mixed)) == ((9, 0), "NVML (2 x NVIDIA H100)")


def test_compute_capability_unsupported_or_no_driver_is_none() -> None:
    unsupported = [FakeGpu(unsupported={"nvmlDeviceGetCudaComputeCapability"})]
    assert COMPUTE_CAPABILITY(FakeNvml(unsupported)) is None
    assert COMPUTE_CAPABILITY(FakeNvml(init_error=NVMLError_DriverNotLoaded)) is None
    nvml = FakeNvml([FakeGpu(capability=(10, 0))])
    COMPUTE_CAPABILITY(nvml)
    assert nvml.initialised == 0  # shut down again


# -- the TUI's entries -------------------------------------------------------------------------
def test_tui_refuses_a_bad_gpu_arch_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from eaglebug.tui.entry import main

    capsys.readouterr()
    code = main(["--gpu-arch", "h100", "--", *LAUNCH, "--model-path", "/m"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines()[0].startswith("error: --gpu-arch 'h100'")
    assert len(err.splitlines()) == 2 and "Traceback" not in err


def test_session_checks_use_the_gpu_arch(sglang_059: Path, models: Path, tmp_path: Path) -> None:
    """The TUI's checks run preflight with the session's --gpu-arch: the draft's MLA backend
    error on sm100, none on sm90."""
    from eaglebug.session.session import Session, SessionConfig

    def draft_errors(arch: str) -> list[str | None]:
        config = SessionConfig(
            tmp_path / arch, str(sglang_059), [*LAUNCH, *deepseek_eagle3(models)], gpu_arch=arch
        )
        (tmp_path / arch).mkdir()
        found = Session(config).run_checks().findings
        return [
            f.role for f in found if f.id == "config.attention_backend" and f.severity == "error"
        ]

    assert draft_errors("sm100") == ["draft"]
    assert draft_errors("sm90") == []
