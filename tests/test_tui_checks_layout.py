"""The checks panel at its width: each finding's id and the step it stops at read at a glance.

The real demo app and its real preflight findings, at the widths a user has: beside the log at
120 columns (34 columns: the step goes on a dim line of its own under the id, never cut
mid-phrase) and stacked at 80x24 (the whole width: id and step on one line, the steps aligned).
"""

from __future__ import annotations

from textual.notifications import Notify  # noqa: TID251 (a UI test drives Textual)
from textual.pilot import Pilot  # noqa: TID251 (a UI test drives Textual)

from eaglebug.checks import Finding
from eaglebug.demo import DemoScenario
from eaglebug.tui.app import EaglebugApp
from eaglebug.tui.widgets.checks_panel import label, step_tag
from tests.test_tui import checks_settled, demo, panel, run, shown, until

STEPS = {  # what the demo's preflight says of where each blocker stops the launch
    "set_eagle3_layers_to_capture": "at CUDA graphs",
    "config.context_length": "before draft load",
    "get_embed_and_head": "at draft lm head",
    "set_embed_and_head": "at draft lm head",
}


def with_steps(app_lines: list[str]) -> dict[str, str]:
    """Each option that names one of STEPS, by that name."""
    return {name: line for line in app_lines for name in STEPS if f" {name}" in line.split("\n")[0]}


async def options_with_steps(pilot: Pilot[None], app: EaglebugApp) -> dict[str, str]:
    """Once the checks are in: the option of each of STEPS (every one of them is shown)."""
    await until(pilot, lambda: checks_settled(app) and bool(panel(app).findings), "checks")
    await pilot.pause()
    options = with_steps(shown(app))
    assert set(options) == set(STEPS)
    return options


def test_beside_the_log_each_step_has_a_dim_line_of_its_own(scenario: DemoScenario) -> None:
    app = demo(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        options = await options_with_steps(pilot, app)
        width = panel(app).content_region.width
        for name, text in options.items():
            first, second = text.split("\n")
            assert first.endswith(name) and second == f"  {STEPS[name]}"
            assert len(first) <= width and len(second) <= width
        finding = next(f for f in panel(app).findings if f.id == "config.context_length")
        assert finding.step is not None and step_tag(finding.step) == "before draft load"

    run(app, script, size=(120, 40))


def test_at_80x24_id_and_step_share_a_line_and_the_steps_align(scenario: DemoScenario) -> None:
    app = demo(scenario)

    async def script(pilot: Pilot[None], notes: list[Notify]) -> None:
        options = await options_with_steps(pilot, app)
        columns = set()
        for name, text in options.items():
            assert "\n" not in text and text.endswith(STEPS[name])
            columns.add(text.index(STEPS[name]))
        assert len(columns) == 1  # one column for every step

    run(app, script, size=(80, 24))


def test_the_drafts_interface_findings_are_marked() -> None:
    """The target and the draft often lack the same method (`thinker`, `make_cache`): the
    draft's row says whose it is, so two rows never read the same."""
    target, draft = (
        Finding(
            "interface.missing_optional",
            "info",
            f"{cls} has no thinker",
            role=role,
            class_=cls,
            attribute="thinker",
        )
        for role, cls in (("target", "KimiK25ForConditionalGeneration"), ("draft", "Eagle3"))
    )
    assert label(target) == "thinker"
    assert label(draft) == "thinker (draft)"
    assert label(Finding("config.memory", "info", "...", role="draft")) == "config.memory"
