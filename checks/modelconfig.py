"""Reading a model folder's `config.json`: enough to name its architecture and sizes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eaglebug.checks.errors import InputError


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
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(
            f"{path}: no config.json in the model folder", "is this the model's snapshot folder?"
        ) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(
            f"{path}: not a text file (invalid UTF-8)", "config.json must be JSON text"
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            "fix or re-download config.json",
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: expected a JSON object at the top level", "fix or re-download config.json"
        )
    return data


def architecture(config: dict[str, Any], source: str) -> str:
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise InputError(
            f'{source}: no "architectures" list naming the model class',
            'add "architectures": ["YourModelClass"] or pass --model-class',
        )
    return archs[0]
