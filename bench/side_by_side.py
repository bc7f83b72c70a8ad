"""Two installations of eaglebug side by side, for a benchmark that compares an earlier commit
with this checkout in the same run: each is `pip install --no-deps --target` into its own
folder, which the benchmark puts first on `PYTHONPATH` of the process it times.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def install(source: Path, target: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
         str(source)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    shutil.rmtree(source / "build", ignore_errors=True)


def install_base_and_head(base: str, scratch: Path) -> dict[str, Path]:
    """`{"base": folder, "head": folder}` under `scratch`: commit `base`, installed from a
    temporary git worktree (removed after, whatever happened), and this checkout."""
    worktree = scratch / "base-src"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(worktree), base],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        sites = {"base": scratch / "base", "head": scratch / "head"}
        install(worktree, sites["base"])
        install(REPO, sites["head"])
        return sites
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(worktree)],
            check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
