"""Draft-side findings on the real releases 0.5.14, 0.5.22 and 0.5.23: no draft given, the wrong
kind of draft, an lm_head or token map missing from the checkpoint, tensors the draft's loader
drops. Each rule is tested on both of its sides; the checkpoint is a real-format safetensors file
(`tests/safetensors_files.py`) next to a published draft config (`tests/fixtures/drafts/`), and
each finding's `read_from` must point at the tree line that holds the rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.models import draft_checks as draftchecks
from eaglebug.checks.models.checkpoint import Checkpoint, read_checkpoint
from eaglebug.checks.models.checks import check_vocab
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.safetensors_files import EAGLE3_DRAFT_TENSORS, write_safetensors

FIXTURE = Path(__file__).parent / "fixtures" / "drafts" / "qwen3-32b-eagle3"
EAGLE3_CLASS = "LlamaForCausalLMEagle3"
EAGLE_CLASS = "LlamaForCausalLMEagle"
# Qwen3-32B's published sizes (the target the fixture draft was trained for).
QWEN3_32B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "num_hidden_layers": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
}


@pytest.fixture(scope="module", params=["0.5.14", "0.5.22", "0.5.23"])
def index(request: pytest.FixtureRequest) -> TreeIndex:
    folder = request.getfixturevalue("sglang_0" + request.param.replace(".", "")[1:])
    return TreeIndex(locate(str(folder)), use_cache=False)


def tree_line(index: TreeIndex, read_from: str | None) -> str:
    assert read_from is not None
    rel, line = read_from.rsplit(":", 1)
    return (index.tree.root / rel).read_text(encoding="utf-8").splitlines()[int(line) - 1]


def evidence(finding: Finding) -> ConfigEvidence:
    assert isinstance(finding.evidence, ConfigEvidence)
    return finding.evidence


def draft_dir(
    tmp_path: Path,
    drop: tuple[str, ...] = (),
    add: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    folder = tmp_path / "draft"
    folder.mkdir()
    shutil.copy(FIXTURE / "config.json", folder / "config.json")
    if config is not None:
        data = json.loads((folder / "config.json").read_text())
        data.update(config)
        (folder / "config.json").write_text(json.dumps(data))
    tensors = {k: v for k, v in EAGLE3_DRAFT_TENSORS.items() if k not in drop}
    tensors.update(add or {})
    write_safetensors(folder / "model.safetensors", tensors)
    return folder


def fixture_config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURE / "config.json").read_text())
    return data


# -- the checkpoint reader ---------------------------------------------------------------------
def test_reads_names_shapes_and_size_from_the_safetensors_header(tmp_path: Path) -> None:
    folder = draft_dir(tmp_path)
    checkpoint = read_checkpoint(folder)
    assert checkpoint.names == frozenset(EAGLE3_DRAFT_TENSORS)
    assert checkpoint.tensors["fc.weight"].shape == (8, 24)
    assert checkpoint.tensors["d2t"].dtype == "I64"
    data_bytes = (folder / "model.safetensors").stat().st_size
    header = int.from_bytes((folder / "model.safetensors").read_bytes()[:8], "little")
    assert checkpoint.total_size_bytes == data_bytes - 8 - header
    assert (
        checkpoint.has("lm_head.weight") is True and checkpoint.has("embed_tokens.weight") is False
    )


def test_index_wins_and_broken_headers_give_no_names(tmp_path: Path) -> None:
    folder = draft_dir(tmp_path)
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 1234}, "weight_map": {"a.weight": "x", "d2t": "x"}})
    )
    checkpoint = read_checkpoint(folder)
    assert checkpoint.names == {"a.weight", "d2t"} and checkpoint.total_size_bytes == 1234
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes((10**12).to_bytes(8, "little") + b"{}")
    assert read_checkpoint(broken).names is None
    assert read_checkpoint(broken).has("lm_head.weight") is None
    (broken / "model.safetensors").unlink()
    (broken / "pytorch_model.bin").write_bytes(b"\x80\x02")
    assert read_checkpoint(broken).names is None


# -- config.draft_missing ----------------------------------------------------------------------
def test_eagle3_without_a_draft_falls_back_to_the_target(index: TreeIndex) -> None:
    (finding,) = draftchecks.check_draft_missing(index, "EAGLE3", "Qwen3ForCausalLM")
    assert finding.id == "config.draft_missing" and finding.severity == "error"
    assert "model_path or" in tree_line(index, evidence(finding).read_from)
    assert "DeepseekV3ForCausalLM" in evidence(finding).value("defaults_for")  # type: ignore[operator]
    defaults_line = tree_line(index, str(evidence(finding).value("defaults_read_from")))
    assert "speculative_draft_model_path is None" in defaults_line


def test_eagle_on_an_mtp_target_uses_the_target_checkpoint(index: TreeIndex) -> None:
    (finding,) = draftchecks.check_draft_missing(index, "EAGLE", "DeepseekV3ForCausalLM")
    assert finding.severity == "info"
    assert "speculative_draft_model_path is None" in tree_line(index, evidence(finding).read_from)
    (eagle3,) = draftchecks.check_draft_missing(index, "EAGLE3", "DeepseekV3ForCausalLM")
    assert eagle3.severity == "warning" and "EAGLE-3" in eagle3.message


def test_dflash_without_a_draft_is_refused_in_sglangs_words(index: TreeIndex) -> None:
    (finding,) = draftchecks.check_draft_missing(index, "DFLASH", "Qwen3ForCausalLM")
    assert finding.severity == "error"
    said = evidence(finding).sglang_message
    assert said is not None and "requires setting --speculative-draft-model-path" in said
    assert "is None" in tree_line(index, evidence(finding).read_from)
    assert draftchecks.check_draft_missing(index, "NGRAM", "Qwen3ForCausalLM") == []


# -- config.algorithm_mismatch -----------------------------------------------------------------
def test_eagle_with_an_eagle3_draft_and_the_reverse(index: TreeIndex) -> None:
    (silent,) = draftchecks.check_algorithm_mismatch(index, "EAGLE", EAGLE3_CLASS)
    assert silent.fix is not None and silent.fix.text() == "--speculative-algorithm EAGLE3"
    assert "capture_aux_hidden_states = True" in tree_line(index, evidence(silent).read_from)
    (reverse,) = draftchecks.check_algorithm_mismatch(index, "EAGLE3", EAGLE_CLASS)
    assert reverse.fix is not None and reverse.fix.text() == "--speculative-algorithm EAGLE"
    assert "capture_aux_hidden_states = False" in tree_line(index, evidence(reverse).read_from)
    assert draftchecks.check_algorithm_mismatch(index, "EAGLE3", EAGLE3_CLASS) == []
    assert draftchecks.check_algorithm_mismatch(index, "EAGLE", EAGLE_CLASS) == []


# -- config.draft_lm_head ----------------------------------------------------------------------
def test_untied_draft_without_lm_head_tensor(index: TreeIndex, tmp_path: Path) -> None:
    config = fixture_config()
    missing = read_checkpoint(draft_dir(tmp_path, drop=("lm_head.weight",)))
    (finding,) = draftchecks.check_draft_lm_head(index, "EAGLE3", EAGLE3_CLASS, config, missing)
    assert finding.id == "config.draft_lm_head" and finding.severity == "error"
    assert "self.lm_head = ParallelLMHead(" in tree_line(index, evidence(finding).read_from)
    kept = tree_line(index, str(evidence(finding).value("worker_keeps_draft_head")))
    assert ".set_embed(" in kept
    # Under EAGLE the worker gives every draft the target's head (set_embed_and_head).
    assert draftchecks.check_draft_lm_head(index, "EAGLE", EAGLE3_CLASS, config, missing) == []
    shutil.rmtree(tmp_path / "draft")
    whole = read_checkpoint(draft_dir(tmp_path))
    assert draftchecks.check_draft_lm_head(index, "EAGLE3", EAGLE3_CLASS, config, whole) == []
    tied = {**config, "tie_word_embeddings": True}
    assert draftchecks.check_draft_lm_head(index, "EAGLE3", EAGLE3_CLASS, tied, missing) == []


# -- config.vocab: reduced vocabulary without a token map --------------------------------------
def test_reduced_vocab_needs_d2t_in_the_checkpoint(index: TreeIndex, tmp_path: Path) -> None:
    draft = fixture_config()
    shape = draftchecks.loader_shape(index, draftchecks.find_class(index, EAGLE3_CLASS))
    assert shape is not None
    site = f"{shape.read_from.rsplit(':', 1)[0]}:{shape.skip_line('d2t')}"
    assert '"d2t" in name' in tree_line(index, site)
    no_map = read_checkpoint(draft_dir(tmp_path, drop=("d2t", "t2d")))
    (finding,) = check_vocab(QWEN3_32B, draft, "EAGLE3", no_map, site)
    assert finding.attribute == "draft_vocab_size" and evidence(finding).read_from == site
    shutil.rmtree(tmp_path / "draft")
    with_map = read_checkpoint(draft_dir(tmp_path))
    assert check_vocab(QWEN3_32B, draft, "EAGLE3", with_map, site) == []
    full = {**draft, "draft_vocab_size": QWEN3_32B["vocab_size"]}
    assert check_vocab(QWEN3_32B, full, "EAGLE3", no_map, site) == []


# -- config.draft_weights ----------------------------------------------------------------------
def test_names_the_loader_cannot_place(index: TreeIndex, tmp_path: Path) -> None:
    stray = {"eagle.fc.weight": ("BF16", (8, 24)), "draft_model.norm.weight": ("BF16", (8,))}
    checkpoint = read_checkpoint(draft_dir(tmp_path, add=stray))
    (finding,) = draftchecks.check_draft_weights(index, EAGLE3_CLASS, checkpoint)
    assert evidence(finding).value("dropped") == ("draft_model.norm.weight", "eagle.fc.weight")
    assert "def load_weights" in tree_line(index, evidence(finding).read_from)
    shutil.rmtree(tmp_path / "draft")
    clean = read_checkpoint(draft_dir(tmp_path))  # legacy `midlayer` names are renamed: fine
    assert draftchecks.check_draft_weights(index, EAGLE3_CLASS, clean) == []


# -- through preflight -------------------------------------------------------------------------
def test_preflight_runs_the_draft_checks(index: TreeIndex, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(QWEN3_32B))
    draft = draft_dir(tmp_path, drop=("lm_head.weight", "d2t", "t2d"))
    launch = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(target),
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-draft-model-path",
        str(draft),
    ]
    ids = {f.id for f in preflight(index, launch, {}).findings}
    assert "config.algorithm_mismatch" in ids
    assert not {"config.draft_missing", "config.draft_lm_head"} & ids
    launch[6] = "EAGLE3"
    ids = {f.id for f in preflight(index, launch, {}).findings}
    assert {"config.draft_lm_head", "config.vocab"} <= ids
    assert "config.algorithm_mismatch" not in ids
    alone = preflight(index, launch[:7], {}).findings
    assert [f.id for f in alone if f.role == "draft"] == ["config.draft_missing"]


def test_draft_missing_on_0_5_9_where_server_args_holds_the_rule(sglang_059: Path) -> None:
    """0.5.9 has no per-algorithm handlers: the branch sits under
    `if self.speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE")` in server_args.py."""
    index = TreeIndex(locate(str(sglang_059)), use_cache=False)
    (fallback,) = draftchecks.check_draft_missing(index, "EAGLE3", "Qwen3ForCausalLM")
    assert fallback.severity == "error"
    assert "model_path or" in tree_line(index, evidence(fallback).read_from)
    (mtp,) = draftchecks.check_draft_missing(index, "EAGLE", "DeepseekV3ForCausalLM")
    assert mtp.severity == "info"
    assert str(evidence(mtp).read_from).startswith("sglang/srt/server_args.py:")
    assert draftchecks.check_draft_missing(index, "NGRAM", "Qwen3ForCausalLM") == []


def test_the_draft_checks_are_kept_by_what_they_read(
    sglang_0523: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second preflight of the same launch with a flag changed reads the draft checks back
    (no flag changes them); a draft whose shards changed is checked again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    runs: list[Path | None] = []  # each time the checks run, they read the checkpoint first

    def counted(model_dir: Path | None) -> Checkpoint:
        runs.append(model_dir)
        return read_checkpoint(model_dir)

    monkeypatch.setattr(draftchecks, "read_checkpoint", counted)
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(QWEN3_32B))
    draft = draft_dir(tmp_path, drop=("lm_head.weight",))
    launch = [
        *("python", "-m", "sglang.launch_server", "--model-path", str(target)),
        *("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)),
    ]

    def draft_ids(words: list[str]) -> list[str]:
        index = TreeIndex(locate(str(sglang_0523)))  # a new run: the kept answers, read back
        return sorted(f.id for f in preflight(index, words, {}).findings if f.role == "draft")

    first = draft_ids(launch)
    assert "config.draft_lm_head" in first and len(runs) == 1
    assert draft_ids([*launch, "--mem-fraction-static", "0.8"]) == first
    assert len(runs) == 1  # read back, not run again
    write_safetensors(draft / "model.safetensors", EAGLE3_DRAFT_TENSORS)  # lm_head is back
    assert "config.draft_lm_head" not in draft_ids(launch)
    assert len(runs) == 2
