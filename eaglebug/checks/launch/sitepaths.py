"""The folders a launch's Python finds packages in besides SGLang's own (transformers'), read
from the file system: no interpreter is started, nothing is imported.

Why: a config.json leaves keys to its transformers config class (`models/classdefaults.py`),
read from the transformers the server would import. pip puts it beside `sglang/` in
site-packages, but SGLang run from a source checkout (`pip install -e "python[all]"`, how a
model is usually brought up) has only its own package under the tree's folder: transformers
is in the environment's site-packages. The candidates, in the order the server's Python
searches them: the launch's `PYTHONPATH`, the folder holding `sglang/`, then the
site-packages of the interpreter the launch runs (`python` found on the launch's own `PATH`,
or the one a console script's `#!` line names; through a pyenv shim, the version pyenv would
pick; under `uv run` or `conda run`, the environment they run in: `wrappers.py`), and the
user's own site-packages outside a virtual environment. A folder is a candidate whether or
not transformers is there now, so that a kept answer notices it installed later
(`session/stamps.py`).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from eaglebug.checks.launch.command import env_and_argv, launch_environment
from eaglebug.checks.launch.wrappers import Wrapped, environment, unwrapped

_SITES = (
    "lib/python3*/site-packages",
    "lib64/python3*/site-packages",
    "lib/python3/dist-packages",
    "local/lib/python3*/dist-packages",
)
_SHEBANG_BYTES = 512
_SHIM_BYTES = 4096
_PYENV_ROOT = re.compile(rb'^export PYENV_ROOT="([^"\n]+)"', re.MULTILINE)


def package_roots(
    tree_root: Path,
    words: Sequence[str],
    environ: Mapping[str, str],
    cwd: str | None = None,
    chosen_by: list[Path] | None = None,
) -> tuple[Path, ...]:
    """Where the launch's Python looks for top-level packages, `tree_root` among them;
    `chosen_by`, when given, gets the files and folders that chose that Python (pyenv's
    version files and its `versions/`, the `pyproject.toml` files `uv run` looks for), which a
    kept answer stamps."""
    additions, argv = env_and_argv(words)
    if any(w.container for w in unwrapped(argv)[0]):
        return (tree_root,)  # the image's Python and packages are not on this machine
    started = {**environ, **additions}
    env = launch_environment(argv, started)  # the server's, as its wrappers leave it
    here = cwd if cwd is not None else os.getcwd()
    roots: list[Path] = [
        Path(here, entry) for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry
    ]
    roots.append(tree_root)
    python = _python_of(argv, started, here, chosen_by if chosen_by is not None else [])
    if python is not None:
        prefix = python.parent.parent  # the venv's or conda env's, not the base it links to
        for pattern in _SITES:
            roots += [Path(p) for p in sorted(glob.glob(str(prefix / pattern)))]
        if not (prefix / "pyvenv.cfg").is_file() and env.get("HOME"):
            user = Path(env["HOME"], ".local")
            roots += [Path(p) for p in sorted(glob.glob(str(user / _SITES[0])))]
    return tuple(dict.fromkeys(roots))


def launch_python(
    words: Sequence[str], environ: Mapping[str, str], cwd: str | None = None
) -> Path | None:
    """The Python a launch runs (through its wrappers, a console script's `#!` line or a
    pyenv shim), found on the file system; None when it cannot be told."""
    additions, argv = env_and_argv(words)
    here = cwd if cwd is not None else os.getcwd()
    return _python_of(argv, {**environ, **additions}, here, [])


def _python_of(
    argv: Sequence[str], env: Mapping[str, str], cwd: str, chosen_by: list[Path]
) -> Path | None:
    """`env`: the one `argv` is started in; each wrapper sees it as the ones before it left
    it (`env PATH=... uv run ...`)."""
    wrapped, command = unwrapped(argv)
    if any(w.container for w in wrapped):
        return None  # the image's own, not on this machine
    if any(w.name == "sudo" for w in wrapped):
        return None  # found on sudoers' `secure_path`, which a user cannot read
    chosen: Path | None = None  # the innermost `uv run` / `conda run`'s environment
    seen = dict(env)  # as the wrappers so far leave it
    for wrapper in wrapped:
        found = _wrapper_environment(wrapper, seen, cwd, chosen_by)
        chosen = found if found is not None else chosen
        seen = environment([wrapper], seen)
    if chosen is not None:  # `uv run`, `conda run`: the environment they run in
        return chosen / "bin" / "python"
    return _interpreter(command[0], seen, cwd, chosen_by) if command else None


def _interpreter(
    program: str, env: Mapping[str, str], cwd: str, chosen_by: list[Path]
) -> Path | None:
    """The Python the launch's first word runs: itself where it is one, else the one its
    `#!` line names (a console script such as `sglang`); a pyenv shim, the one it execs."""
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        return None
    path = Path(found)
    if path.parent.name == "shims":  # a pyenv shim names pyenv's root: read only those
        root = _PYENV_ROOT.search(_head(path, _SHIM_BYTES) or b"")
        if root is not None:
            return _pyenv_python(Path(os.fsdecode(root.group(1))), path, env, cwd, chosen_by)
    if path.name.startswith("python"):
        return path
    head = _head(path, _SHEBANG_BYTES)
    if head is None or not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    named = Path(words[0]) if words else None
    if named is not None and named.name == "env" and len(words) > 1:  # `#!/usr/bin/env python3`
        if not words[1].startswith("python"):
            return None
        return _interpreter(words[1], env, cwd, chosen_by)
    return named if named is not None and named.name.startswith("python") else None


def _nearest(start: Path, name: str, looked: list[Path]) -> Path | None:
    """The nearest file `name` from `start` up; each place looked at goes into `looked`: one
    made, edited or removed there is a new choice (the files, not their folders, which change
    with every log written in them)."""
    for folder in (start, *start.parents):
        looked.append(folder / name)
        if looked[-1].is_file():
            return looked[-1]
    return None


def _head(path: Path, size: int) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(size)
    except OSError:
        return None


def _pyenv_python(
    root: Path, shim: Path, env: Mapping[str, str], cwd: str, chosen_by: list[Path]
) -> Path | None:
    """What `pyenv exec` runs for a shim, as pyenv picks it: the versions `PYENV_VERSION`
    names, else those of the nearest `.python-version` from the launch's folder up, else
    the global `version` file; the first that has the program (`system`: the next one on
    `PATH` past the shims). None when pyenv would find none."""
    program = shim.name
    chosen_by.append(root / "versions")  # a version installed or removed
    if env.get("PYENV_VERSION"):
        versions = env["PYENV_VERSION"].split(":")
    else:
        local = _nearest(Path(cwd, env.get("PYENV_DIR") or "."), ".python-version", chosen_by)
        chosen = local or root / "version"
        if local is None:
            chosen_by.append(chosen)
        text = (_head(chosen, _SHIM_BYTES) or b"").decode("utf-8", "replace")
        versions = [  # pyenv's own reading: each line's first word, not a comment or a path
            w[0]
            for line in text.splitlines()
            if (w := line.split()) and not w[0].startswith("#") and "/" not in w[0] and w[0] != ".."
        ]
    for version in versions or ["system"]:
        if version == "system":
            rest = os.pathsep.join(
                p for p in env.get("PATH", os.defpath).split(os.pathsep) if Path(p) != shim.parent
            )
            found = shutil.which(program, path=rest)
            if found is not None:
                return _interpreter(found, {**env, "PATH": rest}, cwd, chosen_by)
            continue
        candidate = root / "versions" / version / "bin" / program
        if candidate.is_file():
            return candidate
    return None


def _wrapper_environment(
    wrapper: Wrapped, env: Mapping[str, str], cwd: str, chosen_by: list[Path]
) -> Path | None:
    """The environment a wrapper runs the command in, where it picks one (`uv run`: `_uv_run`;
    `conda run`: `_conda_run`). None: the command's own `python` decides."""
    if wrapper.name == "uv run":
        return _uv_run(wrapper, env, cwd, chosen_by)
    if wrapper.name == "conda run":
        return _conda_run(wrapper, env, cwd, chosen_by)
    return None


def _uv_run(
    wrapper: Wrapped, env: Mapping[str, str], cwd: str, chosen_by: list[Path]
) -> Path | None:
    """In a project (the nearest `pyproject.toml` from `--project`/`--directory` or the
    launch's folder up), its environment: `UV_PROJECT_ENVIRONMENT`, else `.venv` beside it
    (`--active`: the active `VIRTUAL_ENV`; `--python` only picks what that is built from).
    Outside one (or `--no-project`, `--isolated`), the interpreter uv discovers: `--python
    PATH`; else the active `VIRTUAL_ENV`, an active conda environment other than `base`
    (`CONDA_PREFIX`), the nearest `.venv` from the launch's folder up (a folder with
    `pyvenv.cfg`); else the `python` on `PATH`, which is the fallback's. A `--python 3.12`
    version request is uv's own search: not followed."""
    start = Path(cwd, wrapper.option("--directory") or ".")
    no_project = wrapper.option("--no-project", "--isolated") is not None
    project = (
        None
        if no_project
        else _nearest(Path(start, wrapper.option("--project") or "."), "pyproject.toml", chosen_by)
    )
    active = env.get("VIRTUAL_ENV")
    if project is not None:
        if active and wrapper.option("--active") is not None:
            return Path(start, active)
        return Path(project.parent, env.get("UV_PROJECT_ENVIRONMENT") or ".venv")
    python = wrapper.option("--python", "-p")
    if python is not None and os.sep in python:  # outside a project: that interpreter
        return Path(start, python).parent.parent
    if active:
        return Path(start, active)
    conda = env.get("CONDA_PREFIX")
    if conda and env.get("CONDA_DEFAULT_ENV") != "base":
        return Path(conda)
    venv = _nearest(start, ".venv/pyvenv.cfg", chosen_by)
    return venv.parent if venv is not None else None


def _conda_run(
    wrapper: Wrapped, env: Mapping[str, str], cwd: str, chosen_by: list[Path]
) -> Path | None:
    """The environment `-p` names; or `-n`'s, looked for as conda's `locate_prefix_by_name`
    does: in the folders `CONDA_ENVS_DIRS` (or `CONDA_ENVS_PATH`) names, then the conda's own
    `envs/` and `~/.conda/envs` (the other way round when the conda's root is not writable),
    the first that holds it (`base`: the root). Each folder looked in goes into `chosen_by`
    (an environment created later is a new choice). A `.condarc`'s `envs_dirs` is not read."""
    prefix = wrapper.option("-p", "--prefix")
    if prefix:
        return Path(cwd, prefix)
    name = wrapper.option("-n", "--name")
    found = shutil.which(wrapper.words[0], path=env.get("PATH", os.defpath))
    if not name or found is None:
        return None
    root = Path(os.path.realpath(found)).parent.parent  # bin/conda or condabin/conda
    if name == "base":
        return root
    named = env.get("CONDA_ENVS_DIRS") or env.get("CONDA_ENVS_PATH") or ""
    home = Path(env.get("HOME") or "~").expanduser() / ".conda" / "envs"
    fixed = [root / "envs", home]
    if not os.access(root / "conda-meta" / "history", os.W_OK):
        fixed.reverse()
    folders = [Path(os.path.expanduser(f)) for f in named.split(os.pathsep) if f] + fixed
    for folder in dict.fromkeys(folders):
        chosen_by.append(folder)
        if (folder / name).is_dir():
            return folder / name
    return root / "envs" / name  # not there yet: where `conda create -n` puts it
