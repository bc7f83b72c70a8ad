"""Reading a model folder's `config.json`: enough to name its architecture and sizes.

The numbers the checks divide and multiply by are validated here, where they are read: a
head count of 0 or a negative layer count is a broken config, said as such (with the key and
the file), not a `ZeroDivisionError` three modules later.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.contract.inputs import OverLimit, read_limited, regular_file
from eaglebug.checks.contract.limits import CONFIG_FILE_BYTES, MODEL_INDEX_BYTES, mib
from eaglebug.checks.contract.numbers import NotJson, float_value, int_value, python_json

# Sizes and counts that must be positive integers wherever a config (or a sub-config such as
# text_config) gives them.
POSITIVE_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "vocab_size",
    "draft_vocab_size",
    "max_position_embeddings",
    "head_dim",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
)
# A rope scaling factor multiplies the context length (SGLang's `get_context_length`); one past
# this is no model's, and a NaN or infinite one would crash SGLang's own arithmetic.
MAX_ROPE_FACTOR = 1e6


def json_file(path: Path) -> Any:
    """A small JSON side file (a safetensors index), or None if it is absent, unreadable or
    over `limits.MODEL_INDEX_BYTES`."""
    if not regular_file(path):
        return None
    try:
        return python_json(read_limited(path, MODEL_INDEX_BYTES))
    except (OSError, OverLimit, NotJson):
        return None


def _shown(value: Any) -> str:
    """A value as config.json spells it, short (a 4,000-digit number is not echoed whole)."""
    text = json.dumps(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _check_numbers(config: dict[str, Any], path: Path, where: str = "") -> None:
    """The sizes every check divides and multiplies by, read once with the one number reader
    (`contract/numbers.py`): a bool, a NaN, a 30-digit count or a fraction is refused here."""
    for key in POSITIVE_KEYS:
        value = config.get(key)
        if value is None:
            continue
        if int_value(value, lo=1) is None:
            raise InputError(
                f"{path}: {where}{key} is {_shown(value)}; expected a positive integer",
                "fix config.json, or download the model's config again",
            )
    scaling = config.get("rope_scaling")
    if isinstance(scaling, dict) and scaling.get("factor") is not None:
        factor = scaling["factor"]
        if float_value(factor, hi=MAX_ROPE_FACTOR) is None or factor <= 0:
            raise InputError(
                f"{path}: {where}rope_scaling.factor is {_shown(factor)}; "
                "expected a positive finite number",
                "fix config.json, or download the model's config again",
            )
    if not where:
        for name, sub in config.items():
            if isinstance(sub, dict) and name.endswith("_config"):
                _check_numbers(sub, path, f"{name}.")


def read_config(model_dir: str | Path) -> dict[str, Any]:
    """The parsed `config.json` of a model folder, or an InputError that says what is wrong."""
    folder = Path(model_dir).expanduser()
    if not folder.exists():
        raise InputError(
            f"{model_dir}: no such model folder", "pass the folder that holds config.json"
        )
    if not folder.is_dir():
        raise InputError(
            f"{model_dir}: is a file, not a model folder", "pass the folder that holds config.json"
        )
    path = folder / "config.json"
    if path.is_dir():
        raise InputError(
            f"{path}: is a folder, not a file", "config.json must be the model's JSON config file"
        )
    if path.exists() and not regular_file(path):
        raise InputError(
            f"{path}: not a regular file (a pipe or a device)",
            "config.json must be the model's JSON config file",
        )
    try:
        raw = read_limited(path, CONFIG_FILE_BYTES)
    except OverLimit as exc:
        raise InputError(
            f"{path}: {mib(exc.size)} is over the {mib(CONFIG_FILE_BYTES)} limit for a "
            "config.json (a model's config is a few KB)",
            "is this the model's config.json? download it again",
        ) from None
    except FileNotFoundError:
        raise InputError(
            f"{path}: no config.json in the model folder", "is this the model's snapshot folder?"
        ) from None
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read ({exc.strerror})", "check the file's permissions"
        ) from None
    try:
        data = python_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(
            f"{path}: not a text file (invalid UTF-8)", "config.json must be JSON text"
        ) from None
    except NotJson as exc:
        why = "nested too deeply to be a model config" if str(exc) == "nested too deeply" else exc
        raise InputError(f"{path}: {why}", "fix or re-download config.json") from None
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: expected a JSON object at the top level", "fix or re-download config.json"
        )
    _check_numbers(data, path)
    return data


def architecture(config: dict[str, Any], source: str) -> str:
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise InputError(
            f'{source}: no "architectures" list naming the model class',
            'add "architectures": ["YourModelClass"] or pass --model-class',
        )
    return archs[0]
