"""Where a launch's model lives on this machine: a local folder, or the Hugging Face cache.

Hub ids are resolved offline only (`HF_HUB_CACHE`, else `HF_HOME/hub`, else
`~/.cache/huggingface/hub`, laid out as `models--org--name/snapshots/<rev>/`); preflight
never downloads anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eaglebug.checks.models.config import read_config


@dataclass(frozen=True)
class ModelSource:
    given: str
    path: Path | None  # the folder holding config.json, when found
    how: str  # "local folder" | "Hugging Face cache (<rev>)" | why it was not found
    config: dict[str, Any] | None = None
    revision: str | None = None  # the launch's --revision (or the draft's), if it gave one
    # The keys config.json leaves out that its transformers config class gives, and where that
    # class is (`classdefaults.py`): `config` holds them.
    class_defaults: tuple[str, ...] = ()
    class_defaults_from: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.path is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "given": self.given,
            "path": str(self.path) if self.path else None,
            "how": self.how,
        }
        if self.class_defaults:
            out["class_defaults"] = list(self.class_defaults)
            out["class_defaults_from"] = list(self.class_defaults_from)
        return out


def hub_cache(environ: Mapping[str, str]) -> Path:
    """The Hugging Face cache of a process with this environment (`~` its own `HOME`)."""
    if environ.get("HF_HUB_CACHE"):
        return _home(environ["HF_HUB_CACHE"], environ)
    if environ.get("HUGGINGFACE_HUB_CACHE"):
        return _home(environ["HUGGINGFACE_HUB_CACHE"], environ)
    home = environ.get("HF_HOME") or os.path.join(
        environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"
    )
    return _home(home, environ) / "hub"


def _home(path: str, environ: Mapping[str, str]) -> Path:
    """`~` or `~/...` as the process's own `HOME` says (a container's is not this user's)."""
    if (path == "~" or path.startswith("~/")) and environ.get("HOME"):
        return Path(environ["HOME"], path[2:])
    return Path(path).expanduser()


def _snapshot(repo_dir: Path, revision: str | None) -> tuple[Path | None, str]:
    snapshots = repo_dir / "snapshots"
    wanted = revision or "main"
    ref = repo_dir / "refs" / wanted
    if ref.is_file():
        commit = ref.read_text(encoding="utf-8", errors="replace").strip()
        if (snapshots / commit).is_dir():
            return snapshots / commit, commit[:12]
    if revision and (snapshots / revision).is_dir():
        return snapshots / revision, revision[:12]
    if revision and revision != "main":
        return None, f"revision {revision} is not in the cache"
    candidates = sorted(
        (p for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else [],
        key=lambda p: p.stat().st_mtime,
    )
    if candidates:
        return candidates[-1], candidates[-1].name[:12]
    return None, "no snapshot in the cache"


def resolve_model(
    given: str,
    environ: Mapping[str, str],
    revision: str | None = None,
    here: Callable[[str], str | None] = lambda path: path,
) -> ModelSource:
    """Find a model folder without touching the network; read its config.json when found.
    `environ` is the server's; `here(path)`, where a path the server names is on this machine
    (through a container's binds: `launch/containers.py`, `launch/apptainer.py`; None when
    nothing maps it)."""
    if not is_repo_id(given):
        local = here(str(_home(given, environ)))
        if local is None:
            return ModelSource(given, None, _not_mounted(given), revision=revision)
        if Path(local).is_dir():
            return ModelSource(
                given, Path(local), "local folder", read_config(Path(local)), revision
            )
        return ModelSource(given, None, "no such local folder", revision=revision)
    local = here(given)  # `org/name` is also a relative path, where such a folder exists
    if local is not None and Path(local).is_dir():
        return ModelSource(given, Path(local), "local folder", read_config(Path(local)), revision)
    inside = hub_cache(environ)
    mapped = here(str(inside))
    if mapped is None:
        return ModelSource(given, None, _not_mounted(str(inside)), revision=revision)
    cache = Path(mapped)
    repo_dir = cache / ("models--" + given.replace("/", "--"))
    if not repo_dir.is_dir():
        how = f"not downloaded (no {repo_dir.name} in {cache})"
        return ModelSource(given, None, how, revision=revision)
    snapshot, how = _snapshot(repo_dir, revision)
    if snapshot is None:
        return ModelSource(given, None, how, revision=revision)
    if not (snapshot / "config.json").exists():
        return ModelSource(given, None, f"snapshot {how} has no config.json", revision=revision)
    cached = f"Hugging Face cache ({how})"
    return ModelSource(given, snapshot, cached, read_config(snapshot), revision)


def _not_mounted(path: str) -> str:
    return f"the container's {path} is not mounted from this machine (no bind mount for it)"


def is_repo_id(given: str) -> bool:
    """A Hugging Face id (`org/name`) where no such folder exists; anything else is a path."""
    return not given.startswith(("/", ".", "~")) and given.count("/") == 1
