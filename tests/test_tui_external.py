"""The TUI's fix key on a wrapper that lives in an out-of-tree model package: the checks of
`eaglebug -- SGLANG_EXTERNAL_MODEL_PACKAGE=... LAUNCH` find it, `p` then `y` commits the patch
in the package's own repository, and the re-check (loading the same package) is clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)

from eaglebug.gpu.simulated import SimulatedSource
from eaglebug.session.session import Session, SessionConfig
from eaglebug.tui.app import build_app
from eaglebug.tui.screens.confirm import ConfirmModal
from eaglebug.tui.screens.diff import DiffModal
from tests import gitrepo
from tests.test_external_models import KIMI, launch, write_package
from tests.test_tui import FAST, answer, checks_settled, interface_errors, run, select, until


def test_fix_key_commits_in_the_package_repository(
    sglang_0523: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitrepo.hermetic(monkeypatch)
    repo = tmp_path / "work"
    write_package(repo)
    gitrepo.init(repo)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": [KIMI]}))
    words = launch(repo, model)
    session = Session(SessionConfig(tmp_path / "state", str(sglang_0523), words))
    app = build_app(session, SimulatedSource(gpus=2), **FAST)
    before = gitrepo.head(repo)

    async def script(pilot: Pilot[None], _notes: object) -> None:
        await until(pilot, lambda: checks_settled(app), "the first checks", 120)
        assert {"get_embed_and_head", "set_eagle3_layers_to_capture"} <= interface_errors(app)
        finding = await select(
            pilot,
            app,
            lambda f: f.attribute == "set_eagle3_layers_to_capture" and f.role == "target",
            "the wrapper's set_eagle3_layers_to_capture",
        )
        assert finding.class_ == "my_models.kimi_k25." + KIMI
        await pilot.press("p")
        await answer(pilot, app, DiffModal, "y")
        await until(pilot, lambda: gitrepo.head(repo) != before, "the patch commit", 120)
        await until(
            pilot,
            lambda: (
                checks_settled(app) and "set_eagle3_layers_to_capture" not in interface_errors(app)
            ),
            "the re-check",
            120,
        )

        assert gitrepo.git(repo, "rev-parse", "HEAD~1") == before
        assert gitrepo.changed_files(repo) == ["my_models/kimi_k25.py"]
        assert gitrepo.git(repo, "diff", "--cached") == ""
        assert gitrepo.status(repo) == ""
        assert "def set_eagle3_layers_to_capture(" in wrapper.read_text()
        # u reverts it in the same repository (not the SGLang tree's)
        patched = gitrepo.head(repo)
        await pilot.press("u")
        await answer(pilot, app, ConfirmModal, "y")
        await until(pilot, lambda: gitrepo.head(repo) != patched, "the revert commit", 120)
        assert gitrepo.git(repo, "rev-parse", "HEAD~1") == patched
        assert wrapper.read_bytes() == original
        await until(
            pilot,
            lambda: checks_settled(app) and "set_eagle3_layers_to_capture" in interface_errors(app),
            "the errors to come back",
            120,
        )

    wrapper = repo / "my_models" / "kimi_k25.py"
    original = wrapper.read_bytes()
    run(app, script)
