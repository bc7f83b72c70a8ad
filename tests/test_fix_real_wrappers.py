"""Delegation patches for other real wrapper classes that lacked EAGLE-3 methods in 0.5.9.

Found by auditing every EntryClass of the release: these wrappers hold their language model in
an inner attribute whose class provides the methods, and still lack them in later releases.
Patched, each must parse, add no pyflakes error to its file, and pass a fresh audit.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eaglebug.checks.interface.audit import audit
from eaglebug.checks.interface.patching import plan_patches
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from eaglebug.cli.parser import main

WRAPPERS = {
    # class: (file, delegate)
    "KimiVLForConditionalGeneration": ("sglang/srt/models/kimi_vl.py", "language_model"),
    "Qwen2AudioForConditionalGeneration": ("sglang/srt/models/qwen2_audio.py", "language_model"),
    "NVILAForConditionalGeneration": ("sglang/srt/models/nvila.py", "llm"),
    "Phi4MMForCausalLM": ("sglang/srt/models/phi4mm.py", "language_model"),
}
EAGLE3_FAMILY = {"set_eagle3_layers_to_capture", "get_embed_and_head", "set_embed_and_head"}


@pytest.fixture(scope="module")
def tree_059(sglang_059: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 0.5.9 tree hard-linked into tmp: patches replace files (new inodes), never the cache."""
    root = tmp_path_factory.mktemp("sglang-059") / "tree"
    shutil.copytree(sglang_059 / "sglang", root / "sglang", copy_function=os.link)
    return root


def pyflakes(path: Path) -> set[str]:
    """pyflakes-class findings (ruff F) as 'code message' strings, line numbers left out."""
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "F",
         "--output-format", "json", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return {f"{d['code']} {d['message']}" for d in json.loads(proc.stdout or "[]")}


@pytest.mark.parametrize("cls", sorted(WRAPPERS))
def test_real_wrapper_is_patched_and_passes_the_reaudit(tree_059: Path, cls: str) -> None:
    file, delegate = WRAPPERS[cls]
    path = tree_059 / file
    original = path.read_bytes()
    before = pyflakes(path)
    assert path.stat().st_nlink > 1, "the fixture must start from the shared cache copy"

    code = main(
        [
            "fix",
            "--sglang",
            str(tree_059),
            "--model-class",
            cls,
            "--apply",
            "--no-commit",
            "--no-cache",
        ]
    )
    assert code == 0
    patched = path.read_bytes()
    assert patched != original
    assert path.stat().st_nlink == 1, "the patch replaced the file; the cached release is untouched"

    tree = ast.parse(patched)
    compile(tree, str(path), "exec")
    assert pyflakes(path) <= before, "the patch added an undefined name or another pyflakes error"
    cls_node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    methods = {n.name: n for n in cls_node.body if isinstance(n, ast.FunctionDef)}
    assert set(methods) >= EAGLE3_FAMILY
    for name in EAGLE3_FAMILY:
        calls = [
            n
            for n in ast.walk(methods[name])
            if isinstance(n, ast.Call) and ast.unparse(n.func) == f"self.{delegate}.{name}"
        ]
        assert calls, f"{name} does not delegate to self.{delegate}"

    result = audit(TreeIndex(locate(str(tree_059)), use_cache=False), cls)
    assert [f for f in result.findings if f.severity in {"error", "warning"}] == []


def test_wrapper_whose_forward_computes_logits_gets_no_capture_delegation(tree_059: Path) -> None:
    index = TreeIndex(locate(str(tree_059)), use_cache=False)
    reports = audit(index, "Sarashina2VisionForCausalLM").reports
    (patch,) = plan_patches(index, reports)
    assert "set_eagle3_layers_to_capture" not in patch.methods
    reason = patch.refused["set_eagle3_layers_to_capture"]
    assert "computes logits itself" in reason and "sarashina2_vision.py:" in reason
    assert {"get_embed_and_head", "set_embed_and_head"} <= set(patch.methods)
