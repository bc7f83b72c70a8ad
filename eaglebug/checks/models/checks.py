"""Model-config checks for a speculative launch: target vs draft, against the launch's flags.

Each returns findings per the contract. The context length, which SGLang derives by its own
code, is checked in `context.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import AdviceFix
from eaglebug.checks.contract.inputs import regular_file
from eaglebug.checks.models.checkpoint import Checkpoint
from eaglebug.checks.models.config import json_file

GIB = 1024**3
_TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a (possibly multimodal) config."""
    for key in _TEXT_CONFIG_KEYS:
        inner = config.get(key)
        if isinstance(inner, dict):
            return inner
    return config


def _int(config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _eagle_config(draft: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = draft.get("eagle_config")
    return inner if isinstance(inner, dict) else {}


def _has_token_map(checkpoint: Checkpoint | None) -> bool | None:
    """Does the draft checkpoint carry the d2t/t2d map (None: its names cannot be read)?"""
    if checkpoint is None or checkpoint.names is None:
        return None
    return any("d2t" in n or "t2d" in n for n in checkpoint.names)


def check_vocab(
    target: Mapping[str, Any],
    draft: Mapping[str, Any],
    algorithm: str,
    checkpoint: Checkpoint | None,
    token_map_from: str | None = None,
) -> list[Finding]:
    """`token_map_from`: where the draft class's loader reads d2t (file:line), if known."""
    t_vocab = _int(text_config(target), "vocab_size")
    d_vocab = _int(text_config(draft), "vocab_size")
    findings: list[Finding] = []
    if t_vocab is not None and d_vocab is not None and t_vocab != d_vocab:
        findings.append(
            Finding(
                id="config.vocab",
                severity="error",
                message=(
                    f"the draft's vocab_size ({d_vocab}) differs from the target's ({t_vocab}); "
                    "the draft takes the target's embedding, so the shapes will not match"
                ),
                role="draft",
                attribute="vocab_size",
                fix=AdviceFix(
                    "use a draft trained for this target (same tokenizer and vocabulary)"
                ),
                evidence=ConfigEvidence.of({"target": t_vocab, "draft": d_vocab}),
            )
        )
    reduced = _int(draft, "draft_vocab_size")
    if algorithm == "EAGLE3" and reduced is not None and t_vocab is not None:
        if reduced > t_vocab:
            findings.append(
                Finding(
                    id="config.vocab",
                    severity="error",
                    message=f"draft_vocab_size ({reduced}) is larger than the target's vocabulary ({t_vocab})",
                    role="draft",
                    attribute="draft_vocab_size",
                    evidence=ConfigEvidence.of({"target": t_vocab, "draft_vocab_size": reduced}),
                )
            )
        elif reduced < t_vocab and _has_token_map(checkpoint) is False:
            assert checkpoint is not None
            findings.append(
                Finding(
                    id="config.vocab",
                    severity="error",
                    message=(
                        f"draft_vocab_size ({reduced}) is smaller than the vocabulary ({t_vocab}) "
                        f"but the draft checkpoint ({checkpoint.source}) has no d2t/t2d token "
                        "map: draft ids are taken as target ids and nearly none is accepted"
                    ),
                    role="draft",
                    attribute="draft_vocab_size",
                    fix=AdviceFix("use the draft checkpoint that ships its d2t map"),
                    evidence=ConfigEvidence.of(
                        {
                            "target": t_vocab,
                            "draft_vocab_size": reduced,
                            "checkpoint": checkpoint.source,
                        },
                        read_from=token_map_from,
                    ),
                )
            )
    return findings


def check_hidden_size(target: Mapping[str, Any], draft: Mapping[str, Any]) -> list[Finding]:
    t_hidden = _int(text_config(target), "hidden_size")
    declared = _int(draft, "target_hidden_size") or _int(_eagle_config(draft), "target_hidden_size")
    d_hidden = declared if declared is not None else _int(text_config(draft), "hidden_size")
    if t_hidden is None or d_hidden is None or t_hidden == d_hidden:
        return []
    what = (
        "target_hidden_size"
        if declared is not None
        else "hidden_size (no target_hidden_size declared)"
    )
    return [
        Finding(
            id="config.hidden_size",
            severity="error",
            message=(
                f"the draft expects target hidden states of size {d_hidden} ({what}); "
                f"the target's hidden_size is {t_hidden}"
            ),
            role="draft",
            attribute="target_hidden_size" if declared is not None else "hidden_size",
            fix=AdviceFix("use a draft trained for this target"),
            evidence=ConfigEvidence.of({"target": t_hidden, "draft": d_hidden}),
        )
    ]


def check_aux_layers(target: Mapping[str, Any], draft: Mapping[str, Any]) -> list[Finding]:
    ids = _eagle_config(draft).get("eagle_aux_hidden_state_layer_ids")
    layers = _int(text_config(target), "num_hidden_layers")
    if not isinstance(ids, list) or layers is None:
        return []
    outside = [i for i in ids if not isinstance(i, int) or i < 0 or i >= layers]
    if not outside:
        return []
    return [
        Finding(
            id="config.aux_layers",
            severity="error",
            message=(
                f"eagle_aux_hidden_state_layer_ids {ids} reach outside the target's "
                f"{layers} layers (0..{layers - 1}): {outside}"
            ),
            role="draft",
            attribute="eagle_aux_hidden_state_layer_ids",
            fix=AdviceFix("use the layer ids the draft was trained with for this target"),
            evidence=ConfigEvidence.of({"ids": ids, "target_layers": layers}),
        )
    ]


def check_tp(config: Mapping[str, Any], tp: int, role: str) -> list[Finding]:
    text = text_config(config)
    findings: list[Finding] = []
    heads = _int(text, "num_attention_heads")
    if heads is not None and heads % tp:
        findings.append(
            Finding(
                id="config.tp_divisibility",
                severity="error",
                message=f"the {role}'s {heads} attention heads do not split over --tp {tp}",
                role=role,
                attribute="num_attention_heads",
                fix=AdviceFix(f"a --tp that divides {heads}"),
                evidence=ConfigEvidence.of({"heads": heads, "tp": tp}),
            )
        )
    kv = _int(text, "num_key_value_heads")
    mla = "kv_lora_rank" in text  # multi-head latent attention has no per-head KV to split
    if kv is not None and not mla and (kv % tp if kv >= tp else tp % kv):
        findings.append(
            Finding(
                id="config.tp_divisibility",
                severity="error",
                message=(
                    f"the {role}'s {kv} KV heads neither split evenly over --tp {tp} "
                    "nor replicate evenly across it"
                ),
                role=role,
                attribute="num_key_value_heads",
                fix=AdviceFix(f"a --tp that divides {kv} or is a multiple of it"),
                evidence=ConfigEvidence.of({"kv_heads": kv, "tp": tp}),
            )
        )
    return findings


def weights_bytes(model_dir: Path | None) -> tuple[int | None, str]:
    """The checkpoint's size: the index's metadata.total_size, else the weight files' sizes."""
    if model_dir is None:
        return None, "model not available"
    index_file = model_dir / "model.safetensors.index.json"
    index = json_file(index_file)
    metadata = index.get("metadata") if isinstance(index, dict) else None
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total, "model.safetensors.index.json metadata.total_size"
    files = [p for p in model_dir.iterdir() if p.suffix in _WEIGHT_SUFFIXES and regular_file(p)]
    if files:
        return sum(p.stat().st_size for p in files), f"sizes of {len(files)} weight files"
    return None, "no weight files"
