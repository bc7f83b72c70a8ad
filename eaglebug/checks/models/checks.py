"""Model-config checks for a speculative launch: target vs draft, against the launch's flags.

Each returns findings per the contract. Where SGLang's own wording or knobs matter (the env var
that allows a longer context, the keys it reads the context length from), they are read from
the audited tree, so the advice follows the release.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.evidence import ConfigEvidence
from eaglebug.checks.contract.findings import Finding
from eaglebug.checks.contract.fixes import AdviceFix, Choice, EnvFix, FlagFix
from eaglebug.checks.contract.inputs import regular_file
from eaglebug.checks.contract.numbers import float_value
from eaglebug.checks.models.checkpoint import Checkpoint
from eaglebug.checks.models.config import MAX_ROPE_FACTOR, json_file
from eaglebug.checks.source.index import TreeIndex

GIB = 1024**3
# SGLang's EnvBool spellings of true (environ.py: lower-cased, not stripped; anything else,
# "on" included, is warned about and read as the default, False).
_TRUE = frozenset({"1", "true", "yes", "y"})
_DEFAULT_CONTEXT_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
_DEFAULT_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
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


@dataclass(frozen=True)
class ContextRules:
    """How the audited SGLang derives context lengths and lets a user override them."""

    keys: tuple[str, ...]
    env_var: str
    message: str | None  # SGLang's own refusal text, placeholders filled in later
    source: str | None  # where it was read from: file:line of SGLang's refusal


# The keys and the variable of the releases read so far, for a reading without a tree.
DEFAULT_CONTEXT = ContextRules(_DEFAULT_CONTEXT_KEYS, _DEFAULT_CONTEXT_ENV, None, None)


def context_rules(index: TreeIndex) -> ContextRules:
    """How this tree derives and guards the context length (a tree answer)."""
    return index.answer("context_rules", ContextRules, lambda: _context_rules(index))


def _context_rules(index: TreeIndex) -> ContextRules:
    keys: tuple[str, ...] = _DEFAULT_CONTEXT_KEYS
    env_var = _DEFAULT_CONTEXT_ENV
    message = None
    source = None
    for rel in index.entries:
        if not rel.startswith("sglang/srt/"):
            continue
        name = rel.rsplit("/", 1)[-1]
        if name not in {"hf_transformers_utils.py", "common.py", "model_config.py"}:
            continue
        try:
            text = (index.tree.root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "CONTEXT_LENGTH_KEYS = [" in text:
            start = text.index("CONTEXT_LENGTH_KEYS = [")
            end = text.find("]", start)
            try:
                value = ast.literal_eval(text[start + len("CONTEXT_LENGTH_KEYS = ") : end + 1])
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    keys = tuple(value)
            except (SyntaxError, ValueError):
                pass
        if name == "model_config.py":
            env = re.search(r"envs\.(SGLANG_\w*CONTEXT\w*)\.get\(\)", text) or re.search(
                r"set the env var (SGLANG_\w+)=1", text
            )
            if env:
                env_var = env.group(1)
                source = rel
            wording = re.search(
                r'f"(Warning: \{reason\} context_length[^"]*)"((?:\s*f?"[^"]*")*)', text
            )
            if wording:
                more = re.findall(r'f?"([^"]*)"', wording.group(2))
                message = wording.group(1) + "".join(more)
                source = f"{rel}:{text.count(chr(10), 0, wording.start()) + 1}"
    return ContextRules(keys, env_var, message, source)


def derived_context_length(config: Mapping[str, Any], rules: ContextRules) -> int | None:
    """SGLang's `get_context_length`: the first known key, scaled by plain rope scaling."""
    text = text_config(config)
    factor: float = 1
    scaling = text.get("rope_scaling")
    if isinstance(scaling, dict):
        # read_config refused a factor that is not a positive finite number
        factor = float_value(scaling.get("factor", 1), hi=MAX_ROPE_FACTOR) or 1
        if "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3":
            factor = 1
    for key in rules.keys:
        value = _int(text, key)
        if value is not None:
            return int(factor * value)
    return None


def check_context_length(
    target: Mapping[str, Any],
    draft: Mapping[str, Any] | None,
    user_context: int | None,
    env: Mapping[str, str],
    rules: ContextRules,
) -> list[Finding]:
    findings: list[Finding] = []
    allowed = env.get(rules.env_var, "").lower() in _TRUE
    target_len = derived_context_length(target, rules)
    effective = user_context if user_context is not None else target_len
    env_fix = f"{rules.env_var}=1"
    if user_context is not None and target_len is not None and user_context > target_len:
        findings.append(
            Finding(
                id="config.context_length",
                severity="info" if allowed else "error",
                message=(
                    f"--context-length {user_context} is longer than the target's derived "
                    f"context length {target_len}"
                    + (f"; allowed by {env_fix}" if allowed else "; SGLang refuses to start")
                ),
                role="target",
                attribute="context_length",
                fix=EnvFix(rules.env_var, "1", "set: SGLang allows the longer context")
                if allowed
                else Choice(
                    (
                        FlagFix(
                            "--context-length",
                            str(target_len),
                            "stays within what the target was configured for",
                        ),
                        EnvFix(rules.env_var, "1", "forces the longer context on SGLang"),
                    )
                ),
                evidence=ConfigEvidence.of(
                    {"target_context_length": target_len, "requested": user_context}
                ),
            )
        )
    if draft is None:
        return findings
    draft_len = derived_context_length(draft, rules)
    if effective is None and draft_len is not None and not allowed:
        findings.append(_unknown_target_length(draft_len, rules))
    if effective is None or draft_len is None or effective <= draft_len:
        return findings
    sglang_says = None
    if rules.message:
        sglang_says = (
            rules.message.replace("{reason}", "Target model's")
            .replace("{context_length}", str(effective))
            .replace("{derived_context_len}", str(draft_len))
        )
    choice = Choice(
        (
            EnvFix(
                rules.env_var,
                "1",
                f"keeps the full {effective}-token context; the draft runs past the {draft_len} "
                "positions it was trained on, so its acceptance rate (and the speed-up) drops on "
                "long prompts; outputs stay correct because the target verifies every token",
            ),
            FlagFix(
                "--context-length",
                str(draft_len),
                f"keeps the draft inside its trained range; the server then rejects prompts "
                f"longer than {draft_len} tokens",
            ),
        )
    )
    evidence = ConfigEvidence.of(
        {
            "target_context_length": effective,
            "draft_max_position_embeddings": draft_len,
            "env_var": rules.env_var,
        },
        read_from=rules.source,
        sglang=sglang_says,
    )
    findings.append(
        Finding(
            id="config.context_length",
            severity="info" if allowed else "error",
            message=(
                f"the draft's context length ({draft_len}) is shorter than the target's ({effective})"
                + (
                    f"; {env_fix} is set, so SGLang starts and the draft runs past its trained positions"
                    if allowed
                    else "; SGLang refuses to start after loading the target"
                )
            ),
            role="draft",
            attribute="max_position_embeddings",
            fix=choice.env if allowed else choice,
            evidence=evidence,
        )
    )
    return findings


def _unknown_target_length(draft_len: int, rules: ContextRules) -> Finding:
    """The target's config.json names no context length (`save_pretrained` leaves a class
    default out, as Gemma-3's does) and no transformers beside the tree says what its config
    class gives (`classdefaults.py`): SGLang compares that length with the draft's all the
    same, so the draft's shorter one is said, as a warning resting on the unknown, not an
    error on a guess."""
    keys = ", ".join(rules.keys)
    return Finding(
        id="config.context_length",
        severity="warning",
        message=(
            f"the target's config.json names no context length ({keys}), and no transformers "
            f"config class beside this tree gives one; if the one SGLang gets is longer than "
            f"the draft's ({draft_len}), SGLang refuses to start after loading the target"
        ),
        role="draft",
        attribute="max_position_embeddings",
        fix=Choice(
            (
                FlagFix(
                    "--context-length",
                    str(draft_len),
                    f"keeps the draft inside its trained range; the server then rejects "
                    f"prompts longer than {draft_len} tokens",
                ),
                EnvFix(rules.env_var, "1", "lets SGLang start with the target's longer context"),
            )
        ),
        evidence=ConfigEvidence.of(
            {"target_context_length": None, "draft_max_position_embeddings": draft_len},
            read_from=rules.source,
        ),
    )


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
