"""The out-of-tree model package a launch command's environment names
(`SGLANG_EXTERNAL_MODEL_PACKAGE`), found where that launch's Python would find it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from eaglebug.checks.launch.command import words_environment
from eaglebug.checks.launch.wrappers import unwrapped
from eaglebug.checks.source.external import (
    ENV_VAR,
    ExternalPackage,
    find_package,
    launch_search_path,
)


def for_launch(
    words: Sequence[str],
    environ: Mapping[str, str],
    python_path: Sequence[str] | None = None,
    cwd: str | None = None,
) -> ExternalPackage | None:
    """The package a launch command's environment (ours, plus its `VAR=value` words, as an
    `env` among its wrappers leaves it) names,
    found where that launch's Python would find it; None when it names none."""
    env, argv = words_environment(words, environ)
    name = env.get(ENV_VAR, "").strip()
    if not name:
        return None
    command = unwrapped(argv)[1]
    module_launch = "-m" in command[1:2]  # `python -m ...` puts its folder first
    search = launch_search_path(
        env,
        sys.path if python_path is None else python_path,
        os.getcwd() if cwd is None else cwd,
        module_launch,
    )
    return find_package(name, search, f"{ENV_VAR}={name}")
