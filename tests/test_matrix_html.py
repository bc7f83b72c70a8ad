"""`eaglebug matrix --format html` in a real browser: Debian's chromium, headless, driven by
Playwright's Python package pointed at that executable (no browser download). The page is
sglang 0.5.9's whole matrix, opened from a file: sorted by a header, filtered, a row's detail
on click."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from eaglebug.cli.parser import main

CHROMIUM = "/usr/bin/chromium"  # Debian's package; `.ci/run` installs it when missing
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KIMI = "KimiK25ForConditionalGeneration"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def matrix_file(sglang_059: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page, made once for the module: each test opens it in its own tab (the matrix of a
    whole release takes seconds; the tests only read it)."""
    out, err = io.StringIO(), io.StringIO()
    scratch = tmp_path_factory.mktemp("matrix")
    with pytest.MonkeyPatch.context() as env:  # set up before the per-test cache is
        env.setenv("XDG_CACHE_HOME", str(scratch / "xdg-cache"))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["matrix", "--sglang", str(sglang_059), "--format", "html"])
    assert code == 0, err.getvalue()
    html = out.getvalue()
    assert "<script src" not in html and "<link" not in html  # self-contained
    path = scratch / "matrix.html"
    path.write_text(html, encoding="utf-8")
    return path


@pytest.fixture
def page(browser: Browser, matrix_file: Path) -> Iterator[Page]:
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(matrix_file.as_uri())
    yield tab
    tab.close()
    assert errors == []


def _shown(page: Page) -> list[str]:
    return [
        str(n)
        for n in page.locator("#body tr").evaluate_all(
            "rs => rs.map(r => r.dataset.class + '/' + r.dataset.role)"
        )
    ]


def test_the_table_lists_every_class_and_role(page: Page) -> None:
    rows = _shown(page)
    assert f"{KIMI}/target" in rows and "LlamaForCausalLMEagle3/draft" in rows
    assert page.locator("#shown").inner_text() == f"{len(rows)} of {len(rows)} rows"
    headers = page.locator("#head th").all_inner_texts()
    assert headers == ["class", "role", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM"]
    assert "SGLang 0.5.9" in page.title()


def test_filter_by_text_status_and_role(page: Page) -> None:
    page.fill("#filter", "kimik25")
    assert _shown(page) == [f"{KIMI}/target"]
    page.fill("#filter", "set_eagle3_layers_to_capture")  # a missing attribute matches too
    assert f"{KIMI}/target" in _shown(page)
    page.fill("#filter", "")
    page.select_option("#role", "draft")
    assert all(r.endswith("/draft") for r in _shown(page)) and _shown(page)
    page.select_option("#role", "")
    page.select_option("#status", "supported")
    assert f"{KIMI}/target" not in _shown(page)
    page.select_option("#status", "missing")
    assert f"{KIMI}/target" in _shown(page)


def test_sort_by_a_column(page: Page) -> None:
    page.click("#head th[data-key='EAGLE3']")
    first = page.locator("#body tr").first.locator("td").nth(3).inner_text()
    assert first.startswith("missing ")
    page.click("#head th[data-key='EAGLE3']")  # again: the other way
    last = page.locator("#body tr").first.locator("td").nth(3).inner_text()
    assert not last.startswith("missing ")
    page.click("#head th[data-key='class']")
    names = [r.split("/")[0] for r in _shown(page)]
    assert names == sorted(names, key=str.lower)


def test_a_rows_detail_on_click(page: Page) -> None:
    assert page.locator("#detail").is_hidden()
    page.fill("#filter", "kimik25")
    page.click(f"#body tr[data-class='{KIMI}']")
    detail = page.locator("#detail")
    assert detail.is_visible()
    eagle3 = detail.locator("[data-algorithm='EAGLE3']").inner_text()
    assert "EAGLE3: missing" in eagle3
    assert "set_eagle3_layers_to_capture" in eagle3 and "self.language_model" in eagle3
    assert "sglang/srt/model_executor/cuda_graph_runner.py:365" in eagle3
    assert "return self.language_model.set_eagle3_layers_to_capture(layer_ids)" in eagle3
    page.fill("#filter", "DeepseekV3ForCausalLMNextN")
    page.click("#body tr[data-role='target']")
    reason = detail.locator("[data-algorithm='EAGLE']").inner_text()
    assert "n/a" in reason and "renames DeepseekV3ForCausalLM to it" in reason
