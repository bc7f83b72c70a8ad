"""Ask the server's own Python where its `sglang` lives, and where it looks for packages (it
may be another environment)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from eaglebug.checks import NotJson, strict_json

if TYPE_CHECKING:
    from eaglebug.checks import ExternalPackage

_PROBE = (
    "import importlib.util as u; s = u.find_spec('sglang'); "
    "print((s.submodule_search_locations or [''])[0] if s else '')"
)


def sglang_of(python: str) -> str | None:
    """The sglang package folder that `python` would import, found without importing it."""
    if not os.path.basename(python).startswith("python"):
        return None
    import subprocess  # here, not on the path of every preflight: most never ask

    try:
        proc = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    folder = proc.stdout.strip()
    return folder or None


_PATH_PROBE = "import json, sys; print(json.dumps(sys.path))"


def path_of(python: str, env: Mapping[str, str]) -> list[str] | None:
    """The module search path of the launch's own interpreter (run with the launch's
    environment, importing nothing); None when the launch's python is this one, or not a
    python at all."""
    if not os.path.basename(python).startswith("python"):
        return None
    import shutil
    import subprocess

    found = shutil.which(python, path=env.get("PATH"))
    if found is None or os.path.realpath(found) == os.path.realpath(sys.executable):
        return None
    try:
        proc = subprocess.run(
            [found, "-c", _PATH_PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=dict(env),
        )
        paths = strict_json(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, NotJson):
        return None
    if not isinstance(paths, list):
        return None
    return [p for p in paths if isinstance(p, str) and p]


def external_for_launch(words: Sequence[str], environ: Mapping[str, str]) -> ExternalPackage | None:
    """The out-of-tree model package a launch's SGLANG_EXTERNAL_MODEL_PACKAGE names, found on
    that launch's PYTHONPATH and then its own interpreter's path (this one's, when it is the
    same python or cannot be asked)."""
    from eaglebug.checks import ENV_VAR

    if ENV_VAR not in environ and not any(ENV_VAR in word for word in words):
        return None  # the common case, decided before the launch parser loads
    from eaglebug.checks import for_launch, unwrapped, words_environment

    env, argv = words_environment(words, environ)
    if not env.get(ENV_VAR, "").strip():
        return None
    wrapped, command = unwrapped(argv)
    # `uv run` / `conda run` / a container pick an environment of their own: the `python` on
    # PATH is not it
    own_environment = any(w.name in ("uv run", "conda run") or w.container for w in wrapped)
    probed = path_of(command[0], env) if command and not own_environment else None
    return for_launch(words, environ, python_path=probed)
