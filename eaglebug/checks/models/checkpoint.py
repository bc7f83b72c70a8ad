"""A checkpoint's tensor names, dtypes and shapes, read without reading a single weight.

Sources, best first: `model.safetensors.index.json` (its `weight_map` names every tensor and
`metadata.total_size` gives the bytes), then each `*.safetensors` file's header (8 bytes,
little-endian, giving the length of a JSON header that maps each name to its dtype, shape and
byte range). Only those bytes are read. `.bin`/`.pt` pickles cannot be listed without
unpickling them, so such a checkpoint has no names (`names is None`): checks that need names
say nothing rather than guess.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from eaglebug.checks.contract.inputs import regular_file
from eaglebug.checks.contract.numbers import NotJson, int_value, strict_json
from eaglebug.checks.models.config import json_file

INDEX_NAME = "model.safetensors.index.json"
# A header larger than this is not a safetensors header (the format caps it at 100 MB).
_MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str | None  # None when only the index was read
    shape: tuple[int, ...] | None


@dataclass(frozen=True)
class Checkpoint:
    """What a model folder's weight files say about their tensors."""

    names: frozenset[str] | None  # None: the names cannot be read (pickles, nothing there)
    total_size_bytes: int | None  # the index's metadata.total_size, else the headers' sum
    source: str  # how it was read, for the evidence
    tensors: dict[str, Tensor] = field(default_factory=dict)  # with shapes, from headers

    def has(self, suffix: str) -> bool | None:
        """Is there a tensor named `suffix` or ending in `.suffix` (None: cannot tell)?"""
        if self.names is None:
            return None
        return any(n == suffix or n.endswith("." + suffix) for n in self.names)


def safetensors_header(path: Path) -> dict[str, Tensor] | None:
    """The tensors one safetensors file declares, or None if its header is unreadable."""
    if not regular_file(path):
        return None
    try:
        with path.open("rb") as stream:
            head = stream.read(8)
            if len(head) != 8:
                return None
            (length,) = struct.unpack("<Q", head)
            if length <= 0 or length > _MAX_HEADER_BYTES:
                return None
            raw = stream.read(length)
    except OSError:
        return None
    if len(raw) != length:
        return None
    try:
        header = strict_json(raw)
    except NotJson:
        return None
    if not isinstance(header, dict):
        return None
    tensors: dict[str, Tensor] = {}
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        shape = info.get("shape")
        dims = (
            tuple(d for d in shape if isinstance(d, int))
            if isinstance(shape, list) and all(int_value(d, lo=0) is not None for d in shape)
            else None
        )
        dtype = info.get("dtype")
        tensors[name] = Tensor(name, dtype if isinstance(dtype, str) else None, dims)
    return tensors


def _offsets_bytes(path: Path) -> int:
    """The data bytes a header declares (the largest end offset), for total_size."""
    try:
        with path.open("rb") as stream:
            (length,) = struct.unpack("<Q", stream.read(8))
            header = strict_json(stream.read(length))
    except (OSError, struct.error, NotJson):
        return 0
    if not isinstance(header, dict):
        return 0
    ends = [
        int_value(v["data_offsets"][1], lo=0) or 0
        for k, v in header.items()
        if k != "__metadata__"
        and isinstance(v, dict)
        and isinstance(v.get("data_offsets"), list)
        and len(v["data_offsets"]) == 2
    ]
    return max(ends, default=0)


def shards_stamp(model_dir: Path) -> list[tuple[str, int, int]] | None:
    """What a checkpoint's readers depend on in its folder, as a key: the weight index and the
    shards, each by name, size and mtime (None: the folder cannot be listed)."""
    try:
        with os.scandir(model_dir) as entries:
            return sorted(
                (e.name, e.stat().st_size, e.stat().st_mtime_ns)
                for e in entries
                if e.name.endswith((".safetensors", ".safetensors.index.json"))
            )
    except OSError:
        return None


def read_checkpoint(model_dir: Path | None) -> Checkpoint:
    """Tensor names (and, from headers, shapes) and total size of a model folder."""
    if model_dir is None:
        return Checkpoint(None, None, "model not available")
    index = json_file(model_dir / INDEX_NAME)
    if isinstance(index, dict) and isinstance(index.get("weight_map"), dict):
        metadata = index.get("metadata")
        size = int_value(metadata.get("total_size"), lo=0) if isinstance(metadata, dict) else None
        names = frozenset(str(k) for k in index["weight_map"])
        return Checkpoint(names, size, INDEX_NAME)
    try:
        files = sorted(p for p in model_dir.glob("*.safetensors") if regular_file(p))
    except OSError:
        files = []
    tensors: dict[str, Tensor] = {}
    total_bytes = 0
    for path in files:
        found = safetensors_header(path)
        if found is None:
            return Checkpoint(None, None, f"{path.name}: unreadable safetensors header")
        tensors.update(found)
        total_bytes += _offsets_bytes(path)
    if files:
        what = files[0].name if len(files) == 1 else f"{len(files)} safetensors headers"
        return Checkpoint(frozenset(tensors), total_bytes, what, tensors)
    return Checkpoint(None, None, "no safetensors files (names of .bin/.pt are not read)")
