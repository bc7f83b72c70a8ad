"""Small synthetic SGLang-shaped source trees for the audit tests, written from Python strings.

`write_tree(tmp_path, {"sglang/srt/models/foo.py": "..."})` writes the given files plus the
skeleton every SGLang tree has: the package `__init__.py` files, a `SpeculativeAlgorithm` enum in
`sglang/srt/speculative/spec_info.py` shaped like the real one (0.5.9), and the worker modules its
`create_worker` imports. Paths are relative to the folder holding `sglang/`, the same form the
findings use for call sites, so `site(root, path, needle)` builds the CallSite a test expects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

from eaglebug.checks.contract.findings import CallSite, Finding
from eaglebug.checks.interface.audit import AuditResult, audit
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate

SPEC_INFO = '''
from __future__ import annotations

from enum import Enum, auto
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from sglang.srt.server_args import ServerArgs


class SpeculativeAlgorithm(Enum):
    """Enumeration of speculative decoding algorithms."""

    EAGLE = auto()
    EAGLE3 = auto()
    STANDALONE = auto()
    NGRAM = auto()
    NONE = auto()

    @classmethod
    def from_string(cls, name: Optional[str]) -> SpeculativeAlgorithm:
        if name is None:
            return cls.NONE
        return cls[name.upper()]

    def is_none(self) -> bool:
        return self == SpeculativeAlgorithm.NONE

    def is_eagle(self) -> bool:
        # NOTE: EAGLE3 is a variant of EAGLE
        return self == SpeculativeAlgorithm.EAGLE or self == SpeculativeAlgorithm.EAGLE3

    def is_eagle3(self) -> bool:
        return self == SpeculativeAlgorithm.EAGLE3

    def is_standalone(self) -> bool:
        return self == SpeculativeAlgorithm.STANDALONE

    def is_ngram(self) -> bool:
        return self == SpeculativeAlgorithm.NGRAM

    def supports_spec_v2(self) -> bool:
        return self.is_eagle() or self.is_standalone()

    def create_worker(self, server_args: ServerArgs):
        assert not self.is_none(), "Cannot create worker for NONE speculative algorithm."

        enable_overlap = not server_args.disable_overlap_schedule
        if self.is_eagle():
            if enable_overlap:
                from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

                return EAGLEWorkerV2

            from sglang.srt.speculative.eagle_worker import EAGLEWorker

            return EAGLEWorker
        elif self.is_standalone():
            if enable_overlap:
                from sglang.srt.speculative.standalone_worker_v2 import (
                    StandaloneWorkerV2,
                )

                return StandaloneWorkerV2

            from sglang.srt.speculative.standalone_worker import StandaloneWorker

            return StandaloneWorker
        elif self.is_ngram():
            if enable_overlap:
                raise ValueError("NGRAM does not support overlap worker creation.")

            from sglang.srt.speculative.ngram_worker import NGRAMWorker

            return NGRAMWorker

        raise ValueError("Unreachable code path in create_worker.")
'''

# The worker modules `create_worker` returns classes from; tests override them to add uses.
EAGLE_WORKER = """
class EAGLEWorker:
    def __init__(self, server_args, target_worker):
        self.target_worker = target_worker
"""

SKELETON: dict[str, str] = {
    "sglang/srt/speculative/spec_info.py": SPEC_INFO,
    "sglang/srt/speculative/eagle_worker.py": EAGLE_WORKER,
    "sglang/srt/speculative/eagle_worker_v2.py": """
class EAGLEWorkerV2:
    def __init__(self, server_args, target_worker):
        self.target_worker = target_worker
""",
    "sglang/srt/speculative/standalone_worker.py": """
from sglang.srt.speculative.eagle_worker import EAGLEWorker


class StandaloneWorker(EAGLEWorker):
    pass
""",
    "sglang/srt/speculative/standalone_worker_v2.py": """
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2


class StandaloneWorkerV2(EAGLEWorkerV2):
    pass
""",
    "sglang/srt/speculative/ngram_worker.py": """
class NGRAMWorker:
    def __init__(self, server_args, target_worker):
        self.target_worker = target_worker
""",
}

# What a test module writes at import time when `write_tree(..., marker=...)` is used.
_MARKER_LINE = (
    "import pathlib as _eaglebug_marker; _eaglebug_marker.Path({path!r}).write_text(__name__)\n"
)


def write_tree(root: Path, files: Mapping[str, str | bytes], *, marker: Path | None = None) -> Path:
    """Write an SGLang-shaped tree under `root` (the folder that will hold `sglang/`).

    `files` maps paths like `sglang/srt/models/foo.py` to source text (dedented) or raw bytes;
    they replace the skeleton's files of the same path. Every folder under `sglang/` gets an
    `__init__.py`. With `marker`, every text module first writes that file when imported.
    """
    merged: dict[str, str | bytes] = {
        "sglang/__init__.py": "",
        "sglang/srt/__init__.py": "",
        **SKELETON,
        **files,
    }
    for rel in list(merged):
        parent = Path(rel).parent
        while parent.parts and parent.parts[0] == "sglang":
            merged.setdefault((parent / "__init__.py").as_posix(), "")
            parent = parent.parent
    for rel, source in merged.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, bytes):
            path.write_bytes(source)
            continue
        text = textwrap.dedent(source).lstrip("\n")
        if marker is not None:
            header = _MARKER_LINE.format(path=str(marker))
            if text.startswith("from __future__"):
                first, _, rest = text.partition("\n")
                text = f"{first}\n{header}{rest}"
            else:
                text = header + text
        path.write_text(text, encoding="utf-8")
    return root


def audit_tree(
    root: Path, class_name: str, algorithm: str = "EAGLE3", draft_class: str | None = None
) -> AuditResult:
    """The audit through the public API, with no parse cache."""
    return audit(TreeIndex(locate(str(root)), use_cache=False), class_name, algorithm, draft_class)


def findings_for(result: AuditResult, attribute: str, role: str | None = None) -> list[Finding]:
    return [
        f for f in result.findings if f.attribute == attribute and (role is None or f.role == role)
    ]


def line_of(root: Path, rel: str, needle: str) -> int:
    """The 1-based line of the one line in a written file that contains `needle`."""
    lines = (root / rel).read_text(encoding="utf-8").splitlines()
    hits = [i for i, line in enumerate(lines, 1) if needle in line]
    assert len(hits) == 1, f"{needle!r} occurs on lines {hits} of {rel}"
    return hits[0]


def site(root: Path, rel: str, needle: str) -> CallSite:
    """The CallSite a finding should carry for the line of `rel` that contains `needle`."""
    line = line_of(root, rel, needle)
    code = (root / rel).read_text(encoding="utf-8").splitlines()[line - 1].strip()
    return CallSite(rel, line, code)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m eaglebug ...` in a child process, as a user or a CI script would run it."""
    return subprocess.run(
        [sys.executable, "-m", "eaglebug", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# Runs `python -m eaglebug` once per argv inside one child interpreter: the same entry point,
# exit code and stdout/stderr as separate processes, without paying interpreter start-up per case.
# An exception that escapes is printed as Python would print it, traceback and all.
_BATCH = r"""
import io, json, runpy, sys, traceback
from contextlib import redirect_stderr, redirect_stdout

results = {}
for key, argv in json.load(sys.stdin).items():
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["eaglebug", *argv]
    with redirect_stdout(out), redirect_stderr(err):
        try:
            runpy.run_module("eaglebug", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
    results[key] = [code, out.getvalue(), err.getvalue()]
sys.__stdout__.write(json.dumps(results))
"""


def run_cli_batch(
    cases: Mapping[str, list[str]], env: Mapping[str, str] | None = None
) -> dict[str, subprocess.CompletedProcess[str]]:
    """`python -m eaglebug ARGV` for each case, all in one child interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", _BATCH],
        input=json.dumps(dict(cases)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    return {
        key: subprocess.CompletedProcess(["eaglebug", *cases[key]], code, out, err)
        for key, (code, out, err) in results.items()
    }
