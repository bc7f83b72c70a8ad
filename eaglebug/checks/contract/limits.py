"""Every limit on what eaglebug reads from outside, in one place, with why it is where it is.

Why: nothing eaglebug reads may take a shared GPU box's memory or a minute of its time (issue
21, 24). Each limit sits well above what the real material needs (measured on SGLang 0.5.9 to
0.5.23 and on public checkpoints) and far below what would hurt; an input over a limit is
skipped with one warning line that names it and the limit, and the rest is checked as usual.
"""

from __future__ import annotations

# -- the audited tree's source files (`eaglebug/checks/source/`) ---------------------------------------
# The largest `.py` file of any SGLang release so far is 327 KB (0.5.14's server_args.py): a
# file over this is generated data, not code the runtime's model interface lives in. It is
# skipped unread (a 10 MB one-line file took 5 GB to parse).
SOURCE_FILE_BYTES = 1 << 20
# The longest line of any release is 1,475 characters; byte-level scans work line by line.
SOURCE_LINE_CHARS = 10_000
# A parsed file's syntax tree costs ~270 bytes per node in memory (~400 at the parse's peak).
# Before parsing, the nodes are bounded by the punctuation that separates them (commas,
# brackets, dots, colons, `=`, line ends: about 0.4 to 2.2 nodes each in real files); the
# largest release file has ~20,000 such marks and ~48,000 nodes. 80,000 marks keep any one
# parse under ~80 MB, where a one-line list of a million numbers would take 400 MB.
SOURCE_MARKS = 80_000
SOURCE_MARK_BYTES = (b",", b"(", b"[", b"{", b"=", b".", b":", b"\n")
# Parsed trees kept in memory at once (`source/files.py`), counted by their source's size (a
# tree takes ~27x that: 135 of the 183 MB traced at the end of the seed preflight on 0.5.23).
# That preflight parses ~7.1 MB of source in its main process: with 5 MB kept, 0.4 MB of it
# is parsed again and the run peaked at 199-201 MB, at the 200 MB goal; with 4 MB, 1.1 MB is
# parsed again (a tenth of a second, within the run-to-run noise) and it peaks at 191-192 MB.
PARSED_SOURCE_BYTES = 4_000_000
# The matrix (every class of a release, `matrix/table.py`) revisits few files from one class
# to the next, and holds more besides (every model file's facts): with 4 MB of trees, and the
# evaluator's tables (`pyeval.Source`) holding every model file's classes, `matrix` on 0.5.23
# peaked at 232-240 MB; with 2 MB, and those tables let go between its steps, 175-178 MB, in
# the same time (7.4-9.2 s against 6.7-8.7 s, 2 cores, alternating runs). So do the attention
# check's tries of each backend in place of one set at run time (`args/undecided.py`), each
# reading its own factory's files: DeepSeek-V3 with `--attention-backend $B` on 0.5.23 peaked
# at 225 MB, and at 172 MB so (3.9 s against 4.0 s).
MATRIX_SOURCE_BYTES = 2_000_000
# Values tried in place of a flag set when the launch runs, each a run of the reading (~0.1 s
# warm): by the memory check, every combination of its unknown flags' values
# (`memory/unknowns.py`); by the attention check, one flag's (`args/undecided.py`).
RUN_TIME_TRIES = 32

# -- model folders (`eaglebug/checks/models/`, `eaglebug/checks/memory/`) ----------------------------------------
# A model's config.json is a few KB (the largest public ones, with quantization tables per
# layer, reach a few hundred KB).
CONFIG_FILE_BYTES = 8 << 20
# model.safetensors.index.json maps each tensor to its shard: ~90 bytes a tensor, so ~8 MB for
# the ~90,000 tensors of a 600 B MoE checkpoint.
MODEL_INDEX_BYTES = 64 << 20
# A safetensors header lists a shard's tensors: ~100-300 KB for a shard of a 600 B model, a
# few MB for a single-file checkpoint with every expert. The format allows 100 MB, which
# parsed as JSON would take ~1 GB; a header over this limit is refused with a warning.
SAFETENSORS_HEADER_BYTES = 32 << 20

# -- files a launch command names (`eaglebug/checks/launch/`) ------------------------------------------
# A compose file, a `.env`, an `--env-file`: a few KiB (the largest compose file of the fixtures
# is SGLang deployment's 37 KB, mostly comments). A file over this is not one: refused.
LAUNCH_FILE_BYTES = 1 << 20
# The values of a compose service interpolated: a real one has a few hundred. YAML aliases let
# a 1 KiB file stand for 10^9 of them (a "billion laughs"): the read stops at this many.
COMPOSE_VALUES = 100_000
# GPUs one machine can give a launch (a DGX has 8, the largest boards 16): a count a launch asks
# for past this (`--gpus 30000000`, `--gres=gpu:N`) is not a GPU count, and is not read.
MACHINE_GPUS = 1024

# -- eaglebug's own caches (`eaglebug/checks/source/cache.py`) -------------------------------------------
# A cache file bigger than this is not read (a miss): the facts of two whole releases take
# ~20 MB, and a planted or runaway file must not be read whole.
CACHE_FILE_BYTES = 128 << 20
# The content-addressed facts store is trimmed (least recently used entries first) to this
# size when it is written: enough for the facts of a few releases and checkouts at once.
FACTS_STORE_BYTES = 64 << 20


def mib(n: int) -> str:
    """A byte count for a warning line ("1 MiB", "9.5 MiB")."""
    value = n / (1 << 20)
    return f"{value:.0f} MiB" if value >= 10 or value == int(value) else f"{value:.1f} MiB"
