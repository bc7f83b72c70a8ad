"""The out-of-tree model package a launch command's environment names
(`SGLANG_EXTERNAL_MODEL_PACKAGE`), found where that launch's Python would find it.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Mapping, Sequence

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.launch.command import env_and_argv, server_path, words_environment
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
    """The package a launch command's environment (ours, plus its `VAR=value` words, as its
    wrappers leave it) names, found where that launch's Python would find it; None when it
    names none."""
    env, argv = words_environment(words, environ)
    name = env.get(ENV_VAR, "").strip()
    if not name:
        return None
    wrapped, command = unwrapped(argv)
    module_launch = "-m" in command[1:2]  # `python -m ...` puts its folder first
    if any(w.container for w in wrapped):
        # In a container only what a bind mount brings in from here is found here (its
        # PYTHONPATH entries, mapped): the image's own packages are not on this machine.
        entries = env.get("PYTHONPATH", "").split(os.pathsep)
        started = env_and_argv(words)[0]
        mapped = [
            server_path(argv, {**environ, **started}, e) for e in entries if e.startswith("/")
        ]
        search = list(dict.fromkeys(e for e in mapped if e is not None))
        if importlib.machinery.PathFinder.find_spec(name.split(".")[0], search) is None:
            raise InputError(
                f"{ENV_VAR}={name}: the package is not on a PYTHONPATH folder mounted into the "
                "container, so it is the image's and not on this machine",
                "pass --external-models with a copy of it here",
            )
        return find_package(name, search, f"{ENV_VAR}={name}")
    search = launch_search_path(
        env,
        sys.path if python_path is None else python_path,
        os.getcwd() if cwd is None else cwd,
        module_launch,
    )
    return find_package(name, search, f"{ENV_VAR}={name}")
