"""A real browser: JupyterLab on 127.0.0.1, driven by Playwright in headless Debian Chromium.

Opens a notebook with the layer explorer, runs it, checks that the widget and the plotly
figure rendered, moves the layer slider with the keyboard and checks that the shown layer's
numbers change; saves a screenshot.
"""

from pathlib import Path

import pytest

from tests.conftest import require_chromium
from tests.jupyterlab import CHROMIUM_ARGS, jupyterlab, run_all

REPO = Path(__file__).resolve().parents[1]
CELLS = [
    f"import sys; sys.path.insert(0, {str(REPO)!r})",
    "import rnr_lens as R\nfrom rnr_lens import failures, widgets\nfrom rnr_lens.bottleneck.miner import mine\nfrom tests.planted import build_planted\n"
    "tiny = R.tiny_model()\nresult, store = build_planted(tiny, 'planted.db')\n"
    "sweep = mine(tiny, failures.freeze(result, store, probe='ablation'), strategy='exhaustive', break_bound=1.0, progress=False)",
    "widgets.layer_explorer(sweep)",
    "qa = R.audit(tiny, R.tasks.get('add-small', n=4), ['sampling:k=2,t=1.0', 'routes:k=2'], progress=False)\nwidgets.question_explorer(qa)",
]


@pytest.fixture
def lab(tmp_path):
    with jupyterlab(tmp_path, CELLS) as url:
        yield url, tmp_path


@pytest.mark.slow
def test_layer_explorer_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    url, folder = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)  # a fresh temporary profile
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        run_all(page)
        page.wait_for_selector(".widget-slider", timeout=300_000)
        page.wait_for_selector(".js-plotly-plot", timeout=120_000)
        layer = page.locator(".rnr-layer")
        before = layer.get_attribute("data-layer")
        before_text = layer.inner_text()
        page.focus(".widget-slider .noUi-handle")
        page.keyboard.press("ArrowRight" if before != "3" else "ArrowLeft")
        page.wait_for_function(f"document.querySelector('.rnr-layer').dataset.layer !== '{before}'", timeout=30_000)
        after_text = layer.inner_text()
        page.screenshot(path=str(folder / "layer_explorer.png"), full_page=True)

        # the per-question drill-down: pick another question, its texts and numbers follow
        page.wait_for_selector(".rnr-question", timeout=120_000)
        question = page.locator(".rnr-question")
        question.scroll_into_view_if_needed()
        first_id, first_text = question.get_attribute("data-question"), question.inner_text()
        picker = page.locator(".widget-dropdown select").nth(0)
        options = picker.locator("option").all_inner_texts()
        picker.select_option(index=2)
        page.wait_for_function(f"document.querySelector('.rnr-question').dataset.question !== '{first_id}'", timeout=30_000)
        second_id, second_text = question.get_attribute("data-question"), question.inner_text()
        page.screenshot(path=str(folder / "question_explorer.png"), full_page=True)
        browser.close()
    assert before_text != after_text
    assert "repair" in after_text
    assert (folder / "layer_explorer.png").stat().st_size > 10_000
    assert len(options) == 4 and options[2].startswith(second_id)
    assert first_text != second_text and second_id in second_text
    for probe in ("default", "sampling", "routes"):
        assert probe in second_text, f"every probe's tries are listed ({probe})"
    assert "gold" in second_text and "extracted" in second_text
    assert (folder / "question_explorer.png").stat().st_size > 10_000
