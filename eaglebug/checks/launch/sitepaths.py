"""The folders a launch's Python finds packages in besides SGLang's own (transformers'), read
from the file system: no interpreter is started, nothing is imported.

Why: a config.json leaves keys to its transformers config class (`models/classdefaults.py`),
read from the transformers the server would import. pip puts it beside `sglang/` in
site-packages, but SGLang run from a source checkout (`pip install -e "python[all]"`, how a
model is usually brought up) has only its own package under the tree's folder: transformers
is in the environment's site-packages. The candidates, in the order the server's Python
searches them: the launch's `PYTHONPATH`, the folder holding `sglang/`, then the
site-packages of the interpreter the launch runs (`python` found on the launch's own `PATH`,
or the one a console script's `#!` line names), and the user's own site-packages outside a
virtual environment. A folder is a candidate whether or not transformers is there now, so
that a kept answer notices it installed later (`session/stamps.py`).
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from eaglebug.checks.launch.command import env_and_argv

_SITES = (
    "lib/python3*/site-packages",
    "lib64/python3*/site-packages",
    "lib/python3/dist-packages",
    "local/lib/python3*/dist-packages",
)
_SHEBANG_BYTES = 512


def package_roots(
    tree_root: Path, words: Sequence[str], environ: Mapping[str, str], cwd: str | None = None
) -> tuple[Path, ...]:
    """Where the launch's Python looks for top-level packages, `tree_root` among them."""
    additions, argv = env_and_argv(words)
    env = {**environ, **additions}
    here = cwd if cwd is not None else os.getcwd()
    roots: list[Path] = [
        Path(here, entry) for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry
    ]
    roots.append(tree_root)
    python = _interpreter(argv[0], env) if argv else None
    if python is not None:
        prefix = python.parent.parent  # the venv's or conda env's, not the base it links to
        for pattern in _SITES:
            roots += [Path(p) for p in sorted(glob.glob(str(prefix / pattern)))]
        if not (prefix / "pyvenv.cfg").is_file() and env.get("HOME"):
            user = Path(env["HOME"], ".local")
            roots += [Path(p) for p in sorted(glob.glob(str(user / _SITES[0])))]
    return tuple(dict.fromkeys(roots))


def _interpreter(program: str, env: Mapping[str, str]) -> Path | None:
    """The Python the launch's first word runs: itself where it is one, else the one its
    `#!` line names (a console script such as `sglang`)."""
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        return None
    path = Path(found)
    if path.name.startswith("python"):
        return path
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    named = Path(words[0]) if words else None
    if named is not None and named.name == "env" and len(words) > 1:  # `#!/usr/bin/env python3`
        return _interpreter(words[1], env) if words[1].startswith("python") else None
    return named if named is not None and named.name.startswith("python") else None
