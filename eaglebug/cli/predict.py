"""`diagnose --sglang PATH`: the memory preflight predicted for a logged launch, beside what the
log measured (SGLang's own `KV Cache is allocated. #tokens:` / `max_total_num_tokens=`).

The log's first lines carry the launch: `server_args=ServerArgs(model_path=..., tp_size=8,
...)`, a dataclass repr whose values are Python literals, read with `ast` (never evaluated).
Its flags become a launch command for `preflight` on the given tree, with the GPU as the log
saw it (the free memory before the load, `Load weight begin. avail mem=`), and without the
log's own numbers (no calibration): the prediction is what preflight would have said before
that launch. Where the model folders are not on this host, or the log has no server args,
there is nothing to predict and the measured figures stand alone.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any

from eaglebug.checks import MAX_DIGITS, MemoryLog, float_value, int_value

# ServerArgs fields that change the memory arithmetic, and the flag that sets each: eaglebug's
# choice of fields; each flag is then parsed as the tree at hand defines it (preflight refuses
# one the tree lacks), so a renamed flag is an error, never a silent guess.
_FLAGS = {
    "model_path": "--model-path",
    "tp_size": "--tp",
    "pp_size": "--pp-size",
    "context_length": "--context-length",
    "mem_fraction_static": "--mem-fraction-static",
    "kv_cache_dtype": "--kv-cache-dtype",
    "page_size": "--page-size",
    "max_running_requests": "--max-running-requests",
    "chunked_prefill_size": "--chunked-prefill-size",
    "cuda_graph_max_bs": "--cuda-graph-max-bs",
    "speculative_algorithm": "--speculative-algorithm",
    "speculative_draft_model_path": "--speculative-draft-model-path",
    "speculative_num_steps": "--speculative-num-steps",
    "speculative_eagle_topk": "--speculative-eagle-topk",
    "speculative_num_draft_tokens": "--speculative-num-draft-tokens",
}
# The variables that say where the Hugging Face hub cache is (`eaglebug/checks/models/source.py`).
_HUB_LOCATION = frozenset({"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"})
_HEAD_BYTES = 256 * 1024
_OBJECT_REPR = re.compile(r"<[^<>\n]*>")
_LONG_NUMBER = re.compile(rf"(?<![\w.])\d{{{MAX_DIGITS + 1},}}")
MAX_NESTING = 32  # a ServerArgs repr nests a dict in a list at most
GIB = 1024**3


def server_args_of(path: Path) -> dict[str, Any] | None:
    """The `server_args=ServerArgs(...)` of the log's first lines, as field -> literal value."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as stream:
            head = stream.read(_HEAD_BYTES)
    except OSError:
        return None
    start = head.find("server_args=ServerArgs(")
    if start < 0:
        return None
    line = head[start + len("server_args=") :].split("\n", 1)[0]
    line = _OBJECT_REPR.sub("None", line)  # `<Backend.FA3: 1>`: not Python, and not a flag
    line = _LONG_NUMBER.sub("None", line)  # more digits than a count has: no number
    if _depth(line) > MAX_NESTING:
        return None  # no ServerArgs repr nests this deep: not one
    try:
        call = ast.parse(line.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        call = None
    if isinstance(call, ast.Call):
        pairs = [(str(k.arg), k.value) for k in call.keywords]
    else:  # a line elided with `...` or cut short: the fields that are there, one by one
        pairs = _fields(line)
        if not pairs:
            return None
    found: dict[str, Any] = {}
    for name, node in pairs:
        try:
            value = ast.literal_eval(node)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue  # an object repr, not a literal: not a flag anyway
        if _elided(value):
            continue  # `cuda_graph_bs=[1, 2, ...]`: part of the value is not there
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = _number(value)  # 1e400 or a 30-digit count: not given
        found[name] = value
    return found


_FIELD = re.compile(r"\s*([A-Za-z_]\w*)\s*=(.*)", re.DOTALL)


def _fields(line: str) -> list[tuple[str, ast.expr]]:
    """`name=value` parts of `ServerArgs(...)` split at its top-level commas (outside quotes
    and brackets), each value parsed alone: a part that does not parse (`...`, a value cut
    mid-way) is left out, the rest stand."""
    text = line.strip()
    if not text.startswith("ServerArgs("):
        return []
    parts: list[str] = []
    depth, quote, start, i = 0, "", len("ServerArgs("), len("ServerArgs(")
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:  # the repr's own closing bracket
                break
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:i])
    out: list[tuple[str, ast.expr]] = []
    for part in parts:
        match = _FIELD.fullmatch(part)
        if match is None:
            continue
        try:
            value = ast.parse(match.group(2).strip(), mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        out.append((match.group(1), value))
    return out


def _elided(value: object) -> bool:
    if value is Ellipsis:
        return True
    if isinstance(value, (list, tuple, set)):
        return any(_elided(v) for v in value)
    if isinstance(value, dict):
        return any(_elided(v) for v in value.values())
    return False


def _number(value: float) -> float | None:
    if isinstance(value, int):
        return int_value(value)
    return float_value(value)


def _depth(text: str) -> int:
    """How deep the brackets of `text` nest (a hostile line nests thousands deep, and
    Python's parser may run out of memory before it says so)."""
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    return deepest


def launch_words(args: dict[str, Any]) -> list[str] | None:
    """The memory-relevant part of the logged launch as a command line; None without a model."""
    if not isinstance(args.get("model_path"), str):
        return None
    words = ["python", "-m", "sglang.launch_server"]
    for field, flag in _FLAGS.items():
        value = args.get(field)
        if value is None or isinstance(value, bool):
            continue
        words += [flag, str(value)]
    return words


def predicted(sglang: str, log: Path, measured: MemoryLog | None) -> dict[str, Any] | None:
    """preflight's config.memory for the logged launch: its figures, or why there are none."""
    from eaglebug.checks import GpuMemory, InputError, TreeIndex, locate, preflight

    args = server_args_of(log)
    words = launch_words(args) if args else None
    if words is None:
        return {"skipped": "the log names no launch (no server_args line)"}
    if measured is None or measured.free_before_load_gib is None:
        return {"skipped": "the log has no free memory before the load (Load weight begin)"}
    free = int(measured.free_before_load_gib * GIB)
    gpu = GpuMemory(free, "the log's avail mem before the load", free, "the log")
    # Where the model's files are on this host (a hub id is looked up in the hub cache the
    # user's environment names); the server's own variables are not this shell's, so no more.
    where = {k: v for k, v in os.environ.items() if k in _HUB_LOCATION}
    try:
        result = preflight(TreeIndex(locate(sglang)), words, where, gpu)
    except InputError as exc:
        return {"skipped": str(exc)}
    memory = next((f for f in result.findings if f.id == "config.memory"), None)
    details = memory.to_json()["details"] if memory else {}
    tokens = details.get("max_total_num_tokens")
    if not isinstance(tokens, int):
        return {"skipped": memory.message if memory else "no memory finding"}
    logged = measured.max_total_num_tokens or measured.kv_tokens
    out: dict[str, Any] = {"max_total_num_tokens": tokens, "logged": logged}
    if logged:
        out["ratio"] = round(tokens / logged, 4)
    return out
