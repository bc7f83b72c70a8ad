"""Everything `eaglebug demo` needs, with no GPU and no network, in one scratch folder.

    <root>/
      demo.json                 what was prepared (so a later eaglebug can `open` it again)
      sglang/                   a git repository: a copy of examples/sglang-mini, one commit
        python/sglang/...       the SGLang-shaped tree: audit, preflight and fix work on it,
                                and the stand-in server imports it
      models/Kimi-K2.5/         the target: config.json + model.safetensors.index.json
      models/Kimi-K2.5-EAGLE3/  the EAGLE-3 draft: config.json
      work/                     the working directory: `.eaglebug/` state and launch logs

The tree is the one the README's examples audit, so the demo shows the real 0.5.9 story: preflight finds
the two missing methods and the context-length clash; the first launch crashes in
`set_eagle3_layers_to_capture`; after `fix --apply` the next crashes on the context length;
with `SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1` pending, the next is ready.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eaglebug.checks import InputError, cache_dir
from eaglebug.demo import knobs
from eaglebug.demo.footprint import GIB

MANIFEST = "demo.json"
SCHEMA = 1
TREE_ENV = "EAGLEBUG_DEMO_TREE"  # another SGLang-shaped tree to copy instead of sglang-mini
MODEL_CLASS = "KimiK25ForConditionalGeneration"
DRAFT_CLASS = "LlamaForCausalLMEagle3"
TARGET_NAME = "Kimi-K2.5"
DRAFT_NAME = "Kimi-K2.5-EAGLE3"
TARGET_SHARDS = 64
TARGET_TOTAL_BYTES = 594_000_000_000  # Kimi-K2.5's checkpoint, about 594 GB
GIT_NAME = "eaglebug demo"
GIT_EMAIL = "demo@eaglebug.invalid"
STORIES = ("seed", "silent")
DEFAULT_PORT = 30000  # ServerArgs.port's default, for manifests written before the port was kept
IMPORT_MESSAGE = "sglang-mini: the demo's SGLang-shaped tree (0.5.9 shapes)"


def tree_candidates() -> list[Path]:
    """Where the tree may be: the installed package data (a wheel), else the checkout's
    examples/ (an editable install)."""
    here = Path(__file__).resolve().parent
    return [here / "sglang_mini", here.parents[1] / "examples" / "sglang-mini"]


def _holds_tree(folder: Path) -> bool:
    return (folder / "python" / "sglang" / "__init__.py").is_file()


def example_tree() -> Path:
    """The SGLang-shaped tree to copy: $EAGLEBUG_DEMO_TREE, else the first candidate."""
    override = os.environ.get(TREE_ENV, "").strip()
    if override:
        if not _holds_tree(Path(override).expanduser()):
            raise InputError(
                f"{TREE_ENV}={override}: no python/sglang/ there",
                "point it at a copy of examples/sglang-mini, or unset it",
            )
        return Path(override).expanduser()
    candidates = tree_candidates()
    for candidate in candidates:
        if _holds_tree(candidate):
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise InputError(
        f"the demo's SGLang-shaped tree (examples/sglang-mini) is missing; looked in {looked}",
        "reinstall eaglebug from a checkout that has examples/sglang-mini "
        f"(pip install -e .), or set {TREE_ENV} to a copy of it",
    )


def free_port() -> int:
    """A loopback port nothing listens on now: the stand-in serves HTTP there, so two demos
    (or a demo beside a real server on 30000) do not collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def default_root() -> Path:
    """A new folder under `~/.cache/eaglebug/demo/` (or `$XDG_CACHE_HOME`) for one demo."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return cache_dir() / "demo" / f"{stamp}-{os.getpid()}"


@dataclass(frozen=True)
class DemoScenario:
    """A prepared demo: where everything is, and how to launch the stand-in server."""

    root: Path
    tp: int = 8
    seconds: float | None = None  # about how long a launch takes to ready; None: 30 s
    fast: bool = False  # about 1.2 s to ready (tests)
    gpu_bytes: int = 141 * GIB  # each simulated GPU's memory (an H200)
    created_s: float = field(default_factory=time.time)
    port: int = DEFAULT_PORT  # the stand-in's HTTP port on the loopback (a free one, picked once)
    story: str = "seed"  # seed: three crashes to ready; silent: ready, but nothing accepted

    # -- where things are -----------------------------------------------------------------
    @property
    def sglang_root(self) -> Path:
        """The scratch git repository (`--sglang` for audit, preflight and fix)."""
        return self.root / "sglang"

    @property
    def sglang_python(self) -> Path:
        """The folder holding `sglang/`, which the stand-in imports."""
        return self.sglang_root / "python"

    @property
    def workdir(self) -> Path:
        """The working directory for `Server`: `.eaglebug/` state and logs go here."""
        return self.root / "work"

    @property
    def model_path(self) -> Path:
        return self.root / "models" / TARGET_NAME

    @property
    def draft_path(self) -> Path:
        return self.root / "models" / DRAFT_NAME

    model_class = MODEL_CLASS
    draft_class = DRAFT_CLASS

    # -- the launch -----------------------------------------------------------------------
    @property
    def server_flags(self) -> list[str]:
        """The launch flags, as a real `python -m sglang.launch_server` would get them."""
        return [
            "--model-path",
            str(self.model_path),
            "--speculative-algorithm",
            # The silent story's one mistake: EAGLE for an EAGLE-3 draft (the target captures
            # no aux hidden states, so the draft's tokens are all rejected).
            "EAGLE" if self.story == "silent" else "EAGLE3",
            "--speculative-draft-model-path",
            str(self.draft_path),
            "--tp",
            str(self.tp),
            "--port",
            str(self.port),
            "--trust-remote-code",
        ]

    @property
    def launch_argv(self) -> list[str]:
        """What `Server.launch` runs: the stand-in, with this interpreter."""
        return [sys.executable, "-m", "eaglebug.demo.standin_server", *self.server_flags]

    @property
    def preflight_words(self) -> list[str]:
        """The launch as preflight and `fix --` read it: the real server's entry point.

        The stand-in plays `sglang.launch_server`; preflight accepts only SGLang's own forms.
        """
        return ["python", "-m", "sglang.launch_server", *self.server_flags]

    @property
    def env(self) -> dict[str, str]:
        """Environment additions the stand-in needs (give them to `Server.launch`)."""
        env = {
            knobs.ENV_SGLANG: str(self.sglang_python),
            knobs.ENV_GPU_BYTES: str(self.gpu_bytes),
            # The stand-in is the demo's toy: it ends when this process does, however it ends
            # (q, a killed tmux pane, a dropped SSH connection).
            knobs.ENV_PARENT: knobs.parent_value(),
        }
        if self.fast:
            env[knobs.ENV_FAST] = "1"
        elif self.seconds is not None:
            env[knobs.ENV_SECONDS] = f"{self.seconds:g}"
        return env

    def describe(self) -> str:
        """What the screen says, so nobody takes the demo for a real launch."""
        gib = self.gpu_bytes / GIB
        return (
            f"demo: simulated GPUs ({self.tp} x {gib:.0f} GiB), stand-in server "
            f"(eaglebug.demo.standin_server), scratch SGLang tree at {self.sglang_root}\n"
            "nothing here runs on a GPU or reaches the network; the tree is a git repository "
            "of its own, so fixes are real commits there"
        )

    # -- making one -----------------------------------------------------------------------
    @classmethod
    def prepare(
        cls,
        root: Path | None = None,
        *,
        tp: int = 8,
        seconds: float | None = None,
        fast: bool = False,
        gpu_bytes: int = 141 * GIB,
        story: str = "seed",
    ) -> DemoScenario:
        """Copy the tree into a new git repository and write the model folders.

        `root` must not exist or be empty; by default a new folder under the cache
        (`default_root()`).
        """
        if tp < 1:
            raise InputError(f"tp {tp}: must be 1 or more")
        root = (root or default_root()).expanduser().resolve()
        if root.exists() and any(root.iterdir()):
            raise InputError(
                f"{root} is not empty; a demo is prepared in a new folder",
                "open it as it is (DemoScenario.open), or pick another folder",
            )
        source = example_tree()
        if story not in STORIES:
            raise InputError(f"no demo scenario {story!r}", f"choose one of: {', '.join(STORIES)}")
        scenario = cls(
            root,
            tp=tp,
            seconds=seconds,
            fast=fast,
            gpu_bytes=gpu_bytes,
            port=free_port(),
            story=story,
        )
        made = not root.exists()
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".preparing-", dir=root))
        try:
            scenario._build(source, staging)
            for name in ("sglang", "models", "work"):
                os.replace(staging / name, root / name)
        except BaseException:
            if made:  # nothing of a demo that was never made is left behind
                shutil.rmtree(root, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        manifest = {k: v for k, v in asdict(scenario).items() if k != "root"}
        (root / MANIFEST).write_text(
            json.dumps({"schema": SCHEMA, **manifest}, indent=2), encoding="utf-8"
        )
        return scenario

    @classmethod
    def open(cls, root: Path) -> DemoScenario:
        """A scenario `prepare` made earlier (to re-attach to its server after a restart)."""
        path = root / MANIFEST
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
            if data.get("schema") != SCHEMA:
                raise ValueError(f"schema {data.get('schema')!r}")
            return cls(
                root.resolve(),
                tp=int(data["tp"]),
                seconds=None if data.get("seconds") is None else float(data["seconds"]),
                fast=bool(data.get("fast", False)),
                gpu_bytes=int(data["gpu_bytes"]),
                created_s=float(data.get("created_s", 0.0)),
                port=int(data.get("port", DEFAULT_PORT)),
                story=str(data.get("story", "seed")),
            )
        except FileNotFoundError:
            raise InputError(
                f"{root} holds no prepared demo ({MANIFEST} is missing)",
                "prepare a new one (eaglebug demo)",
            ) from None
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InputError(f"{path}: not a demo manifest eaglebug can read ({exc})") from None

    def _build(self, source: Path, staging: Path) -> None:
        tree = staging / "sglang"
        shutil.copytree(
            source, tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".eaglebug")
        )
        (tree / ".gitignore").write_text("__pycache__/\n*.pyc\n", encoding="utf-8")
        _commit_tree(tree)
        models = staging / "models"
        _write_target(source / "model" / "config.json", models / TARGET_NAME)
        draft = models / DRAFT_NAME
        draft.mkdir(parents=True)
        shutil.copyfile(source / "draft" / "config.json", draft / "config.json")
        (staging / "work").mkdir()
        if self.story == "silent":
            _already_fixed(tree, models / TARGET_NAME, draft)


def _commit_tree(tree: Path) -> None:
    """`git init` on branch main, a local identity, and one commit of everything."""
    # GitPython loads here, not with the module: the demo's first paint does not wait for it.
    # eaglebug.git first (the order matters): it says in one line when git cannot be run.
    from eaglebug.git.ops import first_line  # noqa: I001

    import git

    try:
        repo = git.Repo.init(tree)
        with repo.config_writer() as config:
            config.set_value("user", "name", GIT_NAME)
            config.set_value("user", "email", GIT_EMAIL)
            config.set_value("commit", "gpgsign", "false")
        repo.git.symbolic_ref("HEAD", "refs/heads/main")
        repo.git.add("-A")
        repo.git.commit("--no-verify", "-q", "-m", IMPORT_MESSAGE)
    except git.GitError as exc:  # git's own reason; not where (that folder is removed)
        said = first_line(exc) if isinstance(exc, git.GitCommandError) else ""
        raise InputError(
            f"cannot make the demo's git repository: {said or str(exc).strip().splitlines()[0]}",
            "run `git init` and `git commit` in an empty folder to see why",
        ) from None


def _already_fixed(tree: Path, target: Path, draft: Path) -> None:
    """The silent story starts where the seed story ends: the wrapper's delegations committed
    (with eaglebug's own fix, as a user would have), and a draft trained for the target's whole
    context. What is left is a mistake that crashes nothing."""
    from eaglebug.checks import TreeIndex, audit, locate, plan_patches
    from eaglebug.git.fixing import apply_patch

    index = TreeIndex(locate(str(tree)), use_cache=False)
    for patch in plan_patches(index, audit(index, MODEL_CLASS, "EAGLE3").reports):
        if patch.methods:
            apply_patch(patch, commit=True, reaudit=list)
    target_config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    text = target_config.get("text_config") or target_config
    draft_config = json.loads((draft / "config.json").read_text(encoding="utf-8"))
    draft_config["max_position_embeddings"] = text["max_position_embeddings"]
    (draft / "config.json").write_text(json.dumps(draft_config, indent=2), encoding="utf-8")


def _write_target(config: Path, folder: Path) -> None:
    """config.json, and a weight index that names 64 shards (no weights: nothing loads them)."""
    folder.mkdir(parents=True)
    shutil.copyfile(config, folder / "config.json")
    shard = "model-{:05d}-of-{:06d}.safetensors"
    weight_map = {
        f"language_model.model.layers.{i}.self_attn.kv_a_proj_with_mqa.weight": shard.format(
            i + 1, TARGET_SHARDS
        )
        for i in range(TARGET_SHARDS)
    }
    index = {"metadata": {"total_size": TARGET_TOTAL_BYTES}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(
        json.dumps(index, indent=2), encoding="utf-8"
    )
