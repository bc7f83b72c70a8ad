"""Out-of-tree model packages (`SGLANG_EXTERNAL_MODEL_PACKAGE`, `--external-models`): found
as the server's Python would find them, audited and fixed like built-in classes, overriding
built-in names as the tree's registry does.

Synthetic trees carry each registry shape (0.5.9's `register(..., overwrite=True)`, 0.5.22's
`models.update(...)` with the built-ins merged under it later, and a registry without the
variable); the real releases are the material for the rule and for the KimiK25-like wrapper
around 0.5.23's `DeepseekV3ForCausalLM`.
"""

from __future__ import annotations

import difflib
import json
import os
import textwrap
from pathlib import Path

import pytest

from eaglebug.checks.contract.errors import InputError
from eaglebug.checks.interface.audit import audit
from eaglebug.checks.orchestrator import preflight
from eaglebug.checks.source.external import find_package, package_at, registry_rule
from eaglebug.checks.source.index import TreeIndex
from eaglebug.checks.source.tree import locate
from tests import gitrepo
from tests.clirun import cli, refused
from tests.synthetic import write_tree
from tests.test_audit_rules import DELEGATE_CONSUMERS, DELEGATE_MODELS, model, only, planned

KIMI = "KimiK25ForConditionalGeneration"

# How every release reads a package: its own modules (`pkgutil.iter_modules`), not subpackages.
IMPORT_MODEL_CLASSES = """
def import_model_classes(package_name, strict=False):
    package = importlib.import_module(package_name)
    for _, name, ispkg in pkgutil.iter_modules(package.__path__, package_name + "."):
        if not ispkg:
            pass
    return {}
"""

REGISTRY_059 = f"""
import importlib
import pkgutil
from dataclasses import dataclass, field

from sglang.srt.environ import envs


@dataclass
class _ModelRegistry:
    models: dict = field(default_factory=dict)

    def register(self, package_name, overwrite=False, strict=False):
        new_models = import_model_classes(package_name, strict=strict)
        if overwrite:
            self.models.update(new_models)

{IMPORT_MODEL_CLASSES}


ModelRegistry = _ModelRegistry()
ModelRegistry.register("sglang.srt.models")

if external_pkg := envs.SGLANG_EXTERNAL_MODEL_PACKAGE.get():
    ModelRegistry.register(external_pkg, overwrite=True)
"""

REGISTRY_0522 = f"""
import importlib
import pkgutil
from dataclasses import dataclass, field

from sglang.srt.environ import envs


@dataclass
class _ModelRegistry:
    models: dict = field(default_factory=dict)
    _default_models_loaded: bool = True

    def _load_default_models(self):
        if self._default_models_loaded:
            return
        self.models = import_model_classes("sglang.srt.models") | self.models
        self._default_models_loaded = True

{IMPORT_MODEL_CLASSES}


ModelRegistry = _ModelRegistry()
if external_pkg := envs.SGLANG_EXTERNAL_MODEL_PACKAGE.get():
    ModelRegistry._default_models_loaded = False
    ModelRegistry.models.update(import_model_classes(external_pkg))
else:
    ModelRegistry.register("sglang.srt.models")
"""

REGISTRY_WITHOUT = """
class _ModelRegistry:
    pass


ModelRegistry = _ModelRegistry()
"""

# The built-in wrapper is complete (as 0.5.10+ made Kimi-K2.5's); the user's own one is not.
BUILT_IN = """
from torch import nn

from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM


class KimiK25ForConditionalGeneration(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.language_model = DeepseekV3ForCausalLM(config)

    def get_embed_and_head(self):
        return self.language_model.get_embed_and_head()

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        return self.language_model.set_eagle3_layers_to_capture(layer_ids)


EntryClass = KimiK25ForConditionalGeneration
"""

USER_WRAPPER = """
\"\"\"A Kimi-K2.5 wrapper kept out of the SGLang tree.\"\"\"

from torch import nn

from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM

from .vision import Tower


class KimiK25ForConditionalGeneration(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        super().__init__()
        self.vision_tower = Tower(config)
        self.language_model = DeepseekV3ForCausalLM(config.text_config, quant_config)

    def forward(self, input_ids, positions, forward_batch):
        return self.language_model(input_ids, positions, forward_batch)


EntryClass = [KimiK25ForConditionalGeneration]
"""

COMPLETE_WRAPPER = USER_WRAPPER.replace(
    "    def forward(",
    "    def get_embed_and_head(self):\n"
    "        return self.language_model.get_embed_and_head()\n\n"
    "    def set_eagle3_layers_to_capture(self, layer_ids=None):\n"
    "        return self.language_model.set_eagle3_layers_to_capture(layer_ids)\n\n"
    "    def forward(",
)


def write_package(folder: Path, wrapper: str = USER_WRAPPER, name: str = "my_models") -> Path:
    """A user's model package `name` under `folder` (a PYTHONPATH entry)."""
    package = folder / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "kimi_k25.py").write_text(textwrap.dedent(wrapper).lstrip())
    (package / "vision.py").write_text(
        "from torch import nn\n\n\nclass Tower(nn.Module):\n    pass\n"
    )
    return package


# The flags these tests' launches use, declared as 0.5.9's server_args.py does.
SERVER_ARGS = """
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str)
        parser.add_argument("--speculative-algorithm", type=str)
        parser.add_argument("--speculative-draft-model-path", type=str)
        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
"""


def launch(pythonpath: Path | str, model: Path, speculative: bool = True) -> list[str]:
    """A launch command that names the package `my_models` and where it lives."""
    words = [
        "SGLANG_EXTERNAL_MODEL_PACKAGE=my_models",
        f"PYTHONPATH={pythonpath}",
        "python", "-m", "sglang.launch_server",
        "--model-path", str(model),
    ]  # fmt: skip
    if speculative:
        words += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(model)]
    return words


def tree_with(tmp_path: Path, registry: str) -> Path:
    files = {
        **DELEGATE_MODELS,
        **DELEGATE_CONSUMERS,
        "sglang/srt/server_args.py": SERVER_ARGS,
        "sglang/srt/models/registry.py": registry,
        "sglang/srt/models/kimi_k25.py": BUILT_IN,
    }
    return write_tree(tmp_path / "tree", files)


@pytest.mark.parametrize("registry", [REGISTRY_059, REGISTRY_0522], ids=["0.5.9", "0.5.22"])
def test_the_package_overrides_the_built_in_class(tmp_path: Path, registry: str) -> None:
    root = tree_with(tmp_path, registry)
    package = write_package(tmp_path / "site")
    tree = locate(str(root))
    # the built-in class is complete: nothing to report without the package
    assert [f for f in audit(TreeIndex(tree, use_cache=False), KIMI).findings] == []
    index = TreeIndex(tree, use_cache=False, external=package_at(str(package), []))
    assert index.classes.exporter_names(KIMI) == ["my_models.kimi_k25." + KIMI]
    result = audit(index, KIMI)
    assert result.reports[0].ref.qualname == "my_models.kimi_k25." + KIMI
    assert result.reports[0].ref.file == "my_models/kimi_k25.py"
    f = only([f for f in result.findings if f.attribute == "set_eagle3_layers_to_capture"])
    assert (f.severity, f.delegate) == ("error", "language_model")
    assert f.class_ == "my_models.kimi_k25." + KIMI
    assert "return self.language_model.set_eagle3_layers_to_capture(layer_ids)" in planned(f)
    g = only([f for f in result.findings if f.attribute == "get_embed_and_head"])
    assert g.delegate == "language_model"


def test_a_tree_whose_registry_does_not_read_the_variable(tmp_path: Path) -> None:
    root = tree_with(tmp_path, REGISTRY_WITHOUT)
    package = write_package(tmp_path / "site")
    index = TreeIndex(locate(str(root)), use_cache=False, external=package_at(str(package), []))
    assert registry_rule(index) is None
    assert index.external is None
    assert any("does not read SGLANG_EXTERNAL_MODEL_PACKAGE" in w for w in index.warnings)
    result = audit(index, KIMI)  # the built-in one: what that server would load
    assert result.reports[0].ref.qualname == "sglang.srt.models.kimi_k25." + KIMI
    # preflight says so as a finding, named by the launch's own variable
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"architectures": [KIMI]}))
    words = launch(tmp_path / "site", tmp_path / "model", speculative=False)
    flight = preflight(TreeIndex(locate(str(root)), use_cache=False), words, {})
    (ignored,) = [f for f in flight.findings if f.id == "config.external_models"]
    assert ignored.severity == "warning"
    assert "SGLANG_EXTERNAL_MODEL_PACKAGE=my_models" in ignored.message


def test_pythonpath_order_picks_the_package(tmp_path: Path) -> None:
    root = tree_with(tmp_path, REGISTRY_0522)
    first = tmp_path / "first"
    second = tmp_path / "second"
    write_package(first)  # lacks the methods
    write_package(second, COMPLETE_WRAPPER)
    (tmp_path / "model").mkdir()
    config = {"architectures": [KIMI], "text_config": {"hidden_size": 64}}
    (tmp_path / "model" / "config.json").write_text(json.dumps(config))

    def errors(pythonpath: str) -> tuple[set[str], str]:
        words = launch(pythonpath, tmp_path / "model")
        flight = preflight(TreeIndex(locate(str(root)), use_cache=False), words, {})
        assert flight.external is not None
        target = [f for f in flight.findings if f.role == "target" and f.severity == "error"]
        assert not [f for f in flight.findings if f.id == "config.unregistered_architecture"]
        return {f.attribute or "" for f in target}, str(flight.external.package_dir)

    found, where = errors(f"{first}{os.pathsep}{second}")
    assert found == {"get_embed_and_head", "set_eagle3_layers_to_capture"}
    assert where == str((first / "my_models").resolve())
    found, where = errors(f"{second}{os.pathsep}{first}")
    assert found == set()
    assert where == str((second / "my_models").resolve())


def test_dotted_names_and_namespace_roots(tmp_path: Path) -> None:
    outer = tmp_path / "site" / "acme"
    outer.mkdir(parents=True)
    (outer / "__init__.py").write_text("")
    write_package(outer, name="models")
    found = find_package("acme.models", [str(tmp_path / "site")], "test")
    assert (found.name, found.root) == ("acme.models", (tmp_path / "site").resolve())
    assert found.package_dir == (outer / "models").resolve()
    assert found.owns("acme/models/kimi_k25.py") and not found.owns("acme/other.py")


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("missing", "not found on the launch's PYTHONPATH"),
        ("module", "is a module"),
        ("file", "is a file, not a package folder"),
        ("no-init", "not a package (no __init__.py"),
        ("bad-name", "not a Python package name"),
    ],
)
def test_bad_packages_are_one_line_errors(
    tmp_path: Path, setup: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tree_with(tmp_path, REGISTRY_0522)
    site = tmp_path / "site"
    site.mkdir()
    (site / "lonely.py").write_text("x = 1\n")
    (site / "plain").mkdir()
    given = {
        "missing": "nowhere_models",
        "module": "lonely",
        "file": str(site / "lonely.py"),
        "no-init": str(site / "plain"),
        "bad-name": "my-models",
    }[setup]
    if setup in {"missing", "module", "bad-name"}:  # as the launch names it
        os.environ["PYTHONPATH"] = str(site)
        try:
            run = cli(
                capsys, "preflight", "--sglang", str(root), "--",
                f"SGLANG_EXTERNAL_MODEL_PACKAGE={given}", "python", "-m",
                "sglang.launch_server", "--model-path", str(tmp_path),
            )  # fmt: skip
        finally:
            del os.environ["PYTHONPATH"]
    else:
        run = cli(capsys, "audit", "--sglang", str(root), "--model-class", KIMI,
                  "--external-models", given)  # fmt: skip
    refused(run, needle)
    with pytest.raises(InputError):
        package_at(given, [str(site)])


# -- the real release 0.5.23: the wrapper audited and fixed like a built-in ---------------------


@pytest.mark.parametrize("release", ["sglang_059", "sglang_0514", "sglang_0522", "sglang_0523"])
def test_every_release_read_overrides_built_ins(
    release: str, request: pytest.FixtureRequest
) -> None:
    root = request.getfixturevalue(release)
    rule = registry_rule(TreeIndex(locate(str(root)), use_cache=False))
    assert rule is not None
    assert rule.overrides and rule.top_level_only
    file, line = rule.read_from.split(":")
    text = (root / file).read_text().splitlines()
    assert "SGLANG_EXTERNAL_MODEL_PACKAGE" in text[int(line) - 1]
    decided = text[int(rule.override_from.split(":")[1]) - 1]
    assert "overwrite=True" in decided or "| self.models" in decided


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    """The user's own package, in its own git repository, with unrelated dirty work."""
    repo = tmp_path / "work"
    write_package(repo)
    (repo / "notes.txt").write_text("todo\n")
    gitrepo.init(repo)
    (repo / "notes.txt").write_text("todo: try EAGLE-3\n")  # unstaged, must stay so
    return repo


def test_wrapper_on_0523_is_audited_and_fixed_in_its_own_repository(
    sglang_0523: Path,
    user_repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    gitrepo.hermetic(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the cache is used here
    package = str(user_repo / "my_models")
    audit_args = ("audit", "--sglang", str(sglang_0523), "--model-class", KIMI, "--json")
    run = cli(capsys, *audit_args, "--external-models", package)
    assert run.code == 1, run.err
    data = json.loads(run.out)
    assert data["external"]["name"] == "my_models"
    assert data["classes"][0]["class"] == "my_models.kimi_k25." + KIMI
    errors = {f["attribute"]: f for f in data["findings"] if f["severity"] == "error"}
    assert set(errors) == {"get_embed_and_head", "set_eagle3_layers_to_capture"}
    for f in errors.values():
        assert f["delegate"] == "language_model"
        assert (
            f["fix_detail"]["inner_class"] == "sglang.srt.models.deepseek_v2.DeepseekV3ForCausalLM"
        )
        assert f["fix_detail"]["file"] == "my_models/kimi_k25.py"
    # the built-in class of the same name (complete in 0.5.23) is not what was audited
    plain = json.loads(cli(capsys, *audit_args).out)
    assert plain["classes"][0]["class"] == "sglang.srt.models.kimi_k25." + KIMI

    wrapper = user_repo / "my_models" / "kimi_k25.py"
    before_head = gitrepo.head(user_repo)
    before = wrapper.read_bytes()
    run = cli(capsys, "fix", "--sglang", str(sglang_0523), "--model-class", KIMI,
              "--external-models", package, "--apply")  # fmt: skip
    assert run.code == 0, run.err
    after = wrapper.read_bytes()
    diff = list(difflib.ndiff(before.decode().splitlines(), after.decode().splitlines()))
    assert [line for line in diff if line.startswith("- ")] == []  # only additions
    added = [line[2:] for line in diff if line.startswith("+ ")]
    assert "from typing import List, Optional" in added  # 0.5.23's annotation, imported
    for method in ("get_embed_and_head", "set_eagle3_layers_to_capture", "set_embed_and_head"):
        assert f"    def {method}(".encode() in after
    assert b"return self.language_model.set_eagle3_layers_to_capture(layer_ids)" in after
    compile(after, str(wrapper), "exec")
    # one commit on top, touching only the wrapper; nothing staged; the dirty note untouched
    assert gitrepo.git(user_repo, "rev-parse", "HEAD~1") == before_head
    assert gitrepo.changed_files(user_repo) == ["my_models/kimi_k25.py"]
    assert f"Eaglebug-Fix: my_models.kimi_k25.{KIMI}" in gitrepo.message(user_repo)
    assert gitrepo.git(user_repo, "diff", "--cached") == ""
    assert gitrepo.status(user_repo) == " M notes.txt"
    # the cached answers were keyed on the package's files: the same audit now passes
    run = cli(capsys, *audit_args, "--external-models", package)
    assert run.code == 0, run.out
    assert [f for f in json.loads(run.out)["findings"] if f["severity"] == "error"] == []


def test_a_refused_commit_in_the_package_repository_changes_nothing(
    sglang_0523: Path, user_repo: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    gitrepo.hermetic(monkeypatch)
    hook = user_repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint: no' >&2\nexit 1\n")
    hook.chmod(0o755)
    wrapper = user_repo / "my_models" / "kimi_k25.py"
    before = gitrepo.everything(user_repo, wrapper)  # bytes, status, HEAD, index
    run = cli(capsys, "fix", "--sglang", str(sglang_0523), "--model-class", KIMI,
              "--external-models", str(user_repo / "my_models"), "--apply")  # fmt: skip
    refused(run, "lint: no")
    assert gitrepo.everything(user_repo, wrapper) == before


def test_model_path_reaches_the_package_class_on_0523(
    sglang_0523: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = write_package(tmp_path / "site")
    (package / "kimi_k25.py").write_text(
        (package / "kimi_k25.py").read_text().replace(KIMI, "AcmeWrapperForCausalLM")
    )
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(
        json.dumps({"architectures": ["AcmeWrapperForCausalLM"]})
    )
    base = ("audit", "--sglang", str(sglang_0523), "--model-path", str(tmp_path / "model"))
    refused(cli(capsys, *base), "not registered")  # unknown to the tree alone
    run = cli(capsys, *base, "--external-models", str(package), "--json")
    assert run.code == 1, run.err
    data = json.loads(run.out)
    assert data["classes"][0]["class"] == "my_models.kimi_k25.AcmeWrapperForCausalLM"
    # and a class that only the package defines, by name
    run = cli(capsys, "audit", "--sglang", str(sglang_0523), "--model-class",
              "AcmeWrapperForCausalLM", "--external-models", str(package))  # fmt: skip
    assert run.code == 1 and "/my_models/kimi_k25.py:" in run.out, run.out


def test_modules_of_subpackages_are_not_registered(tmp_path: Path) -> None:
    root = tree_with(tmp_path, REGISTRY_0522)
    package = write_package(tmp_path / "site")
    (package / "nested").mkdir()
    (package / "nested" / "__init__.py").write_text("")
    (package / "nested" / "extra.py").write_text(
        model("ExtraForCausalLM") + "\n\nEntryClass = ExtraForCausalLM\n"
    )
    index = TreeIndex(locate(str(root)), use_cache=False, external=package_at(str(package), []))
    assert index.classes.exporter_names("ExtraForCausalLM") == []  # iter_modules: top level only
    assert index.classes.exporter_names(KIMI) == ["my_models.kimi_k25." + KIMI]


@pytest.mark.parametrize("apart", [False, True], ids=["here", "worker"])
def test_the_tui_session_fixes_the_package_named_by_the_launch(
    sglang_0523: Path,
    user_repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    apart: bool,
) -> None:
    """What the TUI's fix key runs: the checks of the launch (its variable and PYTHONPATH),
    then the patch applied and verified by a fresh audit that loads the same package; in
    this process, and in the checks' worker process the TUI starts."""
    from eaglebug.session.checking import HereChecks
    from eaglebug.session.session import Session, SessionConfig

    gitrepo.hermetic(monkeypatch)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"architectures": [KIMI]}))
    words = launch(user_repo, tmp_path / "model")
    config = SessionConfig(tmp_path / "work", str(sglang_0523), words, checks_apart=apart)
    session = Session(config)
    request.addfinalizer(session.close)  # no worker outlives the test, failed or not
    checks = session.run_checks()
    target = [f for f in checks.findings if f.role == "target" and f.severity == "error"]
    assert {f.attribute for f in target} == {"get_embed_and_head", "set_eagle3_layers_to_capture"}
    patch = session.patch_for(target[0])
    assert patch is not None and patch.path == user_repo / "my_models" / "kimi_k25.py"
    before = gitrepo.head(user_repo)
    applied = session.apply(patch)
    assert applied.commit is not None
    assert gitrepo.git(user_repo, "rev-parse", "HEAD~1") == before
    assert gitrepo.changed_files(user_repo) == ["my_models/kimi_k25.py"]
    assert gitrepo.git(user_repo, "diff", "--cached") == ""
    again = session.run_checks()
    assert not [f for f in again.findings if f.role == "target" and f.severity == "error"]
    if isinstance(session.checks, HereChecks):
        assert session.checks.parsed_trees().hits > 0  # the re-check took unchanged files


@pytest.mark.parametrize("release", ["sglang_0514", "sglang_0522", "sglang_0523"])
def test_the_wrapper_is_audited_like_a_built_in_on_each_release(
    release: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    root = request.getfixturevalue(release)
    package = write_package(tmp_path / "site")
    index = TreeIndex(locate(str(root)), use_cache=False, external=package_at(str(package), []))
    result = audit(index, KIMI)
    assert result.external is not None and result.external.name == "my_models"
    assert result.reports[0].ref.qualname == "my_models.kimi_k25." + KIMI
    errors = {f.attribute: f for f in result.findings if f.severity == "error"}
    assert {"get_embed_and_head", "set_eagle3_layers_to_capture"} <= set(errors)
    for attribute in ("get_embed_and_head", "set_eagle3_layers_to_capture"):
        f = errors[attribute]
        assert f.delegate == "language_model"
        assert f"return self.language_model.{attribute}(" in planned(f)
    # the inner class comes from the tree, through the package's import of it
    provided = dict(result.reports[0].provided)
    assert provided["forward"].owner == "my_models.kimi_k25." + KIMI


def test_the_launchs_own_interpreter_path_is_asked(tmp_path: Path) -> None:
    """A launch run by another python (another environment) finds the package where that
    python looks: its path is asked for (it imports nothing), ours would not have it."""
    import sys

    from eaglebug.checks.launch.external import for_launch
    from eaglebug.server.pyenv import external_for_launch

    site = tmp_path / "their-site"
    write_package(site)
    other = tmp_path / "bin" / "python"
    other.parent.mkdir()
    other.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    other.chmod(0o755)
    words = [
        "SGLANG_EXTERNAL_MODEL_PACKAGE=my_models",
        str(other), "-m", "sglang.launch_server", "--model-path", str(tmp_path),
    ]  # fmt: skip
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = external_for_launch(words, environ)
    assert found is not None and found.package_dir == (site / "my_models").resolve()
    wrapped = [words[0], "nohup", "numactl", "--interleave=all", *words[1:]]
    found = external_for_launch(wrapped, environ)  # the python after the wrappers is asked
    assert found is not None and found.package_dir == (site / "my_models").resolve()
    set_by_env = ["nohup", "env", words[0], *words[1:]]  # the variable set by an `env` wrapper
    found = external_for_launch(set_by_env, environ)
    assert found is not None and found.package_dir == (site / "my_models").resolve()
    unset = ["env", "-u", "SGLANG_EXTERNAL_MODEL_PACKAGE", *words[1:]]
    assert external_for_launch(unset, {**environ, "SGLANG_EXTERNAL_MODEL_PACKAGE": "x"}) is None
    with pytest.raises(InputError, match="not found"):
        for_launch(words, environ)  # this interpreter's path alone does not hold it
    assert external_for_launch(words[1:], environ) is None  # no variable, no package
