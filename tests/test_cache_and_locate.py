"""The parse cache (keys, atomic writes, concurrent audits, corruption) and locating the tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eaglebug.checks.interface.audit import audit
from eaglebug.checks.source import cache
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.store import load_stamps
from eaglebug.checks.source.tree import locate

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
    assert load_stamps(tree.root), "the first audit wrote no cache"
    assert cache.files_path(tree.root).parent == Path(os.environ["XDG_CACHE_HOME"]) / "eaglebug"
    warm = TreeIndex(tree)
    assert warm.answers.has("consumers"), "an unchanged tree should reuse the tree-wide facts"
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
    assert not index.answers.has("consumers"), "tree-wide facts must not survive a changed file"
    assert errors(mini) == {"set_eagle3_layers_to_capture"}


def test_corrupt_cache_is_ignored_and_replaced(mini: Path) -> None:
    tree = locate(str(mini))
    paths = [cache.files_path(tree.root), cache.answers_path(tree.root), cache.store_path()]
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    for path in paths:
        path.write_bytes(b"\x80\x04not a cache at all")
    assert errors(mini) == {"get_embed_and_head", "set_eagle3_layers_to_capture"}
    assert load_stamps(tree.root), "the corrupt cache was not replaced"
    assert all(cache.read(p, None) or cache.read(p, tree.root) for p in paths)


def test_no_cache_neither_reads_nor_writes(mini: Path) -> None:
    tree = locate(str(mini))
    errors(mini, use_cache=False)
    assert not cache.files_path(tree.root).exists()
    assert not cache.store_path().exists() and not cache.answers_path(tree.root).exists()


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
    assert load_stamps(tree.root), "the cache left behind is not readable"
    leftovers = [p for p in cache.cache_dir().iterdir() if p.suffix == ".tmp"]
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


# -- tree-wide answers and kept replies ------------------------------------------------------


def test_an_unchanged_tree_is_answered_without_a_walk(mini: Path) -> None:
    tree = locate(str(mini))
    cold = audit(TreeIndex(tree), KIMI)
    warm_index = TreeIndex(tree)
    assert warm_index.answers.quick, "the fingerprint of an unchanged tree should hold"
    warm = audit(warm_index, KIMI)
    assert not warm_index.files.scanned, "a question answered before needs no walk"
    assert [f.to_json() for f in warm.findings] == [f.to_json() for f in cold.findings]


def test_a_new_folder_without_python_files_keeps_the_answers(mini: Path) -> None:
    tree = locate(str(mini))
    audit(TreeIndex(tree), KIMI)
    (mini / "python/sglang/srt/__pycache__").mkdir()
    (mini / "python/sglang/srt/notes").mkdir()  # a folder's mtime changes: the walk decides
    index = TreeIndex(tree)
    assert not index.answers.quick and index.files.scanned
    assert index.answers.has("consumers"), "the same files: the answers still hold"


def test_a_new_file_drops_the_answers(mini: Path) -> None:
    tree = locate(str(mini))
    assert "extra_attr" not in {f.attribute for f in audit(TreeIndex(tree), KIMI).findings}
    (mini / "python/sglang/srt/extra_runner.py").write_text(
        "def f(model_runner):\n    model_runner.model.extra_attr()\n"
    )
    index = TreeIndex(tree)
    assert not index.answers.has("consumers")
    assert "extra_attr" in {f.attribute for f in audit(index, KIMI).findings}


def _edit_in_place(path: Path, text: str) -> None:
    """Rewrite a file as an editor that truncates does: its folder's mtime stays as it was."""
    folder = path.parent.stat().st_mtime_ns
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before, before + 1_000_000_000))
    assert path.parent.stat().st_mtime_ns == folder


def test_an_edit_to_a_file_outside_the_runtime_that_an_answer_read_is_seen(mini: Path) -> None:
    """The answers' fingerprint stats the runtime's files and the others a run read: here a
    base class that lives outside `sglang/srt/`, reached by an import."""
    mixin = mini / "python/sglang/contrib/heads.py"
    mixin.parent.mkdir()
    mixin.write_text("class Heads:\n    pass\n")
    kimi = mini / "python/sglang/srt/models/kimi_k25.py"
    kimi.write_text(
        kimi.read_text()
        .replace(
            "from typing import Any\n",
            "from typing import Any\n\nfrom sglang.contrib.heads import Heads\n",
        )
        .replace("(nn.Module):", "(nn.Module, Heads):", 1)
    )
    assert "get_embed_and_head" in errors(mini)
    _edit_in_place(
        mixin,
        "class Heads:\n    def get_embed_and_head(self):\n"
        "        return self.language_model.get_embed_and_head()\n",
    )
    index = TreeIndex(locate(str(mini)))
    assert not index.answers.quick, "the answers read heads.py: its edit must be noticed"
    assert "get_embed_and_head" not in errors(mini)


def test_an_edit_to_a_file_no_answer_read_keeps_the_answers(mini: Path) -> None:
    """A wheel ships thousands of files outside the runtime (kernels, tests); stat'ing them
    all would double a warm run's check for files no answer looked at."""
    unread = mini / "python/sglang/test/helpers.py"
    unread.parent.mkdir()
    unread.write_text("X = 1\n")
    cold = errors(mini)
    _edit_in_place(unread, "X = 2\n")
    assert TreeIndex(locate(str(mini))).answers.quick
    assert errors(mini) == cold
    unread.unlink()  # a file gone: its folder says so, and the walk decides
    assert not TreeIndex(locate(str(mini))).answers.quick


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m eaglebug ...`, and (on stderr's last line) whether the engine was loaded."""
    probe = (
        "import sys\nbefore = set(sys.modules)\n"  # what the interpreter's site loaded
        "from eaglebug.tui.entry import main\ncode = main(sys.argv[1:])\n"
        "heavy = {'dataclasses', 'shutil'} & (set(sys.modules) - before)\n"
        "print('dataclasses or shutil loaded:', bool(heavy), file=sys.stderr)\n"
        "print('engine loaded:', 'eaglebug.checks.source.index' in sys.modules, file=sys.stderr)\n"
        "raise SystemExit(code)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", probe, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_a_kept_reply_is_the_cold_one_without_loading_the_engine(mini: Path) -> None:
    argv = ("audit", "--sglang", str(mini), "--model-class", KIMI, "--json")
    cold, warm = _cli(*argv), _cli(*argv)
    assert cold.stderr.endswith("engine loaded: True\n")
    # Nor `dataclasses` (with `inspect`, ~10 ms, and ~1 ms per class made): what a kept reply
    # reads is NamedTuples (the fingerprint, the reply, the tree); nor `shutil` (~5 ms, which
    # argparse's formatter imports for the terminal's width: `options.Formatter`).
    assert warm.stderr.endswith("dataclasses or shutil loaded: False\nengine loaded: False\n")
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout) == (1, warm.stdout)
    assert warm.stderr.splitlines()[:-2] == cold.stderr.splitlines()[:-2]


def test_a_kept_reply_says_the_warnings_again(mini: Path) -> None:
    os.mkfifo(mini / "python/sglang/srt/models/pipe.py")
    argv = ("audit", "--sglang", str(mini), "--model-class", KIMI, "--json")
    warning = "warning: sglang/srt/models/pipe.py: skipped, not a regular file"
    for attempt in ("cold", "warm"):
        run = _cli(*argv)
        assert run.returncode == 1, (attempt, run.stderr)
        assert warning in run.stderr.splitlines(), attempt


def test_a_preflight_reply_is_not_kept_past_an_edited_config(mini: Path, tmp_path: Path) -> None:
    from tests.configs import eagle3, llama, write_model

    target = write_model(tmp_path / "target", llama(max_position_embeddings=8192))
    draft = write_model(tmp_path / "draft", eagle3(max_position_embeddings=8192))
    # The GPU given: NVML is not asked, and a kept reply loads little.
    argv = (
        "preflight", "--sglang", str(mini), "--json", "--gpu-mem-gib", "80", "--gpu-arch", "sm90",
        "--", "python", "-m", "sglang.launch_server", "--model-path", str(target),
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
    )  # fmt: skip

    def context_findings() -> list[str]:
        run = _cli(*argv)
        assert run.returncode in (0, 1), run.stderr
        found = json.loads(run.stdout)["findings"]
        return [f["severity"] for f in found if f["id"] == "config.context_length"]

    assert context_findings() == context_findings() == []
    assert "dataclasses or shutil loaded: False" in _cli(*argv).stderr, (
        "a kept preflight reply, too"
    )
    write_model(tmp_path / "draft", eagle3(max_position_embeddings=4096))
    assert context_findings() == ["error"], "the draft's shorter context must be read afresh"
    ok = _cli(*argv, env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
    allowed = [f for f in json.loads(ok.stdout)["findings"] if f["id"] == "config.context_length"]
    assert [f["severity"] for f in allowed] == ["info"], "a different environment, another reply"


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_in_process_audits_leave_no_helper_behind(
    mini: Path, capsys: pytest.CaptureFixture[str], json_flag: tuple[str, ...]
) -> None:
    import psutil

    from eaglebug.cli.parser import main

    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    for _attempt in ("cold", "warm"):
        code = main(["audit", "--sglang", str(mini), "--model-class", KIMI, *json_flag])
        assert code == 1, capsys.readouterr().err
    left = [p for p in me.children(recursive=True) if p.pid not in before]
    assert left == [], "every helper process is reaped before the command returns"


def test_caches_of_another_eaglebug_are_ignored(
    mini: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Facts and answers are what this code computed: an upgrade (or an edit of eaglebug
    itself) must not be answered from what the older code wrote."""
    tree = locate(str(mini))
    audit(TreeIndex(tree), KIMI)
    assert load_stamps(tree.root) and cache.read(cache.answers_path(tree.root), tree.root)
    assert cache.read(cache.store_path(), None)
    monkeypatch.setattr(cache, "_code", ["another eaglebug"])
    assert (
        load_stamps(tree.root) == {}
        and cache.read(cache.answers_path(tree.root), tree.root) is None
    )
    assert cache.read(cache.store_path(), None) is None
    assert not TreeIndex(tree).answers.quick


def test_a_new_ssh_session_or_tmux_pane_gets_the_kept_preflight_reply(
    mini: Path, tmp_path: Path
) -> None:
    """A new login or pane differs in variables no launch reads (`contract/environ.py`): the
    reply kept in one is printed in the other without loading the engine; a variable a
    launch may read still asks again."""
    from tests.configs import llama, write_model

    target = write_model(tmp_path / "target", llama())
    argv = (
        "preflight", "--sglang", str(mini), "--json", "--gpu-mem-gib", "80", "--",
        "python", "-m", "sglang.launch_server", "--model-path", str(target),
    )  # fmt: skip

    def session(n: int) -> dict[str, str]:
        return {
            "SSH_CONNECTION": f"10.0.0.{n} {50000 + n} 10.0.0.99 22",
            "SSH_CLIENT": f"10.0.0.{n} {50000 + n} 22",
            "SSH_TTY": f"/dev/pts/{n}",
            "TMUX_PANE": f"%{n}",
            "OLDPWD": f"/tmp/{n}",
            "SHLVL": str(n),
        }

    first = _cli(*argv, env=session(1))
    assert first.returncode in (0, 1) and first.stderr.endswith("engine loaded: True\n")
    second = _cli(*argv, env=session(2))
    assert second.stderr.endswith("engine loaded: False\n"), "a new pane: the kept reply"
    assert second.stdout == first.stdout
    other = _cli(*argv, env={**session(2), "HF_HOME": str(tmp_path / "hf")})
    assert other.stderr.endswith("engine loaded: True\n"), "a variable a launch reads"


def test_preflight_reads_no_session_variable(
    mini: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever environment a front end hands `preflight`, the launch's environment it reads
    lacks the session's variables (and keeps every other): the kept reply's key may omit them."""
    from eaglebug.checks import orchestrator
    from tests.configs import llama, write_model

    read: list[dict[str, str]] = []
    resolve = orchestrator.resolve_model

    def watched(given: str, environ: dict[str, str], *rest: Any) -> object:
        read.append(dict(environ))
        return resolve(given, environ, *rest)

    monkeypatch.setattr(orchestrator, "resolve_model", watched)
    target = write_model(tmp_path / "target", llama())
    shell = {"TMUX_PANE": "%7", "SSH_CONNECTION": "10.0.0.1 5 10.0.0.2 22", "HF_HOME": "/hf"}
    words = ["TMUX_PANE=%9", "python", "-m", "sglang.launch_server", "--model-path", str(target)]
    orchestrator.preflight(TreeIndex(locate(str(mini)), use_cache=False), words, shell)
    assert read, "the model was looked up with the launch's environment"
    for environ in read:
        assert "SSH_CONNECTION" not in environ and environ["HF_HOME"] == "/hf"
        assert environ["TMUX_PANE"] == "%9", "what the launch command itself sets is the server's"


def test_replies_kept_for_changing_environments_are_bounded(mini: Path, tmp_path: Path) -> None:
    from eaglebug.checks.source.answers import Answers
    from tests.configs import llama, write_model

    target = write_model(tmp_path / "target", llama())
    argv = (
        "preflight", "--sglang", str(mini), "--json", "--gpu-mem-gib", "80", "--",
        "python", "-m", "sglang.launch_server", "--model-path", str(target),
    )  # fmt: skip
    outputs = {_cli(*argv, env={"RUN_NUMBER": str(n)}).stdout for n in range(10)}
    assert len(outputs) == 1, "the same answer, whatever the unrelated variable"
    answers = Answers(locate(str(mini)), use_cache=True)
    assert len(answers.keys("reply:preflight:")) == 8, "only the newest replies are kept"
