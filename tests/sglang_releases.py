"""Real SGLang releases for the tests: `pip download --no-deps sglang==X`, unpacked once.

They live in a cache outside the repository (`$EAGLEBUG_SGLANG_CACHE`, default
`~/.cache/eaglebug-sglang`); nothing of SGLang is ever committed. `.ci/run` calls this module
before the suite so a fresh machine fetches them once; the test fixtures call it too, so
`python -m pytest` alone works on a machine that can reach PyPI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# 0.5.8.post1: the last release before sglang/srt/models/kimi_k25.py (0.5.9 added it without the
# speculative methods): `matrix --compare` is tested on that step.
# 0.4.1.post7: the default fraction set inline in `ServerArgs.__post_init__` and the pool sized
# by `ModelRunner` itself (tests/test_memory_releases.py, on a real launch's log). 0.5.3 and 0.5.7:
# the releases before `create_worker` (the scheduler's if/elif chain, the registry of 0.5.7):
# the interface audit reads their own dispatch; 0.5.7's runner also rewrites its model config's
# layer lists after the load.
# 0.5.12: the runner fills its linear-attention registry cache on first use (`if not
# hasattr(self, ...)`, 0.5.11-0.5.12). 0.5.19: its KV configurator reads the parallel widths
# from a `ps: ParallelState` field (0.5.17-0.5.20) and its server args put a field in a nested
# namespace by the field's own `NS("exec.mamba")` (0.5.17-0.5.19).
RELEASES = (
    "0.4.1.post7",
    "0.5.3",
    "0.5.7",
    "0.5.8.post1",
    "0.5.9",
    "0.5.10",
    "0.5.12",
    "0.5.14",
    "0.5.19",
    "0.5.22",
    "0.5.23",
)


def cache_root() -> Path:
    default = Path.home() / ".cache" / "eaglebug-sglang"
    return Path(os.environ.get("EAGLEBUG_SGLANG_CACHE", default))


def release(version: str) -> Path:
    """The folder holding the unpacked `sglang/` package of one release."""
    target = cache_root() / version
    if (target / "sglang" / "srt").is_dir() and (target / ".complete").exists():
        return target
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                "-d",
                tmp,
                f"sglang=={version}",
            ],
            check=True,
        )
        wheels = list(Path(tmp).glob("sglang-*.whl"))
        if not wheels:
            raise RuntimeError(f"pip download sglang=={version} produced no wheel")
        unpack = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as archive:
            archive.extractall(unpack)
        (unpack / ".complete").write_text(wheels[0].name + "\n")
        if target.exists():
            import shutil

            shutil.rmtree(target)
        os.replace(unpack, target)
    return target


def main() -> int:
    for version in RELEASES:
        print(f"sglang {version}: {release(version)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
