"""The keys a model's config.json leaves to its transformers config class, read beside SGLang.

Gemma-3-27B's published config names no context length and no vocabulary: transformers'
Gemma3TextConfig gives both (131072 positions, 262208 tokens), and SGLang reads them from the
config object transformers builds. With transformers beside the release (a real environment's
site-packages; here two of its published modules, `tests/fixtures/transformers/`), the
preflight reads them as SGLang does: its EAGLE-3 draft's 2048 positions against the target's
1048576 (131072 with the linear rope factor 8) are SGLang's refusal, and the draft's other
vocabulary an error.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from eaglebug.checks import preflight
from eaglebug.checks.models.classdefaults import with_class_defaults
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests.configs import eagle3, kimi_k25, write_model
from tests.memconfigs import GEMMA3_27B, GEMMA3_27B_BYTES
from tests.test_memory import H200, LAUNCH
from tests.test_mempools import copy_tree, edit

TRANSFORMERS = Path(__file__).parent / "fixtures" / "transformers" / "transformers"


@pytest.fixture(scope="module")
def beside(sglang_0523: Path, tmp_path_factory: pytest.TempPathFactory) -> TreeIndex:
    """0.5.23 with transformers' configuration modules beside it."""
    root = copy_tree(sglang_0523, tmp_path_factory.mktemp("site-packages"))
    shutil.copytree(TRANSFORMERS, root / "transformers")
    return TreeIndex(locate(str(root)), use_cache=False)


def _launch(tmp_path: Path) -> list[str]:
    target = write_model(tmp_path / "gemma-3-27b-it", GEMMA3_27B, total_size=GEMMA3_27B_BYTES)
    draft = write_model(tmp_path / "draft", eagle3(hidden_size=5376, max_position_embeddings=2048))
    return [
        *LAUNCH, "--model-path", str(target), "--tp", "2", "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(draft),
    ]  # fmt: skip


def test_the_class_gives_what_config_json_leaves_out(beside: TreeIndex, tmp_path: Path) -> None:
    result = preflight(beside, _launch(tmp_path), {}, H200)
    target = result.target
    assert {"text_config.max_position_embeddings", "text_config.vocab_size"} <= set(
        target.class_defaults
    )
    module = beside.tree.root / "transformers" / "models" / "gemma3" / "configuration_gemma3.py"
    assert set(target.class_defaults_from) == {f"{module}:246", f"{module}:33"}  # both classes
    assert target.config is not None
    assert target.config["text_config"]["max_position_embeddings"] == 131072
    assert target.config["text_config"]["sliding_window"] == 1024  # config.json's own stays
    assert "vocab_size" not in GEMMA3_27B["text_config"]  # the published dict, untouched
    by_id = {f.id: f for f in result.findings}
    context = by_id["config.context_length"]
    assert context.severity == "error"
    assert "(2048) is shorter than the target's (1048576)" in context.message
    assert by_id["config.vocab"].severity == "error"
    assert "(262208)" in by_id["config.vocab"].message
    assert target.to_json()["class_defaults_from"] == list(target.class_defaults_from)


def test_without_transformers_beside_it_the_config_is_as_published(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    result = preflight(index_0523, _launch(tmp_path), {}, H200)
    assert result.target.class_defaults == ()
    assert result.target.config == GEMMA3_27B
    context = [f for f in result.findings if f.id == "config.context_length"]
    assert [f.severity for f in context] == ["warning"]  # the unknown, said as one


def _mla_draft(tmp_path: Path) -> list[str]:
    """The seed launch with an EAGLE-3 MLA draft for Kimi-K2.5 (`kimi_k25_eagle3.py`'s
    class) whose config.json, saved from DeepseekV3Config's subclass, leaves out what equals
    that class's defaults: its context length and its latent width among them."""
    target = write_model(tmp_path / "kimi-k2.5", kimi_k25(), total_size=8 * 10**9)
    draft = {
        "architectures": ["Eagle3DeepseekV2ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": 7168,
        "num_hidden_layers": 1,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "vocab_size": 163840,
        "draft_vocab_size": 32000,
        "torch_dtype": "bfloat16",
    }
    draft_path = write_model(tmp_path / "kimi-k2.5-eagle3-mla", draft)
    return [
        *LAUNCH, "--model-path", str(target), "--tp", "8", "--trust-remote-code",
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft_path),
    ]  # fmt: skip


def test_sglangs_alias_of_a_transformers_class_gives_that_class_defaults(
    beside: TreeIndex, sglang_0523: Path, tmp_path: Path
) -> None:
    """0.5.23 registers `_KimiK2ConfigAlias(DeepseekV3Config)` for `kimi_k2` (which
    transformers does not map): the draft is built as DeepseekV3Config, whose 4096 positions
    are shorter than the target's 262144, SGLang's refusal. The same tree without that
    registration leaves the draft's context unknown: read from the tree."""
    words = _mla_draft(tmp_path)
    result = preflight(beside, words, {}, H200)
    draft = result.draft
    assert draft is not None
    assert {"max_position_embeddings", "kv_lora_rank", "qk_rope_head_dim"} <= set(
        draft.class_defaults
    )
    module = beside.tree.root / "transformers" / "models" / "deepseek_v3"
    assert draft.class_defaults_from == (f"{module / 'configuration_deepseek_v3.py'}:26",)
    assert draft.config is not None and draft.config["kv_lora_rank"] == 512
    context = next(f for f in result.findings if f.id == "config.context_length")
    assert context.severity == "error"
    assert "(4096) is shorter than the target's (262144)" in context.message
    # the target's text config (`kimi_k2` too) is read through the same alias
    assert "text_config.rope_interleave" in result.target.class_defaults

    unregistered = copy_tree(sglang_0523, tmp_path / "no-alias")
    shutil.copytree(TRANSFORMERS, unregistered / "transformers")
    common = unregistered / "sglang" / "srt" / "utils" / "hf_transformers" / "common.py"
    edit(common, '_CONFIG_REGISTRY["kimi_k2"] = _KimiK2ConfigAlias', "pass")
    before = preflight(TreeIndex(locate(str(unregistered)), use_cache=False), words, {}, H200)
    assert before.draft is not None and before.draft.class_defaults == ()
    assert [f.severity for f in before.findings if f.id == "config.context_length"] == ["warning"]


def test_which_registered_classes_are_transformers_own(tmp_path: Path) -> None:
    """A registered class is transformers' own under another name when its one base comes
    from transformers (a module of it too) and it adds no `__init__`; one with an `__init__`
    of its own is the tree's, and a type registered nowhere is neither."""
    from eaglebug.checks.memory.classes import model_objects

    utils = tmp_path / "sglang" / "srt" / "utils"
    utils.mkdir(parents=True)
    for folder in (tmp_path / "sglang", tmp_path / "sglang" / "srt", utils):
        (folder / "__init__.py").write_text("")
    (utils / "hf_transformers_utils.py").write_text(
        textwrap.dedent(
            """
            try:
                from transformers.models.deepseek_v3 import DeepseekV3Config as _Base

                class _Alias(_Base):
                    model_type = "kimi_k2"
                    q_head_norm = True

                class _Own(_Base):
                    model_type = "own_type"

                    def __init__(self, **kwargs):
                        super().__init__(**kwargs)

                _CONFIG_REGISTRY = {"kimi_k2": _Alias, "own_type": _Own}
            except ImportError:
                pass
            """
        )
    )
    index = TreeIndex(locate(str(tmp_path)), use_cache=False)
    alias = model_objects(index, {"model_type": "kimi_k2"})
    assert alias.qualname.endswith("._Alias") and alias.reuses == "DeepseekV3Config"
    own = model_objects(index, {"model_type": "own_type"})
    assert own.qualname.endswith("._Own") and own.reuses == ""
    assert model_objects(index, {"model_type": "llama"}).qualname == ""


def test_only_literal_defaults_kept_as_they_come(tmp_path: Path) -> None:
    """A default `__init__` transforms, writes again or replaces, one that is not a literal,
    and None are not taken; a type SGLang builds with a class of its own is left alone."""
    models = tmp_path / "transformers" / "models"
    (models / "auto").mkdir(parents=True)
    (models / "auto" / "configuration_auto.py").write_text(
        'CONFIG_MAPPING_NAMES = OrderedDict([("foo", "FooConfig"), ("bar", "BarConfig")])\n'
    )
    (models / "foo").mkdir()
    (models / "foo" / "configuration_foo.py").write_text(
        textwrap.dedent(
            """
            class FooConfig(PretrainedConfig):
                def __init__(self, a=1, b=2, c=None, d=SIZE, *, e=(4, 5), f=6, g=7, **kwargs):
                    self.a = a
                    self.b = b * 2
                    self.c = c
                    self.d = d
                    self.e = e
                    self.f = f
                    if kwargs:
                        self.f = 0
                    g = g or 8
                    self.g = g
                    super().__init__(**kwargs)
            """
        )
    )
    made = with_class_defaults({"model_type": "foo", "a": 7}, [tmp_path], lambda t: False)
    assert made.config == {"model_type": "foo", "a": 7, "e": [4, 5]}
    assert made.keys == ("e",)
    assert made.read_from == (f"{models / 'foo' / 'configuration_foo.py'}:2",)
    own = with_class_defaults({"model_type": "foo"}, [tmp_path], lambda t: t == "foo")
    assert own.config == {"model_type": "foo"} and own.keys == ()
    unknown = with_class_defaults({"model_type": "bar"}, [tmp_path], lambda t: False)
    assert unknown.keys == ()  # BarConfig is named but defined nowhere


def test_a_kept_answer_is_not_reused_once_transformers_is_beside_it(
    sglang_0523: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI keeps a preflight's answer by what it read: installing transformers beside the
    tree, or a change to the class read, is a new answer, not the kept one."""
    import eaglebug.cli.parser

    root = copy_tree(sglang_0523, tmp_path / "site-packages")
    words = ["preflight", "--sglang", str(root), "--json", "--gpu-mem-gib", "141", "--"]
    words += _launch(tmp_path)

    def vocab() -> str:
        """The vocabulary finding's message ('' when there is none)."""
        eaglebug.cli.parser.main(words)
        report = json.loads(capsys.readouterr().out)
        found = [f["message"] for f in report["findings"] if f["id"] == "config.vocab"]
        return found[0] if found else ""

    assert "262208" not in vocab()  # the published config names no vocabulary
    shutil.copytree(TRANSFORMERS, root / "transformers")
    assert "(262208)" in vocab()
    gemma3 = root / "transformers" / "models" / "gemma3" / "configuration_gemma3.py"
    gemma3.write_text(gemma3.read_text().replace("vocab_size=262_208", "vocab_size=262_209"))
    assert "(262209)" in vocab()


def _environment(root: Path, transformers: bool = True) -> Path:
    """A virtual environment's layout (nothing in it runs): its `bin/python` and, with
    `transformers`, transformers' configuration modules in its site-packages."""
    (root / "bin").mkdir(parents=True)
    python = root / "bin" / "python"
    python.write_text("")
    python.chmod(0o755)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    if transformers:
        shutil.copytree(TRANSFORMERS, site / "transformers")
    return python


def test_a_source_checkout_reads_transformers_from_its_environment(
    index_0523: TreeIndex, tmp_path: Path
) -> None:
    """SGLang run from a checkout (`pip install -e python`) has no transformers beside its
    `sglang/`: the launch's own interpreter's site-packages has it."""
    python = _environment(tmp_path / "venv")
    words = [str(python), *_launch(tmp_path)[1:]]
    result = preflight(index_0523, words, {"PATH": str(tmp_path / "no-such-folder")}, H200)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    assert "text_config.vocab_size" in result.target.class_defaults
    assert all(w.startswith(f"{site}/transformers/") for w in result.target.class_defaults_from)
    assert str(site) in result.package_roots
    by_id = {f.id: f for f in result.findings}
    assert "(262208)" in by_id["config.vocab"].message
    nowhere = {"PATH": str(tmp_path / "no-such-folder")}
    plain = preflight(index_0523, _launch(tmp_path), nowhere, H200)
    assert plain.target.class_defaults == ()  # no `python` on that PATH: the tree's folder only


def test_the_launchs_python_and_its_search_path(tmp_path: Path) -> None:
    from eaglebug.checks.launch.sitepaths import package_roots

    tree = tmp_path / "checkout" / "python"
    python = _environment(tmp_path / "venv", transformers=False)
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    env = {"PATH": f"{python.parent}:/usr/bin", "PYTHONPATH": "extra", "HOME": str(tmp_path)}
    roots = package_roots(tree, ["python", "-m", "sglang.launch_server"], env, cwd="/work")
    assert roots == (Path("/work/extra"), tree, site)  # a venv: no user site-packages
    script = python.parent / "sglang"  # a console script names its interpreter
    script.write_text(f"#!{python}\nimport sys\n")
    script.chmod(0o755)
    assert package_roots(tree, ["sglang", "serve"], env, cwd="/work")[-1] == site
    env_line = python.parent / "serve-env"
    env_line.write_text("#!/usr/bin/env python\n")
    env_line.chmod(0o755)
    assert package_roots(tree, ["serve-env"], {**env, "PYTHONPATH": ""}) == (tree, site)
    (tmp_path / "venv" / "pyvenv.cfg").unlink()  # not a venv: the user's own site-packages too
    user = tmp_path / ".local" / "lib" / "python3.11" / "site-packages"
    user.mkdir(parents=True)
    assert package_roots(tree, ["VAR=1", "python"], env, cwd="/w")[-2:] == (site, user)
    assert package_roots(tree, ["no-such-program"], env, cwd="/w") == (Path("/w/extra"), tree)


def _pyenv(root: Path) -> Path:
    """pyenv's layout: its `python` shim (the script pyenv writes, naming its root) in
    `shims/`, and two versions, 3.11.7 a plain install and `serve` a virtualenv."""
    shims = root / "shims"
    shims.mkdir(parents=True)
    shim = shims / "python"
    shim.write_text(
        "#!/usr/bin/env bash\nset -e\n"
        f'program="${{0##*/}}"\n\nexport PYENV_ROOT="{root}"\n'
        f'exec "{root}/libexec/pyenv" exec "$program" "$@"\n'
    )
    shim.chmod(0o755)
    for version in ("3.11.7", "serve"):
        _environment(root / "versions" / version, transformers=False)
    return shim


def test_a_pyenv_shim_is_the_version_pyenv_picks(tmp_path: Path) -> None:
    """`python` on the launch's PATH is pyenv's shim (a bash script under pyenv's root, no
    site-packages of its own): the site-packages are those of the version `pyenv exec`
    would run, read from the files pyenv reads, in its order."""
    from eaglebug.checks.launch.sitepaths import package_roots

    root = tmp_path / "pyenv"
    shim = _pyenv(root)
    tree = tmp_path / "checkout" / "python"
    env = {"PATH": f"{shim.parent}:{tmp_path / 'system'}", "HOME": str(tmp_path)}
    words = ["python", "-m", "sglang.launch_server"]

    def site(version: str) -> Path:
        return root / "versions" / version / "lib" / "python3.11" / "site-packages"

    project = tmp_path / "work" / "model"
    project.mkdir(parents=True)
    assert package_roots(tree, words, env, cwd=str(project)) == (tree,)  # no version set
    (root / "version").write_text("3.11.7\n")  # `pyenv global`
    assert package_roots(tree, words, env, cwd=str(project)) == (tree, site("3.11.7"))
    # `pyenv local` in a folder above: a comment, a missing version, then one that is there
    (tmp_path / "work" / ".python-version").write_text("# pinned\n3.9.0\nserve extra\n")
    assert package_roots(tree, words, env, cwd=str(project)) == (tree, site("serve"))
    shell = {**env, "PYENV_VERSION": "3.11.7"}  # `pyenv shell` wins over both files
    assert package_roots(tree, words, shell, cwd=str(project)) == (tree, site("3.11.7"))
    # `system`: the python on PATH past the shims, here not a venv (the user's site too)
    system = _environment(tmp_path / "system-python", transformers=False)
    (tmp_path / "system-python" / "pyvenv.cfg").unlink()
    user = tmp_path / ".local" / "lib" / "python3.11" / "site-packages"
    user.mkdir(parents=True)
    plain = {**env, "PATH": f"{shim.parent}:{system.parent}", "PYENV_VERSION": "system"}
    roots = package_roots(tree, words, plain, cwd=str(project))
    assert roots == (
        tree,
        tmp_path / "system-python" / "lib" / "python3.11" / "site-packages",
        user,
    )
    gone = {**env, "PYENV_VERSION": "3.9.0"}  # pyenv would find no python: nothing guessed
    assert package_roots(tree, words, gone, cwd=str(project)) == (tree,)


def test_a_wrappers_environment_is_the_launchs_python(tmp_path: Path) -> None:
    """`uv run` runs the project's environment (`.venv` beside the nearest pyproject.toml,
    or UV_PROJECT_ENVIRONMENT), `conda run -n NAME` / `-p PREFIX` that environment of the
    conda that runs it; `taskset` and `nohup` run the `python` after them."""
    from eaglebug.checks.launch.sitepaths import package_roots

    tree = tmp_path / "checkout" / "python"
    launch = ["python", "-m", "sglang.launch_server"]

    def site(env_root: Path) -> Path:
        return env_root / "lib" / "python3.11" / "site-packages"

    project = tmp_path / "project"
    _environment(project / ".venv", transformers=False)
    (project / "pyproject.toml").write_text("[project]\nname = 'serve'\n")
    (project / "scripts").mkdir()
    words = ["taskset", "-c", "0-7", "uv", "run", "--no-sync", *launch]
    chosen: list[Path] = []
    found = package_roots(tree, words, {"PATH": "/no-such"}, str(project / "scripts"), chosen)
    assert found == (tree, site(project / ".venv"))
    assert project / "pyproject.toml" in chosen  # a project made or moved: a new choice
    elsewhere = {"PATH": "/no-such", "UV_PROJECT_ENVIRONMENT": str(tmp_path / "env")}
    _environment(tmp_path / "env", transformers=False)
    assert package_roots(tree, words, elsewhere, str(project))[-1] == site(tmp_path / "env")

    conda = tmp_path / "conda"
    (conda / "bin").mkdir(parents=True)
    (conda / "bin" / "conda").write_text("#!/bin/sh\n")
    (conda / "bin" / "conda").chmod(0o755)
    _environment(conda / "envs" / "sglang", transformers=False)
    (conda / "envs" / "sglang" / "pyvenv.cfg").unlink()  # conda's envs are no venvs
    env = {"PATH": str(conda / "bin"), "HOME": str(tmp_path / "home")}
    named = ["conda", "run", "-n", "sglang", "--no-capture-output", *launch]
    assert package_roots(tree, named, env, str(tmp_path)) == (tree, site(conda / "envs" / "sglang"))
    prefixed = ["conda", "run", "-p", str(conda / "envs" / "sglang"), *launch]
    assert package_roots(tree, prefixed, env, str(tmp_path)) == (
        tree,
        site(conda / "envs" / "sglang"),
    )
    python = _environment(tmp_path / "venv", transformers=False)
    plain = {"PATH": str(python.parent)}
    assert package_roots(tree, ["nohup", *launch], plain, str(tmp_path))[-1] == site(
        tmp_path / "venv"
    )
    # An `env` among the wrappers changes what the ones after it and the server see: the
    # `python` found on its PATH, uv's environment, the server's PYTHONPATH.
    through_env = ["nohup", "env", f"PATH={python.parent}", "PYTHONPATH=extra", *launch]
    assert package_roots(tree, through_env, {"PATH": "/no-such"}, str(tmp_path)) == (
        tmp_path / "extra",
        tree,
        site(tmp_path / "venv"),
    )
    uv_env = ["env", "-u", "HOME", f"UV_PROJECT_ENVIRONMENT={tmp_path / 'env'}", *words]
    assert package_roots(tree, uv_env, {"PATH": "/no-such"}, str(project))[-1] == site(
        tmp_path / "env"
    )


def test_uv_run_outside_a_project_and_conda_environments_elsewhere(tmp_path: Path) -> None:
    """`uv run` outside a project runs the interpreter uv discovers: `--python PATH`, the
    active VIRTUAL_ENV, an active conda environment but base, the nearest `.venv` up (how
    `uv venv && uv pip install sglang` leaves a folder); `--no-project` ignores a project,
    `--active` prefers the active environment to it. `conda run -n` finds the environment in
    CONDA_ENVS_PATH's folders, then the conda's `envs/` and `~/.conda/envs`, the user's first
    when the conda's root is not writable."""
    from eaglebug.checks.launch.sitepaths import package_roots

    tree = tmp_path / "checkout" / "python"
    launch = ["python", "-m", "sglang.launch_server"]
    uv = ["uv", "run", *launch]
    plain = {"PATH": "/no-such"}

    def site(env_root: Path) -> Path:
        return env_root / "lib" / "python3.11" / "site-packages"

    work = tmp_path / "work"
    _environment(work / ".venv", transformers=False)
    (work / "logs").mkdir()
    chosen: list[Path] = []
    assert package_roots(tree, uv, plain, str(work / "logs"), chosen) == (
        tree,
        site(work / ".venv"),
    )
    assert work / ".venv" / "pyvenv.cfg" in chosen  # a .venv made later: a new choice
    active = _environment(tmp_path / "active", transformers=False).parent.parent
    with_active = {**plain, "VIRTUAL_ENV": str(active)}
    assert package_roots(tree, uv, with_active, str(work))[-1] == site(active)
    conda_env = _environment(tmp_path / "conda-env", transformers=False).parent.parent
    in_conda = {**plain, "CONDA_PREFIX": str(conda_env), "CONDA_DEFAULT_ENV": "serve"}
    assert package_roots(tree, uv, in_conda, str(work))[-1] == site(conda_env)
    base = {**in_conda, "CONDA_DEFAULT_ENV": "base"}  # base is a system Python to uv
    assert package_roots(tree, uv, base, str(work))[-1] == site(work / ".venv")
    pinned = ["uv", "run", "--python", str(active / "bin" / "python"), *launch]
    assert package_roots(tree, pinned, plain, str(work))[-1] == site(active)

    project = work / "project"
    _environment(project / ".venv", transformers=False)
    (project / "pyproject.toml").write_text("[project]\nname = 'serve'\n")
    assert package_roots(tree, uv, with_active, str(project))[-1] == site(project / ".venv")
    flagged = ["uv", "run", "--active", *launch]
    assert package_roots(tree, flagged, with_active, str(project))[-1] == site(active)
    outside = ["uv", "run", "--no-project", *launch]
    assert package_roots(tree, outside, with_active, str(project))[-1] == site(active)
    built_from = ["uv", "run", "--python", str(active / "bin" / "python"), *launch]
    assert package_roots(tree, built_from, plain, str(project))[-1] == site(project / ".venv")

    conda = tmp_path / "conda"
    (conda / "bin").mkdir(parents=True)
    (conda / "bin" / "conda").write_text("#!/bin/sh\n")
    (conda / "bin" / "conda").chmod(0o755)
    (conda / "conda-meta").mkdir()
    (conda / "conda-meta" / "history").write_text("")
    home = tmp_path / "home"
    _environment(home / ".conda" / "envs" / "serve", transformers=False)
    _environment(conda / "envs" / "serve", transformers=False)
    env = {"PATH": str(conda / "bin"), "HOME": str(home)}
    named = ["conda", "run", "-n", "serve", *launch]
    assert package_roots(tree, named, env, str(tmp_path))[-1] == site(conda / "envs" / "serve")
    # conda's root is writable when its conda-meta/history is: without one (a read-only
    # install has none it may write), the user's folder comes first
    (conda / "conda-meta" / "history").unlink()
    user_env = home / ".conda" / "envs" / "serve"
    assert package_roots(tree, named, env, str(tmp_path))[-1] == site(user_env)
    shared = tmp_path / "shared-envs"
    _environment(shared / "serve", transformers=False)
    listed = {**env, "CONDA_ENVS_PATH": f"{tmp_path / 'none'}{os.pathsep}{shared}"}
    chosen = []
    assert package_roots(tree, named, listed, str(tmp_path), chosen)[-1] == site(shared / "serve")
    assert chosen[:2] == [tmp_path / "none", shared]


def test_a_kept_answer_sees_transformers_installed_in_the_launchs_environment(
    sglang_0523: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import eaglebug.cli.parser

    python = _environment(tmp_path / "venv", transformers=False)
    words = ["preflight", "--sglang", str(sglang_0523), "--json", "--gpu-mem-gib", "141", "--"]
    words += [str(python), *_launch(tmp_path)[1:]]

    def vocab() -> str:
        eaglebug.cli.parser.main(words)
        report = json.loads(capsys.readouterr().out)
        return next((f["message"] for f in report["findings"] if f["id"] == "config.vocab"), "")

    assert "262208" not in vocab()
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    shutil.copytree(TRANSFORMERS, site / "transformers")
    assert "(262208)" in vocab()


def test_a_kept_answer_sees_pyenv_pick_another_python(
    sglang_0523: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`pyenv local serve` in the launch's folder after a preflight: the kept answer read
    another Python's (no) transformers, so the question is answered afresh; a log written in
    that folder changes nothing pyenv reads, and the kept answer stands."""
    import eaglebug.checks
    import eaglebug.cli.parser

    shim = _pyenv(tmp_path / "pyenv")
    site = tmp_path / "pyenv" / "versions" / "serve" / "lib" / "python3.11" / "site-packages"
    shutil.copytree(TRANSFORMERS, site / "transformers")
    (tmp_path / "pyenv" / "version").write_text("3.11.7\n")
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("PATH", str(shim.parent))
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    monkeypatch.delenv("PYENV_DIR", raising=False)
    words = ["preflight", "--sglang", str(sglang_0523), "--json", "--gpu-mem-gib", "141", "--"]
    words += ["python", *_launch(tmp_path)[1:]]

    def vocab() -> str:
        eaglebug.cli.parser.main(words)
        report = json.loads(capsys.readouterr().out)
        return next((f["message"] for f in report["findings"] if f["id"] == "config.vocab"), "")

    computed: list[int] = []
    preflight_now = eaglebug.checks.preflight
    monkeypatch.setattr(
        eaglebug.checks, "preflight", lambda *a, **k: computed.append(1) or preflight_now(*a, **k)
    )
    assert "262208" not in vocab()  # the global 3.11.7 has no transformers
    (project / "server.log").write_text("a log in the launch's folder: the same question\n")
    assert "262208" not in vocab() and len(computed) == 1  # the kept answer
    (project / ".python-version").write_text("serve\n")
    assert "(262208)" in vocab() and len(computed) == 2


def test_without_sglang_the_tree_is_the_one_the_wrapped_launchs_python_imports(
    sglang_0523: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No `--sglang` and no importable sglang here: the tree is the one the launch's own
    Python imports, asked of the Python after its wrappers (`uv run` here: the project's
    environment), never of the wrapper."""
    import eaglebug.cli.parser

    project = tmp_path / "project"
    python = _environment(project / ".venv", transformers=False)
    python.write_text(f"#!/bin/sh\necho {sglang_0523 / 'sglang'}\n")  # answers the probe
    (project / "pyproject.toml").write_text("[project]\nname = 'serve'\n")
    monkeypatch.chdir(project)
    monkeypatch.setenv("PATH", "/no-such-folder")
    words = ["preflight", "--json", "--gpu-mem-gib", "141", "--"]
    words += ["nohup", "uv", "run", "--no-sync", *_launch(tmp_path)]
    eaglebug.cli.parser.main(words)
    report = json.loads(capsys.readouterr().out)
    assert report["sglang"]["version"] == "0.5.23"
    assert report["launch"]["program"][:5] == ["nohup", "uv", "run", "--no-sync", "python"]
