"""The pre-commit hook (`.pre-commit-hooks.yaml`) run by the real `pre-commit` tool on a scratch
git repository holding sglang 0.5.9's tree, and the CI recipe (`docs/upstream-matrix.yml`)
checked by a real workflow linter (actionlint, whose binary ships in its wheel)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
KIMI = "KimiK25ForConditionalGeneration"
HOOK = "eaglebug-speculative"


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def _env(home: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # this environment's pre-commit, eaglebug, git
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "PRE_COMMIT_HOME": str(home),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }


@pytest.fixture(scope="module")
def hook_config(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A `.pre-commit-config.yaml` naming this repository's hook as a user's does (`repo`,
    `rev`, the hook's id), and one pre-commit home for the module: pre-commit installs the
    hook's environment once and every run here uses it, where `pre-commit try-repo` would
    install it into a fresh store for each run. As `try-repo` does, a working tree with
    uncommitted changes is committed first in a shadow clone, so the hook under test is the
    one on disk."""
    scratch = tmp_path_factory.mktemp("pre-commit")
    env = _env(scratch / "home")
    repo = REPO
    if subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=REPO).returncode != 0:
        repo = scratch / "shadow"
        _git(scratch, "clone", "-q", str(REPO), str(repo))
        for rel in _git(REPO, "diff", "--name-only", "HEAD").splitlines():
            if (REPO / rel).exists():
                shutil.copyfile(REPO / rel, repo / rel)
            else:
                (repo / rel).unlink()
        _git(repo, "add", "-A")
        subprocess.run(["git", "commit", "-q", "-m", "shadow"], cwd=repo, env=env, check=True)
    rev = _git(repo, "rev-parse", "HEAD").strip()
    config = scratch / ".pre-commit-config.yaml"
    config.write_text(f"repos:\n  - repo: {repo}\n    rev: {rev}\n    hooks:\n      - id: {HOOK}\n")
    return config, env


@pytest.fixture
def checkout(sglang_059: Path, tmp_path: Path) -> Path:
    """A git repository whose root holds 0.5.9's `sglang/` package, everything committed."""
    root = tmp_path / "sglang"
    shutil.copytree(sglang_059 / "sglang", root / "sglang")
    _git(root, "init", "-q")
    _git(root, "config", "user.name", "t")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "sglang 0.5.9")
    return root


def _touch_and_stage(root: Path, rel: str) -> None:
    path = root / rel
    path.write_text(path.read_text() + "\n# a reviewer's edit\n")
    _git(root, "add", rel)


def _run_hook(root: Path, hook: tuple[Path, dict[str, str]]) -> subprocess.CompletedProcess[str]:
    """`pre-commit run` on the staged files of `root`, as a commit there runs it."""
    config, env = hook
    pre_commit = shutil.which("pre-commit", path=env["PATH"])
    assert pre_commit is not None, "pre-commit is in the test extra"
    return subprocess.run(
        [pre_commit, "run", "--config", str(config), "--verbose"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )


def test_hook_fails_on_the_seed_wrapper_then_passes_once_fixed(
    checkout: Path, hook_config: tuple[Path, dict[str, str]]
) -> None:
    env = hook_config[1]
    _touch_and_stage(checkout, "sglang/srt/models/kimi_k25.py")
    failed = _run_hook(checkout, hook_config)
    out = failed.stdout + failed.stderr
    assert failed.returncode == 1, out
    assert (
        f"sglang/srt/models/kimi_k25.py:648: EAGLE3 target: {KIMI} has no "
        "set_eagle3_layers_to_capture, which the target model needs for EAGLE3" in out
    )
    assert f"fix: eaglebug fix --sglang . --model-class {KIMI} --algorithm EAGLE3 --apply" in out
    # The command it prints, run as printed with the edit stashed, makes the hook pass.
    _git(checkout, "stash", "-q")
    eaglebug = shutil.which("eaglebug", path=env["PATH"])
    assert eaglebug is not None
    fixed = subprocess.run(
        [
            eaglebug,
            "fix",
            "--sglang",
            ".",
            "--model-class",
            KIMI,
            "--algorithm",
            "EAGLE3",
            "--apply",
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    _git(checkout, "stash", "pop", "-q")
    _git(checkout, "add", "sglang/srt/models/kimi_k25.py")
    passed = _run_hook(checkout, hook_config)
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_hook_ignores_files_outside_the_models(
    checkout: Path, hook_config: tuple[Path, dict[str, str]]
) -> None:
    """A staged file the manifest's `files` pattern leaves out never reaches eaglebug."""
    _touch_and_stage(checkout, "sglang/srt/server_args.py")
    run = _run_hook(checkout, hook_config)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "(no files to check)" in run.stdout


def test_workflow_recipe_passes_actionlint_and_a_broken_copy_does_not(tmp_path: Path) -> None:
    tool = shutil.which("actionlint", path=str(Path(sys.executable).parent))
    assert tool is not None, "the actionlint wheel is in the test extra"
    # The wheel ships the linter's binary: nothing is downloaded when it runs.
    shipped = list(Path(sys.prefix).glob("lib/python*/site-packages/actionlint*/bin/actionlint"))
    assert shipped and shipped[0].read_bytes()[:4] == b"\x7fELF"
    recipe = REPO / "docs" / "upstream-matrix.yml"
    ok = subprocess.run([tool, "-no-color", str(recipe)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "eaglebug matrix --sglang base/python --compare head/python" in recipe.read_text()
    broken = tmp_path / "broken.yml"
    broken.write_text(
        recipe.read_text().replace("runs-on: ubuntu-latest", "runs-on: ubuntu-latest\n    foo: 1")
    )
    bad = subprocess.run([tool, "-no-color", str(broken)], capture_output=True, text=True)
    assert bad.returncode == 1 and 'unexpected key "foo"' in bad.stdout, bad.stdout


def test_hook_notes_what_no_inner_object_provides_and_strict_fails_on_it(
    capsys: pytest.CaptureFixture[str], sglang_059: Path
) -> None:
    """BertModel never implemented EAGLE: a note by default (an edit of bert.py is not blocked),
    a failure with --strict; kimi_k25.py's wrapper fails either way."""
    from tests.clirun import cli

    bert = str(sglang_059 / "sglang/srt/models/bert.py")
    noted = cli(capsys, "hook", "--sglang", str(sglang_059), bert)
    assert noted.code == 0, noted.out + noted.err
    assert "note: sglang/srt/models/bert.py:" in noted.out
    assert "EAGLE3 target: BertModel lacks get_embed_and_head" in noted.out
    strict = cli(capsys, "hook", "--sglang", str(sglang_059), "--strict", bert)
    assert strict.code == 1
    assert "no delegate found: the class must implement it" in strict.out
    kimi = str(sglang_059 / "sglang/srt/models/kimi_k25.py")
    only = cli(capsys, "hook", "--sglang", str(sglang_059), "--algorithm", "EAGLE", kimi)
    assert only.code == 1
    assert "EAGLE target: KimiK25ForConditionalGeneration has no get_embed_and_head" in only.out
    assert "EAGLE3" not in only.out
    outside = cli(capsys, "hook", "--sglang", str(sglang_059), str(Path(__file__)))
    assert outside.code == 0 and outside.out == ""
