"""The parse cache (keys, atomic writes, concurrent audits, corruption) and locating the tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eaglebug.checks import cache
from eaglebug.checks.audit import audit
from eaglebug.checks.index import TreeIndex
from eaglebug.checks.tree import locate

REPO = Path(__file__).resolve().parent.parent
MINI = REPO / "examples" / "sglang-mini"
KIMI = "KimiK25ForConditionalGeneration"


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    """A private copy of the example tree, safe to edit."""
    target = tmp_path / "mini"
    shutil.copytree(MINI / "python", target / "python")
    return target


def errors(root: Path, use_cache: bool = True) -> set[str]:
    result = audit(TreeIndex(locate(str(root)), use_cache=use_cache), KIMI)
    return {f.attribute or "" for f in result.findings if f.severity == "error"}


def test_cache_is_written_and_reused(mini: Path) -> None:
    tree = locate(str(mini))
    assert errors(mini) == {"get_embed_and_head", "set_eagle3_layers_to_capture"}
    payload = cache.load(tree.root)
    assert payload["entries"], "the first audit wrote no cache"
    assert (
        Path(cache.cache_path(tree.root)).parent == Path(os.environ["XDG_CACHE_HOME"]) / "eaglebug"
    )
    warm = TreeIndex(tree)
    assert "consumers" in warm.memo, "an unchanged tree should reuse the tree-wide facts"
    assert errors(mini) == {"get_embed_and_head", "set_eagle3_layers_to_capture"}


def test_a_changed_file_is_read_again(mini: Path) -> None:
    assert "get_embed_and_head" in errors(mini)
    kimi = mini / "python/sglang/srt/models/kimi_k25.py"
    source = kimi.read_text()
    marker = "class KimiK25ForConditionalGeneration("
    assert marker in source
    # Add the method at the end of the class body (the class is the last one in the file).
    head, _, _ = source.partition("\nEntryClass")
    patched = (
        head.rstrip()
        + "\n\n    def get_embed_and_head(self):\n        return self.language_model.get_embed_and_head()\n"
        + "\n\nEntryClass"
        + source.partition("\nEntryClass")[2]
    )
    kimi.write_text(patched)
    stat = kimi.stat()
    os.utime(kimi, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    index = TreeIndex(locate(str(mini)))
    assert "consumers" not in index.memo, "tree-wide facts must not survive a changed file"
    assert errors(mini) == {"set_eagle3_layers_to_capture"}


def test_corrupt_cache_is_ignored_and_replaced(mini: Path) -> None:
    tree = locate(str(mini))
    path = cache.cache_path(tree.root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x80\x04not a pickle at all")
    assert errors(mini) == {"get_embed_and_head", "set_eagle3_layers_to_capture"}
    assert cache.load(tree.root)["entries"], "the corrupt cache was not replaced"


def test_no_cache_neither_reads_nor_writes(mini: Path) -> None:
    tree = locate(str(mini))
    errors(mini, use_cache=False)
    assert not cache.cache_path(tree.root).exists()


def test_two_audits_at_once_share_one_cache(mini: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "eaglebug",
        "audit",
        "--sglang",
        str(mini),
        "--model-class",
        KIMI,
        "--json",
    ]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_stdout, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 1, stderr
        assert "Traceback" not in stderr
    findings = [json.loads(stdout)["findings"] for stdout, _ in outputs]
    assert all(f == findings[0] for f in findings)
    tree = locate(str(mini))
    assert cache.load(tree.root)["entries"], "the cache left behind is not readable"
    leftovers = [p for p in cache.cache_path(tree.root).parent.iterdir() if p.suffix == ".tmp"]
    assert leftovers == []


def test_default_tree_is_found_without_importing_it(
    mini: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(mini / "python"))
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)
    tree = locate(None)
    assert tree.package_dir == (mini / "python" / "sglang").resolve()
    assert not any(m == "sglang" or m.startswith("sglang.") for m in sys.modules)


def test_cli_uses_the_importable_sglang_by_default(mini: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(mini / "python"))
    proc = subprocess.run(
        [sys.executable, "-m", "eaglebug", "audit", "--model-class", KIMI, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["sglang"]["package_dir"] == str(
        (mini / "python" / "sglang").resolve()
    )


@pytest.mark.parametrize("given", ["root", "python", "package"])
def test_sglang_path_forms(mini: Path, given: str) -> None:
    path = {"root": mini, "python": mini / "python", "package": mini / "python" / "sglang"}[given]
    assert locate(str(path)).package_dir == (mini / "python" / "sglang").resolve()
