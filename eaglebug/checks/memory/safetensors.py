"""The bytes of every tensor of a checkpoint, read from its safetensors headers alone.

A safetensors file starts with an 8-byte little-endian header length and a JSON header
`{name: {dtype, shape, data_offsets}}` (plus `__metadata__`); `data_offsets` give each
tensor's exact size, whatever the dtype (FP8, packed INT4 and scales included). Only the
header is read, never the data, so a 700 GB checkpoint costs a few megabytes of reading.
The shard files are the ones `model.safetensors.index.json`'s `weight_map` names, else the
`*.safetensors` files of the folder. A folder whose shards are absent or unreadable (a Git
LFS pointer, a truncated download) gives the reason instead, for the caller to fall back.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eaglebug.checks.contract.inputs import OverLimit, read_limited
from eaglebug.checks.contract.limits import MODEL_INDEX_BYTES, SAFETENSORS_HEADER_BYTES, mib
from eaglebug.checks.contract.numbers import NotJson, int_value, strict_json

_LFS = b"version https://git-lfs"


class Refused(str):
    """A reason that is also a warning line: a header refused by a limit, not a broken file."""


@dataclass(frozen=True)
class CheckpointTensors:
    sizes: dict[str, int]  # tensor name (or the key names were folded into) -> bytes
    files: int  # shard files read
    counts: dict[str, int] = field(default_factory=dict)  # key -> tensors folded into it

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes.values())

    def count(self, key: str) -> int:
        return self.counts.get(key, 1)


def header_sizes(path: Path) -> dict[str, int] | str:
    """Tensor name -> bytes from one file's header, or why it cannot be read."""
    try:
        with path.open("rb") as handle:
            head = handle.read(8)
            if head.startswith(_LFS[:8]):
                return f"{path.name} is a Git LFS pointer, not the weights (run git lfs pull)"
            if len(head) < 8:
                return f"{path.name} is truncated ({len(head)} bytes)"
            (length,) = struct.unpack("<Q", head)
            size = path.stat().st_size
            if length + 8 > size:
                return f"{path.name} has no readable safetensors header (truncated download?)"
            if length > SAFETENSORS_HEADER_BYTES:
                return Refused(
                    f"{path}: a safetensors header of {mib(length)} is over the "
                    f"{mib(SAFETENSORS_HEADER_BYTES)} limit; not read"
                )
            raw = handle.read(length)
    except OSError as error:
        return f"{path.name} cannot be read ({error.strerror or error})"
    try:
        header = strict_json(raw)
    except NotJson:
        return f"{path.name}'s safetensors header is not JSON"
    if not isinstance(header, dict):
        return f"{path.name}'s safetensors header is not a table of tensors"
    sizes: dict[str, int] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        begin, end = (
            (int_value(offsets[0], lo=0), int_value(offsets[1], lo=0))
            if isinstance(offsets, list) and len(offsets) == 2
            else (None, None)
        )
        if begin is None or end is None or end < begin:
            return f"{path.name}: tensor {name} has no data_offsets"
        if end + 8 + length > size:
            return f"{path.name} is shorter than its header says (truncated download?)"
        sizes[name] = end - begin
    return sizes


def _shard_files(model_dir: Path) -> list[Path] | str:
    index_file = model_dir / "model.safetensors.index.json"
    if index_file.is_file():
        try:
            index = strict_json(read_limited(index_file, MODEL_INDEX_BYTES))
        except OverLimit as exc:
            return f"model.safetensors.index.json is {mib(exc.size)}, over the limit; not read"
        except (OSError, NotJson):
            return "model.safetensors.index.json is not readable JSON"
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            return "model.safetensors.index.json has no weight_map"
        names = sorted({v for v in weight_map.values() if isinstance(v, str)})
        missing = [n for n in names if not (model_dir / n).is_file()]
        if missing:
            return (
                f"{len(missing)} of the {len(names)} shard files the index names are absent "
                f"(first: {missing[0]})"
            )
        return [model_dir / n for n in names]
    files = sorted(p for p in model_dir.glob("*.safetensors") if p.is_file())
    return files or "no safetensors files"


def checkpoint_tensors(
    model_dir: Path | None,
    fold: Callable[[str], str] | None = None,
    warnings: list[str] | None = None,
) -> CheckpointTensors | str:
    """Every tensor's bytes from the checkpoint's headers, or why they cannot be read; with
    `fold`, the names that fold to one key are summed under it (a 700 GB MoE checkpoint has
    ~90,000 tensors, most of them experts that differ only by number). A header refused by
    its limit is also said in `warnings`."""
    if model_dir is None:
        return "model not available"
    files = _shard_files(model_dir)
    if isinstance(files, str):
        return files
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    for path in files:
        found = header_sizes(path)
        if isinstance(found, str):
            if isinstance(found, Refused) and warnings is not None:
                warnings.append(str(found))
            return str(found)
        if fold is None:
            sizes.update(found)
            continue
        for name, size in found.items():
            key = fold(name)
            sizes[key] = sizes.get(key, 0) + size
            counts[key] = counts.get(key, 0) + 1
    if not sizes:
        return "the safetensors headers list no tensors"
    return CheckpointTensors(sizes, len(files), counts)
