"""Architecture name -> model class, collected from every model module's `EntryClass`.

Mirrors sglang 0.5.9 models/registry.py: config.json's `architectures` picks the class.
"""

from __future__ import annotations

import importlib
import pkgutil

import sglang.srt.models


def import_model_classes() -> dict[str, type]:
    classes: dict[str, type] = {}
    for info in pkgutil.iter_modules(sglang.srt.models.__path__, "sglang.srt.models."):
        module = importlib.import_module(info.name)
        entry = getattr(module, "EntryClass", None)
        if entry is None:
            continue
        for cls in entry if isinstance(entry, list) else [entry]:
            classes[cls.__name__] = cls
    return classes


class _ModelRegistry:
    def __init__(self) -> None:
        self.models = import_model_classes()

    def resolve_model_cls(self, architectures: list[str]) -> tuple[type, str]:
        for arch in architectures:
            if arch in self.models:
                return self.models[arch], arch
        raise ValueError(
            f"Model architectures {architectures} are not supported for now. "
            f"Supported architectures: {sorted(self.models)}"
        )


ModelRegistry = _ModelRegistry()
