"""A check's whole answer, kept with the tree's answers, as the headless CLI keeps its replies.

Why: the TUI opened on a tree it has checked before (the everyday case: a new pane, the same
launch) evaluated the launch again, ~1.2 s on 0.5.23, while `eaglebug preflight` answers the
same question from its kept reply in ~0.06 s. The checks' worker keeps the answer (the
preflight's result and the patches) under a key made of everything it depends on besides the
tree, the same parts the CLI's preflight reply is kept by (`cli/commands.py`): the tree's
folder and version, the launch words, the working folder, the environment as preflight reads
it, the GPUs, the last launch's measured memory and the model package's files. The tree
itself is the answers' fingerprint: a fix's commit, an undo or an upgrade is another tree
state, whose answers start empty. The model folders it read are stamped and checked again
before it is reused (`stamps.py`); an answer that read the Hugging Face cache is not kept.
Only the worker keeps answers (`HereChecks(keep=True)`): the tests' in-process checks always
compute.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, NamedTuple

from eaglebug.checks import NO_ANSWER, Answers, Patch, PreflightResult, stamp_key
from eaglebug.session.stamps import FolderStamp, model_folders, question, unchanged

if TYPE_CHECKING:  # `checking.py` imports this module when it keeps answers
    from eaglebug.session.checking import CheckRequest

PREFIX = "check:"
_KEPT = 8  # answers kept per tree: the key holds the GPUs' free memory, which moves


class Kept(NamedTuple):
    flight: PreflightResult
    patches: list[Patch]
    folders: tuple[FolderStamp, ...]


def key(request: CheckRequest) -> str:
    memory = request.gpu_memory
    gpu = dataclasses.astuple(memory) if memory is not None else None  # every figure it holds
    parts: list[object] = [
        str(request.tree.package_dir),
        request.tree.version,
        *question(
            request.words,
            request.environ,
            gpu,
            request.gpu_arch.capability if request.gpu_arch is not None else None,
            request.measured.to_json() if request.measured is not None else None,
        ),
        stamp_key(request.external) if request.external is not None else "",
    ]
    return PREFIX + json.dumps(parts, default=str)


def kept(answers: Answers, check_key: str) -> Kept | None:
    """The answer kept under this key, if the model folders it read are as they were."""
    value = answers.get(check_key, [], Kept)
    if value is NO_ANSWER or not isinstance(value, Kept) or not unchanged(value.folders):
        return None
    return value


def keep(answers: Answers, check_key: str, flight: PreflightResult, patches: list[Patch]) -> None:
    """Keep a check's answer (not if it read folders that cannot be stamped)."""
    folders = model_folders(
        flight.target, flight.draft, roots=flight.package_roots, chosen_by=flight.python_chosen_by
    )
    if folders is None:
        return
    answers.put(check_key, Kept(flight, patches, folders), [], Kept)
    answers.drop_oldest(PREFIX, _KEPT)
    answers.save()
